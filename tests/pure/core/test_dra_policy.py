"""Tests for sriov_dra.core.operator.dra_policy.build_dra_policy_plan (docs/design.md#operator)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import operator_objects as oo
from tests.fakes.dra_plans import (
    ATTRS_A,
    ATTRS_B,
    GEN,
    OP,
    POOL_LABEL,
    RAIL_A,
    RAIL_B,
    UID_C,
    UID_D,
    D,
    R,
    attrs_of,
    plan,
    rail_attrs,
    rail_config,
    ready,
    srp,
)

from sriov_dra.core import device_facts, policies
from sriov_dra.core.operator import dra_objects, dra_policy, sriov_network
from sriov_dra_rules import extended_resources, names


def test_operator_two_rails_sharing_a_resource_name_get_separate_maps_and_selectors() -> None:
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
        device_facts.DeviceFacts(f"0000:0{i}:00.{vf}", "15b3", "101e", "101d", pf, f"0000:0{i}:00.0", vf)
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
            sriov_network.unresolved(RAIL_A, R.SRIOV_NETWORK_NOT_FOUND, "SriovNetwork x does not exist"),
            R.SRIOV_NETWORK_NOT_FOUND,
        ),
        (
            sriov_network.unresolved(RAIL_A, R.SRIOV_NETWORK_NOT_READY, "Ready was observed at generation 1"),
            R.SRIOV_NETWORK_NOT_READY,
        ),
        (sriov_network.unresolved(RAIL_A, R.SOURCE_NAD_NOT_READY, "being deleted"), R.SOURCE_NAD_NOT_READY),
        (sriov_network.unresolved(RAIL_A, R.SOURCE_ACCESS_DENIED, "forbidden"), R.SOURCE_ACCESS_DENIED),
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
    resolution: sriov_network.SourceResolution | None, reason: R
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


def test_dra_disabled_generates_nothing_and_reports_inactive() -> None:
    p = plan(oo.rail_policies(), settings=dra_policy.PlanSettings(namespace=OP, dra_enabled=False))
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
    assert dra_policy.references([a, b]) == {RAIL_A}


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
    name = dra_objects.attributes_name(str(uid))
    assert names.is_dns1123_label(name) and len(name) <= 63


def _extended_plan(*policies: dict[str, Any]) -> dra_policy.DraPolicyPlan:
    return dra_policy.build_dra_policy_plan(
        list(policies), [oo.node("worker-1")], {}, dra_policy.PlanSettings(namespace=oo.OP_NS)
    )


def test_each_resource_name_gets_one_device_class_selecting_the_value_its_policies_publish() -> None:
    plan = _extended_plan(
        oo.node_policy("rail-a", uid=oo.UID_A, pf="ens1f0", resource_name="rail_a"),
        oo.node_policy("rail-b", uid=oo.UID_B, pf="ens2f0", resource_name="rail_b"),
        oo.node_policy(
            "rail-a2", uid="cccccccc-0000-4000-8000-00000000000c", pf="ens3f0", resource_name="rail_a"
        ),
    )
    classes = {c["metadata"]["name"]: c for c in plan.device_classes}  # type: ignore[index]
    assert sorted(classes) == ["rail-a", "rail-b"]
    published = {
        a["spec"]["attributes"][extended_resources.RESOURCE_NAME_ATTRIBUTE]["string"]  # type: ignore[index]
        for a in plan.device_attributes
    }
    served = {c["spec"]["extendedResourceName"] for c in classes.values()}  # type: ignore[index]
    assert served == published == {"openshift.io/rail_a", "openshift.io/rail_b"}
    for name, obj in classes.items():
        want = extended_resources.device_class(
            "openshift.io",
            name.replace("-", "_"),
            labels={
                dra_objects.GENERATED_BY_LABEL: dra_objects.GENERATED_BY_VALUE,
                dra_objects.RESOURCE_POOL_LABEL: name,
                dra_objects.OPERATOR_NAMESPACE_LABEL: oo.OP_NS,
            },
        )
        assert obj == want
    assert plan.names(dra_objects.DEVICE_CLASS_KIND) == frozenset(classes)


def test_dra_policies_get_the_device_class_of_their_resource_name_too() -> None:
    plan = _extended_plan(oo.node_policy("rail-a", uid=oo.UID_A, resource_name="rail_a", dra={}))
    assert [c["metadata"]["name"] for c in plan.device_classes] == ["rail-a"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("names_", "classes", "fragment"),
    [
        (["rail_a", "rail-a"], ["rail-a"], "normalises to DeviceClass 'rail-a'"),
        (["rail_a", "bad_"], ["rail-a"], "resourceName 'bad_': no DeviceClass"),
    ],
    ids=["two-names-one-class", "name-kubernetes-refuses"],
)
def test_resource_names_without_a_class_of_their_own_are_reported(
    names_: list[str], classes: list[str], fragment: str
) -> None:
    uids = ["dddddddd-0000-4000-8000-00000000000d", "eeeeeeee-0000-4000-8000-00000000000e"]
    plan = _extended_plan(
        *(
            oo.node_policy(f"p{i}", uid=u, pf=f"ens{i}f0", resource_name=n)
            for i, (n, u) in enumerate(zip(names_, uids, strict=True))
        )
    )
    assert [c["metadata"]["name"] for c in plan.device_classes] == classes  # type: ignore[index]
    assert any(fragment in d for d in plan.diagnostics), plan.diagnostics


def test_no_device_class_while_the_dra_provider_is_disabled() -> None:
    plan = dra_policy.build_dra_policy_plan(
        [oo.node_policy("rail-a", uid=oo.UID_A, resource_name="rail_a")],
        [oo.node("worker-1")],
        {},
        dra_policy.PlanSettings(namespace=oo.OP_NS, dra_enabled=False),
    )
    assert plan.device_classes == ()
