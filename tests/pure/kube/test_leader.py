"""Tests for sriov_dra.kube.leader: the official elector on a Lease lock, with a fake clock.

The official ``try_acquire_or_renew`` reads ``time.time()`` of its own module; the tests replace
that module attribute with the same fake clock that drives :class:`Election`'s waits and
deadlines, so nothing here really sleeps. Candidates run synchronously in the test thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes.leaderelection import leaderelection as official
from kubernetes.leaderelection import leaderelectionrecord
from tests.fakes.objects_api import FakeObjects

from sriov_dra.kube import errors, leader, objects

SETTINGS = leader.LeaseSettings("op", "ns", "a", lease_duration_s=15, renew_deadline_s=10, retry_period_s=2)


@dataclass
class FakeClock:
    """Monotonic seconds from 0; ``wait`` advances time and reports stop once ``until`` is reached."""

    until: float
    now: float = 0.0
    events: list[tuple[float, str]] = field(default_factory=list)
    on_tick: Callable[[float], None] | None = None

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:  # the official module's time.time()
        return 1_800_000_000.0 + self.now

    def sleep(self, seconds: float) -> None:  # never used: Election overrides the sleeping loops
        raise AssertionError("the official sleep must not run")

    def wait(self, seconds: float) -> bool:
        self.now += seconds
        if self.on_tick is not None:
            self.on_tick(self.now)
        return self.now >= self.until


@dataclass
class Store:
    """The shared 'server' state of the fake lock: one record and a version for optimistic updates."""

    record: Any = None
    version: int = 0
    fail_updates: bool = False


class RecordingLock:
    """Hand-written lock that records every call (as upstream's ``leaderelection_test.py`` does)."""

    def __init__(
        self, store: Store, identity: str, clock: FakeClock, history: list[tuple[float, str, str]]
    ) -> None:
        self.name, self.namespace, self.identity = "op", "ns", identity
        self.store, self.clock, self.history = store, clock, history
        self.seen = -1

    def get(self, name: str, namespace: str) -> tuple[bool, Any]:
        self.history.append((self.clock.now, self.identity, "get"))
        self.seen = self.store.version
        if self.store.record is None:
            return False, leader._Failure(404, "not found")
        r = self.store.record
        if not r.holder_identity:
            return True, None  # a released Lease, as LeaseLock reports it
        return True, leaderelectionrecord.LeaderElectionRecord(
            r.holder_identity, r.lease_duration, r.acquire_time, r.renew_time
        )

    def create(self, name: str, namespace: str, election_record: Any) -> bool:
        if self.store.record is not None:
            self.history.append((self.clock.now, self.identity, "create-lost"))
            return False
        self.store.record, self.store.version = election_record, self.store.version + 1
        self.history.append((self.clock.now, self.identity, "create"))
        return True

    def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        if self.store.fail_updates or self.seen != self.store.version:
            self.history.append((self.clock.now, self.identity, "update-failed"))
            return False
        self.store.record, self.store.version = updated_record, self.store.version + 1
        self.history.append((self.clock.now, self.identity, f"update:{updated_record.holder_identity}"))
        return True


@pytest.fixture
def history() -> list[tuple[float, str, str]]:
    return []


def election(
    lock: Any, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> tuple[leader.Election, dict[str, threading.Event]]:
    monkeypatch.setattr(official, "time", clock)
    flags = {"started": threading.Event(), "stopped": threading.Event()}
    e = leader.make_election(
        lock,
        leader.LeaseSettings(
            "op", "ns", lock.identity, lease_duration_s=15, renew_deadline_s=10, retry_period_s=2
        ),
        clock,
        on_started=flags["started"].set,
        on_stopped=flags["stopped"].set,
    )
    return e, flags


def test_single_candidate_creates_the_lease_and_renews_every_retry_period(
    monkeypatch: pytest.MonkeyPatch, history: list[tuple[float, str, str]]
) -> None:
    clock = FakeClock(until=20)
    e, flags = election(RecordingLock(Store(), "a", clock, history), clock, monkeypatch)
    e.run()
    assert flags["started"].wait(2)
    writes = [(t, op) for t, who, op in history if who == "a" and op != "get"]
    assert writes[0] == (0.0, "create")
    assert [t for t, op in writes[1:]] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0]
    assert all(op == "update:a" for _, op in writes[1:])
    assert flags["stopped"].is_set()  # stop ends the renew loop; the caller tells stop from loss


def test_follower_takes_over_only_after_a_full_lease_duration_without_renewal(
    monkeypatch: pytest.MonkeyPatch, history: list[tuple[float, str, str]]
) -> None:
    store = Store(record=leaderelectionrecord.LeaderElectionRecord("a", "15", "t0", "t0"), version=1)
    clock = FakeClock(until=30)
    e, flags = election(RecordingLock(store, "b", clock, history), clock, monkeypatch)
    e.run()
    assert flags["started"].wait(2)
    first_write = next((t, op) for t, who, op in history if op.startswith("update"))
    assert first_write == (16.0, "update:b")  # observed at 0; 0 + 15 s must have passed


def test_follower_never_takes_over_while_the_leader_renews(
    monkeypatch: pytest.MonkeyPatch, history: list[tuple[float, str, str]]
) -> None:
    store = Store(record=leaderelectionrecord.LeaderElectionRecord("a", "15", "t0", "t0"), version=1)

    def leader_renews(now: float) -> None:
        store.record = leaderelectionrecord.LeaderElectionRecord("a", "15", "t0", f"renewed-{now}")
        store.version += 1

    clock = FakeClock(until=60, on_tick=leader_renews)
    e, flags = election(RecordingLock(store, "b", clock, history), clock, monkeypatch)
    e.run()
    assert not flags["started"].is_set() and not flags["stopped"].is_set()
    assert not [op for _, _, op in history if op.startswith("update") or op.startswith("create")]


def test_leader_that_cannot_renew_stops_leading_after_the_renew_deadline(
    monkeypatch: pytest.MonkeyPatch, history: list[tuple[float, str, str]]
) -> None:
    store = Store()
    stopped_at: list[float] = []

    def api_down_at_6(now: float) -> None:
        store.fail_updates = now >= 6

    clock = FakeClock(until=100, on_tick=api_down_at_6)
    e, flags = election(RecordingLock(store, "a", clock, history), clock, monkeypatch)
    original = e.election_config.onstopped_leading
    e.election_config.onstopped_leading = lambda: (stopped_at.append(clock.now), original())
    e.run()
    assert flags["started"].is_set()
    assert stopped_at == [16.0]  # last renewal at 4, failing from 6 until the 10 s deadline (6 + 10)
    assert clock.now < 100  # gave up on its own, not because of stop


def test_a_conflicting_update_is_not_leadership(
    monkeypatch: pytest.MonkeyPatch, history: list[tuple[float, str, str]]
) -> None:
    store = Store(record=leaderelectionrecord.LeaderElectionRecord("", "15", "t0", "t0"), version=1)
    clock = FakeClock(until=4)
    lock = RecordingLock(store, "b", clock, history)
    real_get = lock.get

    def racing_get(name: str, namespace: str) -> tuple[bool, Any]:
        out = real_get(name, namespace)
        store.version += 1  # someone else wrote between our read and our update
        return out

    lock.get = racing_get  # type: ignore[method-assign]
    e, flags = election(lock, clock, monkeypatch)
    e.run()
    assert not flags["started"].is_set()
    assert {op for _, _, op in history if op != "get"} == {"update-failed"}


def test_stop_while_following_returns_without_callbacks(
    monkeypatch: pytest.MonkeyPatch, history: list[tuple[float, str, str]]
) -> None:
    store = Store(record=leaderelectionrecord.LeaderElectionRecord("a", "15", "t0", "t0"), version=1)
    clock = FakeClock(until=1)
    e, flags = election(RecordingLock(store, "b", clock, history), clock, monkeypatch)
    e.run()
    assert not flags["started"].is_set() and not flags["stopped"].is_set()


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"retry_period_s": 0}, "at least 1s"),
        ({"renew_deadline_s": 2, "retry_period_s": 2}, "must exceed 1.2"),
        ({"lease_duration_s": 10, "renew_deadline_s": 10}, "must exceed renew deadline"),
        ({"identity": ""}, "required"),
    ],
    ids=["retry-too-short", "deadline-too-short", "lease-not-longer-than-deadline", "no-identity"],
)
def test_bad_timings_raise_instead_of_exiting(kwargs: dict[str, Any], needle: str) -> None:
    base = {"name": "op", "namespace": "ns", "identity": "a"}
    with pytest.raises(ValueError, match=needle):
        leader.LeaseSettings(**{**base, **kwargs})


