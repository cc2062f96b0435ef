"""JSON Patch builder: RFC 6901 escaping, UID/resourceVersion tests, annotation operations, applier."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import json_patch_apply

from sriov_dra.core.plugin import json_patch
from sriov_dra_rules import errors


@pytest.mark.parametrize(
    ("token", "escaped"),
    [
        ("plain", "plain"),
        ("k8s.v1.cni.cncf.io/networks", "k8s.v1.cni.cncf.io~1networks"),
        ("a~b", "a~0b"),
        ("~1", "~01"),
        ("/~", "~1~0"),
        ("", ""),
    ],
    ids=[
        "no-special",
        "slash-becomes-tilde-1",
        "tilde-becomes-tilde-0",
        "literal-tilde-1",
        "both-in-order",
        "empty",
    ],
)
def test_escape_token(token: str, escaped: str) -> None:
    assert json_patch.escape_token(token) == escaped
    assert json_patch_apply.unescape_token(escaped) == token


@given(st.lists(st.text(), max_size=5))
def test_pointer_round_trips_any_tokens(tokens: list[str]) -> None:
    assert json_patch_apply.parse_pointer(json_patch.pointer(*tokens)) == tuple(tokens)


@pytest.mark.parametrize("bad", ["~", "a~2", "~x"], ids=["lone-tilde", "tilde-2", "tilde-letter"])
def test_bad_tilde_escape_is_contract_violation(bad: str) -> None:
    with pytest.raises(errors.ContractViolation):
        json_patch_apply.unescape_token(bad)


def test_pointer_without_leading_slash_is_rejected() -> None:
    with pytest.raises(errors.ContractViolation):
        json_patch_apply.parse_pointer("metadata/uid")


def test_preconditions_test_uid_then_resource_version() -> None:
    assert json_patch.metadata_preconditions("u-1", "42") == [
        {"op": "test", "path": "/metadata/uid", "value": "u-1"},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
    ]


@pytest.mark.parametrize(("uid", "rv"), [("", "1"), ("u", "")], ids=["empty-uid", "empty-resource-version"])
def test_preconditions_refuse_empty_values(uid: str, rv: str) -> None:
    with pytest.raises(errors.ContractViolation):
        json_patch.metadata_preconditions(uid, rv)


def test_absent_annotations_map_is_created_whole() -> None:
    after = {"k8s.v1.cni.cncf.io/networks": "[]", "x": "y"}
    assert json_patch.annotation_ops(None, after) == [
        {"op": "add", "path": "/metadata/annotations", "value": after}
    ]


def test_add_replace_remove_with_escaped_keys() -> None:
    before = {"a/b": "1", "c~d": "2", "same": "s"}
    after = {"a/b": "10", "new/key": "n", "same": "s"}
    assert json_patch.annotation_ops(before, after) == [
        {"op": "replace", "path": "/metadata/annotations/a~1b", "value": "10"},
        {"op": "remove", "path": "/metadata/annotations/c~0d"},
        {"op": "add", "path": "/metadata/annotations/new~1key", "value": "n"},
    ]


@pytest.mark.parametrize(
    ("before", "after"),
    [(None, {}), ({}, {}), ({"a": "b"}, {"a": "b"})],
    ids=["absent-stays-absent", "empty-stays-empty", "equal-maps"],
)
def test_no_change_gives_empty_patch(before: dict[str, str] | None, after: dict[str, str]) -> None:
    assert json_patch.annotations_patch(uid="u", resource_version="1", before=before, after=after) == []


def test_annotations_patch_starts_with_preconditions() -> None:
    patch = json_patch.annotations_patch(uid="u", resource_version="7", before={}, after={"a": "b"})
    assert [op["op"] for op in patch] == ["test", "test", "add"]


def _pod(annotations: dict[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {}}


annotation_maps = st.dictionaries(st.text(min_size=1, max_size=12), st.text(max_size=12), max_size=6)


@given(st.one_of(st.none(), annotation_maps), annotation_maps)
def test_applying_patch_yields_exactly_the_target_annotations(
    before: dict[str, str] | None, after: dict[str, str]
) -> None:
    pod = _pod(before)
    original = copy.deepcopy(pod)
    patch = json_patch.annotations_patch(uid="u", resource_version="7", before=before, after=after)
    result = json_patch_apply.apply_patch(pod, patch)
    assert result["metadata"].get("annotations", {}) == after
    assert pod == original  # the input is never mutated


def test_stale_resource_version_fails_the_test_op() -> None:
    patch = json_patch.annotations_patch(uid="u", resource_version="6", before={}, after={"a": "b"})
    with pytest.raises(errors.Conflict):
        json_patch_apply.apply_patch(_pod({}), patch)


def test_replaced_pod_uid_fails_the_test_op() -> None:
    patch = json_patch.annotations_patch(uid="other", resource_version="7", before={}, after={"a": "b"})
    with pytest.raises(errors.Conflict):
        json_patch_apply.apply_patch(_pod({}), patch)


def test_add_below_missing_parent_is_rejected() -> None:
    with pytest.raises(errors.ContractViolation):
        json_patch_apply.apply_patch(_pod(None), [json_patch.add_op("/metadata/annotations/a", "b")])


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        ([json_patch.add_op("/l/-", 3)], {"l": [1, 2, 3]}),
        ([json_patch.add_op("/l/0", 0)], {"l": [0, 1, 2]}),
        ([json_patch.remove_op("/l/1")], {"l": [1]}),
        ([json_patch.replace_op("/l/0", 9)], {"l": [9, 2]}),
        ([json_patch.test_op("/l", [1, 2])], {"l": [1, 2]}),
    ],
    ids=["append-dash", "insert-front", "remove-index", "replace-index", "test-array"],
)
def test_array_operations(ops: list[json_patch.PatchOp], expected: Any) -> None:
    assert json_patch_apply.apply_patch({"l": [1, 2]}, ops) == expected


@pytest.mark.parametrize(
    "ops",
    [
        [json_patch.remove_op("/l/2")],
        [json_patch.remove_op("/l/01")],
        [json_patch.replace_op("/missing", 1)],
        [json_patch.remove_op("")],
    ],
    ids=["index-out-of-range", "leading-zero-index", "replace-missing-member", "remove-whole-document"],
)
def test_malformed_operations_are_contract_violations(ops: list[json_patch.PatchOp]) -> None:
    with pytest.raises(errors.ContractViolation):
        json_patch_apply.apply_patch({"l": [1, 2]}, ops)


def test_test_op_distinguishes_true_from_one() -> None:
    with pytest.raises(errors.Conflict):
        json_patch_apply.apply_patch({"v": 1}, [json_patch.test_op("/v", True)])
