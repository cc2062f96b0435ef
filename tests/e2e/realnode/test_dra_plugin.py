"""The project's DRA plugin on a real kubelet v1.36: registration, NodePrepare before the sandbox, NodeUnprepare after.

The plugin runs as the lab starts it for its simulated nodes (``python -m sriov_dra.driver`` on a
fake-sysfs node with the lab-only fake kernel), but inside the real node's namespaces, with the
kubelet's own directories (``/var/lib/kubelet/plugins``, ``/var/lib/kubelet/plugins_registry``) and
the node's CDI directory, which containerd reads. Nothing stands in for the kubelet.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from tests.e2e.realnode.pods import busybox_pod, delete_pod, run_pod
from tests.waiting import eventually

from sriov_dra.core.plugin import checkpoint_codec
from sriov_dra_lab import paths
from sriov_dra_lab.fakes import fake_pci
from sriov_dra_rules import checkpoint_doc, names

D = names.DOMAIN
DRIVER = names.DRIVER_NAME
MANIFESTS = paths.MANIFESTS
CRDS = (
    MANIFESTS / "crds" / f"{D}_sriovresourcepolicies.yaml",
    MANIFESTS / "crds" / f"{D}_deviceattributes.yaml",
)
DEVICE_CLASS = MANIFESTS / "deviceclasses" / f"{D}.yaml"
METRICS_PORT = 18080


@pytest.fixture(scope="module")
def dra_objects(control_plane: Any) -> None:
    """The plugin's CRDs and its DeviceClass, as the roles install them."""
    from sriov_dra.kube import apply

    crds = [yaml.safe_load(p.read_text()) for p in CRDS]
    with control_plane.api() as api:
        apply.apply_objects(api, crds)
        apply.wait_crds_established(api, [c["metadata"]["name"] for c in crds])
        apply.apply_objects(api, [yaml.safe_load(DEVICE_CLASS.read_text())])


@pytest.fixture
def plugin(
    request: pytest.FixtureRequest,
    real_node: Any,
    control_plane: Any,
    api: client.ApiClient,
    dra_objects: None,
    namespace: str,
) -> Iterator[Path]:
    """The plugin on ``real_node`` advertising every fake VF (policy ``configs: [{}]`` in ``namespace``).

    Indirect parameters are extra plugin flags. Yields its state directory; the plugin is stopped
    afterwards.
    """
    from sriov_dra_lab.fakes import fake_sysfs

    root = real_node.root / f"plugin-{namespace}"
    fake_sysfs.build(root / "host", fake_pci.two_root_pfs(2))
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        D,
        "v1alpha1",
        namespace,
        "sriovresourcepolicies",
        {
            "apiVersion": f"{D}/v1alpha1",
            "kind": "SriovResourcePolicy",
            "metadata": {"name": "all-vfs", "namespace": namespace},
            "spec": {"configs": [{}]},
        },
    )
    argv = [
        sys.executable,
        "-m",
        "sriov_dra_lab.launch_plugin",
        f"--node-name={real_node.name}",
        f"--kubeconfig={control_plane.kubeconfig}",
        f"--sysfs-root={root / 'host'}",
        "--kubelet-plugins-directory-path=/var/lib/kubelet/plugins",
        "--kubelet-registrar-directory-path=/var/lib/kubelet/plugins_registry",
        f"--cdi-root={real_node.cdi_dir}",
        f"--state-dir={root / 'state'}",
        f"--namespace={namespace}",
        f"--metrics-bind-address=127.0.0.1:{METRICS_PORT}",
        "--log-format=json",
        *getattr(request, "param", ()),
    ]
    proc = real_node.spawn("plugin", argv)
    try:
        yield root / "state"
    finally:
        proc.stop()
        real_node.processes.pop("plugin", None)


