"""Tests for sriov_dra_rules.preflight_rules: each cluster check passes, and fails naming the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import sriov_dra
from sriov_dra_rules import preflight_rules as rules

RBAC = Path(sriov_dra.__file__).resolve().parent / "manifests" / "plugin" / "rbac.yaml"
ADMISSION = RBAC.with_name("admission-policy.yaml")
SHIPPED = {d["kind"]: d for d in yaml.safe_load_all(ADMISSION.read_text()) if d}
SA = "dra-driver-sriov/dra-driver-sriov"
GOOD_APIS = [
    "v1",
    "resource.k8s.io/v1",
    "k8s.cni.cncf.io/v1",
    "sriovnetwork.k8snetworkplumbingwg.io/v1alpha1",
]


def _policy(name: str, *, selector: dict[str, Any] | None = None, **filt: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"configs": [{"resourceFilters": [filt]}]}
    if selector is not None:
        spec["nodeSelector"] = selector
    return {"metadata": {"namespace": "p", "name": name}, "spec": spec}


def _policy_in(namespace: str, name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"configs": [{}]}}


def _with_finding(obj: dict[str, Any], node: str, reason: str, message: str) -> dict[str, Any]:
    condition = {"type": "Valid", "status": "False", "reason": reason, "message": message}
    ok = {"type": "Valid", "status": "True", "reason": "NoFindings", "message": ""}
    nodes = [{"node": node, "conditions": [condition]}, {"node": "healthy", "conditions": [ok]}]
    return {**obj, "status": {"nodes": nodes}}


def _node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def _admission(**over: Any) -> dict[str, Any]:
    """Admission facts of a cluster with the shipped policy and binding and the plugin's grant."""
    facts: dict[str, Any] = {
        "required": True,
        "policy": SHIPPED["ValidatingAdmissionPolicy"],
        "binding": SHIPPED["ValidatingAdmissionPolicyBinding"],
        "grant": True,
    }
    facts.update(over)
    return facts


def _facts(**over: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "version": "v1.36.3",
        "apis": GOOD_APIS,
        "service_account": SA,
        "policy_namespace": "dra-driver-sriov",
        "denied": [],
        "reviewed": len(rules.PERMISSIONS),
        "crds": ["network-attachment-definitions.k8s.cni.cncf.io"],
        "workloads": [],
        "policies": [],
        "nodes": [_node("n1")],
        "admission": _admission(),
        "all_policies": [],
        "device_attributes": [],
    }
    facts.update(over)
    return facts


def _one(name: str, **over: Any) -> dict[str, str]:
    return next(c for c in rules.cluster_checks(**_facts(**over)) if c["name"] == name)


def test_a_ready_cluster_passes_every_check_in_a_fixed_order() -> None:
    found = rules.cluster_checks(**_facts())
    assert [c["name"] for c in found] == list(rules.CLUSTER_CHECKS)
    assert {c["status"] for c in found} == {"pass"}
    assert all(c["fix"] == "" for c in found)
    assert _one("plugin-rbac")["detail"] == f"ServiceAccount {SA} has all 38 permissions"


