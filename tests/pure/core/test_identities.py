"""Tests for sriov_dra.core.identities: attachmentID, shadow names, identity verification (docs/design.md#identity)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import identities
from sriov_dra_rules import errors, names

FIXTURES = Path(__file__).parents[2] / "fixtures" / "contract"

NODE = "0b7c6f2e-5a1d-4c3e-9f10-2a3b4c5d6e7f"
POD = "11111111-2222-3333-4444-555555555555"
CLAIM = "c1a1c1a1-0000-4000-8000-000000000001"

uuids = st.uuids().map(str)
labels = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
pools = st.lists(labels, min_size=1, max_size=3).map("/".join)
identity_fields = st.fixed_dictionaries(
    {
        "protocolVersion": st.just(1),
        "nodeUID": uuids,
        "podUID": uuids,
        "claimUID": uuids,
        "driver": st.sampled_from([names.DRIVER_NAME, "gpu.example.com"]),
        "pool": pools,
        "device": labels,
    }
)


def _identity(**overrides: Any) -> identities.BindingIdentity:
    args: dict[str, Any] = {"node_uid": NODE, "pod_uid": POD, "claim_uid": CLAIM, "pool": "worker-a"}
    args["device"] = "0000-03-00-1"
    args.update(overrides)
    return identities.build_binding_identity(**args)


def _vectors() -> list[dict[str, Any]]:
    data = json.loads((FIXTURES / "identity-vectors.json").read_text())
    assert isinstance(data, list) and data
    return data


@pytest.mark.parametrize("vector", _vectors(), ids=lambda v: f"vector-{v['shadowName']}")
def test_identity_vector_is_reproduced_byte_for_byte(vector: dict[str, Any]) -> None:
    identity = identities.identity_from_fields(vector["fields"])
    assert identities.canonical_encoding(identity).hex() == vector["canonicalEncodingHex"]
    assert identities.attachment_id(identity) == vector["attachmentID"]
    assert identities.shadow_name(vector["attachmentID"]) == vector["shadowName"]


def test_builder_defaults_to_this_driver_and_protocol_version() -> None:
    identity = _identity()
    assert identity.driver == names.DRIVER_NAME
    assert identity.protocol_version == names.PROTOCOL_VERSION
    assert identity.fields()["driver"] == "sriovnetwork.k8snetworkplumbingwg.io"


def test_separator_shifts_between_fields_give_different_ids() -> None:
    a = _identity(pool="ab", device="c")
    b = _identity(pool="a", device="bc")
    assert identities.canonical_encoding(a) != identities.canonical_encoding(b)
    assert identities.attachment_id(a) != identities.attachment_id(b)


@given(identity_fields, st.randoms(use_true_random=False))
def test_attachment_id_is_stable_under_any_input_order(fields: dict[str, Any], rnd: Any) -> None:
    keys = list(fields)
    rnd.shuffle(keys)
    shuffled = {k: fields[k] for k in keys}
    a = identities.identity_from_fields(fields)
    b = identities.identity_from_fields(shuffled)
    assert identities.attachment_id(a) == identities.attachment_id(b)


@given(
    identity_fields,
    st.sampled_from(["nodeUID", "podUID", "claimUID", "driver", "pool", "device"]),
    identity_fields,
)
def test_any_single_field_change_changes_the_id(
    fields: dict[str, Any], key: str, other: dict[str, Any]
) -> None:
    changed = dict(fields, **{key: other[key]})
    a = identities.attachment_id(identities.identity_from_fields(fields))
    b = identities.attachment_id(identities.identity_from_fields(changed))
    assert (a == b) is (fields[key] == other[key])


@given(identity_fields, identity_fields)
def test_canonical_encoding_is_injective(f1: dict[str, Any], f2: dict[str, Any]) -> None:
    i1, i2 = identities.identity_from_fields(f1), identities.identity_from_fields(f2)
    assert (identities.canonical_encoding(i1) == identities.canonical_encoding(i2)) is (i1 == i2)


@given(identity_fields)
def test_shadow_name_is_a_dns_label_of_42_chars(fields: dict[str, Any]) -> None:
    aid = identities.attachment_id(identities.identity_from_fields(fields))
    name = identities.shadow_name(aid)
    assert names.is_hex64(aid)
    assert name == "dra-sriov-" + aid[:32]
    assert len(name) == 42 <= 63
    assert names.is_dns1123_label(name)


@pytest.mark.parametrize(
    ("overrides", "path"),
    [
        ({"pod_uid": "not-a-uid"}, "podUID"),
        ({"claim_uid": POD.upper().replace("1", "A")}, "claimUID"),
        ({"node_uid": ""}, "nodeUID"),
        ({"pool": "Worker_A"}, "pool"),
        ({"device": "0000:03:00.1"}, "device"),
        ({"driver": "-bad-"}, "driver"),
        ({"protocol_version": True}, "protocolVersion"),
    ],
    ids=[
        "pod-uid-not-uuid",
        "claim-uid-uppercase",
        "node-uid-empty",
        "pool-not-dns",
        "device-with-colons",
        "driver-not-subdomain",
        "bool-protocol-version",
    ],
)
def test_malformed_identity_field_is_rejected_with_its_name(overrides: dict[str, Any], path: str) -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        _identity(**overrides)
    assert [e.path for e in exc.value.errors] == [path]


def test_unsupported_protocol_version_is_refused_not_guessed() -> None:
    with pytest.raises(errors.ContractViolation) as exc:
        _identity(protocol_version=2)
    assert exc.value.reason is errors.Reason.UNSUPPORTED_VERSION
    assert "protocolVersion 2" in str(exc.value)


def test_identity_from_fields_rejects_unknown_and_missing_fields() -> None:
    fields = _identity().fields()
    del fields["device"]
    fields["shareID"] = "x"
    with pytest.raises(errors.InvalidSpec) as exc:
        identities.identity_from_fields(fields)
    assert sorted(e.path for e in exc.value.errors) == ["device", "shareID"]


@pytest.mark.parametrize("aid", ["ab" * 16, "g" * 64, "AB" * 32], ids=["truncated", "non-hex", "uppercase"])
def test_shadow_name_refuses_a_malformed_attachment_id(aid: str) -> None:
    with pytest.raises(errors.ContractViolation):
        identities.shadow_name(aid)


def test_shadow_name_for_matches_shadow_name_of_attachment_id() -> None:
    identity = _identity()
    assert identities.shadow_name_for(identity) == identities.shadow_name(identities.attachment_id(identity))
