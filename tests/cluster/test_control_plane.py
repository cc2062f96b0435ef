"""The control plane module: what it starts is the pinned release, secured, and fully stopped."""

from __future__ import annotations

import os

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from sriov_dra.kube import apiserver_probes
from sriov_dra_lab import binaries, control_plane, processes


def test_apiserver_reports_the_pinned_version(api):
    version = apiserver_probes.server_version(api)
    pinned = binaries.Versions.load().values["KUBERNETES_VERSION"]
    assert version["gitVersion"] == pinned
    assert (version["major"], version["minor"]) == ("1", pinned.split(".")[1])


def test_apiserver_scheduler_and_controller_manager_run_with_the_dra_gates_the_plugin_needs(request):
    lab = request.getfixturevalue("control_plane")
    gates = f"--feature-gates={control_plane.LAB_FEATURE_GATES}"
    started = {p.name: list(p.argv) for p in lab.processes}
    for name in ("kube-apiserver", "kube-scheduler", "kube-controller-manager"):
        assert gates in started[name], name
    assert "DRADeviceTaints=true" in gates and "DRAExtendedResource=true" in gates


def test_resource_v1_api_is_served(api):
    groups = {g.name: [v.version for v in g.versions] for g in client.ApisApi(api).get_api_versions().groups}
    assert "v1" in groups["resource.k8s.io"]


def test_nad_crd_is_installed_and_accepts_a_nad(api, namespace):
    crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(
        "network-attachment-definitions.k8s.cni.cncf.io"
    )
    assert crd.spec.scope == "Namespaced"
    assert crd.spec.names.short_names == ["net-attach-def"]
    custom = client.CustomObjectsApi(api)
    config = '{"cniVersion":"1.0.0","name":"rail-a","type":"sriov","ipam":{"type":"host-local"}}'
    custom.create_namespaced_custom_object(
        "k8s.cni.cncf.io",
        "v1",
        namespace,
        "network-attachment-definitions",
        {
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": "rail-a"},
            "spec": {"config": config},
        },
    )
    got = custom.get_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", namespace, "network-attachment-definitions", "rail-a"
    )
    assert got["spec"]["config"] == config


def test_rbac_is_enforced_for_an_unprivileged_user(api, namespace):
    """Authorization is Node,RBAC: impersonating a user with no bindings is forbidden."""
    impersonated = client.ApiClient(api.configuration)
    impersonated.set_default_header("Impersonate-User", "nobody@example.invalid")
    try:
        with pytest.raises(ApiException) as err:
            client.CoreV1Api(impersonated).list_namespaced_pod(namespace)
        assert err.value.status == 403
    finally:
        impersonated.close()


def test_stop_leaves_no_process_and_no_listening_port():
    cp = control_plane.ControlPlane(control_plane.ControlPlaneSettings())
    cp.start()
    pids, ports = cp.pids(), dict(cp.ports)
    groups = set(pids)
    try:
        assert len(pids) == 4
        assert all(processes.port_in_use(p) for n, p in ports.items() if n != "etcd-peer")
    finally:
        cp.stop()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not [n for n, p in ports.items() if processes.port_in_use(p)]
    leftover = [line for line in processes.survivors() if int(line.split()[0]) in groups]
    assert not leftover
    assert not cp.workdir.exists(), "a temp work directory is removed on stop"
