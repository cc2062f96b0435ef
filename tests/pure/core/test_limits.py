"""Kubernetes metadata limits: annotation total size, qualified names, label values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import limits
from sriov_dra_rules import errors, names, strict_json

LIMIT = limits.TOTAL_ANNOTATION_SIZE_LIMIT_B


def test_limit_is_256_kib() -> None:
    assert LIMIT == 262144


@pytest.mark.parametrize(
    ("annotations", "size"),
    [
        ({}, 0),
        ({"a": "b"}, 2),
        ({"k8s.v1.cni.cncf.io/networks": "[]"}, 27 + 2),
        ({"a": "é"}, 1 + 2),
        ({"a": "x", "bb": "yy"}, 1 + 1 + 2 + 2),
    ],
    ids=["empty-map-is-zero", "key-plus-value", "slash-key", "utf8-bytes-not-characters", "sum-over-all"],
)
def test_annotations_size_sums_key_and_value_bytes(annotations: dict[str, str], size: int) -> None:
    assert limits.annotations_size(annotations) == size


def test_size_exactly_at_limit_is_accepted() -> None:
    limits.check_annotations_size({"a": "x" * (LIMIT - 1)}, obj="Pod ns/p")


def test_size_one_byte_over_limit_is_annotation_too_large() -> None:
    with pytest.raises(errors.InvalidSpec) as info:
        limits.check_annotations_size({"a": "x" * LIMIT, "other": "v"}, obj="Pod ns/p")
    assert info.value.reason is errors.Reason.ANNOTATION_TOO_LARGE
    msg = str(info.value)
    assert "Pod ns/p" in msg
    assert str(LIMIT + 1 + 5 + 1) in msg
    assert "'a'" in msg


def test_multibyte_values_count_bytes_against_limit() -> None:
    # 87382 three-byte characters are 262146 bytes although only 87382 characters.
    with pytest.raises(errors.InvalidSpec):
        limits.check_annotations_size({"k": "€" * 87382}, obj="Pod ns/p")


@given(st.dictionaries(st.text(max_size=20), st.text(max_size=50), max_size=10))
def test_size_is_sum_of_encoded_lengths(annotations: dict[str, str]) -> None:
    expected = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    assert limits.annotations_size(annotations) == expected


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("k8s.v1.cni.cncf.io/networks", True),
        ("sriovnetwork.k8snetworkplumbingwg.io/managed-networks", True),
        ("simple", True),
        ("Upper_Case.ok", True),
        ("a/b/c", False),
        ("/name", False),
        ("prefix/", False),
        ("Prefix.io/name", False),
        ("prefix.io/" + "n" * 64, False),
        ("-bad", False),
    ],
    ids=[
        "multus-key",
        "registry-key",
        "no-prefix",
        "mixed-case-name",
        "two-slashes",
        "empty-prefix",
        "empty-name",
        "upper-case-prefix",
        "name-over-63",
        "leading-dash",
    ],
)
def test_qualified_name(key: str, ok: bool) -> None:
    assert (names.qualified_name_errors(key) == []) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("", True),
        ("sriov-dra-plugin", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("a b", False),
        ("_x", False),
    ],
    ids=["empty-allowed", "plain", "63-chars", "64-chars", "space", "leading-underscore"],
)
def test_label_value(value: str, ok: bool) -> None:
    assert (names.label_value_errors(value) == []) is ok


def test_qualified_name_prefix_is_checked_by_the_one_dns1123_validator() -> None:
    assert names.qualified_name_errors("Prefix.io/name") == [
        f"prefix part {names.dns1123_subdomain_problem('Prefix.io')}"
    ]
    assert "'Prefix.io'" in names.qualified_name_errors("Prefix.io/name")[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", True), ("net-a", True), ("é\U0001f600", True), ("\ud800", False), ("a\udfffb", False)],
    ids=["empty", "ascii", "non-ascii-and-pair", "lone-high-surrogate", "lone-low-surrogate"],
)
def test_has_utf8_form_is_false_only_for_a_lone_surrogate(text: str, expected: bool) -> None:
    assert strict_json.has_utf8_form(text) is expected
