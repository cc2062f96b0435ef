"""core.plugin.claim_plan: which claims can be prepared on this node, and the status.devices upsert."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import claims_api as fx

from sriov_dra.core import vf_config
from sriov_dra.core.plugin import claim_plan, device_conditions
from sriov_dra_rules import errors

DEV_A = "0000-03-02-0"
DEV_B = "0000-03-02-1"
KNOWN = frozenset({DEV_A, DEV_B})
GPU = "gpu.nvidia.com"


def plan(claim: dict[str, Any], *, uid: str = fx.CLAIM_UID) -> claim_plan.ClaimPlan:
    return claim_plan.plan_claim(
        claim, expected_uid=uid, driver_name=fx.DRIVER, pool_name=fx.NODE, known_devices=KNOWN
    )


def test_single_vf_claim_is_planned_with_its_consumer_and_config() -> None:
    claim = fx.resource_claim(
        [fx.result(DEV_A)], configs=[fx.config(fx.vf_config(driver="default", netAttachDefName="rail-a"))]
    )
    got = plan(claim)
    assert (got.claim_uid, got.namespace, got.name) == (fx.CLAIM_UID, "ns-a", "vf-claim")
    assert (got.pod_uid, got.pod_name) == (fx.POD_UID, "consumer")
    assert got.devices == (
        claim_plan.PlannedDevice(
            ("vf",),
            fx.NODE,
            DEV_A,
            vf_config.VfConfig(driver="default", net_attach_def_name="rail-a"),
        ),
    )


def test_subrequest_results_are_reported_under_their_top_level_request() -> None:
    got = plan(fx.resource_claim([fx.result(DEV_A, "nic/large")]))
    assert got.devices[0].request_names == ("nic",)


def test_other_drivers_results_and_configs_are_skipped_undecoded() -> None:
    claim = fx.resource_claim(
        [fx.result("gpu-0", "gpu", driver=GPU), fx.result(DEV_A, "vf")],
        configs=[fx.config({"not": "a vfconfig"}, driver=GPU), fx.config(fx.vf_config(ifName="net1"))],
    )
    got = plan(claim)
    assert [d.device for d in got.devices] == [DEV_A]
    assert got.devices[0].config.if_name == "net1"


def test_claim_config_overrides_class_config_for_the_same_field() -> None:
    claim = fx.resource_claim(
        [fx.result(DEV_A)],
        configs=[
            fx.config(fx.vf_config(driver="vfio-pci"), source="FromClaim"),
            fx.config(fx.vf_config(driver="default", addVhostMount=True), source="FromClass"),
        ],
    )
    config = plan(claim).devices[0].config
    assert (config.driver, config.add_vhost_mount) == ("vfio-pci", True)


def test_one_vf_serving_two_requests_with_equal_configs_is_one_device() -> None:
    got = plan(fx.resource_claim([fx.result(DEV_A, "b"), fx.result(DEV_A, "a/x")]))
    assert [(d.device, d.request_names) for d in got.devices] == [(DEV_A, ("a", "b"))]


def test_one_vf_serving_requests_with_different_configs_is_refused() -> None:
    claim = fx.resource_claim(
        [fx.result(DEV_A, "a"), fx.result(DEV_A, "b")],
        configs=[fx.config(fx.vf_config(driver="vfio-pci"), requests=["b"])],
    )
    with pytest.raises(errors.InvalidSpec) as caught:
        plan(claim)
    assert caught.value.reason is errors.Reason.CONFLICTING_DEVICE_REQUIREMENTS


POD_GROUP = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": fx.POD_UID}
TWO_PODS = [
    {"resource": "pods", "name": "a", "uid": fx.POD_UID},
    {"resource": "pods", "name": "b", "uid": fx.OTHER_POD_UID},
]


@pytest.mark.parametrize(
    ("claim", "uid", "needle"),
    [
        (fx.resource_claim([fx.result(DEV_A)]), fx.CLAIM_UID_2, "deleted and recreated"),
        (fx.resource_claim([fx.result(DEV_A)], allocated=False), fx.CLAIM_UID, "not allocated yet"),
        (fx.resource_claim([fx.result(DEV_A)], pod_uid=None), fx.CLAIM_UID, "no consumer"),
        (fx.resource_claim([fx.result(DEV_A)], reserved=TWO_PODS), fx.CLAIM_UID, "2 consumers"),
        (fx.resource_claim([fx.result(DEV_A)], reserved=[POD_GROUP]), fx.CLAIM_UID, "is not a Pod"),
        (fx.resource_claim([fx.result(DEV_A)], pod_uid="not-a-uid"), fx.CLAIM_UID, "reservedFor[0].uid"),
        (fx.resource_claim([fx.result(DEV_A, pool="node-b")]), fx.CLAIM_UID, "another node's pool"),
        (fx.resource_claim([fx.result("0000-09-00-1")]), fx.CLAIM_UID, "is not a VF discovered"),
        (fx.resource_claim([fx.result(DEV_A, adminAccess=True)]), fx.CLAIM_UID, "admin access"),
        (fx.resource_claim([fx.result(DEV_A, shareID="abc")]), fx.CLAIM_UID, "shared allocation"),
        (fx.resource_claim([fx.result("gpu-0", driver=GPU)]), fx.CLAIM_UID, "no device of driver"),
    ],
    ids=[
        "replaced-claim-uid",
        "unallocated",
        "no-consumer",
        "two-consumers",
        "podgroup-consumer",
        "consumer-uid-not-uuid",
        "claim-for-another-node",
        "device-not-discovered",
        "admin-access",
        "shared-allocation",
        "no-result-of-this-driver",
    ],
)
def test_claims_that_cannot_be_prepared_here_are_refused_as_invalid_claim(
    claim: dict[str, Any], uid: str, needle: str
) -> None:
    with pytest.raises(errors.InvalidSpec) as caught:
        plan(claim, uid=uid)
    assert caught.value.reason is errors.Reason.INVALID_CLAIM
    assert needle in str(caught.value)
    assert "ResourceClaim ns-a/vf-claim" in str(caught.value)


def test_unknown_vfconfig_field_is_refused_with_its_path() -> None:
    claim = fx.resource_claim([fx.result(DEV_A)], configs=[fx.config(fx.vf_config(vlan=12))])
    with pytest.raises(errors.InvalidSpec) as caught:
        plan(claim)
    assert caught.value.reason is errors.Reason.INVALID_VF_CONFIG
    assert "status.allocation.devices.config[0].opaque.parameters.vlan: unknown field" in str(caught.value)


def test_one_if_name_for_a_two_device_request_is_ambiguous() -> None:
    claim = fx.resource_claim(
        [fx.result(DEV_A), fx.result(DEV_B)],
        configs=[fx.config(fx.vf_config(ifName="net1"))],
        requests=[{"name": "vf", "exactly": {"deviceClassName": "x", "count": 2}}],
    )
    with pytest.raises(errors.InvalidSpec) as caught:
        plan(claim)
    assert caught.value.reason is errors.Reason.DUPLICATE_INTERFACE_NAME


def test_base_request_strips_the_subrequest() -> None:
    assert [claim_plan.base_request(r) for r in ("vf", "vf/large", "a/b")] == ["vf", "vf", "a"]


# --- status.devices ---------------------------------------------------------------------------

OURS_A = claim_plan.status_entry(fx.DRIVER, fx.NODE, DEV_A, {"kind": "VfConfig"})
OURS_B = claim_plan.status_entry(fx.DRIVER, fx.NODE, DEV_B, {"kind": "VfConfig"})
GPU_0 = {"driver": GPU, "pool": fx.NODE, "device": "gpu-0", "data": {"uuid": "GPU-1"}}
GPU_1 = {"driver": GPU, "pool": fx.NODE, "device": "gpu-1"}


@pytest.mark.parametrize(
    ("existing", "ours", "expected"),
    [
        (None, [OURS_A], [OURS_A]),
        ([GPU_0], [OURS_A], [GPU_0, OURS_A]),
        ([OURS_A, GPU_0], [OURS_A], None),
        ([GPU_0, {**OURS_A, "data": {}}, GPU_1], [OURS_A], [GPU_0, OURS_A, GPU_1]),
        ([GPU_0, OURS_A, OURS_B], [OURS_B], [GPU_0, OURS_B]),
        ([OURS_A, GPU_0], [], [GPU_0]),
        ([GPU_0], [], None),
        ([OURS_B, OURS_A], [OURS_A, OURS_B], None),
        ([{**OURS_A, "conditions": None}], [OURS_A], None),
    ],
    ids=[
        "added-to-empty",
        "appended-after-other-drivers",
        "already-present-writes-nothing",
        "changed-entry-replaced-in-place",
        "stale-own-entry-dropped",
        "empty-removes-only-own",
        "nothing-of-ours-writes-nothing",
        "order-of-own-entries-is-not-a-change",
        "null-fields-from-the-server-are-absent",
    ],
)
def test_status_devices_upsert_keeps_other_drivers_entries(
    existing: list[dict[str, Any]] | None,
    ours: list[dict[str, Any]],
    expected: list[dict[str, Any]] | None,
) -> None:
    assert claim_plan.merged_status_devices(existing, ours, driver_name=fx.DRIVER) == expected


@pytest.mark.parametrize(
    "ours", [[GPU_0], [OURS_A, OURS_A]], ids=["foreign-driver-entry", "repeated-own-key"]
)
def test_status_devices_upsert_refuses_entries_it_does_not_own(ours: list[dict[str, Any]]) -> None:
    with pytest.raises(errors.ContractViolation):
        claim_plan.merged_status_devices([], ours, driver_name=fx.DRIVER)


_entry = st.fixed_dictionaries(
    {
        "driver": st.sampled_from([fx.DRIVER, GPU, "other.example.com"]),
        "pool": st.sampled_from([fx.NODE, "node-b"]),
        "device": st.sampled_from(["d0", "d1", "d2"]),
        "data": st.dictionaries(st.sampled_from(["x", "y"]), st.integers(0, 3), max_size=2),
    }
)


def _distinct(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in entries:
        seen.setdefault((e["driver"], e["pool"], e["device"]), e)
    return list(seen.values())


@given(st.lists(_entry, max_size=8).map(_distinct), st.lists(_entry, max_size=4).map(_distinct))
def test_status_upsert_property_others_kept_in_order_and_second_run_is_a_no_op(
    existing: list[dict[str, Any]], proposed: list[dict[str, Any]]
) -> None:
    ours = [{**e, "driver": fx.DRIVER} for e in proposed]
    ours = _distinct(ours)
    merged = claim_plan.merged_status_devices(existing, ours, driver_name=fx.DRIVER)
    after = existing if merged is None else merged
    assert [e for e in after if e["driver"] != fx.DRIVER] == [e for e in existing if e["driver"] != fx.DRIVER]
    own = sorted((e for e in after if e["driver"] == fx.DRIVER), key=lambda e: (e["pool"], e["device"]))
    assert own == sorted(ours, key=lambda e: (e["pool"], e["device"]))
    assert claim_plan.merged_status_devices(after, ours, driver_name=fx.DRIVER) is None


ND = {"interfaceName": "dra0", "ips": ["192.0.2.5/24"], "hardwareAddress": "02:00:00:00:00:01"}


@pytest.mark.parametrize(
    ("existing", "ours", "expected"),
    [
        ([{**OURS_A, "networkData": ND}], [OURS_A], None),
        (
            [GPU_0, {**OURS_A, "data": {}, "networkData": ND}],
            [OURS_A],
            [GPU_0, {**OURS_A, "networkData": ND}],
        ),
        ([{**OURS_A, "networkData": ND}, GPU_0], [], [GPU_0]),
    ],
    ids=[
        "repeated-prepare-writes-nothing",
        "changed-data-keeps-network-data",
        "release-removes-it-with-the-entry",
    ],
)
def test_status_devices_upsert_keeps_network_data_until_the_entry_goes(
    existing: list[dict[str, Any]], ours: list[dict[str, Any]], expected: list[dict[str, Any]] | None
) -> None:
    assert claim_plan.merged_status_devices(existing, ours, driver_name=fx.DRIVER) == expected


def test_a_repeated_prepare_keeps_network_ready_network_data_and_the_time_ready_was_first_set() -> None:
    t0, t1 = "2026-12-06T07:00:00Z", "2026-12-06T08:00:00Z"
    up = device_conditions.network_ready("dra0", t0)
    first = claim_plan.status_entry(
        fx.DRIVER, fx.NODE, DEV_A, {"kind": "VfConfig"}, [device_conditions.ready(t0)]
    )
    existing = [
        {**first, "networkData": {"interfaceName": "dra0"}, "conditions": [device_conditions.ready(t0), up]}
    ]
    again = claim_plan.status_entry(
        fx.DRIVER, fx.NODE, DEV_A, {"kind": "VfConfig"}, [device_conditions.ready(t1)]
    )
    assert claim_plan.merged_status_devices(existing, [again], driver_name=fx.DRIVER) is None
