# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Cluster checks of the preflight: the decisions, from facts already read.

Owns the permissions the plugin's ServiceAccount needs (every verb of the shipped
``manifests/plugin/rbac.yaml``; docs/design.md#rbac), the order, names, details and fixes of the
cluster checks (docs/design.md#prerequisites, docs/design.md#rollout) and their findings.
``sriov-dra preflight`` and the ``preflight`` role feed it facts; which policy takes part where
is the plugin's rule (:mod:`.label_selectors`, :mod:`.resource_filters`). No I/O; standard library
and siblings only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import label_selectors, names, resource_filters

PASS = "pass"
FAIL = "fail"
MIN_KUBERNETES = "1.36.0"
RESOURCE_V1 = "resource.k8s.io/v1"
NAD_V1 = "k8s.cni.cncf.io/v1"
PLUGIN_API = "sriovnetwork.k8snetworkplumbingwg.io/v1alpha1"
UPSTREAM_OPERATOR_CRDS = (
    "sriovoperatorconfigs.sriovnetwork.openshift.io",
    "sriovnetworknodestates.sriovnetwork.openshift.io",
)
DEVICE_PLUGIN_IMAGE = "sriov-network-device-plugin"
POLICY = "policy"
CLUSTER_CHECKS = (
    "kubernetes-version",
    "resource-k8s-io-v1",
    "nad-crd",
    "plugin-crds",
    "plugin-rbac",
    "admission-policy",
    "no-upstream-sriov-network-operator",
    "no-legacy-device-plugin",
    "no-overlapping-policies",
    "policy-namespace",
    "policy-findings",
)


def _perms(
    group: str, resource: str, verbs: str, namespace: str = "", sub: str = "", name: str = ""
) -> list[dict[str, str]]:
    out = []
    for verb in verbs.split():
        perm = {"group": group, "resource": resource, "verb": verb, "namespace": namespace}
        if sub:
            perm["subresource"] = sub
        if name:
            perm["name"] = name
        out.append(perm)
    return out


PERMISSIONS: tuple[dict[str, str], ...] = tuple(
    # ClusterRole dra-sriov-managed-networks (docs/design.md#rbac, --multus-auto-attach)
    _perms("", "pods", "get patch")
    + _perms("k8s.cni.cncf.io", "network-attachment-definitions", "get list create patch delete")
    # ClusterRole sriov-dra-plugin (DRA publication, claims, status, Node, Events)
    + _perms("resource.k8s.io", "resourceslices", "get list watch create update patch delete")
    + _perms("resource.k8s.io", "resourceclaims", "get list watch")
    + _perms("resource.k8s.io", "resourceclaims", "get update patch", sub="status")
    + _perms(
        "resource.k8s.io",
        "resourceclaims",
        "associated-node:update associated-node:patch",
        sub="driver",
        name="sriovnetwork.k8snetworkplumbingwg.io",
    )
    + _perms("", "nodes", "get list watch")
    + _perms("", "pods", "list watch")
    + _perms("sriovnetwork.k8snetworkplumbingwg.io", "sriovresourcepolicies", "list")
    + _perms("events.k8s.io", "events", "create patch")
    # Role sriov-dra-plugin-policies in the policy namespace
    + _perms("sriovnetwork.k8snetworkplumbingwg.io", "sriovresourcepolicies", "get list watch", POLICY)
    + _perms("sriovnetwork.k8snetworkplumbingwg.io", "deviceattributes", "get list watch", POLICY)
    + _perms("sriovnetwork.k8snetworkplumbingwg.io", "sriovresourcepolicies", "patch", POLICY, sub="status")
    + _perms("sriovnetwork.k8snetworkplumbingwg.io", "deviceattributes", "patch", POLICY, sub="status")
)
"""Every permission of the shipped plugin RBAC; ``namespace`` ``""`` = all, ``policy`` = the policy namespace."""

ADMISSION_POLICY = "sriov-dra-binding-protection"
"""Name of the shipped ValidatingAdmissionPolicy and of its binding (``manifests/plugin/admission-policy.yaml``)."""
ADMISSION_GRANT: dict[str, str] = _perms(
    "sriovnetwork.k8snetworkplumbingwg.io", "managedbindings", "manage-own-node"
)[0]
"""The permission the policy asks about for the plugin's own writes (ClusterRole sriov-dra-binding-node-writer)."""


def review_namespace(perm: Mapping[str, str], policy_namespace: str) -> str:
    """The namespace to review ``perm`` in (``""`` for all namespaces)."""
    return policy_namespace if perm.get("namespace") == POLICY else perm.get("namespace") or ""


def describe(perm: Mapping[str, str], policy_namespace: str) -> str:
    """``verb group/resource[/subresource][ named N] in <where>`` for a permission."""
    what = "{}/{}".format(perm.get("group") or "core", perm["resource"])
    if perm.get("subresource"):
        what += "/" + perm["subresource"]
    if perm.get("name"):
        what += " named " + perm["name"]
    where = review_namespace(perm, policy_namespace) or "all namespaces"
    return "{} {} in {}".format(perm["verb"], what, where)


_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of ``v1.36.3``, ``1.36`` or ``v1.36.0-rc.1+abc``.

    Raises: ValueError naming the text when it does not start with a version.
    """
    m = _VERSION.match(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a Kubernetes version (expected v<major>.<minor>.<patch>)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def node_selected(
    selector: Mapping[str, Any] | None, labels: Mapping[str, str], *, managed: bool = True
) -> bool:
    """Whether a policy with ``spec.nodeSelector`` ``selector`` takes part on a node with ``labels``.

    The plugin's decision (:meth:`label_selectors.NodeSelection.takes_part`, upstream
    dra-driver-sriov's node-selector semantics): ``matchFields`` ignored, an empty term matches
    every node, a term with ``Gt``/``Lt`` matches none; in managed mode a selector with such a
    construct takes part everywhere (its configs claim and block). ``None`` selects every node.
    """
    selection = label_selectors.evaluate_node_selector(selector, labels, "spec.nodeSelector")
    return selection.takes_part(managed)


def _spec(obj: Any) -> Mapping[str, Any]:
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return "{}/{}".format(meta.get("namespace", ""), meta.get("name", ""))


def _filters(policy: Mapping[str, Any], managed: bool) -> list[resource_filters.ResourceFilter]:
    """Every resource filter of a policy as the plugin applies it (match-all for a config without).

    A filter the plugin refuses as malformed selects nothing (the plugin rejects the policy).
    """
    found: list[resource_filters.ResourceFilter] = []
    configs = _spec(policy).get("configs")
    for c_index, config in enumerate(configs if isinstance(configs, list) else []):
        raw = config.get("resourceFilters") if isinstance(config, Mapping) else None
        if not raw:
            found.append(resource_filters.ResourceFilter())
            continue
        for f_index, entry in enumerate(raw if isinstance(raw, list) else []):
            where = f"spec.configs[{c_index}].resourceFilters[{f_index}]"
            parsed = resource_filters.parse_filter(entry, where, managed=managed).filter
            if parsed is not None:
                found.append(parsed)
    return found


def policy_overlaps(
    policies: Iterable[Mapping[str, Any]] | None,
    nodes: Iterable[Mapping[str, Any]] | None,
    *,
    managed: bool = True,
) -> list[dict[str, list[str]]]:
    """Pairs of SriovResourcePolicies that can both select one VF on some node.

    A safe rollout forbids independent overlapping policies (docs/design.md#rollout).

    Two policies overlap on a node when both take part there (:func:`node_selected`) and some
    resource filter of each can match the same device
    (:meth:`resource_filters.ResourceFilter.may_match_a_device_of`). Both follow the plugin:
    ``drivers`` never narrows a filter, and in ``managed`` mode (the default, the auto-attach
    rollout this check guards) ``pfName#range`` entries count as their whole PF.
    Shapes: ``[{"policies": [a, b], "nodes": [...]}]`` sorted, ``namespace/name`` strings.
    """
    found: dict[tuple[str, str], list[str]] = {}
    ordered = sorted(policies or [], key=_name)
    for node in nodes or []:
        labels = (node.get("metadata") or {}).get("labels") or {}
        node_name = (node.get("metadata") or {}).get("name", "")
        selected = [
            p for p in ordered if node_selected(_spec(p).get("nodeSelector"), labels, managed=managed)
        ]
        for i, first in enumerate(selected):
            for second in selected[i + 1 :]:
                pairs = ((a, b) for a in _filters(first, managed) for b in _filters(second, managed))
                if any(a.may_match_a_device_of(b) for a, b in pairs):
                    found.setdefault((_name(first), _name(second)), []).append(node_name)
    return [{"policies": list(pair), "nodes": sorted(found[pair])} for pair in sorted(found)]


def workloads_with_image(objs: Iterable[Mapping[str, Any]] | None, fragment: str) -> list[str]:
    """``namespace/name`` of each workload with a container or init container image containing ``fragment``."""
    found = []
    for obj in objs or []:
        pod = _spec(_spec(obj).get("template"))
        images = [
            c.get("image") or ""
            for c in list(pod.get("containers") or []) + list(pod.get("initContainers") or [])
        ]
        if any(fragment in image for image in images):
            found.append(_name(obj))
    return sorted(found)


def check(name: str, ok: bool, detail: str, fix: str) -> dict[str, str]:
    """One check result; ``fix`` is dropped on pass."""
    return {"name": name, "status": PASS if ok else FAIL, "detail": detail, "fix": "" if ok else fix}


def _admission_check(admission: Mapping[str, Any], sa: str) -> dict[str, str]:
    """The ``admission-policy`` check from ``{"required", "policy", "binding", "grant"}``.

    ``policy`` and ``binding`` are the live objects named :data:`ADMISSION_POLICY` (``None`` when
    absent); ``grant`` whether the plugin's ServiceAccount holds :data:`ADMISSION_GRANT`;
    ``required`` false when the admin turned the policy off on purpose.
    """
    name = ADMISSION_POLICY
    policy, binding = admission.get("policy"), admission.get("binding")
    install = "apply manifests/plugin/admission-policy.yaml (role sriovnet.dra.plugin with plugin_admission_policy: true)"
    if not policy and not binding:
        if not admission.get("required", True):
            return check(
                "admission-policy",
                True,
                f"ValidatingAdmissionPolicy {name} is not installed (not required): driver-owned metadata is "
                "protected only by the guard's checks and the repair worker",
                "",
            )
        return check(
            "admission-policy",
            False,
            f"ValidatingAdmissionPolicy {name} and its binding are not installed: anyone who may edit a Pod or a "
            "NAD in a namespace can rewrite the plugin's shadows, registry and selections",
            install
            + ", or pass --no-admission-policy (preflight_admission_policy: false) if it is off on purpose",
        )
    spec = _spec(binding) if binding else {}
    actions = list(spec.get("validationActions") or [])
    problems = []
    if not policy:
        problems.append(f"ValidatingAdmissionPolicy {name} is missing (its binding enforces nothing)")
    if not binding:
        problems.append(f"ValidatingAdmissionPolicyBinding {name} is missing (the policy is inert)")
    elif spec.get("policyName") != name:
        problems.append(f"ValidatingAdmissionPolicyBinding {name} binds policy {spec.get('policyName')!r}")
    elif "Deny" not in actions:
        problems.append(f"ValidatingAdmissionPolicyBinding {name} has validationActions {actions} (no Deny)")
    if problems:
        return check("admission-policy", False, "; ".join(problems), install)
    if not admission.get("grant"):
        return check(
            "admission-policy",
            False,
            f"ValidatingAdmissionPolicy {name} is enforced but ServiceAccount {sa} may not "
            + describe(ADMISSION_GRANT, "")
            + ": the policy refuses its shadows and Pod patches",
            f"bind ServiceAccount {sa} to the ClusterRole sriov-dra-binding-node-writer (ClusterRoleBinding of the "
            "same name); the role sriovnet.dra.plugin applies it",
        )
    return check(
        "admission-policy",
        True,
        f"ValidatingAdmissionPolicy {name} and its binding (Deny) are installed; ServiceAccount {sa} may write "
        "its own node's bindings",
        "",
    )


def policy_namespaces(all_policies: Iterable[Mapping[str, Any]] | None) -> dict[str, int]:
    """SriovResourcePolicies per namespace, from a cluster-wide list. Shapes: sorted keys."""
    counts: dict[str, int] = {}
    for obj in all_policies or []:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        ns = str(meta.get("namespace") or "") if isinstance(meta, Mapping) else ""
        counts[ns] = counts.get(ns, 0) + 1
    return dict(sorted(counts.items()))


def node_findings(kind: str, objects: Iterable[Mapping[str, Any]] | None) -> list[str]:
    """Every ``Valid=False`` node entry in the ``kind`` objects' ``status.nodes`` (the plugin's findings).

    Shapes: ``Kind/name on node: Reason: message``, sorted.
    """
    found = []
    for obj in objects or []:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        status = obj.get("status") if isinstance(obj, Mapping) else None
        entries = status.get("nodes") if isinstance(status, Mapping) else None
        if not isinstance(meta, Mapping) or not isinstance(entries, list):
            continue
        for entry in entries:
            conditions = entry.get("conditions") if isinstance(entry, Mapping) else None
            for c in conditions if isinstance(conditions, list) else []:
                if (
                    isinstance(c, Mapping)
                    and c.get("type") == names.POLICY_STATUS_CONDITION
                    and c.get("status") == "False"
                ):
                    found.append(
                        "{}/{} on {}: {}: {}".format(
                            kind, meta.get("name"), entry.get("node"), c.get("reason"), c.get("message")
                        )
                    )
    return sorted(found)


def _policy_namespace_check(
    policy_namespace: str, watched: int, elsewhere: Mapping[str, int]
) -> dict[str, str]:
    others = ", ".join(f"{ns} ({n})" for ns, n in elsewhere.items() if ns != policy_namespace)
    if watched:
        detail = f"the plugin watches {policy_namespace}, which holds {watched} SriovResourcePolic" + (
            "y" if watched == 1 else "ies"
        )
        if others:
            detail += f"; ignored, in other namespaces: {others}"
    elif others:
        detail = (
            f"the plugin watches {policy_namespace}, which holds no SriovResourcePolicy, so no node publishes "
            f"a device; SriovResourcePolicies exist in: {others}"
        )
    else:
        detail = (
            f"the plugin watches {policy_namespace}; no SriovResourcePolicy exists yet, so nothing is "
            "published until one selects VFs"
        )
    return check(
        "policy-namespace",
        bool(watched) or not others,
        detail,
        f"create the SriovResourcePolicy and DeviceAttributes objects in {policy_namespace}, or set the "
        "plugin's policy namespace (plugin_policy_namespace, --policy-namespace) to where they are",
    )


def _served(api: str, apis: Sequence[str]) -> str:
    return "served" if api in apis else "not served"


def cluster_checks(
    *,
    version: str,
    apis: Sequence[str],
    service_account: str,
    policy_namespace: str,
    denied: Sequence[Mapping[str, str]],
    reviewed: int,
    crds: Sequence[str],
    workloads: Sequence[Mapping[str, Any]],
    policies: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    admission: Mapping[str, Any],
    all_policies: Sequence[Mapping[str, Any]],
    device_attributes: Sequence[Mapping[str, Any]],
    minimum: str = MIN_KUBERNETES,
) -> list[dict[str, str]]:
    """Every cluster check, in the order of :data:`CLUSTER_CHECKS`, with detail and fix.

    ``version`` is the API server's gitVersion; ``apis`` the served ``group/version`` strings;
    ``service_account`` ``namespace/name``; ``denied`` the permissions of ``reviewed`` that the
    ServiceAccount's access reviews refused; ``crds`` CRD names; ``workloads`` DaemonSets (and
    other workloads); ``policies`` SriovResourcePolicies; ``nodes`` Nodes; ``admission`` the
    admission policy facts (``required``, the live ``policy`` and ``binding`` or ``None``, ``grant``);
    ``all_policies`` the SriovResourcePolicies of every namespace; ``device_attributes`` those of
    ``policy_namespace``.
    Shapes: ``[{"name", "status": "pass"|"fail", "detail", "fix"}]``; ``fix`` empty on pass.
    """
    try:
        have = parse_version(version)
        version_ok = have >= parse_version(minimum)
        shown = "v{}.{}.{}".format(*have)
    except ValueError:
        version_ok, shown = False, repr(version)
    missing = "; ".join(describe(p, policy_namespace) for p in denied)
    upstream = sorted(n for n in crds if n in UPSTREAM_OPERATOR_CRDS)
    legacy = workloads_with_image(workloads, DEVICE_PLUGIN_IMAGE)
    overlaps = [
        "{} can select the same VFs on {}".format(" and ".join(o["policies"]), ", ".join(o["nodes"]))
        for o in policy_overlaps(policies, nodes)
    ]
    findings = sorted(
        node_findings("SriovResourcePolicy", policies) + node_findings("DeviceAttributes", device_attributes)
    )
    sa = service_account
    return [
        check(
            "kubernetes-version",
            version_ok,
            f"the API server is {shown}",
            f"upgrade the control plane to Kubernetes {minimum} or later (DRA resource.k8s.io/v1)",
        ),
        check(
            "resource-k8s-io-v1",
            RESOURCE_V1 in apis,
            f"{RESOURCE_V1} is {_served(RESOURCE_V1, apis)}",
            "enable the resource.k8s.io/v1 API (served by default since Kubernetes 1.34; check --runtime-config)",
        ),
        check(
            "nad-crd",
            NAD_V1 in apis,
            f"{NAD_V1} (NetworkAttachmentDefinition) is {_served(NAD_V1, apis)}",
            "install Multus's NetworkAttachmentDefinition CRD (role sriovnet.dra.multus)",
        ),
        check(
            "plugin-crds",
            PLUGIN_API in apis,
            f"{PLUGIN_API} (SriovResourcePolicy, DeviceAttributes) is {_served(PLUGIN_API, apis)}",
            "apply the plugin's CRDs (role sriovnet.dra.plugin)",
        ),
        check(
            "plugin-rbac",
            not denied,
            f"ServiceAccount {sa} may not: {missing}"
            if denied
            else f"ServiceAccount {sa} has all {reviewed} permissions",
            f"bind ServiceAccount {sa} to the ClusterRoles sriov-dra-plugin and dra-sriov-managed-networks "
            f"(ClusterRoleBindings of the same names) and to the Role sriov-dra-plugin-policies in {policy_namespace}; "
            "the role sriovnet.dra.plugin applies them",
        ),
        _admission_check(admission, sa),
        check(
            "no-upstream-sriov-network-operator",
            not upstream,
            "upstream sriov-network-operator CRDs found: {}".format(", ".join(upstream))
            if upstream
            else "no upstream sriov-network-operator CRDs",
            "uninstall the upstream sriov-network-operator; it and sriov-dra's operator must not manage the same "
            "node policies",
        ),
        check(
            "no-legacy-device-plugin",
            not legacy,
            "SR-IOV network device plugin DaemonSets: {}".format(", ".join(legacy))
            if legacy
            else "no SR-IOV network device plugin DaemonSet",
            "drain the nodes and delete the sriov-network-device-plugin DaemonSet; one provider must own each VF",
        ),
        check(
            "no-overlapping-policies",
            not overlaps,
            "; ".join(overlaps)
            if overlaps
            else f"{len(policies)} SriovResourcePolic{'y' if len(policies) == 1 else 'ies'}, none overlapping",
            "give the policies disjoint nodeSelectors or resourceFilters (pfNames, pciAddresses, vendors, devices); "
            "independent overlapping policies are forbidden",
        ),
        _policy_namespace_check(policy_namespace, len(policies), policy_namespaces(all_policies)),
        check(
            "policy-findings",
            not findings,
            "; ".join(findings)
            if findings
            else f"no node reports a problem in the SriovResourcePolicies and DeviceAttributes of {policy_namespace}",
            "fix each field named (the objects' Warning Events and status.nodes say which node found it); "
            "their devices stay withheld until then",
        ),
    ]
