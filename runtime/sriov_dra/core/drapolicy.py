"""BuildDRAPolicyPlan: node policies + resolved networks + nodes → generated DRA objects and conditions.

One plan per reconciliation, shared by attribute generation and node-config generation, so a
policy is never resolved twice into inconsistent desired state (spec §12.2.4). For every policy
with a ``spec.dra`` block the plan holds one ``DeviceAttributes`` named
``dra-policy-<policy UID>-attrs`` (labels ``generated-by`` and ``node-policy-uid``, never the
resource-pool label) carrying the complete map: the compatibility resourceName, the validated
custom attributes and the resolved ``netAttachDefName``/``netAttachDefNamespace`` pair. Policies
without ``dra`` keep upstream's per-pool ``<pool>-attrs`` object. Every node selected by a policy
gets one ``SriovResourcePolicy`` (named after the node, selecting its hostname) whose configs keep
each policy's translated filter and select exactly its attribute object.

Safety rules (spec §12.2.4, §12.2.5): an unresolved or invalid policy has its attribute object
withheld but keeps its filter and selector, so its devices stay claimed and unavailable instead of
reaching a broader config; a node where a DRA-managed mapping overlaps a different mapping, or
where a selected policy cannot be translated exactly, gets an empty ``configs`` list and every DRA
policy there reports ``ConflictingDRAMapping``/``UnsupportedManagedSelector``. Overlap is decided
on the node's device inventory when one is given, else structurally (filters that are not
provably disjoint overlap).

It must never do I/O, depend on input order, adopt or name objects it did not generate, or emit a
match-all filter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from sriov_dra.core import attributes, conditions, limits, nodepolicy, overlap, policies, sriovnetwork
from sriov_dra_rules import errors, names

DRA_GROUP: Final = "sriovnetwork.k8snetworkplumbingwg.io"
DRA_API_VERSION: Final = f"{DRA_GROUP}/v1alpha1"
ATTRIBUTES_KIND: Final = "DeviceAttributes"
ATTRIBUTES_PLURAL: Final = "deviceattributes"
POLICY_KIND: Final = "SriovResourcePolicy"
POLICY_PLURAL: Final = "sriovresourcepolicies"
GENERATED_BY_LABEL: Final = "sriovnetwork.openshift.io/generated-by"
GENERATED_BY_VALUE: Final = "sriov-network-operator"
POLICY_UID_LABEL: Final = "sriovnetwork.openshift.io/node-policy-uid"
RESOURCE_POOL_LABEL: Final = "sriovnetwork.openshift.io/resource-pool"
NODE_LABEL: Final = "sriovnetwork.openshift.io/node"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
CONDITION_TYPE: Final = "DRAConfigurationReady"
READY_REASON: Final = "DRAConfigurationApplied"
MANAGED_SELECTOR: Final = f"{GENERATED_BY_LABEL}={GENERATED_BY_VALUE}"
"""Label selector of every object this plan generates (and the only ones it may delete)."""

_R = errors.Reason
PRECEDENCE: Final = (
    _R.DRA_INACTIVE,
    _R.INVALID_DRA_ATTRIBUTE,
    _R.SOURCE_ACCESS_DENIED,
    _R.SRIOV_NETWORK_NOT_FOUND,
    _R.SRIOV_NETWORK_NOT_READY,
    _R.SOURCE_NAD_NOT_READY,
    _R.DRA_CONFIGURATION_SYNC_FAILED,
    _R.UNSUPPORTED_MANAGED_SELECTOR,
    _R.CONFLICTING_DRA_MAPPING,
)
"""Which reason a policy reports when several apply (earlier wins)."""
_WITHHOLDING: Final = frozenset(PRECEDENCE[:7])
_NODES_SHOWN: Final = 5


@dataclass(frozen=True)
class PlanSettings:
    """What the plan needs from the operator's configuration.

    ``namespace`` is the operator/driver policy namespace holding every generated object;
    ``resource_prefix`` the ``RESOURCE_PREFIX`` of the compatibility resourceName; with
    ``dra_enabled`` false nothing is generated and DRA policies report ``DRAInactive``.
    """

    namespace: str
    resource_prefix: str = sriovnetwork.DEFAULT_RESOURCE_PREFIX
    dra_enabled: bool = True
    nic_ids: tuple[nodepolicy.NicId, ...] = ()


@dataclass(frozen=True)
class PolicyOutcome:
    """The DRAConfigurationReady verdict for one policy with a ``dra`` block.

    ``attributes_name`` is set when its DeviceAttributes is published; ``nodes`` names the
    SriovResourcePolicies whose configs carry its filter.
    """

    policy: str
    uid: str
    generation: int
    reason: errors.Reason | None
    message: str
    attributes_name: str | None
    nodes: tuple[str, ...]

    def condition(self) -> conditions.Condition:
        """The ``DRAConfigurationReady`` condition for this outcome."""
        if self.reason is None:
            return conditions.Condition(
                CONDITION_TYPE, conditions.Status.TRUE, READY_REASON, self.message, self.generation
            )
        return conditions.Condition(
            CONDITION_TYPE, conditions.Status.FALSE, self.reason.value, self.message, self.generation
        )


@dataclass(frozen=True)
class DraPolicyPlan:
    """Desired generated objects (sorted by name) and per-policy outcomes.

    ``withheld`` names per-policy DeviceAttributes of current policies that must not exist
    (delete them first); every other existing managed object outside the desired names is obsolete.
    """

    device_attributes: tuple[Mapping[str, object], ...]
    resource_policies: tuple[Mapping[str, object], ...]
    withheld: frozenset[str]
    outcomes: Mapping[str, PolicyOutcome]
    diagnostics: tuple[str, ...]

    def names(self, kind: str) -> frozenset[str]:
        """Desired object names of ``kind`` (``DeviceAttributes`` or ``SriovResourcePolicy``)."""
        objs = self.device_attributes if kind == ATTRIBUTES_KIND else self.resource_policies
        return frozenset(_name(o) for o in objs)


def attributes_name(policy_uid: str) -> str:
    """``dra-policy-<full policy UID>-attrs``: a recreated policy gets a different object."""
    return f"dra-policy-{policy_uid}-attrs"


def references(
    policy_objects: Sequence[Mapping[str, object]], *, prefix: str = ""
) -> frozenset[sriovnetwork.ObjectRef]:
    """Every valid SriovNetwork reference of the DRA policies (what the controller must resolve)."""
    out: set[sriovnetwork.ObjectRef] = set()
    for obj in policy_objects:
        parsed = nodepolicy.parse_policy(obj, prefix=prefix, nic_ids=())
        if parsed.dra is not None and parsed.dra.network is not None:
            out.add(parsed.dra.network)
    return frozenset(out)


@dataclass
class _Issues:
    """Per-policy problems collected while planning: reason → {detail → nodes}."""

    by_reason: dict[errors.Reason, dict[str, list[str]]] = field(default_factory=dict)

    def add(self, reason: errors.Reason, detail: str, node: str = "") -> None:
        nodes = self.by_reason.setdefault(reason, {}).setdefault(detail, [])
        if node:
            nodes.append(node)

    def verdict(self) -> tuple[errors.Reason | None, str]:
        present = [r for r in PRECEDENCE if r in self.by_reason]
        if not present:
            return None, ""
        parts = []
        for reason in present:
            for detail, nodes in sorted(self.by_reason[reason].items()):
                parts.append(f"{detail} on node(s) {_fmt(nodes)}" if nodes else detail)
        return present[0], "; ".join(parts)


def build_dra_policy_plan(
    policy_objects: Sequence[Mapping[str, object]],
    nodes: Sequence[Mapping[str, object]],
    resolutions: Mapping[sriovnetwork.ObjectRef, sriovnetwork.SourceResolution],
    settings: PlanSettings,
    *,
    inventory: Mapping[str, Sequence[policies.DeviceFacts]] | None = None,
) -> DraPolicyPlan:
    """Plan every generated DeviceAttributes and SriovResourcePolicy, and each DRA policy's verdict.

    ``policy_objects`` are the SriovNetworkNodePolicies of the operator namespace (deleting ones
    and the ``default`` bootstrap policy take no part in generation); ``resolutions`` map each
    reference of :func:`references` to its live resolution (a missing entry counts as not yet
    resolved); ``inventory`` optionally lists each node's discovered VFs for the overlap check.
    Shapes: outputs sorted by name; configs per node ordered by priority (smaller number first,
    so the higher-priority policy wins the driver's first match), then policy name.
    Source: spec §12.2.2–§12.2.6, §13.3; reference sriov-network-operator.md §4.3, §4.4.
    """
    diagnostics: list[str] = []
    parsed = _parse_all(policy_objects, settings, diagnostics)
    issues: dict[str, _Issues] = {p.name: _Issues() for p in parsed if p.has_dra}
    if not settings.dra_enabled:
        for p in parsed:
            if p.has_dra:
                issues[p.name].add(
                    _R.DRA_INACTIVE, "the DRA provider is disabled; spec.dra is stored, not applied"
                )
        return DraPolicyPlan((), (), frozenset(), _outcomes(parsed, issues, {}, {}), tuple(diagnostics))
    generated = [p for p in parsed if p.name != nodepolicy.DEFAULT_POLICY_NAME]
    for p in parsed:
        if p.name == nodepolicy.DEFAULT_POLICY_NAME and p.has_dra:
            issues[p.name].add(
                _R.INVALID_DRA_ATTRIBUTE,
                "spec.dra must not be set on the default bootstrap policy; move it to a separately named policy",
            )
    attrs, withheld, published = _attribute_objects(generated, resolutions, settings, issues, diagnostics)
    pools = _pools(generated, settings, diagnostics)
    attrs.extend(obj for _, obj in pools.values())
    srps, policy_nodes = _node_policies(generated, nodes, pools, settings, issues, inventory, diagnostics)
    return DraPolicyPlan(
        device_attributes=tuple(sorted(attrs, key=_name)),
        resource_policies=tuple(sorted(srps, key=_name)),
        withheld=frozenset(withheld),
        outcomes=_outcomes(parsed, issues, published, policy_nodes),
        diagnostics=tuple(sorted(set(diagnostics))),
    )


def _parse_all(
    policy_objects: Sequence[Mapping[str, object]], settings: PlanSettings, diagnostics: list[str]
) -> list[nodepolicy.NodePolicy]:
    out: dict[str, nodepolicy.NodePolicy] = {}
    for obj in policy_objects:
        meta = obj.get("metadata")
        if isinstance(meta, Mapping) and meta.get("deletionTimestamp"):
            continue
        p = nodepolicy.parse_policy(obj, prefix=settings.resource_prefix, nic_ids=settings.nic_ids)
        if not p.name or names.uuid_problem(p.uid) is not None or p.name in out:
            diagnostics.append(f"{nodepolicy.KIND} {p.name!r}: missing or duplicate name/uid; skipped")
            continue
        out[p.name] = p
    return [out[name] for name in sorted(out)]


def _attribute_objects(
    generated: Sequence[nodepolicy.NodePolicy],
    resolutions: Mapping[sriovnetwork.ObjectRef, sriovnetwork.SourceResolution],
    settings: PlanSettings,
    issues: dict[str, _Issues],
    diagnostics: list[str],
) -> tuple[list[Mapping[str, object]], set[str], dict[str, str]]:
    objects: list[Mapping[str, object]] = []
    withheld: set[str] = set()
    published: dict[str, str] = {}
    for p in generated:
        if not p.has_dra or p.dra is None:
            continue
        name = attributes_name(p.uid)
        for problem in p.dra.problems:
            issues[p.name].add(_R.INVALID_DRA_ATTRIBUTE, str(problem))
        values: dict[str, attributes.AttributeValue] = {
            nodepolicy.RESOURCE_NAME_ATTRIBUTE: attributes.string_value(
                nodepolicy.compat_resource_name(p.resource_name, settings.resource_prefix)
            ),
            **p.dra.custom,
        }
        if p.dra.network is not None and not p.dra.problems:
            resolution = resolutions.get(p.dra.network) or sriovnetwork.unresolved(
                p.dra.network,
                _R.DRA_CONFIGURATION_SYNC_FAILED,
                f"SriovNetwork {p.dra.network} was not read yet",
            )
            if resolution.ready and resolution.nad is not None:
                values.update(
                    attributes.reference_attributes(
                        attributes.NadReference(resolution.nad.name, resolution.nad.namespace)
                    )
                )
            else:
                issues[p.name].add(resolution.reason or _R.SRIOV_NETWORK_NOT_READY, resolution.message)
        if any(r in _WITHHOLDING for r in issues[p.name].by_reason):
            withheld.add(name)
            continue
        published[p.name] = name
        labels = {GENERATED_BY_LABEL: GENERATED_BY_VALUE, POLICY_UID_LABEL: p.uid}
        objects.append(_attrs_object(name, labels, values, settings.namespace))
    return objects, withheld, published


def _pools(
    generated: Sequence[nodepolicy.NodePolicy], settings: PlanSettings, diagnostics: list[str]
) -> dict[str, tuple[str, Mapping[str, object]]]:
    """Upstream's per-pool objects, only for resource names still used by policies without ``dra``."""
    by_pool: dict[str, str] = {}
    for rn in sorted({p.resource_name for p in generated if not p.has_dra and p.resource_name}):
        pool = nodepolicy.pool_name(rn)
        if pool in by_pool:
            diagnostics.append(
                f"resourceName {rn!r} normalises to pool {pool!r} of {by_pool[pool]!r}; skipped"
            )
            continue
        value = nodepolicy.compat_resource_name(rn, settings.resource_prefix)
        if len(value.encode("utf-8")) > attributes.MAX_VALUE_BYTES:
            diagnostics.append(
                f"resourceName {rn!r}: {value!r} exceeds {attributes.MAX_VALUE_BYTES} bytes; skipped"
            )
            continue
        by_pool[pool] = rn
    out: dict[str, tuple[str, Mapping[str, object]]] = {}
    for pool, rn in by_pool.items():
        value = nodepolicy.compat_resource_name(rn, settings.resource_prefix)
        labels = {GENERATED_BY_LABEL: GENERATED_BY_VALUE, RESOURCE_POOL_LABEL: pool}
        values = {nodepolicy.RESOURCE_NAME_ATTRIBUTE: attributes.string_value(value)}
        out[rn] = (pool, _attrs_object(f"{pool}-attrs", labels, values, settings.namespace))
    return out


def _attrs_object(
    name: str, labels: Mapping[str, str], values: Mapping[str, attributes.AttributeValue], namespace: str
) -> dict[str, object]:
    return {
        "apiVersion": DRA_API_VERSION,
        "kind": ATTRIBUTES_KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": dict(sorted(labels.items()))},
        "spec": {"attributes": {k: values[k].to_json() for k in sorted(values)}},
    }


def _selector(
    p: nodepolicy.NodePolicy, pools: Mapping[str, tuple[str, Mapping[str, object]]]
) -> dict[str, object]:
    """The policy-UID selector for DRA policies; upstream's pool selector for the others."""
    if p.has_dra:
        labels = {GENERATED_BY_LABEL: GENERATED_BY_VALUE, POLICY_UID_LABEL: p.uid}
    else:
        labels = {RESOURCE_POOL_LABEL: pools[p.resource_name][0]}
    return {"matchLabels": dict(sorted(labels.items()))}


def _node_policies(
    generated: Sequence[nodepolicy.NodePolicy],
    nodes: Sequence[Mapping[str, object]],
    pools: Mapping[str, tuple[str, Mapping[str, object]]],
    settings: PlanSettings,
    issues: dict[str, _Issues],
    inventory: Mapping[str, Sequence[policies.DeviceFacts]] | None,
    diagnostics: list[str],
) -> tuple[list[Mapping[str, object]], dict[str, list[str]]]:
    usable = [p for p in generated if p.has_dra or p.resource_name in pools]
    for p in generated:
        if not p.has_dra and p.resource_name not in pools:
            diagnostics.append(
                f"{nodepolicy.KIND} {p.name}: resourceName {p.resource_name!r} has no pool; no config"
            )
    identity = {p.name: overlap.identity(p, nodepolicy.pool_name(p.resource_name)) for p in usable}
    translated = [p for p in usable if p.translation.problem is None]
    structural = overlap.conflicting_pairs(translated, identity)
    # Built once per policy and shared (read-only) by every node's config list.
    config_parts = {
        p.name: (_selector(p, pools), [dict(p.translation.filter)])
        for p in translated
        if p.translation.filter is not None
    }
    srps: list[Mapping[str, object]] = []
    policy_nodes: dict[str, list[str]] = {}
    for node in sorted(nodes, key=_name):
        node_name, labels = _name(node), _labels(node.get("metadata"))
        applicable = sorted((p for p in usable if p.selects(labels)), key=lambda p: (p.priority, p.name))
        if not applicable:
            continue
        hostname = labels.get(HOSTNAME_LABEL)
        if not hostname:
            diagnostics.append(f"node {node_name} has no {HOSTNAME_LABEL} label; no SriovResourcePolicy")
            continue
        names = {p.name for p in applicable}
        broken = [p for p in applicable if p.translation.problem is not None]
        managed = [p for p in applicable if p.has_dra]
        withdrawn = False
        if broken and managed:
            withdrawn = True
            for p in managed:
                for b in broken:
                    issues[p.name].add(
                        _R.UNSUPPORTED_MANAGED_SELECTOR,
                        f"policy {b.name}: {b.translation.problem}; configs withdrawn",
                        node_name,
                    )
        for b in broken:
            diagnostics.append(f"{nodepolicy.KIND} {b.name}: {b.translation.problem} (node {node_name})")
        configured = [p for p in applicable if p.translation.problem is None]
        if not withdrawn:
            facts = None if inventory is None else inventory.get(node_name)
            pairs = (
                [(a, b) for a, b in structural if a.name in names and b.name in names]
                if facts is None
                else overlap.inventory_pairs(configured, identity, facts)
            )
            for a, b in pairs:
                withdrawn = True
                for p, other in ((a, b), (b, a)):
                    if p.has_dra:
                        issues[p.name].add(
                            _R.CONFLICTING_DRA_MAPPING,
                            f"overlaps policy {other.name} with a different mapping; make their nicSelectors "
                            "disjoint (configs withdrawn)",
                            node_name,
                        )
            if withdrawn:
                for p in managed:
                    if _R.CONFLICTING_DRA_MAPPING not in issues[p.name].by_reason:
                        issues[p.name].add(
                            _R.CONFLICTING_DRA_MAPPING, "node withdrawn by a conflict", node_name
                        )
        configs: list[dict[str, object]] = []
        if not withdrawn:
            for p in configured:
                selector, filters = config_parts[p.name]
                configs.append({"deviceAttributesSelector": selector, "resourceFilters": filters})
                if p.has_dra:
                    policy_nodes.setdefault(p.name, []).append(node_name)
        srps.append(_srp(node_name, str(hostname), configs, settings.namespace))
    return srps, policy_nodes


def _srp(node: str, hostname: str, configs: list[dict[str, object]], namespace: str) -> dict[str, object]:
    labels = {GENERATED_BY_LABEL: GENERATED_BY_VALUE}
    if not limits.label_value_errors(node):
        labels[NODE_LABEL] = node
    term = {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [hostname]}]}
    return {
        "apiVersion": DRA_API_VERSION,
        "kind": POLICY_KIND,
        "metadata": {"name": node, "namespace": namespace, "labels": dict(sorted(labels.items()))},
        "spec": {"nodeSelector": {"nodeSelectorTerms": [term]}, "configs": configs},
    }


def _outcomes(
    parsed: Sequence[nodepolicy.NodePolicy],
    issues: Mapping[str, _Issues],
    published: Mapping[str, str],
    policy_nodes: Mapping[str, list[str]],
) -> dict[str, PolicyOutcome]:
    out: dict[str, PolicyOutcome] = {}
    for p in parsed:
        if not p.has_dra:
            continue
        reason, message = issues[p.name].verdict()
        nodes = tuple(sorted(policy_nodes.get(p.name, ())))
        name = published.get(p.name)
        if reason is None:
            message = (
                f"DeviceAttributes {name} is generated and selected by the SriovResourcePolicy of "
                f"{len(nodes)} node(s)"
            )
        out[p.name] = PolicyOutcome(p.name, p.uid, p.generation, reason, message, name, nodes)
    return out


def _fmt(nodes: Sequence[str]) -> str:
    unique = sorted(set(nodes))
    shown = ", ".join(unique[:_NODES_SHOWN])
    return shown if len(unique) <= _NODES_SHOWN else f"{shown} (+{len(unique) - _NODES_SHOWN} more)"


def _name(obj: Mapping[str, object]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


def _labels(meta: object) -> Mapping[str, str]:
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
