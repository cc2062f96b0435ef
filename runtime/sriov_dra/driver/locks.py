"""Per-key operation locks: one per claim UID and one per Pod UID (spec §6.3).

The plugin serializes work on one claim with a claim lock and work on one Pod's shared state
(its Pod-global CDI spec; in auto-attach mode its shadows and annotation) with a Pod lock. Rules:

- take the claim lock before the Pod lock, never the reverse, and take each at most once per
  operation (an ensure/release helper that already runs under them must not lock again);
- these two operation locks are the only locks held across Kubernetes API calls or hardware
  operations; the checkpoint store's own lock never is (``host.checkpoint``);
- calls for different claims and different Pods run in parallel.

Locks are created on first use and dropped when their last holder releases them, so the tables
do not grow with every claim ever seen. This module owns no other state.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
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
