"""``CNI_ARGS`` split as Multus splits them (the shim's reading of the runtime's items)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra_rules import cni_args


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("IgnoreUnknown=1", [("IgnoreUnknown", "1")]),
        ("A=1;K8S_POD_UID=", [("A", "1"), ("K8S_POD_UID", "")]),
        ("A=1;", None),
        ("A", None),
        ("=1", None),
        ("A=1=2", None),
    ],
    ids=["empty", "one", "empty-value", "trailing-semicolon", "no-equals", "empty-key", "two-equals"],
)
def test_items_are_split_as_multus_splits_them(text: str, expected: list[tuple[str, str]] | None) -> None:
    assert cni_args.items(text) == expected


keys = st.text(st.characters(blacklist_characters=";=", blacklist_categories=("Cs",)), min_size=1, max_size=8)
values = st.text(st.characters(blacklist_characters=";=", blacklist_categories=("Cs",)), max_size=8)


@given(st.lists(st.tuples(keys, values), min_size=1, max_size=6))
def test_property_joined_items_split_back_to_themselves(pairs: list[tuple[str, str]]) -> None:
    assert cni_args.items(";".join(f"{k}={v}" for k, v in pairs)) == pairs
