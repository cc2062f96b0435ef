"""Tests for sriov_dra.operator.queue: coalescing, delays, re-run after processing, backoff."""

from __future__ import annotations

import threading

from sriov_dra.operator import queue


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_duplicate_adds_coalesce_and_the_earliest_due_time_wins() -> None:
    clock = Clock()
    q = queue.WorkQueue(clock=clock)
    q.add(queue.POLICIES, delay_s=5)
    q.add(queue.POLICIES)
    q.add(queue.POLICIES, delay_s=9)
    assert q.pending() == [queue.POLICIES] and len(q) == 1
    stop = threading.Event()
    assert q.get(stop) == queue.POLICIES
    assert len(q) == 0


def test_delayed_key_is_not_returned_before_it_is_due() -> None:
    clock = Clock()
    q = queue.WorkQueue(clock=clock)
    q.add(queue.network_key("ns", "a"), delay_s=10)
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    assert q.get(stop, poll_s=0.01) is None
    clock.now += 10
    assert q.get(threading.Event()) == ("network", "ns", "a")


def test_key_added_while_processing_runs_again_after_done() -> None:
    q = queue.WorkQueue(clock=Clock())
    stop = threading.Event()
    q.add(queue.POLICIES)
    key = q.get(stop)
    q.add(queue.POLICIES)  # an event arrives mid-reconcile
    assert len(q) == 0  # not handed to a second worker concurrently
    q.done(key)  # type: ignore[arg-type]
    assert q.get(stop) == queue.POLICIES


def test_failures_back_off_exponentially_up_to_the_cap_and_reset_on_success() -> None:
    clock = Clock()
    q = queue.WorkQueue(clock=clock, backoff_initial_s=0.5, backoff_max_s=3.0)
    stop = threading.Event()
    delays = []
    for _ in range(5):
        q.add(queue.POLICIES)
        key = q.get(stop)
        delays.append(q.done(key, failed=True))  # type: ignore[arg-type]
        clock.now += 100
    assert delays == [0.5, 1.0, 2.0, 3.0, 3.0]
    key = q.get(stop)
    assert q.done(key) is None  # type: ignore[arg-type]
    q.add(queue.POLICIES)
    assert q.done(q.get(stop), failed=True) == 0.5  # type: ignore[arg-type]


def test_keys_due_together_come_out_in_a_stable_order() -> None:
    q = queue.WorkQueue(clock=Clock())
    for key in (queue.POLICIES, queue.network_key("b", "x"), queue.network_key("a", "x")):
        q.add(key)
    stop = threading.Event()
    assert [q.get(stop) for _ in range(3)] == [("network", "a", "x"), ("network", "b", "x"), ("policies",)]
