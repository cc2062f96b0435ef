"""``ansible-playbook sriovnet.dra.preflight`` against the real test control plane.

With the plugin role applied (admission policy included) and a prepared node, every check (9 cluster,
7 node) is reported as PASS (``cni-add`` SKIP: the stand-in node has no bridge plugin) and the play
succeeds. With the
managed-networks ClusterRoleBinding deleted, the same playbook reports ``FAIL plugin-rbac`` with the
missing verbs and the fix, still reports every other check, and fails.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from kubernetes import client as k8s
from tests.ansible import node_fixture
from tests.ansible.conftest import node_inventory, run
from tests.waiting import eventually

CLUSTER_CHECKS = [
    "kubernetes-version", "resource-k8s-io-v1", "nad-crd", "plugin-crds", "plugin-rbac", "admission-policy",
    "no-upstream-sriov-network-operator", "no-legacy-device-plugin", "no-overlapping-policies",
    "policy-namespace", "policy-findings",
]  # fmt: skip
NODE_CHECKS = node_fixture.NODE_CHECKS
NAMESPACE = "sriovnet-preflight-playbook"
CLUSTER_RBAC = [("ClusterRoleBinding", "dra-sriov-managed-networks"), ("ClusterRole", "dra-sriov-managed-networks"),
                ("ClusterRoleBinding", "sriov-dra-plugin"), ("ClusterRole", "sriov-dra-plugin"),
                ("ClusterRoleBinding", "sriov-dra-binding-node-writer"), ("ClusterRole", "sriov-dra-binding-node-writer"),
                ("ClusterRoleBinding", "sriov-dra-binding-manager-operator"),
                ("ClusterRoleBinding", "sriov-dra-binding-manager"), ("ClusterRole", "sriov-dra-binding-manager")]  # fmt: skip


@pytest.fixture
def cluster(control_plane: object, api: object, ansible_env: dict[str, str], tmp_path: Path):
    env = {**ansible_env, "K8S_AUTH_KUBECONFIG": str(control_plane.kubeconfig)}  # type: ignore[attr-defined]
    inventory = node_inventory(tmp_path / "inventory.yml")
    setup = tmp_path / "setup.yml"
    setup.write_text(
        "- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: sriovnet.dra.plugin\n"
        f"      plugin_namespace: {NAMESPACE}\n      plugin_image: 'localhost/sriov-dra:0.1.0@sha256:{'0' * 63}4'\n"
    )
    run(["ansible-playbook", "-i", str(inventory), str(setup)], env)
    extra = tmp_path / "vars.json"
    extra.write_text(
        json.dumps(
            {
                "preflight_plugin_namespace": NAMESPACE,
                "preflight_node_options": node_fixture.prepare(tmp_path / "node"),
                "preflight_auto_attach_gate": False,  # no Node here: tests/ansible/test_auto_attach_gate.py
            }
        )
    )
    try:
        yield env, ["ansible-playbook", "-i", str(inventory), "-e", f"@{extra}", "sriovnet.dra.preflight"]
    finally:
        admission = k8s.AdmissionregistrationV1Api(api)
        for delete in (
            admission.delete_validating_admission_policy_binding,
            admission.delete_validating_admission_policy,
        ):
            try:
                delete("sriov-dra-binding-protection")
            except k8s.ApiException as exc:
                if exc.status != 404:
                    raise
        rbac = k8s.RbacAuthorizationV1Api(api)
        for kind, name in CLUSTER_RBAC:
            delete = (
                rbac.delete_cluster_role_binding if kind == "ClusterRoleBinding" else rbac.delete_cluster_role
            )
            try:
                delete(name)
            except k8s.ApiException as exc:
                if exc.status != 404:
                    raise
        core = k8s.CoreV1Api(api)
        core.delete_namespace(NAMESPACE, propagation_policy="Background")

        def gone() -> bool:
            try:
                core.read_namespace(NAMESPACE)
            except k8s.ApiException as exc:
                if exc.status == 404:
                    return True
                raise
            return False

        # the next test's setup creates the namespace again: a Terminating one would refuse its objects
        eventually(f"namespace {NAMESPACE} deleted", lambda: gone() or None, timeout_s=180, interval_s=0.5)


def _reported(out: str) -> dict[str, str]:
    found = {}
    for name in CLUSTER_CHECKS + NODE_CHECKS:
        for status in ("PASS", "FAIL", "SKIP"):
            if f'"{status} {name}: ' in out:
                found[name] = status
    return found


def _wait_until_denied(api: object) -> None:
    authz = k8s.AuthorizationV1Api(api)
    review = k8s.V1SubjectAccessReview(
        spec=k8s.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{NAMESPACE}:dra-driver-sriov",
            groups=["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"],
            resource_attributes=k8s.V1ResourceAttributes(verb="patch", resource="pods", namespace="w"),
        )
    )
    waiter = threading.Event()
    for _ in range(100):
        if not authz.create_subject_access_review(review).status.allowed:
            return
        waiter.wait(0.1)
    pytest.fail("the authorizer still allows pods/patch after the binding was deleted")


def test_preflight_passes_then_fails_on_a_broken_rbac_binding(cluster, api) -> None:
    env, argv = cluster
    good = run(argv, env)
    # the stand-in node has no bridge plugin, so the test ADD is skipped with the reason
    assert _reported(good.stdout) == {
        **dict.fromkeys(CLUSTER_CHECKS + NODE_CHECKS, "PASS"),
        "cni-add": "SKIP",
    }

    k8s.RbacAuthorizationV1Api(api).delete_cluster_role_binding("dra-sriov-managed-networks")
    _wait_until_denied(api)
    bad = run(argv, env, check=False)
    assert bad.returncode != 0
    assert _reported(bad.stdout) == {
        **dict.fromkeys(CLUSTER_CHECKS + NODE_CHECKS, "PASS"),
        "cni-add": "SKIP",
        "plugin-rbac": "FAIL",
    }
    assert (
        f"FAIL plugin-rbac: ServiceAccount {NAMESPACE}/dra-driver-sriov may not: get core/pods in all namespaces; "
        "patch core/pods in all namespaces; get k8s.cni.cncf.io/network-attachment-definitions in all namespaces"
    ) in bad.stdout
    assert (
        f"-- fix: bind ServiceAccount {NAMESPACE}/dra-driver-sriov to the ClusterRoles sriov-dra-plugin and dra-sriov-managed-networks"
        in bad.stdout
    )
    assert "[plugin-rbac]" in bad.stdout + bad.stderr


def test_preflight_node_checks_follow_the_inventorys_multus_mode(cluster, tmp_path: Path) -> None:
    """The multus role's ``multus_mode: thin`` in the inventory (no ``preflight_node_options.multus_mode``)
    makes the node checks look for thin Multus's ``multus`` binary, not thick's ``multus-shim``."""
    env, argv = cluster
    thin = tmp_path / "thin.json"
    thin.write_text(json.dumps({"multus_mode": "thin", "preflight_fail": False}))
    out = run([*argv, "-e", f"@{thin}"], env).stdout
    assert _reported(out)["cni-binaries"] == "FAIL"
    missing = re.search(r"FAIL cni-binaries: missing or not executable in \S+: ([\w, -]+?) -- fix", out)
    assert missing is not None, out
    assert missing.group(1).split(", ") == ["multus"]
