"""``sriov-dra`` turns ordinary mistakes into one actionable line and an exit status, not a traceback.

Against the session control plane: a Pod name that exists only in another namespace is reported
with the ``-n`` that would find it; a missing kubeconfig names the flag and variable to set; a Pod
with no VF allocated gets the policy namespace's problems and where the policies are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.cluster.driver.conftest import install_plugin_objects

from sriov_dra.cli import main
from sriov_dra.kube import objects


def _pod(name: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
    )


def test_inspect_of_a_pod_in_another_namespace_names_the_namespace_that_has_it(
    control_plane: Any, api: client.ApiClient, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    client.CoreV1Api(api).create_namespaced_pod(namespace, _pod("only-here"))

    status = main.main(
        ["inspect", "only-here", "-n", "default", "--kubeconfig", str(control_plane.kubeconfig)]
    )

    err = capsys.readouterr().err
    assert status == 2
    assert err.strip() == f"sriov-dra inspect: pod default/only-here not found; it exists in: -n {namespace}"


def test_inspect_of_a_pod_that_exists_nowhere_is_one_line(
    control_plane: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main.main(
        ["inspect", "nowhere-pod", "-n", "default", "--kubeconfig", str(control_plane.kubeconfig)]
    )

    assert status == 2
    assert capsys.readouterr().err.strip() == "sriov-dra inspect: pod default/nowhere-pod not found"


def test_missing_kubeconfig_names_the_flag_and_variable_to_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main.main(["inspect", "p", "--kubeconfig", str(tmp_path / "absent")])

    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith("sriov-dra: no usable kubeconfig (")
    assert err.rstrip().endswith("pass --kubeconfig FILE or set KUBECONFIG")
    assert "Traceback" not in err


def test_inspect_of_a_pod_without_vfs_names_the_policy_namespace_and_where_policies_are(
    api: client.ApiClient, namespace: str, control_plane: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    install_plugin_objects(api)
    client.CoreV1Api(api).create_namespaced_pod(namespace, _pod("waits"))
    policy = {
        "apiVersion": "sriovnetwork.k8snetworkplumbingwg.io/v1alpha1",
        "kind": "SriovResourcePolicy",
        "metadata": {"name": "rails", "namespace": namespace},
        "spec": {"configs": [{}]},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "sriovnetwork.k8snetworkplumbingwg.io", "v1alpha1", namespace, "sriovresourcepolicies", policy
    )
    argv = ["inspect", "waits", "-n", namespace, "--kubeconfig", str(control_plane.kubeconfig)]
    status = main.main([*argv, "--policy-namespace", "watched-in-vain"])
    err = capsys.readouterr().err
    assert status == 1
    assert "sriov-dra inspect: no VF allocated; the policy namespace watched-in-vain holds no " in err
    assert f"{namespace} (1)" in err

    condition = {
        "type": "Valid",
        "status": "False",
        "reason": "ConflictingNetworkReference",
        "message": "spec.configs[0]: two networks",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    objects.Objects(api, field_manager="sriov-dra-plugin/node-b").apply_status(
        objects.RESOURCE_POLICY,
        "rails",
        namespace,
        {"nodes": [{"node": "node-b", "conditions": [condition]}]},
    )
    status = main.main([*argv, "--policy-namespace", namespace])
    err = capsys.readouterr().err
    assert status == 1
    assert err.strip() == (
        "sriov-dra inspect: no VF allocated; policy finding: SriovResourcePolicy/rails on node-b: "
        "ConflictingNetworkReference: spec.configs[0]: two networks"
    )