FAILURES = [
    ("kubernetes-version", {"version": "v1.33.5"}, "the API server is v1.33.5",
     "upgrade the control plane to Kubernetes 1.36.0 or later (DRA resource.k8s.io/v1)"),
    ("kubernetes-version", {"version": "garbage"}, "the API server is 'garbage'",
     "upgrade the control plane to Kubernetes 1.36.0 or later (DRA resource.k8s.io/v1)"),
    ("resource-k8s-io-v1", {"apis": ["v1", "resource.k8s.io/v1beta2"]}, "resource.k8s.io/v1 is not served",
     "enable the resource.k8s.io/v1 API (served by default since Kubernetes 1.34; check --runtime-config)"),
    ("nad-crd", {"apis": ["resource.k8s.io/v1"]}, "k8s.cni.cncf.io/v1 (NetworkAttachmentDefinition) is not served",
     "install Multus's NetworkAttachmentDefinition CRD (role sriovnet.dra.multus)"),
    ("plugin-crds", {"apis": ["resource.k8s.io/v1"]},
     "sriovnetwork.k8snetworkplumbingwg.io/v1alpha1 (SriovResourcePolicy, DeviceAttributes) is not served",
     "apply the plugin's CRDs (role sriovnet.dra.plugin)"),
    ("plugin-rbac", {"denied": [rules.PERMISSIONS[1], rules.PERMISSIONS[-1]]},
     f"ServiceAccount {SA} may not: patch core/pods in all namespaces; "
     "patch sriovnetwork.k8snetworkplumbingwg.io/deviceattributes/status in dra-driver-sriov",
     f"bind ServiceAccount {SA} to the ClusterRoles sriov-dra-plugin and dra-sriov-managed-networks "
     "(ClusterRoleBindings of the same names) and to the Role sriov-dra-plugin-policies in dra-driver-sriov; "
     "the role sriovnet.dra.plugin applies them"),
    ("no-upstream-sriov-network-operator", {"crds": ["sriovoperatorconfigs.sriovnetwork.openshift.io"]},
     "upstream sriov-network-operator CRDs found: sriovoperatorconfigs.sriovnetwork.openshift.io",
     "uninstall the upstream sriov-network-operator; it and sriov-dra's operator must not manage the same node "
     "policies"),
    ("no-legacy-device-plugin",
     {"workloads": [{"metadata": {"namespace": "kube-system", "name": "sriov-dp"}, "spec": {"template": {"spec": {
         "containers": [{"image": "ghcr.io/k8snetworkplumbingwg/sriov-network-device-plugin:v3.9.0"}]}}}}]},
     "SR-IOV network device plugin DaemonSets: kube-system/sriov-dp",
     "drain the nodes and delete the sriov-network-device-plugin DaemonSet; one provider must own each VF"),
    ("no-overlapping-policies", {"policies": [_policy("a", vendors=["15b3"]), _policy("b", pfNames=["ens1f0"])]},
     "p/a and p/b can select the same VFs on n1",
     "give the policies disjoint nodeSelectors or resourceFilters (pfNames, pciAddresses, vendors, devices); "
     "independent overlapping policies are forbidden"),
    ("policy-namespace", {"all_policies": [_policy("a"), _policy("b"), _policy_in("ai-workloads", "c")]},
     "the plugin watches dra-driver-sriov, which holds no SriovResourcePolicy, so no node publishes a device; "
     "SriovResourcePolicies exist in: ai-workloads (1), p (2)",
     "create the SriovResourcePolicy and DeviceAttributes objects in dra-driver-sriov, or set the plugin's policy "
     "namespace (plugin_policy_namespace, --policy-namespace) to where they are"),
    ("policy-findings", {"policies": [_with_finding(_policy("a"), "n2", "DeviceNotEligible", "x: matches nothing")],
                         "device_attributes": [_with_finding({"metadata": {"name": "d"}}, "n1", "ReservedAttribute",
                                                             "spec.attributes: reserved")]},
     "DeviceAttributes/d on n1: ReservedAttribute: spec.attributes: reserved; "
     "SriovResourcePolicy/a on n2: DeviceNotEligible: x: matches nothing",
     "fix each field named (the objects' Warning Events and status.nodes say which node found it); their devices "
     "stay withheld until then"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "over", "detail", "fix"),
    FAILURES,
    ids=[
        "old-control-plane", "unparsable-version", "dra-v1-not-served", "nad-crd-missing", "plugin-crds-missing",
        "denied-verbs-are-named", "upstream-operator-crds", "device-plugin-daemonset", "overlapping-policies",
        "policies-only-in-other-namespaces", "node-findings-in-status",
    ],
)  # fmt: skip
def test_each_failed_check_names_what_was_found_and_the_fix(
    name: str, over: dict[str, Any], detail: str, fix: str
) -> None:
    check = _one(name, **over)
    assert (check["status"], check["detail"], check["fix"]) == ("fail", detail, fix)
    others = [
        c for c in rules.cluster_checks(**_facts(**over)) if c["name"] != name and c["status"] == "fail"
    ]
    assert name in ("nad-crd", "plugin-crds", "resource-k8s-io-v1") or others == []


def test_the_permissions_are_every_verb_of_the_shipped_plugin_rbac() -> None:
    shipped = set()
    for doc in yaml.safe_load_all(RBAC.read_text()):
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        where = "policy" if doc["kind"] == "Role" else ""
        for rule in doc["rules"]:
            names = rule.get("resourceNames") or [""]
            for group in rule["apiGroups"]:
                for res in rule["resources"]:
                    resource, _, sub = res.partition("/")
                    for verb in rule["verbs"]:
                        shipped.update((group, resource, sub, verb, where, n) for n in names)
    ours = {
        (p["group"], p["resource"], p.get("subresource", ""), p["verb"], p["namespace"], p.get("name", ""))
        for p in rules.PERMISSIONS
    }
    assert ours == shipped
    assert len(ours) == len(rules.PERMISSIONS)


