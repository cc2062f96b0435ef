"""Per-key operation locks: one per claim UID and one per Pod UID (docs/design.md#prepare).

A claim lock serializes work on one claim, a Pod lock work on one Pod's shared state (its
Pod-global CDI spec; in auto-attach mode its shadows and annotation). The claim lock comes first,
each at most once per operation; these two are the only locks held across API calls or hardware
operations (never the checkpoint store's); different claims and Pods run in parallel. Locks are
created on first use and dropped with their last holder. Also the prepare tickets an unprepare
marks (:class:`PrepareTickets`, docs/design.md#prepare).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class KeyedLocks:
    """A table of mutexes keyed by string (claim UIDs or Pod UIDs); not re-entrant.

    Shapes: ``name`` labels the table in diagnostics (``"claim"``, ``"pod"``).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        """Hold the lock of ``key`` for the ``with`` block (blocks while another holder has it)."""
        with self._guard:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)

    def active(self) -> int:
        """How many keys currently have a holder or a waiter (for tests and metrics)."""
        with self._guard:
            return len(self._locks)


class PrepareTickets:
    """Which running prepares an unprepare of the same claim UID overtook (docs/design.md#prepare).

    A prepare reads the claim (and in auto-attach the Pod) before it takes the claim lock. When the
    kubelet's NodeUnprepareResources for that claim UID runs meanwhile, it finds no record and
    answers success, and the kubelet never calls it again: a prepare that then took the lock and
    created a record would bind the VF for good. So a prepare holds a ticket from before its first
    read; every unprepare marks the open tickets of its claim UID under the claim lock; the prepare
    checks its ticket once it holds the claim lock and stops if it was marked. Only prepares of
    this process can be overtaken (a restart ends them), so the tickets live in memory; a ticket
    exists only while its prepare runs.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._open: dict[str, dict[int, bool]] = {}
        self._next = 0

    @contextmanager
    def ticket(self, claim_uid: str) -> Iterator[Callable[[], bool]]:
        """Hold a ticket for one prepare of ``claim_uid``; yields "was it overtaken?"."""
        with self._guard:
            self._next += 1
            number = self._next
            self._open.setdefault(claim_uid, {})[number] = False
        try:
            yield lambda: self._open[claim_uid][number]
        finally:
            with self._guard:
                tickets = self._open[claim_uid]
                del tickets[number]
                if not tickets:
                    del self._open[claim_uid]

    def overtake(self, claim_uid: str) -> int:
        """Mark every open ticket of ``claim_uid`` (an unprepare ran); returns how many."""
        with self._guard:
            tickets = self._open.get(claim_uid, {})
            for number in tickets:
                tickets[number] = True
            return len(tickets)
