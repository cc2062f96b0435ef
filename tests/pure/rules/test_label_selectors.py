"""Tests for sriov_dra_rules.label_selectors: label selector and upstream node-selector semantics."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra_rules import label_selectors

LABELS = {"tier": "gpu", "rail": "a"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ({}, True),
        ({"matchLabels": {"tier": "gpu"}}, True),
        ({"matchLabels": {"tier": "cpu"}}, False),
        ({"matchLabels": {"tier": "gpu", "rail": "b"}}, False),
        ({"matchExpressions": [{"key": "rail", "operator": "In", "values": ["a", "b"]}]}, True),
        ({"matchExpressions": [{"key": "rail", "operator": "NotIn", "values": ["a"]}]}, False),
        ({"matchExpressions": [{"key": "absent", "operator": "NotIn", "values": ["a"]}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, False),
        ({"matchExpressions": [{"key": "absent", "operator": "DoesNotExist", "values": []}]}, True),
    ],
    ids=[
        "empty-selects-everything",
        "match-labels",
        "match-labels-other-value",
        "match-labels-are-anded",
        "in",
        "not-in",
        "not-in-absent-key-matches",
        "exists",
        "does-not-exist",
        "does-not-exist-with-empty-values",
    ],
)
def test_label_selector_semantics(selector: dict[str, object], matches: bool) -> None:
    parsed, problems = label_selectors.parse_label_selector(selector, "sel")
    assert problems == []
    assert parsed is not None and parsed.matches(LABELS) is matches


@pytest.mark.parametrize(
    ("selector", "path"),
    [
        (
            {"matchExpressions": [{"key": "t", "operator": "Bogus", "values": ["x"]}]},
            "sel.matchExpressions[0].operator",
        ),
        (
            {"matchExpressions": [{"key": "t", "operator": "In", "values": []}]},
            "sel.matchExpressions[0].values",
        ),
        (
            {"matchExpressions": [{"key": "t", "operator": "Exists", "values": ["x"]}]},
            "sel.matchExpressions[0].values",
        ),
        (
            {"matchExpressions": [{"key": "t", "operator": "Gt", "values": ["1"]}]},
            "sel.matchExpressions[0].operator",
        ),
        ({"matchExpressions": [{"operator": "Exists"}]}, "sel.matchExpressions[0].key"),
        ({"matchLabels": {"t": "bad value!"}}, 'sel.matchLabels["t"].values'),
        ({"matchLabels": {"bad key!": "v"}}, 'sel.matchLabels["bad key!"].key'),
        ({"matchLabels": ["t"]}, "sel.matchLabels"),
        ({"matchFields": []}, "sel.matchFields"),
        ("tier=gpu", "sel"),
    ],
    ids=[
        "unknown-operator",
        "in-without-values",
        "exists-with-values",
        "gt-not-a-label-operator",
        "missing-key",
        "invalid-label-value",
        "invalid-label-key",
        "match-labels-not-a-map",
        "unknown-field",
        "string-selector",
    ],
)
def test_invalid_label_selectors_are_refused(selector: object, path: str) -> None:
    parsed, problems = label_selectors.parse_label_selector(selector, "sel")
    assert parsed is None
    assert path in [p.path for p in problems]


_keys = st.sampled_from(["tier", "rail", "absent"])
_values = st.lists(st.sampled_from(["gpu", "a", "b"]), min_size=1, max_size=2)


@given(
    _keys,
    st.sampled_from(["In", "NotIn"]),
    _values,
    st.dictionaries(_keys, st.sampled_from(["gpu", "a", "b"])),
)
def test_not_in_is_the_negation_of_in(key: str, op: str, values: list[str], labels: dict[str, str]) -> None:
    req_in, _ = label_selectors.parse_requirement({"key": key, "operator": "In", "values": values}, "r")
    req_not, _ = label_selectors.parse_requirement({"key": key, "operator": "NotIn", "values": values}, "r")
    assert req_in is not None and req_not is not None
    assert req_in.matches(labels) != req_not.matches(labels)


def _in(key: str, *values: str) -> dict[str, object]:
    return {"key": key, "operator": "In", "values": list(values)}


@pytest.mark.parametrize(
    ("selector", "applies", "unsupported"),
    [
        (None, True, 0),
        ({"nodeSelectorTerms": [{"matchExpressions": [_in("rail", "a")]}]}, True, 0),
        ({"nodeSelectorTerms": [{"matchExpressions": [_in("rail", "a"), _in("tier", "cpu")]}]}, False, 0),
        (
            {
                "nodeSelectorTerms": [
                    {"matchExpressions": [_in("rail", "b")]},
                    {"matchExpressions": [_in("tier", "gpu")]},
                ]
            },
            True,
            0,
        ),
        ({"nodeSelectorTerms": []}, True, 1),
        ({"nodeSelectorTerms": [{}]}, True, 1),
        ({"nodeSelectorTerms": [{"matchFields": [_in("metadata.name", "other")]}]}, True, 1),
        (
            {
                "nodeSelectorTerms": [
                    {"matchExpressions": [_in("rail", "a")], "matchFields": [_in("metadata.name", "x")]}
                ]
            },
            True,
            1,
        ),
        (
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["1"]}]}]},
            False,
            1,
        ),
    ],
    ids=[
        "no-selector-all-nodes",
        "matching-term",
        "expressions-are-anded",
        "terms-are-ored",
        "no-terms-all-nodes-upstream",
        "empty-term-all-nodes-upstream",
        "match-fields-only-is-empty-term-upstream",
        "match-fields-ignored-upstream",
        "gt-term-skipped-upstream",
    ],
)
def test_node_selector_follows_upstream_and_reports_disagreements(
    selector: object, applies: bool, unsupported: int
) -> None:
    result = label_selectors.evaluate_node_selector(selector, LABELS, "spec.nodeSelector")
    assert result.applies is applies
    assert len(result.unsupported) == unsupported
    assert result.malformed == ()


@pytest.mark.parametrize(
    "selector",
    [
        ["x"],
        {"nodeSelectorTerms": "x"},
        {"nodeSelectorTerms": ["x"]},
        {"nodeSelectorTerms": [{"matchExpressions": {}}]},
    ],
    ids=["not-an-object", "terms-not-a-list", "term-not-an-object", "expressions-not-a-list"],
)
def test_malformed_node_selector_never_applies(selector: object) -> None:
    result = label_selectors.evaluate_node_selector(selector, LABELS, "spec.nodeSelector")
    assert result.applies is False
    assert result.malformed


@pytest.mark.parametrize(
    "operator", [["In"], {"op": "In"}, 1, None], ids=["list", "object", "number", "missing"]
)
def test_non_string_operator_is_a_field_problem_not_a_type_error(operator: object) -> None:
    expr = {"key": "tier", "operator": operator, "values": ["gpu"]}
    selector, problems = label_selectors.parse_label_selector({"matchExpressions": [expr]}, "sel")
    assert selector is None
    assert [p.path for p in problems] == ["sel.matchExpressions[0].operator"]
    node = label_selectors.evaluate_node_selector(
        {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}, LABELS, "spec.nodeSelector"
    )
    assert not node.applies
    assert [p.path for p in node.unsupported] == [
        "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator"
    ]
