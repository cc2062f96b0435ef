"""``--api-max-in-flight`` reaches the concurrent API steps of an auto-attach prepare and release."""

from __future__ import annotations

import pytest
from tests.fakes import managed_node as mn

from sriov_dra.kubeletapi import messages
from sriov_dra.servicekit import fanout


@pytest.fixture
def bounds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ``max_in_flight`` of every fan-out from now on, in call order."""
    seen: list[int] = []
    real = fanout.run_all

    def recording(calls, *, max_in_flight=fanout.DEFAULT_MAX_IN_FLIGHT):  # type: ignore[no-untyped-def]
        seen.append(max_in_flight)
        return real(calls, max_in_flight=max_in_flight)

    monkeypatch.setattr(fanout, "run_all", recording)
    return seen


def test_the_configured_in_flight_bound_reaches_every_fan_out_of_a_prepare(
    node: mn.ManagedNode, bounds: list[int]
) -> None:
    node.attach.max_in_flight = 3
    ref = node.add_consumer([("nic-0", mn.DEV_A0), ("nic-1", mn.DEV_B0)])
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert len(bounds) >= 2 and set(bounds) == {3}  # the source reads of the plan and the shadow ensures


def test_the_configured_in_flight_bound_reaches_every_fan_out_of_a_release(
    node: mn.ManagedNode, bounds: list[int]
) -> None:
    ref = node.add_consumer([("nic-0", mn.DEV_A0), ("nic-1", mn.DEV_B0)])
    assert isinstance(node.prepare(ref), messages.Prepared)
    node.attach.max_in_flight = 3
    bounds.clear()
    assert node.unprepare(ref) is None
    assert bounds == [3, 3, 3]  # the shadow reads, the deletions, the finalizer removals
    assert mn.clean_problems(node) == []
