"""The SriovResourcePolicy of each node a DRA policy plan selects, with its overlap safety rules.

Per node (docs/design.md#operator-attributes, docs/design.md#eligibility): the policies selecting
it ordered by priority then name, each config selecting exactly its attribute object with the
policy's translated filter. A node where a DRA policy sits beside an untranslatable policy, or
where a DRA mapping overlaps a different one (on the node's inventory when given, else
structurally), gets an empty ``configs`` list, and its DRA policies report
``UnsupportedManagedSelector`` or ``ConflictingDRAMapping``. Never emits a match-all filter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sriov_dra.core import device_facts
from sriov_dra.core.operator import node_policy, overlap
from sriov_dra.core.operator.dra_objects import (
    HOSTNAME_LABEL,
    config_selector,
    object_labels,
    object_name,
    resource_policy_object,
)
from sriov_dra.core.operator.dra_verdicts import Issues
from sriov_dra_rules import errors, extended_resources

_R = errors.Reason


def node_policies(
    generated: Sequence[node_policy.NodePolicy],
    nodes: Sequence[Mapping[str, object]],
    pools: Mapping[str, tuple[str, Mapping[str, object]]],
    namespace: str,
    issues: dict[str, Issues],
    inventory: Mapping[str, Sequence[device_facts.DeviceFacts]] | None,
    diagnostics: list[str],
) -> tuple[list[Mapping[str, object]], dict[str, list[str]]]:
    """Every node's SriovResourcePolicy in ``namespace``, and the nodes each DRA policy configures.

    Shapes: ``pools`` maps a resourceName to its pool and per-pool object; ``issues`` (by policy
    name) and ``diagnostics`` are appended to; nodes without a hostname label get none.
    """
    usable = [p for p in generated if p.has_dra or p.resource_name in pools]
    for p in generated:
        if not p.has_dra and p.resource_name not in pools:
            diagnostics.append(
                f"{node_policy.KIND} {p.name}: resourceName {p.resource_name!r} has no pool; no config"
            )
    identity = {
        p.name: overlap.identity(p, extended_resources.device_class_name(p.resource_name)) for p in usable
    }
    translated = [p for p in usable if p.translation.problem is None]
    structural = overlap.conflicting_pairs(translated, identity)
    # Built once per policy and shared (read-only) by every node's config list.
    config_parts = {
        p.name: (config_selector(p, pools), [dict(p.translation.filter)])
        for p in translated
        if p.translation.filter is not None
    }
    srps: list[Mapping[str, object]] = []
    policy_nodes: dict[str, list[str]] = {}
    for node in sorted(nodes, key=object_name):
        node_name, labels = object_name(node), object_labels(node.get("metadata"))
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
            diagnostics.append(f"{node_policy.KIND} {b.name}: {b.translation.problem} (node {node_name})")
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
        srps.append(resource_policy_object(node_name, str(hostname), configs, namespace))
    return srps, policy_nodes