def test_lease_lock_round_trips_records_and_counts_transitions() -> None:
    api = FakeObjects()
    a = leader.LeaseLock(api, "op", "ns", "a")  # type: ignore[arg-type]
    b = leader.LeaseLock(api, "op", "ns", "b")  # type: ignore[arg-type]
    ok, failure = a.get("op", "ns")
    assert not ok and '"code": 404' in failure.body
    rec = leaderelectionrecord.LeaderElectionRecord(
        "a", "15", "2026-01-02 03:04:05.000006", "2026-01-02 03:04:05.000006"
    )
    assert a.create("op", "ns", rec)
    assert not b.create("op", "ns", rec)
    lease = api.get(objects.LEASE, "op", "ns")
    assert lease["spec"]["holderIdentity"] == "a" and lease["spec"]["leaseDurationSeconds"] == 15
    assert lease["spec"]["renewTime"].endswith("Z") and lease["spec"]["leaseTransitions"] == 0
    ok, got = b.get("op", "ns")
    assert ok and got.holder_identity == "a" and got.lease_duration == "15"
    assert a.get("op", "ns")[0]
    taken = leaderelectionrecord.LeaderElectionRecord(
        "b", "15", lease["spec"]["acquireTime"], lease["spec"]["renewTime"]
    )
    assert b.update("op", "ns", taken)
    assert not a.update("op", "ns", rec)  # a's read is stale: optimistic concurrency refuses it
    assert api.get(objects.LEASE, "op", "ns")["spec"]["leaseTransitions"] == 1
    assert leader.release(b) and b.get("op", "ns") == (True, None)


def test_lease_lock_reports_read_failures_in_the_shape_the_elector_reads() -> None:
    api = FakeObjects(fail={("get", "leases", "op"): errors.Forbidden("forbidden", status=403)})
    ok, failure = leader.LeaseLock(api, "op", "ns", "a").get("op", "ns")  # type: ignore[arg-type]
    assert not ok and '"code": 403' in failure.body and "forbidden" in failure.reason


def test_the_lock_remembers_when_the_api_server_last_answered_a_refusal_included() -> None:
    now = [100.0]
    api = FakeObjects(fail={("get", "leases", "op"): errors.ApiError("connection refused", status=0)})
    lock = leader.LeaseLock(api, "op", "ns", "a", monotonic=lambda: now[0])  # type: ignore[arg-type]
    lock.get("op", "ns")
    assert lock.answer_age_s() is None, "a transport failure is no answer"
    api.fail = {("get", "leases", "op"): errors.Forbidden("forbidden", status=403)}
    lock.get("op", "ns")
    now[0] = 103.5
    assert lock.answer_age_s() == 3.5, "a refusal is an answer"
