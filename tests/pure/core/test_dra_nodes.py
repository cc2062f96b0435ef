"""Tests for sriov_dra.core.operator.dra_nodes: each node's SriovResourcePolicy and its overlap and translation safety rules
(docs/design.md#operator-attributes, docs/design.md#eligibility)."""

from __future__ import annotations

from typing import Any

from tests.fakes import operator_objects as oo
from tests.fakes.dra_plans import (
    POOL_LABEL,
    RAIL_A,
    UID_C,
    UID_D,
    R,
    plan,
    rail_config,
    ready,
    srp,
)

from sriov_dra.core import device_facts


def overlapping(second_ref: str = "rail-b-net", **nic: Any) -> list[dict[str, Any]]:
    a, b = oo.rail_policies()
    b["spec"]["nicSelector"] = nic or {"vendor": "15b3"}
    b["spec"]["dra"]["attributes"] = oo.reference(second_ref)
    return [a, b]


def test_conflicting_overlap_withdraws_the_node_with_an_empty_configs_list() -> None:
    p = plan(overlapping())
    for node in ("worker-1", "worker-2"):
        assert srp(p, node)["spec"]["configs"] == []
    for name, other in (("rail-a-policy", "rail-b-policy"), ("rail-b-policy", "rail-a-policy")):
        outcome = p.outcomes[name]
        assert outcome.reason is R.CONFLICTING_DRA_MAPPING
        assert other in outcome.message and "worker-1" in outcome.message
        assert outcome.nodes == ()
    assert len(p.device_attributes) == 2  # the maps stay valid; no config selects them


def test_overlap_with_an_identical_mapping_is_not_a_conflict() -> None:
    p = plan(overlapping(second_ref="rail-a-net"), resolutions=ready(RAIL_A))
    assert len(srp(p, "worker-1")["spec"]["configs"]) == 2
    assert all(o.reason is None for o in p.outcomes.values())


def test_overlap_between_dra_and_legacy_mappings_conflicts() -> None:
    legacy = oo.node_policy("legacy", uid=UID_C, nic={"vendor": "15b3"}, resource_name="intel_nic")
    p = plan([oo.rail_policies()[0], legacy])
    assert srp(p, "worker-1")["spec"]["configs"] == []
    assert p.outcomes["rail-a-policy"].reason is R.CONFLICTING_DRA_MAPPING


def test_legacy_overlaps_keep_priority_order_without_conflict() -> None:
    low = oo.node_policy("low", uid=UID_C, nic={"vendor": "15b3"}, resource_name="a_pool", priority=50)
    high = oo.node_policy("high", uid=UID_D, nic={"vendor": "15b3"}, resource_name="b_pool", priority=10)
    p = plan([low, high])
    selectors = [
        c["deviceAttributesSelector"]["matchLabels"][POOL_LABEL]
        for c in srp(p, "worker-1")["spec"]["configs"]
    ]
    assert selectors == ["b-pool", "a-pool"]  # priority 10 first: it wins the driver's first match


def facts(pf: str, vf: int, vendor: str = "15b3") -> device_facts.DeviceFacts:
    return device_facts.DeviceFacts(f"0000:0{vf}:00.1", vendor, "101e", "101d", pf, "0000:01:00.0", vf)


def test_inventory_decides_actual_overlap() -> None:
    pols = overlapping(rootDevices=["0000:01:00.0"])  # names vs addresses: structurally unknown
    overlapping_inventory = plan(
        pols, inventory={"worker-1": [facts("ens1f0", 1)], "worker-2": [facts("ens1f0", 1)]}
    )
    # ens1f0 VFs have pfPciAddress 0000:01:00.0 in this inventory, so both policies match them.
    assert srp(overlapping_inventory, "worker-1")["spec"]["configs"] == []
    disjoint_inventory = [
        device_facts.DeviceFacts("0000:09:00.1", "15b3", "101e", "101d", "ens1f0", "0000:09:00.0", 1)
    ]
    ok = plan(pols, inventory={"worker-1": disjoint_inventory, "worker-2": disjoint_inventory})
    assert len(srp(ok, "worker-1")["spec"]["configs"]) == 2
    assert all(o.reason is None for o in ok.outcomes.values())
    structural = plan(pols)
    assert srp(structural, "worker-1")["spec"]["configs"] == []  # without inventory: not provably disjoint


def test_conflict_only_withdraws_the_nodes_where_both_policies_apply() -> None:
    pols = overlapping()
    pols[1]["spec"]["nodeSelector"] = {"only": "worker-2"}
    nodes = [oo.node("worker-1"), oo.node("worker-2", {**oo.DUAL_RAIL, "only": "worker-2"})]
    p = plan(pols, nodes)
    assert srp(p, "worker-1")["spec"]["configs"] == [rail_config(oo.UID_A, "ens1f0")]
    assert srp(p, "worker-2")["spec"]["configs"] == []
    assert p.outcomes["rail-a-policy"].reason is R.CONFLICTING_DRA_MAPPING
    assert (
        "worker-2" in p.outcomes["rail-a-policy"].message
        and "worker-1" not in p.outcomes["rail-a-policy"].message
    )


def test_untranslatable_dra_policy_withdraws_its_nodes() -> None:
    a, b = oo.rail_policies()
    b["spec"]["nicSelector"] = {"netFilter": "openstack/NetworkID:abc"}
    p = plan([a, b])
    assert srp(p, "worker-1")["spec"]["configs"] == []
    for name in ("rail-a-policy", "rail-b-policy"):
        assert p.outcomes[name].reason is R.UNSUPPORTED_MANAGED_SELECTOR
        assert "netFilter" in p.outcomes[name].message


def test_untranslatable_legacy_policy_alone_is_skipped_not_match_all() -> None:
    legacy = oo.node_policy("legacy", uid=UID_C, nic={"pfNames": ["ens1f0#0-7"]}, resource_name="intel_nic")
    ok = oo.node_policy("legacy-ok", uid=UID_D, pf="ens2f0", resource_name="intel_nic")
    p = plan([legacy, ok])
    configs = srp(p, "worker-1")["spec"]["configs"]
    assert len(configs) == 1 and configs[0]["resourceFilters"] == [
        {"linkType": "eth", "pfNames": ["ens2f0"], "vendors": ["15b3"]}
    ]
    assert any("VF ranges" in d for d in p.diagnostics)
