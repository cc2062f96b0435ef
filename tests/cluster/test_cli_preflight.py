"""``sriov-dra preflight`` against the session control plane.

With the CRDs, the shipped plugin RBAC and the admission policy applied (cluster-scoped RBAC names
prefixed, so other tests' bindings are untouched), every cluster check passes and the command exits 0. With the binding of
the managed-networks ClusterRole deleted, ``plugin-rbac`` fails naming each missing verb and the fix,
every other check still passes, and the command exits 1. With the policies only in another
namespace, ``policy-namespace`` fails naming both namespaces; a node's ``Valid=False`` entry in a
policy's status fails ``policy-findings`` naming the object, node, reason and field.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from tests import waiting

import sriov_dra
from sriov_dra.cli import main
from sriov_dra.kube import apply, cluster_facts, objects
from sriov_dra_rules import names, preflight_gates, preflight_rules

MANIFESTS = Path(sriov_dra.__file__).resolve().parent / "manifests"
NS = "sriov-dra-preflight-cli"
ELSEWHERE = "sriov-dra-preflight-elsewhere"
PREFIX = "preflight-cli-"
CRDS = (
    "network-attachment-definitions.yaml",
    "sriovnetwork.k8snetworkplumbingwg.io_sriovresourcepolicies.yaml",
    "sriovnetwork.k8snetworkplumbingwg.io_deviceattributes.yaml",
)


def _shipped_rbac() -> list[dict[str, Any]]:
    """The shipped plugin RBAC and admission policy moved to ``NS``; ClusterRoles/Bindings renamed with
    ``PREFIX`` (the policy and its binding keep their names: the preflight looks them up by name)."""
    docs = [
        d
        for name in ("rbac.yaml", "admission-policy.yaml")
        for d in yaml.safe_load_all((MANIFESTS / "plugin" / name).read_text())
        if d
    ]
    out = []
    for doc in copy.deepcopy(docs):
        meta = doc["metadata"]
        if "namespace" in meta:
            meta["namespace"] = NS
        if doc["kind"].startswith("Cluster"):
            meta["name"] = PREFIX + meta["name"]
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] = PREFIX + doc["roleRef"]["name"]
        for subject in doc.get("subjects") or []:
            subject["namespace"] = NS
        out.append(doc)
    return out


@pytest.fixture
def installed(control_plane: Any, api: client.ApiClient) -> Iterator[Path]:
    crds = [yaml.safe_load((MANIFESTS / "crds" / n).read_text()) for n in CRDS]
    apply.apply_objects(api, crds)
    apply.wait_crds_established(api, [c["metadata"]["name"] for c in crds])
    apply.apply_objects(api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    rbac = _shipped_rbac()
    apply.apply_objects(api, rbac)
    apply.apply_objects(api, [_policy(NS, "all")])
    try:
        yield Path(control_plane.kubeconfig)
    finally:
        api_rbac = client.RbacAuthorizationV1Api(api)
        admission = client.AdmissionregistrationV1Api(api)
        deletes = {
            "ClusterRole": api_rbac.delete_cluster_role,
            "ClusterRoleBinding": api_rbac.delete_cluster_role_binding,
            "ValidatingAdmissionPolicy": admission.delete_validating_admission_policy,
            "ValidatingAdmissionPolicyBinding": admission.delete_validating_admission_policy_binding,
        }
        for doc in reversed(rbac):
            if doc["kind"] in deletes:
                delete = deletes[doc["kind"]]
                try:
                    delete(doc["metadata"]["name"])
                except client.ApiException as exc:
                    if exc.status != 404:
                        raise
        client.CoreV1Api(api).delete_namespace(NS, propagation_policy="Background")
        waiting.eventually(f"namespace {NS} gone", lambda: _gone(api, NS), timeout_s=60, interval_s=0.2)


def _gone(api: client.ApiClient, namespace: str) -> bool:
    try:
        client.CoreV1Api(api).read_namespace(namespace)
    except client.ApiException as exc:
        return exc.status == 404
    return False


def _policy(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "sriovnetwork.k8snetworkplumbingwg.io/v1alpha1",
        "kind": "SriovResourcePolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"configs": [{}]},
    }


def _run(
    kubeconfig: Path, capsys: pytest.CaptureFixture[str], output: str = "json", *extra: str
) -> tuple[int, str]:
    argv = [
        "preflight",
        "--kubeconfig",
        str(kubeconfig),
        "--namespace",
        NS,
        "--no-node-checks",
        "--output",
        output,
        *extra,
    ]
    status = main.main(argv)
    return status, capsys.readouterr().out


def _denied_patch_pods(api: client.ApiClient) -> bool:
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{NS}:dra-driver-sriov",
            groups=cluster_facts.service_account_groups(NS),
            resource_attributes=client.V1ResourceAttributes(verb="patch", resource="pods", namespace="w"),
        )
    )
    return not client.AuthorizationV1Api(api).create_subject_access_review(review).status.allowed


def test_preflight_passes_with_the_shipped_rbac_and_names_the_verbs_a_broken_binding_loses(
    installed: Path, api: client.ApiClient, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = _run(installed, capsys)
    report = json.loads(out)
    assert [c["name"] for c in report["checks"]] == [
        *preflight_rules.CLUSTER_CHECKS,
        preflight_gates.DEVICE_TAINTS_CHECK,
        preflight_gates.EXTENDED_RESOURCES_CHECK,
    ]
    assert report["failed_checks"] == [], out
    assert status == 0
    taints = next(c for c in report["checks"] if c["name"] == preflight_gates.DEVICE_TAINTS_CHECK)
    assert taints["detail"] == "the API server keeps device taints (DRADeviceTaints on)"
    extended = next(c for c in report["checks"] if c["name"] == preflight_gates.EXTENDED_RESOURCES_CHECK)
    assert (
        extended["detail"]
        == "the API server keeps a DeviceClass's extendedResourceName (DRAExtendedResource on)"
    )
    assert not [
        c
        for c in client.ResourceV1Api(api).list_device_class().items
        if c.metadata.name.startswith("sriov-dra-preflight-")
    ], "the dry run wrote nothing"
    assert (
        not client.ResourceV1Api(api)
        .list_resource_slice(field_selector=f"spec.driver=preflight.{names.DOMAIN}")
        .items
    ), "the dry run wrote nothing"
    rbac = next(c for c in report["checks"] if c["name"] == "plugin-rbac")
    assert (
        rbac["detail"]
        == f"ServiceAccount {NS}/dra-driver-sriov has all {len(preflight_rules.PERMISSIONS)} permissions"
    )

    client.RbacAuthorizationV1Api(api).delete_cluster_role_binding(PREFIX + "dra-sriov-managed-networks")
    waiting.eventually("pods/patch denied", lambda: _denied_patch_pods(api), timeout_s=20, interval_s=0.1)

    status, out = _run(installed, capsys)
    report = json.loads(out)
    assert status == 1
    assert report["failed_checks"] == ["plugin-rbac"]
    rbac = next(c for c in report["checks"] if c["name"] == "plugin-rbac")
    assert rbac["detail"] == (
        f"ServiceAccount {NS}/dra-driver-sriov may not: get core/pods in all namespaces; patch core/pods in all "
        "namespaces; get k8s.cni.cncf.io/network-attachment-definitions in all namespaces; list "
        "k8s.cni.cncf.io/network-attachment-definitions in all namespaces; create "
        "k8s.cni.cncf.io/network-attachment-definitions in all namespaces; patch "
        "k8s.cni.cncf.io/network-attachment-definitions in all namespaces; delete "
        "k8s.cni.cncf.io/network-attachment-definitions in all namespaces"
    )
    assert rbac["fix"] == (
        f"bind ServiceAccount {NS}/dra-driver-sriov to the ClusterRoles sriov-dra-plugin and "
        "dra-sriov-managed-networks (ClusterRoleBindings of the same names) and to the Role "
        f"sriov-dra-plugin-policies in {NS}; the role sriovnet.dra.plugin applies them"
    )

    status, text = _run(installed, capsys, output="text")
    assert status == 1
    assert f"FAIL plugin-rbac: ServiceAccount {NS}/dra-driver-sriov may not: get core/pods" in text
    assert f"     fix: bind ServiceAccount {NS}/dra-driver-sriov" in text
    assert "PASS kubernetes-version: the API server is v1.36" in text


def _admission(report: dict[str, Any]) -> dict[str, str]:
    return next(c for c in report["checks"] if c["name"] == "admission-policy")


def test_preflight_reports_the_admission_policy_its_binding_and_the_plugins_grant(
    installed: Path, api: client.ApiClient, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out = _run(installed, capsys)
    assert status == 0 and _admission(json.loads(out))["detail"] == (
        f"ValidatingAdmissionPolicy {preflight_rules.ADMISSION_POLICY} and its binding (Deny) are installed; "
        f"ServiceAccount {NS}/dra-driver-sriov may write its own node's bindings"
    )
    admission = client.AdmissionregistrationV1Api(api)
    admission.delete_validating_admission_policy_binding(preflight_rules.ADMISSION_POLICY)
    status, out = _run(installed, capsys)
    report = json.loads(out)
    assert status == 1 and report["failed_checks"] == ["admission-policy"]
    assert _admission(report)["detail"] == (
        f"ValidatingAdmissionPolicyBinding {preflight_rules.ADMISSION_POLICY} is missing (the policy is inert)"
    )
    admission.delete_validating_admission_policy(preflight_rules.ADMISSION_POLICY)
    status, out = _run(installed, capsys)
    assert status == 1 and "are not installed" in _admission(json.loads(out))["detail"]
    status, out = _run(installed, capsys, "json", "--no-admission-policy")
    assert status == 0 and "is not installed (not required)" in _admission(json.loads(out))["detail"]


def _check(report: dict[str, Any], name: str) -> dict[str, str]:
    return next(c for c in report["checks"] if c["name"] == name)


def test_preflight_names_the_watched_namespace_the_policies_namespaces_and_each_node_finding(
    installed: Path, api: client.ApiClient, capsys: pytest.CaptureFixture[str]
) -> None:
    reader = objects.Objects(api, field_manager="sriov-dra-plugin/node-a")
    apply.apply_objects(api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ELSEWHERE}}])
    try:
        apply.apply_objects(api, [_policy(ELSEWHERE, "rails")])
        reader.delete(objects.RESOURCE_POLICY, "all", NS)
        status, out = _run(installed, capsys)
        report = json.loads(out)
        assert status == 1 and "policy-namespace" in report["failed_checks"]
        check = _check(report, "policy-namespace")
        assert check["detail"].startswith(
            f"the plugin watches {NS}, which holds no SriovResourcePolicy, so no node publishes a device; "
            "SriovResourcePolicies exist in: "
        )
        assert f"{ELSEWHERE} (1)" in check["detail"]
        assert f"create the SriovResourcePolicy and DeviceAttributes objects in {NS}" in check["fix"]

        apply.apply_objects(api, [_policy(NS, "all")])
        condition = {
            "type": "Valid",
            "status": "False",
            "reason": "DeviceNotEligible",
            "message": "spec.configs[0].deviceAttributesSelector: matches no DeviceAttributes",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        reader.apply_status(
            objects.RESOURCE_POLICY, "all", NS, {"nodes": [{"node": "node-a", "conditions": [condition]}]}
        )
        status, out = _run(installed, capsys)
        report = json.loads(out)
        assert report["failed_checks"] == ["policy-findings"], out
        assert _check(report, "policy-findings")["detail"] == (
            "SriovResourcePolicy/all on node-a: DeviceNotEligible: "
            "spec.configs[0].deviceAttributesSelector: matches no DeviceAttributes"
        )
        assert _check(report, "policy-namespace")["status"] == "pass"
    finally:
        client.CoreV1Api(api).delete_namespace(ELSEWHERE, propagation_policy="Background")
