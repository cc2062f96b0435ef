"""Tests for sriov_dra.core.operator.overlap: mapping identities, structural and inventory overlap."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import operator_objects as oo

from sriov_dra.core import device_facts
from sriov_dra.core.operator import node_policy, overlap
from sriov_dra_rules import extended_resources


def parsed(name: str, uid_n: int, **kw: Any) -> node_policy.NodePolicy:
    obj = oo.node_policy(name, uid=f"{uid_n:08x}-0000-4000-8000-000000000000", **kw)
    return node_policy.parse_policy(obj, prefix="openshift.io", nic_ids=())


def test_identity_is_the_intended_mapping_not_its_resolution() -> None:
    a = parsed("a", 1, dra={"attributes": oo.reference("rail-a-net")})
    same = parsed("same", 2, pf="ens2f0", dra={"attributes": oo.reference("rail-a-net")})
    other = parsed("other", 3, dra={"attributes": oo.reference("rail-b-net")})
    invalid = parsed("invalid", 4, dra={"attributes": {"bad": {"int": 1}}})
    legacy = parsed("legacy", 5)
    assert overlap.identity(a, None) == overlap.identity(same, None)
    assert overlap.identity(a, None) != overlap.identity(other, None)
    assert overlap.identity(invalid, None) == ("invalid", invalid.uid)
    assert overlap.identity(legacy, "sriov-vfs") == ("pool", "sriov-vfs")


def test_inventory_pairs_need_one_device_matched_by_both() -> None:
    a = parsed("a", 1, nic={"vendor": "15b3"}, dra={"attributes": oo.reference("rail-a-net")})
    b = parsed("b", 2, nic={"pfNames": ["ens2f0"]}, dra={"attributes": oo.reference("rail-b-net")})
    ids = {p.name: overlap.identity(p, None) for p in (a, b)}
    only_a = [device_facts.DeviceFacts("0000:01:00.1", "15b3", "101e", "101d", "ens1f0", "0000:01:00.0", 1)]
    shared = [device_facts.DeviceFacts("0000:02:00.1", "15b3", "101e", "101d", "ens2f0", "0000:02:00.0", 1)]
    assert overlap.inventory_pairs([a, b], ids, only_a) == []
    assert [(x.name, y.name) for x, y in overlap.inventory_pairs([a, b], ids, shared)] == [("a", "b")]


def test_two_legacy_policies_never_conflict() -> None:
    low = parsed("low", 1, nic={"vendor": "15b3"}, resource_name="a_pool")
    high = parsed("high", 2, nic={"vendor": "15b3"}, resource_name="b_pool")
    ids = {
        p.name: overlap.identity(p, extended_resources.device_class_name(p.resource_name))
        for p in (low, high)
    }
    assert overlap.conflicting_pairs([low, high], ids) == []


_NIC = st.fixed_dictionaries(
    {},
    optional={
        "vendor": st.sampled_from(["15b3", "8086"]),
        "pfNames": st.lists(st.sampled_from(["ens1f0", "ens2f0", "ens3f0"]), min_size=1, max_size=2),
        "rootDevices": st.lists(st.sampled_from(["0000:01:00.0", "0000:02:00.0"]), min_size=1, max_size=2),
    },
)


@given(st.lists(st.tuples(_NIC, st.booleans(), st.sampled_from(["a", "b"])), min_size=2, max_size=7))
def test_pf_bucketing_finds_exactly_the_pairs_a_full_comparison_finds(
    specs: list[tuple[dict[str, Any], bool, str]],
) -> None:
    parsed = []
    for i, (nic, dra, rail) in enumerate(specs):
        obj = oo.node_policy(
            f"p{i}",
            uid=f"{i:08x}-0000-4000-8000-000000000000",
            nic=nic or {"vendor": "15b3"},
            dra={"attributes": {"example.com/rail": {"string": rail}}} if dra else None,
        )
        parsed.append(node_policy.parse_policy(obj, prefix="openshift.io", nic_ids=()))
    translated = [p for p in parsed if p.translation.matcher is not None]
    identity = {
        p.name: overlap.identity(p, extended_resources.device_class_name(p.resource_name)) for p in translated
    }
    brute = [
        (a.name, b.name)
        for i, a in enumerate(translated)
        for b in translated[i + 1 :]
        if (a.has_dra or b.has_dra)
        and identity[a.name] != identity[b.name]
        and a.translation.matcher.may_match_a_device_of(b.translation.matcher)  # type: ignore[union-attr,arg-type]
    ]
    got = [(a.name, b.name) for a, b in overlap.conflicting_pairs(translated, identity)]
    assert got == brute