def log_events(node: Any) -> list[dict[str, Any]]:
    """The plugin's JSON log lines (other lines left out)."""
    out = []
    for line in (node.logs / "plugin.log").read_text(errors="replace").splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def claim_records(state: Path) -> dict[str, Any]:
    """The plugin checkpoint's claim records by claim UID ({} before the first write)."""
    path = state / checkpoint_doc.CHECKPOINT_FILE_NAME
    if not path.exists():
        return {}
    return dict(checkpoint_codec.decode_checkpoint(path.read_bytes()).claims)


def when(stamp: str) -> dt.datetime:
    """An RFC 3339 time (nanoseconds cut to microseconds) as an aware datetime."""
    head, _, frac = stamp.rstrip("Z").partition(".")
    return dt.datetime.fromisoformat(f"{head}.{(frac or '0')[:6]:0<6}+00:00")


def test_plugin_registers_with_the_real_kubelet_and_a_vf_claim_is_prepared_before_the_sandbox_and_unprepared_after_deletion(
    real_node: Any, plugin: Path, api: client.ApiClient, namespace: str, kubectl: Callable[..., Any]
) -> None:
    def healthz_ok() -> bool:
        got = real_node.run_in_node(
            ["busybox", "wget", "-q", "-O-", f"http://127.0.0.1:{METRICS_PORT}/healthz"]
        )
        return got.returncode == 0

    # /healthz turns 200 only once the kubelet has called GetInfo and NotifyRegistrationStatus.
    eventually("the plugin to be registered by the real kubelet", healthz_ok, timeout_s=90, interval_s=0.5)
    resource = client.ResourceV1Api(api)
    eventually(
        f"a ResourceSlice of {real_node.name}",
        lambda: resource.list_resource_slice(field_selector=f"spec.nodeName={real_node.name}").items,
        timeout_s=60,
        interval_s=0.5,
    )
    resource.create_namespaced_resource_claim_template(
        namespace,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-vf"},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "vf", "exactly": {"deviceClassName": DRIVER}}]}}
            },
        },
    )
    pod = busybox_pod("vf-user", real_node.name, "exec sleep 3600")
    pod["spec"]["resourceClaims"] = [{"name": "vfs", "resourceClaimTemplateName": "one-vf"}]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "vfs"}]}
    live, took = run_pod(client.CoreV1Api(api), namespace, pod)
    print(f"Pod with a VF claim apply→Running {took:.1f}s; RSS KiB {real_node.rss_kib()}")
    claim_name = live.status.resource_claim_statuses[0].resource_claim_name
    claim_uid = resource.read_namespaced_resource_claim(claim_name, namespace).metadata.uid

    prepared = [
        e for e in log_events(real_node) if e.get("msg") == "prepare done" and e.get("claim_uid") == claim_uid
    ]
    assert prepared, "the real kubelet called NodePrepareResources"
    assert claim_uid in claim_records(plugin)
    (sandbox,) = real_node.crictl("pods", "-q", f"--namespace={namespace}").stdout.split()
    created = json.loads(real_node.crictl("inspectp", sandbox).stdout)["status"]["createdAt"]
    assert when(prepared[0]["ts"]) < when(created), "NodePrepare before the sandbox"
    env = kubectl("exec", "-n", namespace, "vf-user", "--", "env")
    assert env.returncode == 0, env.stderr
    assert any(line.startswith("SRIOVNETWORK_VF_DEVICE_") for line in env.stdout.splitlines()), (
        "containerd injected the plugin's CDI environment"
    )
    assert any(real_node.cdi_dir.glob("*.json"))

    delete_pod(client.CoreV1Api(api), namespace, "vf-user")
    eventually(
        "NodeUnprepareResources from the real kubelet",
        lambda: any(
            e.get("msg") == "unprepare done" and e.get("claim_uid") == claim_uid
            for e in log_events(real_node)
        ),
        timeout_s=90,
        interval_s=0.5,
    )
    assert claim_uid not in claim_records(plugin)
    assert not any(real_node.cdi_dir.glob("*.json"))
