"""Tests for sriov_dra.core.operator.conditions: current-generation reads, write decisions, transition times."""

from __future__ import annotations

from typing import Any

import pytest

from sriov_dra.core.operator import conditions

T = conditions.Status.TRUE
F = conditions.Status.FALSE
STORED = {
    "type": "Ready",
    "status": "True",
    "reason": "NetworkReady",
    "message": "ok",
    "observedGeneration": 3,
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


def obj(generation: int, *conds: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"generation": generation}, "status": {"conditions": list(conds)}}


@pytest.mark.parametrize(
    ("o", "ok", "needle"),
    [
        (obj(3, STORED), True, ""),
        (obj(4, STORED), False, "observed at generation 3, current generation 4"),
        (
            obj(3, {**STORED, "status": "False", "reason": "NamespaceNotFound"}),
            False,
            "Ready is False (NamespaceNotFound",
        ),
        (obj(3), False, "no Ready condition"),
        ({"metadata": {"generation": 1}}, False, "no Ready condition"),
        (obj(3, {**STORED, "type": "Other"}), False, "no Ready condition"),
    ],
    ids=["current-true", "stale-generation", "false", "empty-list", "no-status", "other-type-only"],
)
def test_current_true_requires_true_at_the_current_generation(
    o: dict[str, Any], ok: bool, needle: str
) -> None:
    got, why = conditions.current_true(o, "Ready")
    assert got is ok
    assert needle in why


@pytest.mark.parametrize(
    ("desired", "write"),
    [
        (conditions.Condition("Ready", T, "NetworkReady", "ok", 3), False),
        (conditions.Condition("Ready", F, "NetworkReady", "ok", 3), True),
        (conditions.Condition("Ready", T, "Other", "ok", 3), True),
        (conditions.Condition("Ready", T, "NetworkReady", "changed", 3), True),
        (conditions.Condition("Ready", T, "NetworkReady", "ok", 4), True),
    ],
    ids=["unchanged-no-write", "status-change", "reason-change", "message-change", "generation-change"],
)
def test_only_a_changed_field_forces_a_write(desired: conditions.Condition, write: bool) -> None:
    assert conditions.needs_write(STORED, desired) is write


def test_missing_condition_is_written() -> None:
    assert conditions.needs_write(None, conditions.Condition("Ready", T, "R", "m", 1))


def test_transition_time_kept_when_status_unchanged_and_renewed_when_changed() -> None:
    same = conditions.to_api(
        conditions.Condition("Ready", T, "R2", "m2", 4), STORED, now="2026-05-05T05:05:05Z"
    )
    assert same["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert same["observedGeneration"] == 4 and same["reason"] == "R2"
    flipped = conditions.to_api(
        conditions.Condition("Ready", F, "R", "m", 4), STORED, now="2026-05-05T05:05:05Z"
    )
    assert flipped["lastTransitionTime"] == "2026-05-05T05:05:05Z"


def test_long_messages_are_truncated_consistently() -> None:
    long = conditions.Condition("Ready", T, "R", "x" * 40000, 1)
    api = conditions.to_api(long, None, now="2026-01-01T00:00:00Z")
    assert len(str(api["message"])) == conditions.MESSAGE_MAX
    assert not conditions.needs_write(api, long)


def test_without_drops_only_the_named_type() -> None:
    items = [{"type": "A"}, {"type": "B"}]
    assert conditions.without(items, "A") == [{"type": "B"}]
