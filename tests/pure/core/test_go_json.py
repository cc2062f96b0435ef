"""Tests for sriov_dra.core.operator.go_json: Go's json.Indent reproduced byte for byte."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import operator_objects as oo

from sriov_dra.core.operator import go_json
from sriov_dra_rules import errors

R = errors.Reason
OP = oo.OP_NS


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)


@given(_JSON)
def test_go_indent_equals_four_space_json_and_is_idempotent(value: object) -> None:
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    indented = go_json.go_json_indent(compact)
    assert indented == json.dumps(value, indent=4, ensure_ascii=False)
    assert go_json.go_json_indent(indented) == indented


@pytest.mark.parametrize("text", ["", "{", '{"a":1} x', "[1,]", "NaN", '{"a":Infinity}'], ids=str)
def test_go_indent_refuses_non_json(text: str) -> None:
    with pytest.raises(errors.InvalidSpec):
        go_json.go_json_indent(text)
