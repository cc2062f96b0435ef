"""Which node-policy filters can claim the same VF with different mappings.

The driver gives a VF to the first matching config and never merges configs, so two policies
whose filters can select the same VF must publish the same mapping, or the node's configs are
withdrawn (docs/design.md#operator-attributes). A policy's identity is the mapping it intends to
publish, resolved or not; overlap is decided on the node's inventory when known, else
structurally (``ResourceFilter.may_match_a_device_of``, the preflight's rule too). Two policies
without a DRA block never conflict (upstream's priority order decides). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sriov_dra.core import device_facts
from sriov_dra.core.operator import node_policy

Identity = tuple[object, ...]


def identity(p: node_policy.NodePolicy, pool: str | None) -> Identity:
    """What a device matched by ``p`` would publish, for the overlap comparison.

    Uses the intended mapping (reference identity, not its resolution) so a conflict does not
    come and go with a dependency's readiness.
    """
    if not p.has_dra:
        return ("pool", pool)
    if p.dra is None or p.dra.problems:
        return ("invalid", p.uid)
    custom = tuple((k, v.type.value, v.value) for k, v in sorted(p.dra.custom.items()))
    return ("dra", p.resource_name, custom, p.dra.network)


def conflicting_pairs(
    candidates: Sequence[node_policy.NodePolicy], identities: Mapping[str, Identity]
) -> list[tuple[node_policy.NodePolicy, node_policy.NodePolicy]]:
    """Pairs (with at least one DRA policy) whose filters may overlap and whose mappings differ.

    Two filters that both name PFs can only overlap when they share a PF name, so only those
    pairs, and pairs involving a filter without PF names, are compared (same answer as
    comparing every pair, far fewer comparisons for the usual one-policy-per-PF layout).
    """
    by_pf: dict[str, list[int]] = {}
    unnamed: list[int] = []
    for i, p in enumerate(candidates):
        m = p.translation.matcher
        if m is None:
            continue
        if m.pf_names:
            for pf in m.pf_names:
                by_pf.setdefault(pf, []).append(i)
        else:
            unnamed.append(i)
    pairs: set[tuple[int, int]] = set()
    for members in by_pf.values():
        pairs.update((i, j) for n, i in enumerate(members) for j in members[n + 1 :])
    for i in unnamed:
        pairs.update((min(i, j), max(i, j)) for j in range(len(candidates)) if j != i)
    out = []
    for i, j in sorted(pairs):
        a, b = candidates[i], candidates[j]
        if not (a.has_dra or b.has_dra) or identities[a.name] == identities[b.name]:
            continue
        ma, mb = a.translation.matcher, b.translation.matcher
        if ma is not None and mb is not None and ma.may_match_a_device_of(mb):
            out.append((a, b))
    return out


def inventory_pairs(
    configured: Sequence[node_policy.NodePolicy],
    identities: Mapping[str, Identity],
    facts: Iterable[device_facts.DeviceFacts],
) -> list[tuple[node_policy.NodePolicy, node_policy.NodePolicy]]:
    """Conflicting pairs that match at least one actual device of the node."""
    pairs: dict[tuple[str, str], tuple[node_policy.NodePolicy, node_policy.NodePolicy]] = {}
    for device in facts:
        matching = [
            p
            for p in configured
            if p.translation.matcher is not None and p.translation.matcher.matches(device)
        ]
        for i, a in enumerate(matching):
            for b in matching[i + 1 :]:
                if (a.has_dra or b.has_dra) and identities[a.name] != identities[b.name]:
                    pairs[(a.name, b.name)] = (a, b)
    return [pairs[k] for k in sorted(pairs)]
