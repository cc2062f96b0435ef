"""Tests for sriov_dra.core.binding_annotation: the shadow binding annotation codec (docs/design.md#ownership)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import binding_annotation, identities
from sriov_dra_rules import errors, names

FIXTURES = Path(__file__).parents[2] / "fixtures" / "contract"
DOCUMENTED_FIELDS = [
    "version",
    "attachmentID",
    "podUID",
    "claimUID",
    "nodeName",
    "nodeUID",
    "source",
    "pciAddress",
    "interface",
    "configSHA256",
]


def _fixtures(valid: bool) -> list[dict[str, Any]]:
    index = json.loads((FIXTURES / "index.json").read_text())
    return [e for e in index if e["contract"] == "binding" and e["valid"] is valid]


def _value(entry: dict[str, Any]) -> str:
    text = (FIXTURES / entry["file"]).read_text()
    return text[:-1] if text.endswith("\n") else text


uuids = st.uuids().map(str)
hex64 = st.binary(min_size=32, max_size=32).map(bytes.hex)
labels = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?", fullmatch=True)
ifnames = st.text(
    alphabet=st.characters(exclude_characters="/:\x00", exclude_categories=("Zs", "Cc", "Zl", "Zp", "Cs")),
    min_size=1,
    max_size=7,
).filter(lambda value: names.ifname_problem(value) is None)
pcis = st.builds(
    "{:04x}:{:02x}:{:02x}.{}".format,
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFF),
    st.integers(0, 0x1F),
    st.integers(0, 7),
)
resource_versions = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=20
)
binding_values = st.builds(
    binding_annotation.Binding,
    attachment_id=hex64,
    pod_uid=uuids,
    claim_uid=uuids,
    node_name=st.lists(labels, min_size=1, max_size=3).map(".".join),
    node_uid=uuids,
    source=st.builds(
        binding_annotation.SourceRef,
        namespace=labels,
        name=labels,
        uid=uuids,
        resource_version=resource_versions,
    ),
    pci_address=pcis,
    interface=ifnames,
    config_sha256=hex64,
)


@pytest.mark.parametrize("entry", _fixtures(valid=True), ids=lambda e: e["file"])
def test_valid_fixture_decodes_and_reencodes_identically(entry: dict[str, Any]) -> None:
    value = _value(entry)
    binding = binding_annotation.decode_binding(value)
    assert binding_annotation.encode_binding(binding) == value


@pytest.mark.parametrize("entry", _fixtures(valid=False), ids=lambda e: e["file"])
def test_invalid_fixture_is_refused_with_its_reason(entry: dict[str, Any]) -> None:
    with pytest.raises(errors.ContractViolation) as exc:
        binding_annotation.decode_binding(_value(entry), owner="NAD ai-workloads/dra-sriov-x")
    assert exc.value.reason == entry["reason"]
    assert "NAD ai-workloads/dra-sriov-x" in str(exc.value)
    if "mentions" in entry:
        assert entry["mentions"] in str(exc.value)


def test_fixture_attachment_ids_come_from_the_identity_vectors() -> None:
    vectors = json.loads((FIXTURES / "identity-vectors.json").read_text())
    decoded = [binding_annotation.decode_binding(_value(e)) for e in _fixtures(valid=True)]
    assert {b.attachment_id for b in decoded} <= {v["attachmentID"] for v in vectors}


def test_encoding_uses_the_documented_field_names_in_their_documented_order() -> None:
    binding = binding_annotation.decode_binding(_value(_fixtures(valid=True)[0]))
    obj = json.loads(binding_annotation.encode_binding(binding))
    assert list(obj) == DOCUMENTED_FIELDS
    assert list(obj["source"]) == ["namespace", "name", "uid", "resourceVersion"]
    assert obj["version"] == 1


@given(binding_values)
def test_decode_inverts_encode(binding: binding_annotation.Binding) -> None:
    assert binding_annotation.decode_binding(binding_annotation.encode_binding(binding)) == binding


@given(binding_values)
def test_encode_is_deterministic_and_compact(binding: binding_annotation.Binding) -> None:
    text = binding_annotation.encode_binding(binding)
    copy = dataclasses.replace(binding, source=dataclasses.replace(binding.source))
    assert binding_annotation.encode_binding(copy) == text
    assert text == json.dumps(json.loads(text), separators=(",", ":"))
    assert text.isascii()


@given(binding_values)
def test_whitespace_and_key_order_do_not_change_the_decoded_value(
    binding: binding_annotation.Binding,
) -> None:
    obj = json.loads(binding_annotation.encode_binding(binding))
    reordered = json.dumps(dict(reversed(list(obj.items()))), indent=2)
    assert binding_annotation.decode_binding(reordered) == binding


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("interface", "eth/1", "interface"),
        ("pci_address", "0000:03:00.1 ", "pciAddress"),
        ("config_sha256", "0" * 63, "configSHA256"),
        ("node_name", "Worker-A", "nodeName"),
    ],
    ids=["bad-interface", "pci-trailing-space", "short-digest", "uppercase-node-name"],
)
def test_encode_refuses_to_publish_an_invalid_binding(field: str, value: str, path: str) -> None:
    good = binding_annotation.decode_binding(_value(_fixtures(valid=True)[0]))
    bad = dataclasses.replace(good, **{field: value})
    with pytest.raises(errors.ContractViolation) as exc:
        binding_annotation.encode_binding(bad)
    assert [e.path for e in exc.value.errors] == [
        binding_annotation.annotation_path(names.BINDING_ANNOTATION, path)
    ]


def test_decode_reports_every_bad_field_at_once() -> None:
    obj = json.loads(_value(_fixtures(valid=True)[0]))
    obj.update(podUID="x", interface="", nodeUID=False)
    with pytest.raises(errors.ContractViolation) as exc:
        binding_annotation.decode_binding(json.dumps(obj))
    assert {e.path.rsplit(".", 1)[-1] for e in exc.value.errors} == {"podUID", "interface", "nodeUID"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a":{"b":1,"b":2}}', 'X.a.b: duplicate key "b"'),
        ('{"version":Infinity}', "not valid JSON"),
        ('{"version":1', "not valid JSON"),
        ('{"a":"\\ud800"}', "X.a: string contains a lone UTF-16 surrogate"),
    ],
    ids=["nested-duplicate-key", "infinity-constant", "unterminated-object", "lone-surrogate"],
)
def test_strict_json_rejects_what_our_contracts_forbid(text: str, message: str) -> None:
    with pytest.raises(errors.ContractViolation) as exc:
        binding_annotation.strict_json_loads(text, what="annotation X", path="X")
    assert message in str(exc.value)
    assert "annotation X" in str(exc.value)


def test_strict_json_gives_floats_so_that_integer_fields_refuse_them() -> None:
    assert binding_annotation.strict_json_loads('{"version":1.0,"n":[2.5e1]}', what="w") == {
        "version": 1.0,
        "n": [25.0],
    }


def test_repeated_key_in_the_binding_annotation_is_named_with_its_path() -> None:
    obj = json.loads(_value(_fixtures(valid=True)[0]))
    text = json.dumps(obj)[:-1] + ',"podUID":"x"}'
    with pytest.raises(errors.ContractViolation) as exc:
        binding_annotation.decode_binding(text)
    assert [e.path for e in exc.value.errors] == [
        binding_annotation.annotation_path(names.BINDING_ANNOTATION, "podUID")
    ]


@pytest.mark.parametrize("value", [None, b"{}", 1], ids=["none", "bytes", "integer"])
def test_decode_requires_a_string_annotation_value(value: object) -> None:
    with pytest.raises(errors.ContractViolation):
        binding_annotation.decode_binding(value)


def test_config_sha256_hashes_the_exact_bytes() -> None:
    assert (
        binding_annotation.config_sha256("")
        == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert binding_annotation.config_sha256('{"a":1}') != binding_annotation.config_sha256('{"a": 1}')
    assert binding_annotation.config_sha256("é") == binding_annotation.config_sha256("é".encode())


def test_unsupported_version_is_checked_before_any_other_field() -> None:
    with pytest.raises(errors.ContractViolation) as exc:
        binding_annotation.decode_binding('{"version":2,"somethingNew":[1,2,3]}')
    assert exc.value.reason is errors.Reason.UNSUPPORTED_VERSION
    assert "version 2" in str(exc.value)


def test_decoded_ids_are_plain_strings_usable_as_identity_types() -> None:
    binding = binding_annotation.decode_binding(_value(_fixtures(valid=True)[0]))
    assert isinstance(binding.attachment_id, str)
    assert identities.shadow_name(binding.attachment_id).startswith(names.SHADOW_NAME_PREFIX)


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, '{"version":1,"source":' + '{"a":' * 100_000 + "1" + "}" * 100_001],
    ids=["deep-arrays", "deep-objects-under-source"],
)
def test_deeply_nested_annotation_is_a_contract_violation_not_a_crash(text: str) -> None:
    with pytest.raises(errors.ContractViolation) as exc:
        binding_annotation.decode_binding(text, owner="NAD ns-a/dra-sriov-x")
    assert exc.value.reason is errors.Reason.CONTRACT_VIOLATION
    assert "nested too deeply" in str(exc.value)
    assert "NAD ns-a/dra-sriov-x" in str(exc.value)
