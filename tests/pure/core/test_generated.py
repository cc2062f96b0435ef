"""Tests for sriov_dra.core.operator.generated.plan_writes: safe order, no-op, cleanup by name, no adoption."""

from __future__ import annotations

import copy
from typing import Any

from tests.fakes import operator_objects as oo

from sriov_dra.core.operator import dra_objects, dra_policy, generated, network_refs, sriov_network
from sriov_dra_rules import errors

OP = oo.OP_NS
RAIL_A = network_refs.ObjectRef(OP, "rail-a-net")
RAIL_B = network_refs.ObjectRef(OP, "rail-b-net")
ATTRS_A = f"dra-policy-{oo.UID_A}-attrs"
ATTRS_B = f"dra-policy-{oo.UID_B}-attrs"


def resolutions(
    *refs: network_refs.ObjectRef,
) -> dict[network_refs.ObjectRef, sriov_network.SourceResolution]:
    return {
        r: sriov_network.SourceResolution(r, network_refs.ObjectRef(oo.TARGET_NS, r.name), None, "")
        for r in refs
    }


def make_plan(pols: list[dict[str, Any]] | None = None, res: Any = None) -> dra_policy.DraPolicyPlan:
    return dra_policy.build_dra_policy_plan(
        oo.rail_policies() if pols is None else pols,
        [oo.node("worker-1")],
        resolutions(RAIL_A, RAIL_B) if res is None else res,
        dra_policy.PlanSettings(namespace=OP),
    )


def stored(objs: Any, rv: str = "5") -> list[dict[str, Any]]:
    """What the API returns for ``objs``: server metadata added."""
    out = []
    for i, obj in enumerate(objs):
        o = copy.deepcopy(dict(obj))
        o["metadata"] = {**o["metadata"], "uid": f"uid-{i}-{o['metadata']['name']}", "resourceVersion": rv}
        out.append(o)
    return out


def ops(writes: tuple[generated.Write, ...]) -> list[str]:
    return [str(w) for w in writes]


def test_first_sync_creates_attributes_before_policies_then_the_device_class() -> None:
    writes = generated.plan_writes(make_plan(), [], [])
    assert ops(writes) == [
        f"create DeviceAttributes {ATTRS_A}",
        f"create DeviceAttributes {ATTRS_B}",
        "create SriovResourcePolicy worker-1",
        "create DeviceClass sriov-vfs",  # the two policies share resourceName sriov_vfs
    ]
    assert writes[0].policies == ("rail-a-policy",)
    assert writes[2].policies == ("rail-a-policy", "rail-b-policy")


def test_unchanged_plan_plans_no_write() -> None:
    p = make_plan()
    assert (
        generated.plan_writes(
            p, stored(p.device_attributes), stored(p.resource_policies), stored(p.device_classes)
        )
        == ()
    )


def test_spec_or_label_drift_is_updated_with_the_read_resource_version() -> None:
    p = make_plan()
    attrs = stored(p.device_attributes, rv="42")
    attrs[0]["spec"]["attributes"]["example.com/manual"] = {"string": "edit"}
    attrs[1]["metadata"]["labels"]["sriovnetwork.openshift.io/resource-pool"] = "sriov-vfs"
    writes = generated.plan_writes(p, attrs, stored(p.resource_policies), stored(p.device_classes))
    assert ops(writes) == [f"update DeviceAttributes {ATTRS_A}", f"update DeviceAttributes {ATTRS_B}"]
    assert writes[0].body is not None and writes[0].body["metadata"]["resourceVersion"] == "42"  # type: ignore[index]
    assert writes[0].body["spec"] == p.device_attributes[0]["spec"]


def test_invalidation_first_then_upserts_then_cleanup_by_full_name_set() -> None:
    before = make_plan()
    unresolved = sriov_network.unresolved(RAIL_A, errors.Reason.SOURCE_NAD_NOT_READY, "deleting")
    after_pols = oo.rail_policies()
    after_pols[1]["spec"]["nodeSelector"] = {"other": "x"}  # rail B leaves worker-1
    gone = oo.node_policy("old", uid="eeeeeeee-0000-4000-8000-00000000000e", pf="ens9f0", dra={})
    old = dra_policy.build_dra_policy_plan(
        [gone], [oo.node("worker-9")], {}, dra_policy.PlanSettings(namespace=OP)
    )
    after = make_plan(after_pols, {RAIL_A: unresolved, **resolutions(RAIL_B)})
    existing_attrs = stored([*before.device_attributes, *old.device_attributes])
    existing_srps = stored([*before.resource_policies, *old.resource_policies])
    stale_class = stored([dra_objects.device_class_object("retired_vfs", "openshift.io", OP)])
    writes = generated.plan_writes(
        after, existing_attrs, existing_srps, [*stored(before.device_classes), *stale_class]
    )
    assert ops(writes) == [
        f"delete DeviceAttributes {ATTRS_A}",  # withheld: stale mapping goes first
        "update SriovResourcePolicy worker-1",
        "delete DeviceClass retired-vfs",
        "delete SriovResourcePolicy worker-9",
        "delete DeviceAttributes dra-policy-eeeeeeee-0000-4000-8000-00000000000e-attrs",
    ]
    assert writes[0].uid.startswith("uid-") and writes[0].policies == ("rail-a-policy",)


def test_unmarked_objects_are_never_updated_or_deleted() -> None:
    p = make_plan()
    foreign = stored(p.device_attributes)
    for obj in foreign:
        del obj["metadata"]["labels"][dra_objects.GENERATED_BY_LABEL]
    stray = stored([{"metadata": {"name": "admin-attrs", "labels": {"team": "net"}}, "spec": {}}])
    writes = generated.plan_writes(p, [*foreign, *stray], [])
    assert [w.op for w in writes] == [generated.Op.CREATE] * 4  # the controller refuses the taken names
    assert "admin-attrs" not in {w.name for w in writes}


def test_is_managed_requires_the_exact_label_value() -> None:
    assert generated.is_managed(
        {"metadata": {"labels": {dra_objects.GENERATED_BY_LABEL: "sriov-network-operator"}}}
    )
    assert not generated.is_managed(
        {"metadata": {"labels": {dra_objects.GENERATED_BY_LABEL: "someone-else"}}}
    )
    assert not generated.is_managed({"metadata": {}})
