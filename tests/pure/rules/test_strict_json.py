"""Tests of sriov_dra_rules.strict_json: strict decoding, exact numbers, canonical encoding."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra_rules import errors, strict_json
from sriov_dra_rules.strict_json import JsonValue, RawNumber

NUMBER_LITERALS = st.from_regex(r"-?(0|[1-9][0-9]{0,5})(\.[0-9]{1,4})?([eE][+-]?[0-9]{1,3})?", fullmatch=True)
RAW_NUMBERS = NUMBER_LITERALS.filter(lambda s: any(c in s for c in ".eE")).map(RawNumber)
SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=12)


def json_values(*, raw_numbers: bool) -> st.SearchStrategy[JsonValue]:
    leaves = SCALARS | RAW_NUMBERS if raw_numbers else SCALARS
    return st.recursive(
        leaves,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=16,
    )


def _problems(text: str, path: str = "$") -> list[errors.FieldError]:
    with pytest.raises(errors.InvalidSpec) as caught:
        strict_json.decode(text, path=path)
    return list(caught.value.errors)


# --- decoding: accepted documents -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"vlan":4095}', {"vlan": 4095}),
        ('{"big":123456789012345678901234567890}', {"big": 123456789012345678901234567890}),
        ('{"neg":-9007199254740993}', {"neg": -9007199254740993}),
        ('{"z":-0}', {"z": 0}),
        ('{"e":1e3,"f":1.50,"g":-0.0,"h":2E+10}', {
            "e": RawNumber("1e3"), "f": RawNumber("1.50"), "g": RawNumber("-0.0"), "h": RawNumber("2E+10"),
        }),
        ("  {\n\t\"a\" : [ ] }\r\n", {"a": []}),
        ('"text"', "text"),
        ("null", None),
        ('{"x":"é€😀"}', {"x": "é€😀"}),
        ('{"pair":"\\ud83d\\ude00"}', {"pair": "😀"}),
    ],
    ids=[
        "vlan-4095-exact", "int-beyond-64-bits-exact", "int-beyond-float-precision-exact",
        "minus-zero-int-is-zero", "fraction-and-exponent-kept-as-written", "whitespace-ignored",
        "scalar-root-decodes", "null-root-decodes", "non-ascii-text", "escaped-surrogate-pair-joins",
    ],
)  # fmt: skip
def test_decode_accepts_strict_json(text: str, expected: JsonValue) -> None:
    assert strict_json.decode(text) == expected


def test_decode_keeps_key_order_and_unknown_fields() -> None:
    doc = strict_json.decode('{"zeta":1,"alpha":{"y":2,"x":3},"custom-extension":{"k":[1,"a"]}}')
    assert isinstance(doc, dict)
    assert list(doc) == ["zeta", "alpha", "custom-extension"]
    alpha = doc["alpha"]
    assert isinstance(alpha, dict)
    assert list(alpha) == ["y", "x"]
    assert doc["custom-extension"] == {"k": [1, "a"]}


def test_decode_never_produces_floats() -> None:
    doc = strict_json.decode("[1.0, 2.5e-3, 3, 1e400]")
    assert doc == [RawNumber("1.0"), RawNumber("2.5e-3"), 3, RawNumber("1e400")]
    assert isinstance(doc, list)
    assert not any(isinstance(v, float) for v in doc)


# --- decoding: rejected documents -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "mentions"),
    [
        ('{"a":1,}', "malformed JSON at line 1 column 8"),
        ('{"a":1', "malformed JSON"),
        ("", "malformed JSON"),
        ("{'a':1}", "malformed JSON"),
        ('{"a":NaN}', "NaN is not a JSON number"),
        ('{"a":Infinity}', "Infinity is not a JSON number"),
        ('{"a":-Infinity}', "-Infinity is not a JSON number"),
        ('\ufeff{"a":1}', "BOM"),
        ('{"a":"line\nbreak"}', "Invalid control character"),
        ('{"a":1} {"b":2}', "Extra data"),
        ('{"a":' + "9" * 5000 + "}", "number not accepted"),
    ],
    ids=[
        "trailing-comma", "truncated", "empty-text", "single-quotes", "nan", "infinity",
        "negative-infinity", "byte-order-mark", "raw-control-character", "two-documents",
        "integer-over-digit-limit",
    ],
)  # fmt: skip
def test_decode_rejects_non_strict_json(text: str, mentions: str) -> None:
    problems = _problems(text, path="spec.config")
    assert len(problems) == 1
    assert problems[0].path == "spec.config"
    assert mentions in problems[0].message


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ('{"type":"sriov","type":"macvlan"}', ["$.type"]),
        ('{"plugins":[{"type":"sriov","deviceID":"a","deviceID":"b"}]}', ["$.plugins[0].deviceID"]),
        ('{"a":{"b":{"c":1,"c":1}}}', ["$.a.b.c"]),
        ('{"ipam":{"k8s.io/x":1,"k8s.io/x":2}}', ['$.ipam["k8s.io/x"]']),
        ('[{"a":1,"a":2},{"b":1,"b":2,"b":3}]', ["$[0].a", "$[1].b"]),
        ('{"name":"x","name":"y","ipam":{"type":"a","type":"b"}}', ["$.name", "$.ipam.type"]),
    ],
    ids=[
        "root-type-duplicated", "device-id-in-plugin-duplicated", "deeply-nested-duplicate",
        "odd-key-quoted-in-path", "duplicates-in-two-array-elements", "all-duplicates-reported-in-document-order",
    ],
)  # fmt: skip
def test_decode_rejects_duplicate_keys_with_paths(text: str, paths: list[str]) -> None:
    problems = _problems(text)
    assert [p.path for p in problems] == paths
    assert all("duplicate key" in p.message for p in problems)


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ('{"mode":"thin","mode":"thick"}', '"thin" and "thick"'),
        ('{"b":1,"b":2,"b":3}', "1, 2 and 3"),
        ('{"x":1.50,"x":null}', "1.50 and null"),
        ('{"x":{"type":"a"},"x":[true,false]}', '{"type":"a"} and [true,false]'),
        ('{"x":"' + "v" * 60 + '","x":"short"}', '"' + "v" * 36 + '... and "short"'),
        ('{"x":[' + ",".join(["1"] * 40) + '],"x":0}', "[" + "1," * 18 + "... and 0"),
        ('{"x":"\\ud800","x":"é"}', '"\\ud800" and "é"'),
    ],
    ids=["two-strings", "three-integers", "exact-number-and-null", "object-and-list", "long-string-shortened",
         "long-list-shortened", "lone-surrogate-escaped"],
)  # fmt: skip
def test_a_duplicate_key_error_shows_every_value_in_order_shortened_when_long(text: str, values: str) -> None:
    (problem,) = [p for p in _problems(text) if "duplicate key" in p.message]
    key = problem.path.rsplit(".", 1)[1]
    assert problem.message == (
        f'duplicate key "{key}" in one object with the values {values} (readers disagree on which value wins); '
        "keep exactly one"
    )
    assert problem.message.encode("utf-8")  # a message is always valid UTF-8


@given(st.text(max_size=200), st.text(max_size=200))
def test_shown_values_are_short_valid_utf8_json_prefixes(first: str, second: str) -> None:
    text = json.dumps({"k": first})[:-1] + "," + json.dumps({"k": second})[1:]
    (problem,) = [p for p in _problems(text) if "duplicate key" in p.message]
    for value in (first, second):
        shown = strict_json.shown_value(value)
        assert len(shown) <= strict_json.DUPLICATE_VALUE_CHARS
        shown.encode("utf-8")
        assert shown in problem.message


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ('{"a":"\\ud800"}', "$.a"),
        ('{"a":["ok","\\udc00x"]}', "$.a[1]"),
        ('{"\\uDBFF":1}', '$["\\udbff"]'),
    ],
    ids=["lone-high-surrogate", "lone-low-surrogate-in-array", "lone-surrogate-in-key"],
)
def test_decode_rejects_lone_surrogates(text: str, path: str) -> None:
    problems = _problems(text)
    assert [p.path for p in problems] == [path]
    assert "surrogate" in problems[0].message


# --- paths --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [("type", "spec.config.type"), ("node_slice_size", "spec.config.node_slice_size"),
     ("k8s.v1.cni.cncf.io/networks", 'spec.config["k8s.v1.cni.cncf.io/networks"]'),
     ("a b", 'spec.config["a b"]'), ("", 'spec.config[""]')],
    ids=["identifier", "underscore-identifier", "annotation-key-quoted", "space-quoted", "empty-key-quoted"],
)  # fmt: skip
def test_key_path_spelling(key: str, expected: str) -> None:
    assert strict_json.key_path("spec.config", key) == expected


def test_index_path_spelling() -> None:
    assert strict_json.index_path("spec.config.plugins", 1) == "spec.config.plugins[1]"


# --- encoding -------------------------------------------------------------------------------------


def test_encode_is_compact_utf8_in_key_order() -> None:
    value: JsonValue = {"b": [1, True, None], "a": {"é": "x\ny"}, "n": RawNumber("1e3")}
    assert strict_json.encode(value) == '{"b":[1,true,null],"a":{"é":"x\\ny"},"n":1e3}'
    assert strict_json.encode_bytes(value) == '{"b":[1,true,null],"a":{"é":"x\\ny"},"n":1e3}'.encode()


@pytest.mark.parametrize(
    "value",
    [{"a": object()}, {1, 2}, [RawNumber("1.5"), b"bytes"]],
    ids=["arbitrary-object", "set", "bytes-on-exact-encoder-path"],
)
def test_encode_rejects_non_json_values(value: object) -> None:
    with pytest.raises(TypeError):
        strict_json.encode(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [[2.5, (1, "a")], {"x": [0.1, -3.0e-7]}],
    ids=["float-and-tuple", "nested-floats"],
)
def test_both_encoder_paths_write_stdlib_values_identically(value: object) -> None:
    fast = strict_json.encode(value)  # type: ignore[arg-type]
    exact = strict_json.encode([value, RawNumber("1.5")])  # type: ignore[list-item]
    assert exact == f"[{fast},1.5]"


def test_encode_bytes_names_lone_surrogate() -> None:
    with pytest.raises(errors.InvalidSpec) as caught:
        strict_json.encode_bytes({"ok": "a", "bad": ["\ud800"]}, path="spec.config")
    assert [e.path for e in caught.value.errors] == ["spec.config.bad[0]"]


@pytest.mark.parametrize("literal", ["abc", "01", "1.", ".5", "+1", "NaN", "1e", " 1"])
def test_raw_number_rejects_non_literals(literal: str) -> None:
    with pytest.raises(ValueError, match="not a JSON number literal"):
        RawNumber(literal)


# --- properties ---------------------------------------------------------------------------------


@given(json_values(raw_numbers=True))
def test_round_trip_keeps_values_numbers_and_key_order(value: JsonValue) -> None:
    text = strict_json.encode(value)
    decoded = strict_json.decode(text)
    assert decoded == value
    assert strict_json.encode(decoded) == text


@given(json_values(raw_numbers=False))
def test_encode_matches_stdlib_compact_form_without_raw_numbers(value: JsonValue) -> None:
    assert strict_json.encode(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@given(json_values(raw_numbers=False))
def test_exact_and_fast_encoders_agree(value: JsonValue) -> None:
    # A RawNumber anywhere forces the exact (pure Python) encoder for the whole value.
    assert strict_json.encode([value, RawNumber("1.5")]) == "[" + strict_json.encode(value) + ",1.5]"


@given(json_values(raw_numbers=False), st.sampled_from([None, 2, 4]), st.booleans())
def test_decode_ignores_formatting(value: JsonValue, indent: int | None, ascii_only: bool) -> None:
    reformatted = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    assert strict_json.encode(strict_json.decode(reformatted)) == strict_json.encode(value)


@given(st.integers(min_value=-(10**60), max_value=10**60))
def test_integers_survive_exactly(number: int) -> None:
    assert strict_json.decode(strict_json.encode({"n": number})) == {"n": number}


# --- hostile nesting ------------------------------------------------------------------------------

DEEP = 100_000


@pytest.mark.parametrize(
    "text",
    [
        "[" * DEEP + "]" * DEEP,
        '{"a":' * DEEP + "1" + "}" * DEEP,
        '{"a":' + "[" * DEEP + "1.5" + "]" * DEEP + "}",
    ],
    ids=["deep-arrays", "deep-objects", "deep-arrays-around-a-raw-number"],
)
def test_decode_refuses_nesting_deeper_than_it_can_decode_with_a_typed_error(text: str) -> None:
    problems = _problems(text, path="spec.config")
    assert [p.path for p in problems] == ["spec.config"]
    assert "nested too deeply" in problems[0].message


# --- decode_plain, decode_sequence, kind, walk ------------------------------------------------

_PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=16,
)


@given(_PLAIN, st.sampled_from([None, 2]))
def test_decode_plain_gives_what_json_loads_gives_for_valid_text(value: object, indent: int | None) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    assert strict_json.decode_plain(text) == json.loads(text)
    assert json.dumps(strict_json.decode_plain(text)) == json.dumps(json.loads(text))


@pytest.mark.parametrize(
    ("text", "path"),
    [('{"logLevel":"debug","logLevel":"error"}', "$.logLevel"), ('{"a":[{"b":1.5,"b":2}]}', "$.a[0].b")],
    ids=["repeated-top-level-key", "repeated-key-beside-a-float"],
)
def test_decode_plain_refuses_a_repeated_key_with_its_path(text: str, path: str) -> None:
    with pytest.raises(errors.InvalidSpec) as caught:
        strict_json.decode_plain(text)
    assert [e.path for e in caught.value.errors] == [path]


def test_decode_plain_refuses_nan() -> None:
    with pytest.raises(errors.InvalidSpec, match="NaN is not a JSON number"):
        strict_json.decode_plain('{"a":NaN}')


def test_decode_sequence_gives_each_value_its_own_index_path() -> None:
    assert strict_json.decode_sequence('{"type":"tuning"}, {"type":"bandwidth","x":1.5}', path="m") == [
        {"type": "tuning"},
        {"type": "bandwidth", "x": RawNumber("1.5")},
    ]
    with pytest.raises(errors.InvalidSpec) as caught:
        strict_json.decode_sequence('{"type":"a"},{"type":"b","type":"c"}', path="spec.metaPlugins")
    assert [e.path for e in caught.value.errors] == ["spec.metaPlugins[1].type"]


@pytest.mark.parametrize(
    "element",
    ['{"type": }', '{"type":"a"', "NaN", "{'a':1}"],
    ids=["missing-value", "unclosed", "nan", "quotes"],
)
def test_decode_sequence_positions_count_in_the_text_itself(element: str) -> None:
    alone = _problems(element, path="p")[0].message
    with pytest.raises(errors.InvalidSpec) as caught:
        strict_json.decode_sequence(element, path="p")
    assert [e.message for e in caught.value.errors] == [alone]


@pytest.mark.parametrize("text", ['{"a":1},', ',{"a":1}', '{"a":1},,{"b":2}', '{"a":1}],[{"b":2}'], ids=str)
def test_decode_sequence_refuses_stray_commas_and_brackets(text: str) -> None:
    with pytest.raises(errors.InvalidSpec, match="malformed JSON"):
        strict_json.decode_sequence(text, path="p")


def test_decode_sequence_of_blank_text_is_empty() -> None:
    assert (
        strict_json.decode_sequence("", path="p") == [] and strict_json.decode_sequence(" \n", path="p") == []
    )


@pytest.mark.parametrize(
    ("value", "name"),
    [({}, "an object"), ([], "a list"), ("x", "a string"), (5, "a number"), (RawNumber("1.5"), "a number"),
     (1.5, "a number"), (True, "a boolean"), (None, "null")],
    ids=["object", "list", "string", "int", "raw-number", "float", "boolean", "null"],
)  # fmt: skip
def test_kind_names_each_json_kind_for_messages(value: object, name: str) -> None:
    assert strict_json.kind(value) == name


def test_walk_lists_every_node_with_its_path_in_document_order() -> None:
    value = strict_json.decode('{"a":[1,{"b c":"x"}],"d":null}')
    assert [p for _, p in strict_json.walk(value, "spec.ipam")] == [
        "spec.ipam",
        "spec.ipam.a",
        "spec.ipam.a[0]",
        "spec.ipam.a[1]",
        'spec.ipam.a[1]["b c"]',
        "spec.ipam.d",
    ]


def test_decode_file_names_the_file_and_each_repeated_key() -> None:
    with pytest.raises(errors.InvalidSpec) as caught:
        strict_json.decode_file(
            b'{"type":"flannel","type":"bridge"}', what="primary config", source="/etc/x.conf"
        )
    assert caught.value.detail == (
        'primary config /etc/x.conf is not valid JSON: $.type: duplicate key "type" in one object '
        'with the values "flannel" and "bridge" (readers disagree on which value wins); keep exactly one'
    )


def test_decode_file_gives_plain_values_of_utf8_text_only() -> None:
    assert strict_json.decode_file('{"mtu":1450.5,"n":"é"}'.encode(), what="f", source="s") == {
        "mtu": 1450.5,
        "n": "é",
    }
    with pytest.raises(errors.InvalidSpec, match="f s is not UTF-8 text"):
        strict_json.decode_file('{"n":"é"}'.encode("utf-16"), what="f", source="s")