def test_the_managed_networks_verbs_come_first_so_a_broken_binding_names_them_first() -> None:
    head = [rules.describe(p, "ns") for p in rules.PERMISSIONS[:3]]
    assert head == [
        "get core/pods in all namespaces",
        "patch core/pods in all namespaces",
        "get k8s.cni.cncf.io/network-attachment-definitions in all namespaces",
    ]


def test_a_named_subresource_permission_is_described_with_its_name() -> None:
    perm = next(p for p in rules.PERMISSIONS if p.get("name"))
    assert rules.describe(perm, "ns") == (
        "associated-node:update resource.k8s.io/resourceclaims/driver named sriovnetwork.k8snetworkplumbingwg.io "
        "in all namespaces"
    )


@pytest.mark.parametrize(
    ("policies", "nodes", "expected"),
    [
        ([_policy("a", pfNames=["ens1f0"]), _policy("b", pfNames=["ens2f0"])], [_node("n1")], []),
        ([_policy("a", linkType="eth"), _policy("b", linkType="ib")], [_node("n1")], []),
        ([_policy("a", linkType="eth"), _policy("b", linkType="ethernet")], [_node("n1")],
         [{"policies": ["p/a", "p/b"], "nodes": ["n1"]}]),
        ([_policy("a", selector={"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "rail", "operator": "In", "values": ["a"]}]}]}), _policy("b")],
         [_node("n1", rail="a"), _node("n2", rail="b")], [{"policies": ["p/a", "p/b"], "nodes": ["n1"]}]),
        ([_policy("a", selector={"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "rail", "operator": "DoesNotExist"}]}]}), _policy("b", selector={"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "rail", "operator": "Exists"}]}]})],
         [_node("n1", rail="a"), _node("n2")], []),
    ],
    ids=["disjoint-pf-names", "different-link-types", "eth-alias-overlaps", "only-where-both-select",
         "exists-vs-does-not-exist-never-meet"],
)  # fmt: skip
def test_policy_overlap_needs_a_shared_node_and_a_shared_device(
    policies: list[dict[str, Any]], nodes: list[dict[str, Any]], expected: list[dict[str, Any]]
) -> None:
    assert rules.policy_overlaps(policies, nodes) == expected


@given(
    st.integers(0, 99),
    st.integers(0, 999),
    st.integers(0, 999),
    st.sampled_from(["", "-rc.1", "+abc", "-alpha.0+x"]),
)
def test_parse_version_reads_what_git_versions_render(
    major: int, minor: int, patch: int, suffix: str
) -> None:
    assert rules.parse_version(f"v{major}.{minor}.{patch}{suffix}") == (major, minor, patch)
    assert rules.parse_version(f"{major}.{minor}") == (major, minor, 0)


@pytest.mark.parametrize(
    "text", ["", "latest", "v.1.2", "x1.36.0"], ids=["empty", "word", "dot-first", "prefix"]
)
def test_parse_version_rejects_what_is_not_a_version_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="is not a Kubernetes version"):
        rules.parse_version(text)


@pytest.mark.parametrize(
    ("count", "detail"),
    [
        (0, "0 SriovResourcePolicies, none overlapping"),
        (1, "1 SriovResourcePolicy, none overlapping"),
        (2, "2 SriovResourcePolicies, none overlapping"),
    ],
    ids=["none", "one-is-singular", "two-plural"],
)
def test_policy_count_in_the_passing_overlap_detail_is_grammatical(count: int, detail: str) -> None:
    policies = [_policy(f"p{i}", pfNames=[f"ens{i}f0"]) for i in range(count)]
    assert _one("no-overlapping-policies", policies=policies)["detail"] == detail


