"""Tests for sriov_dra.core.plugin.checkpoint_model: record rules shared by encode and decode (docs/design.md#checkpoint)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace

import pytest
from tests.fakes import checkpoint_records as fx

from sriov_dra.core import binding_annotation, identities
from sriov_dra.core.plugin import checkpoint_model as model


def test_phase_values_are_the_persisted_strings() -> None:
    assert [p.value for p in model.Phase] == ["Pending", "Ready", "Deleting", "ReleaseComplete"]


def test_config_sha256_hashes_exact_utf8_bytes() -> None:
    text = '{"name":"rail-ä"}'
    assert binding_annotation.config_sha256(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_valid_record_has_no_problems() -> None:
    assert model.record_problems(fx.record(indexes=(0, 1))) == []


def test_record_without_managed_bindings_is_valid() -> None:
    assert model.record_problems(fx.record(managed=False)) == []


def test_managed_bindings_are_listed_in_device_order() -> None:
    rec = fx.record(indexes=(2, 0))
    assert [b.interface for b in rec.managed_bindings()] == ["dra2", "dra0"]


def _binding_change(**changes: object) -> Callable[[model.ClaimRecord], model.ClaimRecord]:
    def apply(rec: model.ClaimRecord) -> model.ClaimRecord:
        dev = rec.devices[0]
        assert dev.managed is not None
        return replace(rec, devices=(replace(dev, managed=replace(dev.managed, **changes)),))  # type: ignore[arg-type]

    return apply


def _device_change(**changes: object) -> Callable[[model.ClaimRecord], model.ClaimRecord]:
    def apply(rec: model.ClaimRecord) -> model.ClaimRecord:
        return replace(rec, devices=(replace(rec.devices[0], **changes),))  # type: ignore[arg-type]

    return apply


def _record_change(**changes: object) -> Callable[[model.ClaimRecord], model.ClaimRecord]:
    return lambda rec: replace(rec, **changes)  # type: ignore[arg-type]


other_source = model.SourceRef("ns-a", "rail-a-net", identities.ObjectUid("not-a-uuid"), "1")

CASES = [
    ("claim-uid-not-uuid", _record_change(claim_uid="claim-1"), "claimUID"),
    ("pod-uid-uppercase", _record_change(pod_uid=fx.SOURCE_UID.upper()), "podUID"),
    ("namespace-not-dns-label", _record_change(namespace="Ns_A"), "namespace"),
    ("no-devices", _record_change(devices=()), "devices"),
    ("duplicate-device", lambda r: replace(r, devices=(r.devices[0], r.devices[0])), "devices[1]"),
    ("empty-request-names", _device_change(request_names=()), "devices[0].requestNames"),
    ("repeated-request-name", _device_change(request_names=("vf", "vf")), "devices[0].requestNames"),
    ("pci-with-prefix", _device_change(pci_address="pci:0000:3b:02.0"), "devices[0].pciAddress"),
    ("device-not-dns-label", _device_change(device="0000:3b:02.0"), "devices[0].device"),
    ("vf-config-with-tuple", _device_change(vf_config={"a": (1, 2)}), "devices[0].vfConfig"),
    ("vf-config-with-nan", _device_change(vf_config={"a": float("nan")}), "devices[0].vfConfig"),
    ("bad-cdi-id", _device_change(cdi_device_ids=("vf=0",)), "devices[0].cdiDeviceIDs[0]"),
    ("interface-too-long", _device_change(interface_name="a" * 16), "devices[0].interfaceName"),
    ("attachment-id-truncated", _binding_change(attachment_id="ab" * 16), "managedBinding.attachmentID"),
    ("attachment-id-of-other-claim", _binding_change(attachment_id="0" * 64), "managedBinding.attachmentID"),
    (
        "shadow-name-not-derived",
        _binding_change(shadow_name="dra-sriov-" + "0" * 32),
        "managedBinding.shadowName",
    ),
    ("shadow-namespace-differs", _binding_change(shadow_namespace="ns-b"), "managedBinding.shadowNamespace"),
    ("shadow-uid-not-uuid", _binding_change(shadow_uid="uid-1"), "managedBinding.shadowUID"),
    ("config-hash-mismatch", _binding_change(config_sha256="0" * 64), "managedBinding.configSHA256"),
    ("rendered-config-empty", _binding_change(rendered_config=""), "managedBinding.renderedConfig"),
    ("rendered-config-surrogate", _binding_change(rendered_config="\ud800"), "managedBinding.renderedConfig"),
    ("interface-differs-from-device", _binding_change(interface="dra9"), "managedBinding.interface"),
    ("source-uid-not-uuid", _binding_change(source=other_source), "managedBinding.source.uid"),
    ("node-uid-not-uuid", _binding_change(node_uid="node"), "managedBinding.nodeUID"),
    ("node-name-invalid", _binding_change(node_name="Node_A"), "managedBinding.nodeName"),
]


@pytest.mark.parametrize(("change", "path"), [(c, p) for _, c, p in CASES], ids=[i for i, _, _ in CASES])
def test_record_problems_names_the_broken_field(
    change: Callable[[model.ClaimRecord], model.ClaimRecord], path: str
) -> None:
    problems = model.record_problems(change(fx.record()), "x.")
    assert problems, "the change must be rejected"
    assert any(p.path.startswith("x.") and p.path.endswith(path) for p in problems), problems


def test_attachment_id_must_hash_this_records_identity_not_another_nodes() -> None:
    rec = fx.record()
    other_node = fx.binding(fx.CLAIM_1, fx.POD_A, 0, node_uid="0b7c6f2e-5a1d-4c3e-9f10-000000000000")
    moved = replace(
        rec, devices=(replace(rec.devices[0], managed=replace(other_node, node_uid=fx.NODE_UID)),)
    )
    paths = [p.path for p in model.record_problems(moved)]
    assert paths == ["devices[0].managedBinding.attachmentID"]


def test_checkpoint_problems_reject_a_record_under_another_claims_key() -> None:
    rec = fx.record()
    cp = model.Checkpoint(claims={identities.ClaimUid(fx.CLAIM_2): rec})
    assert [p.path for p in model.checkpoint_problems(cp)] == [f'data.claims["{fx.CLAIM_2}"].claimUID']


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ({"a": [1, 2.5, "x", True, None, {"b": {}}]}, True),
        ({"a": (1,)}, False),
        ({"a": {1, 2}}, False),
        ({1: "x"}, False),
        ({"a": float("inf")}, False),
        ({"a": b"bytes"}, False),
    ],
    ids=["plain-json", "tuple", "set", "int-key", "infinity", "bytes"],
)
def test_json_value_problem_accepts_only_plain_json(value: object, ok: bool) -> None:
    assert (model.json_value_problem(value) is None) is ok


def test_json_value_problem_refuses_excessive_nesting() -> None:
    deep: object = "x"
    for _ in range(70):
        deep = [deep]
    assert model.json_value_problem({"a": deep}) is not None
