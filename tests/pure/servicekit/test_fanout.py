"""``servicekit.fanout``: bounded, wait-for-all fan-out with outcomes in call order."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from sriov_dra.servicekit import fanout


class Died(BaseException):
    """Stands for the process dying inside a call (not an Exception)."""


class Tracker:
    """Counts calls in flight at once; each call sleeps briefly so that overlaps are observable."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.finished: list[int] = []

    def call(self, i: int, *, fail: BaseException | None = None) -> Callable[[], int]:
        def run() -> int:
            with self.lock:
                self.now += 1
                self.peak = max(self.peak, self.now)
            time.sleep(0.05)
            with self.lock:
                self.now -= 1
                self.finished.append(i)
            if fail is not None:
                raise fail
            return i * 10

        return run


@pytest.mark.parametrize(
    ("calls", "limit", "peak"),
    [(5, 2, 2), (3, 8, 3), (4, 1, 1), (1, 8, 1)],
    ids=[
        "bounded-by-the-limit",
        "all-at-once-under-the-limit",
        "limit-one-runs-inline",
        "one-call-runs-inline",
    ],
)
def test_outcomes_come_back_in_call_order_within_the_in_flight_bound(
    calls: int, limit: int, peak: int
) -> None:
    tracker = Tracker()
    out = fanout.run_all([tracker.call(i) for i in range(calls)], max_in_flight=limit)
    assert [o.value for o in out] == [i * 10 for i in range(calls)]
    assert all(o.error is None for o in out)
    assert tracker.peak == peak


@pytest.mark.parametrize("limit", [1, 4], ids=["inline", "threads"])
def test_a_failure_does_not_stop_the_other_calls_and_each_error_is_kept(limit: int) -> None:
    tracker = Tracker()
    first, third = ValueError("first"), KeyError("third")
    out = fanout.run_all(
        [tracker.call(0, fail=first), tracker.call(1), tracker.call(2, fail=third), tracker.call(3)],
        max_in_flight=limit,
    )
    assert [o.error for o in out] == [first, None, third, None]
    assert [o.value for o in out] == [None, 10, None, 30]
    assert sorted(tracker.finished) == [0, 1, 2, 3]


def test_a_process_death_on_a_thread_is_raised_only_after_every_sibling_finished() -> None:
    tracker = Tracker()
    with pytest.raises(Died):
        fanout.run_all([tracker.call(0, fail=Died()), tracker.call(1), tracker.call(2)], max_in_flight=3)
    assert sorted(tracker.finished) == [0, 1, 2]  # no sibling is still running when the step ends


def test_a_process_death_inline_ends_the_step_at_once() -> None:
    tracker = Tracker()
    with pytest.raises(Died):
        fanout.run_all([tracker.call(0, fail=Died()), tracker.call(1)], max_in_flight=1)
    assert tracker.finished == [0]


def test_no_calls_give_no_outcomes() -> None:
    assert fanout.run_all([], max_in_flight=8) == []


def test_start_runs_even_a_single_call_on_a_worker_beside_the_caller() -> None:
    caller_busy, call_ran = threading.Event(), threading.Event()

    def side() -> str:
        assert caller_busy.wait(timeout=10)  # the caller is still in its own work: true overlap
        call_ran.set()
        return "status"

    started = fanout.start([side], max_in_flight=2)
    caller_busy.set()
    assert call_ran.wait(timeout=10)
    assert [o.value for o in started.wait()] == ["status"]


def test_start_with_one_in_flight_runs_nothing_until_wait() -> None:
    ran: list[str] = []
    started = fanout.start([lambda: ran.append("side")], max_in_flight=1)
    ran.append("caller")
    started.wait()
    assert ran == ["caller", "side"]


def test_start_keeps_each_error_and_reraises_a_process_death_after_all_finished() -> None:
    tracker = Tracker()
    started = fanout.start(
        [tracker.call(0, fail=ValueError("x")), tracker.call(1, fail=Died()), tracker.call(2)],
        max_in_flight=4,
    )
    with pytest.raises(Died):
        started.wait()
    assert sorted(tracker.finished) == [0, 1, 2]


@pytest.mark.parametrize("limit", [1, 4], ids=["inline", "threads"])
def test_values_are_in_call_order_and_the_first_error_in_call_order_is_raised_after_all_finished(
    limit: int,
) -> None:
    tracker = Tracker()
    assert fanout.values([tracker.call(i) for i in range(3)], max_in_flight=limit) == [0, 10, 20]
    tracker = Tracker()
    second, fourth = ValueError("second"), KeyError("fourth")
    calls = [tracker.call(0), tracker.call(1, fail=second), tracker.call(2), tracker.call(3, fail=fourth)]
    with pytest.raises(ValueError) as raised:
        fanout.values(calls, max_in_flight=limit)
    assert raised.value is second
    assert sorted(tracker.finished) == [0, 1, 2, 3]  # every call ran before the error was raised
