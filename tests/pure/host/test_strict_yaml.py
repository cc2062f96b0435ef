"""Tests of sriov_dra.host.strict_yaml: the one YAML loader, refusing repeated mapping keys."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.host import strict_yaml
from sriov_dra_rules import errors

REPO = Path(__file__).resolve().parents[3]


def problems(text: str) -> list[errors.FieldError]:
    with pytest.raises(errors.InvalidSpec) as caught:
        strict_yaml.load(text, source="nic-ids.yaml")
    assert "nic-ids.yaml is not strict YAML" in str(caught.value)
    return list(caught.value.errors)


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("a: 1\nb: 2\na: 3\n", ["$.a"]),
        ('data:\n  x: "8086 158b 154c"\n  x: "15b3 1017 1018"\n', ["$.data.x"]),
        ("- {k: 1}\n- {k: 1, k: 2}\n", ["$[1].k"]),
        ('{"logLevel": "debug", "logLevel": "error"}', ["$.logLevel"]),
        ("1: a\n1.0: b\n", ['$["1.0"]']),
        ("true: a\nyes: b\n", ["$.yes"]),
        ("m:\n  <<: {a: 1}\n  <<: {b: 1}\n", ['$.m["<<"]']),
        ("a: 1\na: 2\nb: {c: 1, c: 1}\n", ["$.a", "$.b.c"]),
    ],
    ids=[
        "top-level", "configmap-data-entry", "in-a-list", "json-text", "equal-numbers",
        "equal-booleans", "two-merge-keys", "every-repeat-in-document-order",
    ],
)  # fmt: skip
def test_repeated_key_is_refused_with_its_path(text: str, paths: list[str]) -> None:
    found = problems(text)
    assert [p.path for p in found] == paths
    assert all("repeated key" in p.message and "keep exactly one" in p.message for p in found)


def test_both_places_of_a_repeated_key_are_named() -> None:
    (found,) = problems("data:\n  x: 1\n  y: 2\n  x: 3\n")
    assert "first at line 2 column 3, again at line 4 column 3" in found.message


def test_merged_keys_may_still_be_overridden() -> None:
    text = "base: &b {a: 1, b: 2}\nm:\n  <<: *b\n  a: 3\n"
    assert (
        strict_yaml.load(text, source="s")
        == yaml.safe_load(text)
        == {"base": {"a": 1, "b": 2}, "m": {"a": 3, "b": 2}}
    )


def test_aliases_and_cycles_load_like_safe_load() -> None:
    loaded = strict_yaml.load("a: &x [1, *x]\nb: *x\n", source="s")
    assert isinstance(loaded, dict) and loaded["a"] is loaded["b"] and loaded["a"][1] is loaded["a"]


@pytest.mark.parametrize(
    ("text", "mentions"),
    [
        ("a: b: c\n", "malformed YAML at line 1 column 5"),
        ("a: [1, 2\n", "malformed YAML"),
        ("!!python/object:os.system {}\n", "malformed YAML"),
        ("a: 1\n---\nb: 2\n", "malformed YAML"),
        ("[" * 5000, "nested too deeply"),
    ],
    ids=["mapping-in-scalar", "unclosed-flow-list", "unsafe-tag", "two-documents-for-one", "deep-nesting"],
)
def test_malformed_yaml_is_a_typed_error_naming_the_source(text: str, mentions: str) -> None:
    (found,) = problems(text)
    assert found.path == "$" and mentions in found.message


def test_load_all_paths_count_documents() -> None:
    assert strict_yaml.load_all("a: 1\n---\nb: 2\n", source="m") == [{"a": 1}, {"b": 2}]
    with pytest.raises(errors.InvalidSpec) as caught:
        strict_yaml.load_all("a: 1\n---\nkind: X\nkind: Y\n", source="m.yaml")
    assert [e.path for e in caught.value.errors] == ["$[1].kind"]


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.dictionaries(st.text(max_size=6) | st.integers() | st.booleans(), kids, max_size=3)
    ),
    max_leaves=12,
)


@given(_VALUES, st.booleans())
def test_valid_yaml_loads_exactly_as_safe_load_does(value: object, flow: bool) -> None:
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True)
    assert strict_yaml.load(text, source="s") == yaml.safe_load(text)


SHIPPED = sorted(
    p
    for root in ("runtime/sriov_dra/manifests", "examples")
    for p in (REPO / root).rglob("*")
    if p.suffix in (".yaml", ".yml")
)


@pytest.mark.parametrize("path", SHIPPED, ids=[str(p.relative_to(REPO)) for p in SHIPPED])
def test_every_shipped_manifest_and_example_loads_strictly(path: Path) -> None:
    assert strict_yaml.read_all(path) == list(yaml.safe_load_all(path.read_text(encoding="utf-8")))


def test_an_integer_past_the_integer_string_limit_is_an_invalid_spec_naming_the_document() -> None:
    with pytest.raises(errors.InvalidSpec) as caught:
        strict_yaml.load_all("a: 1\n---\nb: " + "9" * 4301 + "\n", source="manifest m.yaml")
    assert "m.yaml" in str(caught.value)
    assert caught.value.errors[0].path == "$[1]"
    assert "shorter number" in caught.value.errors[0].message


def test_a_control_character_the_yaml_reader_refuses_is_an_invalid_spec_naming_the_document() -> None:
    with pytest.raises(errors.InvalidSpec) as caught:
        strict_yaml.load_all("a: 1\x00\n--\n", source="manifest m.yaml")
    assert "m.yaml" in str(caught.value) and "control character" in caught.value.errors[0].message
