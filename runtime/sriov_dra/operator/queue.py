"""A coalescing work queue with per-key delays and exponential retry backoff.

Keys are small tuples: ``("network", namespace, name)`` for one SriovNetwork and ``("policies",)``
for the whole DRA plan (upstream's node-policy controller is also a single "sync all" key). A key
added while pending keeps its earliest due time; a key added while it is being processed runs once
more after it is done, so no event is lost and none is processed twice concurrently.

It must never sleep on the wall clock or block shutdown for longer than ``poll_s``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

Key = tuple[str, ...]
POLICIES: Key = ("policies",)


def network_key(namespace: str, name: str) -> Key:
    """The queue key of one SriovNetwork."""
    return ("network", namespace, name)


class WorkQueue:
    """Thread-safe delayed set of keys. Units: seconds on ``clock`` (monotonic by default)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 60.0,
    ) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._due: dict[Key, float] = {}
        self._processing: set[Key] = set()
        self._again: dict[Key, float] = {}
        self._failures: dict[Key, int] = {}
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s

    def add(self, key: Key, delay_s: float = 0.0) -> None:
        """Schedule ``key`` after ``delay_s``; an earlier schedule of the same key wins."""
        due = self._clock() + max(0.0, delay_s)
        with self._cond:
            target = self._again if key in self._processing else self._due
            if key not in target or due < target[key]:
                target[key] = due
            self._cond.notify_all()

    def get(self, stop: threading.Event, *, poll_s: float = 0.2) -> Key | None:
        """Block until a key is due (returned, now in processing) or ``stop`` is set (``None``)."""
        with self._cond:
            while not stop.is_set():
                now = self._clock()
                ready = [k for k, d in self._due.items() if d <= now]
                if ready:
                    key = min(ready, key=lambda k: (self._due[k], str(k)))
                    del self._due[key]
                    self._processing.add(key)
                    return key
                wait = min([d - now for d in self._due.values()] + [poll_s])
                self._cond.wait(max(0.001, wait))
        return None

    def done(self, key: Key, *, failed: bool = False) -> float | None:
        """Finish ``key``; on failure reschedule it with backoff and return the delay used."""
        with self._cond:
            self._processing.discard(key)
            delay: float | None = None
            if failed:
                count = self._failures.get(key, 0)
                self._failures[key] = count + 1
                delay = min(self._backoff_initial_s * (2**count), self._backoff_max_s)
                due = self._clock() + delay
                self._due[key] = min(due, self._due.get(key, due))
            else:
                self._failures.pop(key, None)
            again = self._again.pop(key, None)
            if again is not None:
                self._due[key] = min(again, self._due.get(key, again))
            self._cond.notify_all()
            return delay

    def pending(self) -> list[Key]:
        """Keys waiting (not in processing), sorted."""
        with self._cond:
            return sorted(k for k in self._due if isinstance(k, tuple))

    def __len__(self) -> int:
        with self._cond:
            return len(self._due)