INSTALL = "apply manifests/plugin/admission-policy.yaml (role sriovnet.dra.plugin with plugin_admission_policy: true)"
ADMISSION_CASES = [
    ({"policy": None, "binding": None}, "fail",
     "ValidatingAdmissionPolicy sriov-dra-binding-protection and its binding are not installed: anyone who may edit "
     "a Pod or a NAD in a namespace can rewrite the plugin's shadows, registry and selections",
     INSTALL + ", or pass --no-admission-policy (preflight_admission_policy: false) if it is off on purpose"),
    ({"policy": None, "binding": None, "required": False}, "pass",
     "ValidatingAdmissionPolicy sriov-dra-binding-protection is not installed (not required): driver-owned metadata "
     "is protected only by the guard's checks and the repair worker", ""),
    ({"binding": None}, "fail",
     "ValidatingAdmissionPolicyBinding sriov-dra-binding-protection is missing (the policy is inert)", INSTALL),
    ({"policy": None, "required": False}, "fail",
     "ValidatingAdmissionPolicy sriov-dra-binding-protection is missing (its binding enforces nothing)", INSTALL),
    ({"binding": {"spec": {"policyName": "sriov-dra-binding-protection", "validationActions": ["Audit", "Warn"]}}},
     "fail", "ValidatingAdmissionPolicyBinding sriov-dra-binding-protection has validationActions ['Audit', 'Warn'] "
     "(no Deny)", INSTALL),
    ({"binding": {"spec": {"policyName": "other", "validationActions": ["Deny"]}}}, "fail",
     "ValidatingAdmissionPolicyBinding sriov-dra-binding-protection binds policy 'other'", INSTALL),
    ({"grant": False}, "fail",
     f"ValidatingAdmissionPolicy sriov-dra-binding-protection is enforced but ServiceAccount {SA} may not "
     "manage-own-node sriovnetwork.k8snetworkplumbingwg.io/managedbindings in all namespaces: the policy refuses "
     "its shadows and Pod patches",
     f"bind ServiceAccount {SA} to the ClusterRole sriov-dra-binding-node-writer (ClusterRoleBinding of the same "
     "name); the role sriovnet.dra.plugin applies it"),
    ({}, "pass",
     "ValidatingAdmissionPolicy sriov-dra-binding-protection and its binding (Deny) are installed; ServiceAccount "
     f"{SA} may write its own node's bindings", ""),
]  # fmt: skip


@pytest.mark.parametrize(
    ("over", "status", "detail", "fix"),
    ADMISSION_CASES,
    ids=["absent", "absent-not-required", "binding-missing", "policy-missing-even-if-not-required",
         "binding-without-deny", "binding-to-another-policy", "plugin-grant-missing", "installed"],
)  # fmt: skip
def test_the_admission_policy_check_says_what_is_installed_and_what_to_do(
    over: dict[str, Any], status: str, detail: str, fix: str
) -> None:
    check = _one("admission-policy", admission=_admission(**over))
    assert (check["status"], check["detail"], check["fix"]) == (status, detail, fix)


def test_the_admission_names_are_those_of_the_shipped_policy_and_its_plugin_grant() -> None:
    assert SHIPPED["ValidatingAdmissionPolicy"]["metadata"]["name"] == rules.ADMISSION_POLICY
    binding = SHIPPED["ValidatingAdmissionPolicyBinding"]
    assert binding["metadata"]["name"] == rules.ADMISSION_POLICY
    assert binding["spec"] == {"policyName": rules.ADMISSION_POLICY, "validationActions": ["Deny"]}
    docs = [d for d in yaml.safe_load_all(ADMISSION.read_text()) if d]
    writer = next(
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "sriov-dra-binding-node-writer"
    )
    grant = rules.ADMISSION_GRANT
    assert writer["rules"] == [
        {"apiGroups": [grant["group"]], "resources": [grant["resource"]], "verbs": [grant["verb"]]}
    ]
    bound = next(
        d
        for d in docs
        if d["kind"] == "ClusterRoleBinding" and d["roleRef"]["name"] == writer["metadata"]["name"]
    )
    assert bound["subjects"] == [
        {"kind": "ServiceAccount", "name": "dra-driver-sriov", "namespace": "dra-driver-sriov"}
    ]
    expression = yaml.safe_dump(SHIPPED["ValidatingAdmissionPolicy"]["spec"]["variables"])
    assert f".resource('{grant['resource']}')" in expression and f".check('{grant['verb']}')" in expression


@pytest.mark.parametrize(
    ("policies", "elsewhere", "detail"),
    [
        ([], [], "the plugin watches dra-driver-sriov; no SriovResourcePolicy exists yet, so nothing is published "
                 "until one selects VFs"),
        ([_policy_in("dra-driver-sriov", "a")], [_policy_in("other", "b")],
         "the plugin watches dra-driver-sriov, which holds 1 SriovResourcePolicy; ignored, in other namespaces: "
         "other (1)"),
    ],
    ids=["no-policy-yet", "watched-namespace-has-policies"],
)  # fmt: skip
def test_the_policy_namespace_check_names_the_watched_namespace_and_the_others(
    policies: list[dict[str, Any]], elsewhere: list[dict[str, Any]], detail: str
) -> None:
    check = _one("policy-namespace", policies=policies, all_policies=policies + elsewhere)
    assert (check["status"], check["detail"]) == ("pass", detail)
