"""Tests for sriov_dra.core.registry: the Pod managed-networks registry codec
(docs/design.md#ownership)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import identities, registry
from sriov_dra_rules import errors, names

FIXTURES = Path(__file__).parents[2] / "fixtures" / "contract"
POD = identities.PodUid("11111111-2222-3333-4444-555555555555")


def _fixtures(valid: bool) -> list[dict[str, Any]]:
    index = json.loads((FIXTURES / "index.json").read_text())
    return [e for e in index if e["contract"] == "registry" and e["valid"] is valid]


def _value(entry: dict[str, Any]) -> str:
    text = (FIXTURES / entry["file"]).read_text()
    return text[:-1] if text.endswith("\n") else text


def _two_entries() -> registry.Registry:
    return registry.decode_registry(_value({"file": "registry-valid-two-entries.json"}))


hex64 = st.binary(min_size=32, max_size=32).map(bytes.hex)
uuids = st.uuids().map(str)


@st.composite
def registries(draw: st.DrawFn) -> registry.Registry:
    """Valid registries: distinct IDs, derived names, one namespace, distinct interfaces."""
    namespace = draw(st.from_regex(r"[a-z]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True))
    aids = draw(st.lists(hex64, max_size=6, unique_by=lambda a: a[:32]))
    ifs = draw(
        st.lists(
            st.from_regex(r"[a-z][a-z0-9_.]{0,14}", fullmatch=True),
            min_size=len(aids),
            max_size=len(aids),
            unique=True,
        )
    )
    claims = draw(st.lists(uuids, min_size=1, max_size=3))
    entries = tuple(
        registry.RegistryEntry(
            attachment_id=identities.AttachmentId(aid),
            claim_uid=identities.ClaimUid(draw(st.sampled_from(claims))),
            namespace=namespace,
            name=identities.shadow_name(aid),
            uid=identities.ObjectUid(draw(uuids)),
            interface=ifname,
            config_sha256=draw(hex64),
        )
        for aid, ifname in zip(aids, ifs, strict=True)
    )
    return registry.Registry(pod_uid=identities.PodUid(draw(uuids)), entries=entries)


@pytest.mark.parametrize("entry", _fixtures(valid=True), ids=lambda e: e["file"])
def test_valid_fixture_decodes_and_reencodes_identically(entry: dict[str, Any]) -> None:
    value = _value(entry)
    assert registry.encode_registry(registry.decode_registry(value)) == value


@pytest.mark.parametrize("entry", _fixtures(valid=False), ids=lambda e: e["file"])
def test_invalid_fixture_is_refused_with_its_reason(entry: dict[str, Any]) -> None:
    with pytest.raises(errors.ContractViolation) as exc:
        registry.decode_registry(_value(entry), owner="Pod ai-workloads/demo")
    assert exc.value.reason == entry["reason"]
    assert "Pod ai-workloads/demo" in str(exc.value)
    if "mentions" in entry:
        assert entry["mentions"] in str(exc.value)


def test_encoding_uses_the_documented_field_names_in_their_documented_order() -> None:
    obj = json.loads(registry.encode_registry(_two_entries()))
    assert list(obj) == ["version", "podUID", "entries"]
    assert list(obj["entries"][0]) == [
        "attachmentID",
        "claimUID",
        "namespace",
        "name",
        "uid",
        "interface",
        "configSHA256",
    ]
    assert obj["version"] == names.REGISTRY_VERSION


@given(registries())
def test_decode_inverts_encode(value: registry.Registry) -> None:
    assert registry.decode_registry(registry.encode_registry(value)) == value


@given(registries(), st.randoms(use_true_random=False))
def test_entry_order_is_kept_exactly(value: registry.Registry, rnd: Any) -> None:
    entries = list(value.entries)
    rnd.shuffle(entries)
    shuffled = registry.Registry(value.pod_uid, tuple(entries))
    decoded = registry.decode_registry(registry.encode_registry(shuffled))
    assert [e.attachment_id for e in decoded.entries] == [e.attachment_id for e in entries]


@given(registries())
def test_encode_is_deterministic(value: registry.Registry) -> None:
    rebuilt = registry.Registry(value.pod_uid, tuple(dataclasses.replace(e) for e in value.entries))
    assert registry.encode_registry(rebuilt) == registry.encode_registry(value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda es: (es[0], dataclasses.replace(es[1], interface=es[0].interface)), "duplicate interface"),
        (lambda es: (es[0], es[0]), "duplicate attachmentID"),
        (
            lambda es: (es[0], dataclasses.replace(es[1], namespace="other-ns")),
            "every shadow lives in the Pod",
        ),
        (
            lambda es: (dataclasses.replace(es[0], name="dra-sriov-" + "0" * 32), es[1]),
            "is not the shadow name",
        ),
        (lambda es: (dataclasses.replace(es[0], uid="not-a-uid"), es[1]), "entries[0].uid"),
    ],
    ids=["duplicate-interface", "duplicate-entry", "mixed-namespaces", "name-not-derived", "bad-shadow-uid"],
)
def test_encode_refuses_an_inconsistent_registry(change: Any, message: str) -> None:
    value = _two_entries()
    bad = registry.Registry(value.pod_uid, change(value.entries))
    with pytest.raises(errors.ContractViolation) as exc:
        registry.encode_registry(bad)
    assert message in str(exc.value)


def test_truncated_name_collision_is_a_duplicate_selection() -> None:
    value = _two_entries()
    first = value.entries[0]
    tail = "0" * 32 if first.attachment_id[32:] != "0" * 32 else "1" * 32
    twin = dataclasses.replace(
        value.entries[1],
        attachment_id=identities.AttachmentId(first.attachment_id[:32] + tail),
        name=first.name,
    )
    with pytest.raises(errors.ContractViolation) as exc:
        registry.encode_registry(registry.Registry(value.pod_uid, (first, twin)))
    assert "duplicate selection (namespace, name)" in str(exc.value)
    assert "duplicate attachmentID" not in str(exc.value)


def test_without_claim_drops_only_that_claims_entries_and_keeps_order() -> None:
    value = _two_entries()
    other = identities.ClaimUid("c1a1c1a1-0000-4000-8000-0000000000ff")
    mixed = registry.Registry(
        value.pod_uid, (value.entries[0], dataclasses.replace(value.entries[1], claim_uid=other))
    )
    kept = registry.without_claim(mixed, value.entries[0].claim_uid)
    assert kept.entries == (mixed.entries[1],)
    assert kept.pod_uid == mixed.pod_uid
    assert registry.entries_for_claim(mixed, other) == (mixed.entries[1],)
    assert registry.without_claim(mixed, "c1a1c1a1-0000-4000-8000-000000000000") == mixed


def test_empty_registry_round_trips() -> None:
    empty = registry.Registry(POD)
    assert registry.encode_registry(empty) == f'{{"version":1,"podUID":"{POD}","entries":[]}}'
    assert registry.decode_registry(registry.encode_registry(empty)) == empty


def test_unsupported_version_is_refused_before_reading_entries() -> None:
    with pytest.raises(errors.ContractViolation) as exc:
        registry.decode_registry('{"version":3,"podUID":7,"entries":"whatever"}')
    assert exc.value.reason is errors.Reason.UNSUPPORTED_VERSION


def test_non_object_registry_is_refused() -> None:
    with pytest.raises(errors.ContractViolation) as exc:
        registry.decode_registry("[]")
    assert "must be a JSON object" in str(exc.value)


def test_deeply_nested_registry_is_a_contract_violation_not_a_crash() -> None:
    text = '{"version":1,"entries":' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(errors.ContractViolation) as exc:
        registry.decode_registry(text, owner="Pod ns-a/p")
    assert exc.value.reason is errors.Reason.CONTRACT_VIOLATION
    assert "nested too deeply" in str(exc.value)


def test_registry_interface_with_a_lone_surrogate_escape_is_a_contract_violation_not_a_crash() -> None:
    aid = "a" * 64
    entry = {
        "attachmentID": aid,
        "claimUID": "c1a1c1a1-0000-4000-8000-000000000001",
        "namespace": "ns-a",
        "name": identities.shadow_name(aid),
        "uid": "5a5a5a5a-0000-4000-8000-00000000000a",
        "interface": "IFNAME",
        "configSHA256": "b" * 64,
    }
    text = json.dumps({"version": 1, "podUID": "11111111-2222-3333-4444-555555555555", "entries": [entry]})
    with pytest.raises(errors.ContractViolation) as exc:
        registry.decode_registry(text.replace("IFNAME", "\\ud800"), owner="Pod ns-a/p")
    assert [e.path.rsplit(".", 1)[-1] for e in exc.value.errors] == ["interface"]
    assert "surrogate" in str(exc.value)


def test_repeated_key_in_the_registry_annotation_is_named_with_its_path() -> None:
    text = _value({"file": "registry-invalid-duplicate-key.json"})
    with pytest.raises(errors.ContractViolation) as exc:
        registry.decode_registry(text, owner="Pod ns/p")
    base = f'metadata.annotations["{names.MANAGED_NETWORKS_ANNOTATION}"]'
    assert [e.path for e in exc.value.errors] == [f"{base}.podUID"]
    assert "annotation" in exc.value.summary and "Pod ns/p" in exc.value.summary
