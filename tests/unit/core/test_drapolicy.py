"""Tests for sriov_dra.core.drapolicy.build_dra_policy_plan (spec §12.2.2–§12.2.6, §14.3)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import operator_objects as oo

from sriov_dra.core import drapolicy, policies, sriovnetwork
from sriov_dra_rules import errors, names

R = errors.Reason
OP = oo.OP_NS
SETTINGS = drapolicy.PlanSettings(namespace=OP)
GEN = "sriovnetwork.openshift.io/generated-by"
UID_LABEL = "sriovnetwork.openshift.io/node-policy-uid"
POOL_LABEL = "sriovnetwork.openshift.io/resource-pool"
D = "sriovnetwork.k8snetworkplumbingwg.io"
UID_C = "cccccccc-0000-4000-8000-00000000000c"
UID_D = "dddddddd-0000-4000-8000-00000000000d"
ATTRS_A = f"dra-policy-{oo.UID_A}-attrs"
ATTRS_B = f"dra-policy-{oo.UID_B}-attrs"


def ready(*refs: sriovnetwork.ObjectRef) -> dict[sriovnetwork.ObjectRef, sriovnetwork.SourceResolution]:
    return {
        r: sriovnetwork.SourceResolution(r, sriovnetwork.ObjectRef(oo.TARGET_NS, r.name), None, "")
        for r in refs
    }


RAIL_A = sriovnetwork.ObjectRef(OP, "rail-a-net")
RAIL_B = sriovnetwork.ObjectRef(OP, "rail-b-net")
BOTH_READY = ready(RAIL_A, RAIL_B)
NODES = [oo.node("worker-1"), oo.node("worker-2")]


def plan(
    pols: Sequence[dict[str, Any]],
    nodes: Sequence[dict[str, Any]] = NODES,
    resolutions: dict[sriovnetwork.ObjectRef, sriovnetwork.SourceResolution] | None = None,
    settings: drapolicy.PlanSettings = SETTINGS,
    **kw: Any,
) -> drapolicy.DraPolicyPlan:
    return drapolicy.build_dra_policy_plan(
        pols, nodes, BOTH_READY if resolutions is None else resolutions, settings, **kw
    )


def srp(p: drapolicy.DraPolicyPlan, node: str) -> dict[str, Any]:
    return next(dict(o) for o in p.resource_policies if o["metadata"]["name"] == node)  # type: ignore[index]


def attrs_of(p: drapolicy.DraPolicyPlan, name: str) -> dict[str, Any] | None:
    return next((dict(o) for o in p.device_attributes if o["metadata"]["name"] == name), None)  # type: ignore[index]


def rail_attrs(uid: str, rail: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{D}/v1alpha1",
        "kind": "DeviceAttributes",
        "metadata": {
            "name": f"dra-policy-{uid}-attrs",
            "namespace": OP,
            "labels": {GEN: "sriov-network-operator", UID_LABEL: uid},
        },
        "spec": {
            "attributes": {
                "k8s.cni.cncf.io/resourceName": {"string": "openshift.io/sriov_vfs"},
                f"{D}/netAttachDefName": {"string": rail},
                f"{D}/netAttachDefNamespace": {"string": "ai-workloads"},
            }
        },
    }


def rail_config(uid: str, pf: str) -> dict[str, Any]:
    return {
        "deviceAttributesSelector": {"matchLabels": {GEN: "sriov-network-operator", UID_LABEL: uid}},
        "resourceFilters": [{"linkType": "eth", "pfNames": [pf], "vendors": ["15b3"]}],
    }


def test_spec_14_3_two_rails_sharing_a_resource_name_get_separate_maps_and_selectors() -> None:
    p = plan(oo.rail_policies(), [oo.node("worker-1")])
    assert [dict(o) for o in p.device_attributes] == [
        rail_attrs(oo.UID_A, "rail-a-net"),
        rail_attrs(oo.UID_B, "rail-b-net"),
    ]
    assert [dict(o) for o in p.resource_policies] == [
        {
            "apiVersion": f"{D}/v1alpha1",
            "kind": "SriovResourcePolicy",
            "metadata": {
                "name": "worker-1",
                "namespace": OP,
                "labels": {GEN: "sriov-network-operator", "sriovnetwork.openshift.io/node": "worker-1"},
            },
            "spec": {
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["worker-1"]}
                            ]
                        }
                    ]
                },
                "configs": [rail_config(oo.UID_A, "ens1f0"), rail_config(oo.UID_B, "ens2f0")],
            },
        }
    ]
    for obj in p.device_attributes:
        assert POOL_LABEL not in obj["metadata"]["labels"]  # type: ignore[index]
        assert not set(obj["spec"]["attributes"]) & {oo.NAME_KEY, oo.NS_KEY}  # type: ignore[index]
    assert {o.policy: (o.reason, o.condition().status) for o in p.outcomes.values()} == {
        "rail-a-policy": (None, "True"),
        "rail-b-policy": (None, "True"),
    }
    assert p.outcomes["rail-a-policy"].attributes_name == ATTRS_A
    assert p.outcomes["rail-a-policy"].nodes == ("worker-1",)


def test_generated_map_is_accepted_by_the_driver_in_managed_mode() -> None:
    p = plan(oo.rail_policies(), [oo.node("worker-1")])
    devices = [
        policies.DeviceFacts(f"0000:0{i}:00.{vf}", "15b3", "101e", "101d", pf, f"0000:0{i}:00.0", vf)
        for i, pf in ((1, "ens1f0"), (2, "ens2f0"))
        for vf in (1, 2)
    ]
    labels = oo.node("worker-1")["metadata"]["labels"]
    ev = policies.evaluate_policies(
        devices, list(p.resource_policies), list(p.device_attributes), node_labels=labels, managed=True
    )
    assert ev.eligible == {d.name for d in devices} and not ev.diagnostics
    assert {o.device: str(o.reference) for o in ev.outcomes.values()} == {
        "0000-01-00-1": "ai-workloads/rail-a-net",
        "0000-01-00-2": "ai-workloads/rail-a-net",
        "0000-02-00-1": "ai-workloads/rail-b-net",
        "0000-02-00-2": "ai-workloads/rail-b-net",
    }


def test_attributes_only_and_empty_blocks() -> None:
    pols = [
        oo.node_policy(
            "only",
            uid=oo.UID_A,
            pf="ens1f0",
            dra={
                "attributes": {
                    "example.com/rail": {"string": "a"},
                    "example.com/zero": {"int": 0},
                    "example.com/off": {"bool": False},
                }
            },
        ),
        oo.node_policy("empty", uid=oo.UID_B, pf="ens2f0", dra={}),
    ]
    p = plan(pols, resolutions={})
    assert attrs_of(p, ATTRS_A)["spec"]["attributes"] == {  # type: ignore[index]
        "example.com/off": {"bool": False},
        "example.com/rail": {"string": "a"},
        "example.com/zero": {"int": 0},
        "k8s.cni.cncf.io/resourceName": {"string": "openshift.io/sriov_vfs"},
    }
    assert attrs_of(p, ATTRS_B)["spec"]["attributes"] == {
        "k8s.cni.cncf.io/resourceName": {"string": "openshift.io/sriov_vfs"}
    }  # type: ignore[index]
    assert all(o.reason is None for o in p.outcomes.values())


def test_legacy_policies_keep_the_per_pool_object_and_selector() -> None:
    pols = [
        oo.node_policy("legacy", uid=UID_C, pf="ens3f0", resource_name="intel_nic"),
        oo.rail_policies()[0],
    ]
    p = plan(pols)
    pool = attrs_of(p, "intel-nic-attrs")
    assert pool is not None
    assert pool["metadata"]["labels"] == {GEN: "sriov-network-operator", POOL_LABEL: "intel-nic"}
    assert pool["spec"]["attributes"] == {
        "k8s.cni.cncf.io/resourceName": {"string": "openshift.io/intel_nic"}
    }
    configs = srp(p, "worker-1")["spec"]["configs"]
    assert configs[0]["deviceAttributesSelector"] == {"matchLabels": {POOL_LABEL: "intel-nic"}}
    assert configs[1] == rail_config(oo.UID_A, "ens1f0")
    assert attrs_of(p, "sriov-vfs-attrs") is None  # no pool for a resourceName used only by dra policies
    assert set(p.outcomes) == {"rail-a-policy"}


@pytest.mark.parametrize(
    ("resolution", "reason"),
    [
        (
            sriovnetwork.unresolved(RAIL_A, R.SRIOV_NETWORK_NOT_FOUND, "SriovNetwork x does not exist"),
            R.SRIOV_NETWORK_NOT_FOUND,
        ),
        (
            sriovnetwork.unresolved(RAIL_A, R.SRIOV_NETWORK_NOT_READY, "Ready was observed at generation 1"),
            R.SRIOV_NETWORK_NOT_READY,
        ),
        (sriovnetwork.unresolved(RAIL_A, R.SOURCE_NAD_NOT_READY, "being deleted"), R.SOURCE_NAD_NOT_READY),
        (sriovnetwork.unresolved(RAIL_A, R.SOURCE_ACCESS_DENIED, "forbidden"), R.SOURCE_ACCESS_DENIED),
        (None, R.DRA_CONFIGURATION_SYNC_FAILED),
    ],
    ids=[
        "network-not-found",
        "network-not-ready",
        "source-nad-not-ready",
        "access-denied",
        "not-resolved-yet",
    ],
)
def test_unresolved_reference_withholds_attributes_but_keeps_filter_and_selector(
    resolution: sriovnetwork.SourceResolution | None, reason: R
) -> None:
    resolutions = dict(ready(RAIL_B))
    if resolution is not None:
        resolutions[RAIL_A] = resolution
    p = plan(oo.rail_policies(), resolutions=resolutions)
    assert attrs_of(p, ATTRS_A) is None and ATTRS_A in p.withheld
    assert attrs_of(p, ATTRS_B) == rail_attrs(oo.UID_B, "rail-b-net")
    assert srp(p, "worker-1")["spec"]["configs"][0] == rail_config(oo.UID_A, "ens1f0")
    outcome = p.outcomes["rail-a-policy"]
    assert outcome.reason is reason and outcome.condition().status == "False"
    assert outcome.attributes_name is None
    assert p.outcomes["rail-b-policy"].reason is None


@pytest.mark.parametrize(
    "attributes",
    [
        {oo.NAME_KEY: {"string": "rail-a-net"}},
        {**oo.reference("rail-a-net"), "example.com/long": {"string": "y" * 65}},
        {**oo.reference("rail-a-net"), f"{D}/PFName": {"string": "ens9"}},
        {**oo.reference("rail-a-net"), f"{D}/netAttachDefName": {"string": "manual"}},
    ],
    ids=["partial-reference-pair", "value-over-64", "reserved-key", "manual-driver-reference"],
)
def test_invalid_attribute_maps_withhold_the_object_and_report_invalid(attributes: dict[str, Any]) -> None:
    pols = [oo.node_policy("rail-a-policy", uid=oo.UID_A, pf="ens1f0", dra={"attributes": attributes})]
    p = plan(pols)
    assert p.device_attributes == () and ATTRS_A in p.withheld
    assert srp(p, "worker-1")["spec"]["configs"] == [rail_config(oo.UID_A, "ens1f0")]
    outcome = p.outcomes["rail-a-policy"]
    assert outcome.reason is R.INVALID_DRA_ATTRIBUTE
    assert "spec.dra.attributes" in outcome.message


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


def facts(pf: str, vf: int, vendor: str = "15b3") -> policies.DeviceFacts:
    return policies.DeviceFacts(f"0000:0{vf}:00.1", vendor, "101e", "101d", pf, "0000:01:00.0", vf)


def test_inventory_decides_actual_overlap() -> None:
    pols = overlapping(rootDevices=["0000:01:00.0"])  # names vs addresses: structurally unknown
    overlapping_inventory = plan(
        pols, inventory={"worker-1": [facts("ens1f0", 1)], "worker-2": [facts("ens1f0", 1)]}
    )
    # ens1f0 VFs have pfPciAddress 0000:01:00.0 in this inventory, so both policies match them.
    assert srp(overlapping_inventory, "worker-1")["spec"]["configs"] == []
    disjoint_inventory = [
        policies.DeviceFacts("0000:09:00.1", "15b3", "101e", "101d", "ens1f0", "0000:09:00.0", 1)
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


def test_dra_disabled_generates_nothing_and_reports_inactive() -> None:
    p = plan(oo.rail_policies(), settings=drapolicy.PlanSettings(namespace=OP, dra_enabled=False))
    assert p.device_attributes == () and p.resource_policies == ()
    assert {o.reason for o in p.outcomes.values()} == {R.DRA_INACTIVE}


def test_dra_on_the_default_bootstrap_policy_is_refused_and_ignored() -> None:
    default = oo.node_policy("default", uid=UID_C, pf="ens3f0", dra={})
    p = plan([default, *oo.rail_policies()])
    assert p.outcomes["default"].reason is R.INVALID_DRA_ATTRIBUTE
    assert "default bootstrap policy" in p.outcomes["default"].message
    assert attrs_of(p, f"dra-policy-{UID_C}-attrs") is None
    assert len(srp(p, "worker-1")["spec"]["configs"]) == 2


def test_deleting_policies_and_unlabelled_nodes_take_no_part() -> None:
    a, b = oo.rail_policies()
    b["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    p = plan([a, b], [oo.node("worker-1"), oo.node("no-hostname", hostname=""), oo.node("other", {"x": "y"})])
    assert [o["metadata"]["name"] for o in p.resource_policies] == ["worker-1"]  # type: ignore[index]
    assert set(p.outcomes) == {"rail-a-policy"}
    assert any("no-hostname" in d for d in p.diagnostics)


def test_references_collects_only_valid_pairs() -> None:
    a, b = oo.rail_policies()
    b["spec"]["dra"]["attributes"].pop(oo.NS_KEY)
    assert drapolicy.references([a, b]) == {RAIL_A}


@given(st.permutations(range(4)), st.permutations(range(3)))
def test_plan_does_not_depend_on_input_order(policy_order: list[int], node_order: list[int]) -> None:
    legacy = oo.node_policy("legacy", uid=UID_C, pf="ens3f0", resource_name="intel_nic")
    broken = oo.node_policy("broken", uid=UID_D, pf="ens4f0", dra={"attributes": {"bad": {"int": 1}}})
    pols = [*oo.rail_policies(), legacy, broken]
    nodes = [oo.node("worker-1"), oo.node("worker-2"), oo.node("worker-3", {"x": "y"})]
    base = plan(pols, nodes)
    shuffled = plan([copy.deepcopy(pols[i]) for i in policy_order], [nodes[i] for i in node_order])
    assert shuffled == base


@given(st.uuids())
def test_generated_attribute_names_are_dns_labels(uid: Any) -> None:
    name = drapolicy.attributes_name(str(uid))
    assert names.is_dns1123_label(name) and len(name) <= 63
