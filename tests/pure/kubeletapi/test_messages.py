"""Typed DRA messages and their v1/v1beta1 wire conversion (``sriov_dra.kubeletapi.messages``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import device_health
from sriov_dra.core import networks as core_networks
from sriov_dra.kubeletapi import dra_v1_pb2, dra_v1beta1_pb2, drahealth_v1alpha1_pb2, messages
from sriov_dra_rules import errors as core_errors

CLAIM = messages.ClaimRef(namespace="ns", name="claim-a", uid="uid-a")
DEVICE = messages.Device(
    pool_name="node-1",
    device_name="vf-0000-03-02-0",
    request_names=("vf",),
    cdi_device_ids=("k8s.sriovnetwork.k8snetworkplumbingwg.io/vf=uid-a-vf-0",),
    share_id="share-1",
)

text = st.text(st.characters(codec="utf-8"), max_size=12)
nonblank = text.filter(lambda s: bool(s.strip()))
devices = st.builds(
    messages.Device,
    pool_name=text,
    device_name=text,
    request_names=st.lists(text, max_size=3).map(tuple),
    cdi_device_ids=st.lists(text, max_size=3).map(tuple),
    share_id=st.none() | text,
)
prepare_outcomes = st.dictionaries(
    text,
    st.builds(messages.Prepared, st.lists(devices, max_size=3).map(tuple))
    | st.builds(messages.ClaimError, nonblank),
    max_size=4,
)
unprepare_outcomes = st.dictionaries(text, st.none() | st.builds(messages.ClaimError, nonblank), max_size=4)


@pytest.mark.parametrize(
    ("to_wire", "wire_type"),
    [(messages.claim_to_v1, dra_v1_pb2.Claim), (messages.claim_to_v1beta1, dra_v1beta1_pb2.Claim)],
    ids=["v1", "v1beta1"],
)
def test_claim_round_trips_namespace_name_and_uid(
    to_wire: Callable[[messages.ClaimRef], messages.AnyClaimMessage], wire_type: type
) -> None:
    wire = to_wire(CLAIM)
    assert isinstance(wire, wire_type)
    assert (wire.namespace, wire.name, wire.uid) == ("ns", "claim-a", "uid-a")
    assert messages.claim_from_wire(wire) == CLAIM


def test_v1_prepare_response_carries_share_id() -> None:
    response = messages.prepare_response_v1({"uid-a": messages.Prepared((DEVICE,))})
    device = response.claims["uid-a"].devices[0]
    assert device.HasField("share_id") and device.share_id == "share-1"
    assert messages.prepare_outcomes_from_wire(response) == {"uid-a": messages.Prepared((DEVICE,))}


def test_v1_device_without_share_id_leaves_field_absent() -> None:
    plain = messages.Device(pool_name="p", device_name="d")
    response = messages.prepare_response_v1({"u": messages.Prepared((plain,))})
    assert not response.claims["u"].devices[0].HasField("share_id")
    assert messages.prepare_outcomes_from_wire(response)["u"] == messages.Prepared((plain,))


def test_v1beta1_prepare_response_drops_share_id_like_the_kubelet_conversion() -> None:
    response = messages.prepare_response_v1beta1({"uid-a": messages.Prepared((DEVICE,))})
    back = messages.prepare_outcomes_from_wire(response)["uid-a"]
    assert isinstance(back, messages.Prepared)
    assert back.devices[0].share_id is None
    assert back.devices[0].cdi_device_ids == DEVICE.cdi_device_ids


def test_claim_error_sets_error_and_no_devices() -> None:
    response = messages.prepare_response_v1({"u": messages.ClaimError("VF busy")})
    assert response.claims["u"].error == "VF busy"
    assert len(response.claims["u"].devices) == 0


def test_error_wins_over_devices_when_reading_a_response() -> None:
    response = dra_v1_pb2.NodePrepareResourcesResponse()
    response.claims["u"].error = "boom"
    response.claims["u"].devices.add(pool_name="p", device_name="d")
    assert messages.prepare_outcomes_from_wire(response) == {"u": messages.ClaimError("boom")}


def test_unprepare_success_is_an_empty_entry_not_a_missing_one() -> None:
    response = messages.unprepare_response_v1({"ok": None, "bad": messages.ClaimError("still attached")})
    assert set(response.claims) == {"ok", "bad"}
    assert response.claims["ok"].error == ""
    assert messages.unprepare_outcomes_from_wire(response) == {
        "ok": None,
        "bad": messages.ClaimError("still attached"),
    }


@pytest.mark.parametrize("message", ["", "   ", "\n"], ids=["empty", "spaces", "newline"])
def test_blank_claim_error_is_rejected_because_it_would_read_as_success(message: str) -> None:
    with pytest.raises(ValueError, match="empty error string means success"):
        messages.ClaimError(message)


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (RuntimeError("VF 0000:03:02.0 is bound to vfio-pci"), "VF 0000:03:02.0 is bound to vfio-pci"),
        (KeyError(), "KeyError"),
        (ValueError("  "), "ValueError"),
    ],
    ids=["message-text", "empty-message-uses-class-name", "blank-message-uses-class-name"],
)
def test_claim_error_from_exception(exc: Exception, expected: str) -> None:
    assert messages.ClaimError.from_exception(exc).message == expected


def test_health_response_carries_each_devices_health_and_reason_at_now() -> None:
    H = device_health.Health
    response = messages.health_response(
        [
            messages.DeviceHealthReport(messages.DeviceId("p", "a"), H.HEALTHY, "ok"),
            messages.DeviceHealthReport(messages.DeviceId("p", "b"), H.UNHEALTHY, "PF x has no carrier"),
            messages.DeviceHealthReport(messages.DeviceId("p", "c"), H.UNKNOWN, "x" * 2000),
        ],
        now_s=1_700_000_000,
    )
    assert [(d.device.pool_name, d.device.device_name) for d in response.devices] == [
        ("p", "a"),
        ("p", "b"),
        ("p", "c"),
    ]
    assert [d.health for d in response.devices] == [
        drahealth_v1alpha1_pb2.HEALTHY,
        drahealth_v1alpha1_pb2.UNHEALTHY,
        drahealth_v1alpha1_pb2.UNKNOWN,
    ]
    assert [d.message for d in response.devices[:2]] == ["ok", "PF x has no carrier"]
    assert len(response.devices[2].message) == messages.MAX_HEALTH_MESSAGE
    assert response.devices[2].message.endswith("...")
    assert {d.last_updated_time for d in response.devices} == {1_700_000_000}
    assert {d.health_check_timeout_seconds for d in response.devices} == {0}


@given(prepare_outcomes)
def test_v1_prepare_response_round_trips_through_bytes(outcomes: dict[str, messages.PrepareOutcome]) -> None:
    wire = messages.prepare_response_v1(outcomes).SerializeToString()
    parsed = dra_v1_pb2.NodePrepareResourcesResponse.FromString(wire)
    assert messages.prepare_outcomes_from_wire(parsed) == outcomes


@given(prepare_outcomes)
def test_v1beta1_prepare_response_round_trips_except_share_id(
    outcomes: dict[str, messages.PrepareOutcome],
) -> None:
    wire = messages.prepare_response_v1beta1(outcomes).SerializeToString()
    parsed = messages.prepare_outcomes_from_wire(
        dra_v1beta1_pb2.NodePrepareResourcesResponse.FromString(wire)
    )
    expected = {
        uid: o
        if isinstance(o, messages.ClaimError)
        else messages.Prepared(
            tuple(
                messages.Device(d.pool_name, d.device_name, d.request_names, d.cdi_device_ids, None)
                for d in o.devices
            )
        )
        for uid, o in outcomes.items()
    }
    assert parsed == expected


@given(unprepare_outcomes)
def test_unprepare_responses_round_trip_in_both_versions(
    outcomes: dict[str, messages.UnprepareOutcome],
) -> None:
    v1 = dra_v1_pb2.NodeUnprepareResourcesResponse.FromString(
        messages.unprepare_response_v1(outcomes).SerializeToString()
    )
    v1beta1 = dra_v1beta1_pb2.NodeUnprepareResourcesResponse.FromString(
        messages.unprepare_response_v1beta1(outcomes).SerializeToString()
    )
    assert messages.unprepare_outcomes_from_wire(v1) == outcomes
    assert messages.unprepare_outcomes_from_wire(v1beta1) == outcomes


def test_typed_error_about_a_hostile_annotation_serializes_as_a_claim_error() -> None:
    # A Pod author's networks annotation with the address "\udfff" (a lone surrogate once decoded)
    # must fail only that claim with a readable error, not the whole NodePrepareResources call.
    try:
        core_networks.parse_networks('[{"name":"a","ips":["\\udfff"]}]', pod_namespace="ns")
    except core_errors.InvalidSpec as exc:
        outcome = messages.ClaimError.from_exception(exc)
    response = messages.prepare_response_v1({"uid-1": outcome})
    data = response.SerializeToString()
    assert (
        "is not an IP address"
        in dra_v1_pb2.NodePrepareResourcesResponse.FromString(data).claims["uid-1"].error
    )
