"""Bounded fan-out of independent calls inside ONE ordered step of a sequence.

:func:`run_all` (and :func:`start`, its non-blocking form) runs independent calls (the plugin's
source NAD GETs of one plan and shadow ensures of one claim, the guard's shadow reads of one
ADD) on at most ``max_in_flight`` process-wide threads, waits for **every** one and returns each
result or exception in call order, so no request outlives the step or the caller's locks. A
fan-out never spans an ordering boundary (docs/design.md#prepare, docs/guard.md's ADD order):
what precedes the step happened-before every call, what follows waits for all. Calls must never
take the operation locks; no exception is dropped, no return is early.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar, cast

T = TypeVar("T")

DEFAULT_MAX_IN_FLIGHT: Final = 8
"""API requests one prepare step issues at once (a GPU node's 8 rails in one round trip)."""


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """One call's result, or the exception it raised (``error`` set, ``value`` ``None``)."""

    value: T | None = None
    error: Exception | None = None


def _one(call: Callable[[], T]) -> Outcome[T]:
    try:
        return Outcome(value=call())
    except Exception as exc:  # kept for the caller, who decides in call order
        return Outcome(error=exc)


class _Batch(Generic[T]):
    """The calls of one :func:`run_all` and their outcomes; the caller waits until none is left."""

    def __init__(self, calls: Sequence[Callable[[], T]]) -> None:
        self.calls = calls
        self.outcomes: list[Outcome[T] | None] = [None] * len(calls)
        self.fatal: list[BaseException | None] = [None] * len(calls)
        self.left = len(calls)
        self.done = threading.Condition()

    def run(self, index: int) -> None:
        try:
            outcome: Outcome[T] | None = _one(self.calls[index])
            fatal = None
        except BaseException as exc:  # a simulated process death: re-raised by the caller
            outcome, fatal = None, exc
        with self.done:
            self.outcomes[index], self.fatal[index] = outcome, fatal
            self.left -= 1
            self.done.notify_all()

    def wait(self) -> list[Outcome[T]]:
        with self.done:
            self.done.wait_for(lambda: self.left == 0)
        fatal = next((f for f in self.fatal if f is not None), None)
        if fatal is not None:
            raise fatal
        return [o for o in self.outcomes if o is not None]


class _Workers:
    """``size`` daemon threads serving one queue of ``(batch, index)`` items, started on first use.

    Daemon threads: they hold no state between items and every item's caller waits for it, so an
    idle worker never delays process exit (a started ``ThreadPoolExecutor`` would, and starting
    threads per step cost about 0.3 ms each on a loaded node).
    """

    def __init__(self, size: int) -> None:
        self.items: queue.SimpleQueue[tuple[_Batch[Any], int]] = queue.SimpleQueue()
        for i in range(size):
            threading.Thread(target=self._serve, name=f"sriov-dra-fanout-{size}-{i}", daemon=True).start()

    def _serve(self) -> None:
        while True:
            batch, index = self.items.get()
            batch.run(index)  # never raises: every outcome is stored for the waiting caller


_WORKERS: dict[int, _Workers] = {}
_WORKERS_LOCK: Final = threading.Lock()


def _workers(size: int) -> _Workers:
    with _WORKERS_LOCK:
        workers = _WORKERS.get(size)
        if workers is None:
            workers = _WORKERS[size] = _Workers(size)
        return workers


class Started(Generic[T]):
    """Calls handed to the workers by :func:`start` (or kept to run at :meth:`wait`)."""

    def __init__(self, batch: _Batch[T] | None, deferred: Sequence[Callable[[], T]]) -> None:
        self._batch = batch
        self._deferred = deferred

    def wait(self) -> list[Outcome[T]]:
        """Wait for every call; return their outcomes in call order (see :func:`run_all`).

        Raises: the first non-``Exception`` ``BaseException`` of a call, after all calls finished.
        """
        if self._batch is None:
            return [_one(call) for call in self._deferred]
        return self._batch.wait()


def start(calls: Sequence[Callable[[], T]], *, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT) -> Started[T]:
    """Hand every call to the workers and return at once; :meth:`Started.wait` joins them.

    For work the caller does meanwhile on its own thread (the Pod patch beside the claim status
    write): unlike :func:`run_all`, a single call goes to a worker too, so it overlaps the
    caller's. With ``max_in_flight <= 1`` nothing runs until :meth:`Started.wait`, which then runs
    the calls one after the other on the waiting thread. The caller must call :meth:`Started.wait`
    on every path (a ``finally``), so no call outlives the step.
    """
    if max_in_flight <= 1 or not calls:
        return Started(None, calls)
    batch = _Batch(calls)
    workers = _workers(max_in_flight)
    for index in range(len(calls)):
        workers.items.put((batch, index))
    return Started(batch, ())


def run_all(
    calls: Sequence[Callable[[], T]], *, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
) -> list[Outcome[T]]:
    """Run every call, at most ``max_in_flight`` at once; return their outcomes in call order.

    A single call, or ``max_in_flight <= 1``, runs on the calling thread, one after the other.
    Otherwise the calls go to the process-wide workers of ``max_in_flight`` threads, so the bound
    holds across concurrent prepares too (requests of several prepares queue for one set).
    Every call runs even when an earlier one failed (the caller reports each failure). A
    ``BaseException`` that is not an ``Exception`` (interpreter exit, a test's simulated process
    death) ends a sequential run at once; on threads it is re-raised after every call finished
    (the others were already in flight), first in call order. A fanned-out call must never call
    :func:`run_all` itself (it could wait for a worker of its own set).
    Shapes: ``len(result) == len(calls)``; ``result[i]`` belongs to ``calls[i]``.
    Raises: the first non-``Exception`` ``BaseException`` of a call, after all calls finished.
    """
    if len(calls) <= 1 or max_in_flight <= 1:
        return [_one(call) for call in calls]
    return start(calls, max_in_flight=max_in_flight).wait()


def values(calls: Sequence[Callable[[], T]], *, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT) -> list[T]:
    """:func:`run_all`, then each call's value in call order, or the first call's error in call order.

    Every call has finished before anything is raised, so the error is the one a sequential loop
    would have raised first, and no call outlives the step.
    Raises: the first failing call's exception (calls order); as :func:`run_all` for a ``BaseException``.
    """
    outcomes = run_all(calls, max_in_flight=max_in_flight)
    for outcome in outcomes:
        if outcome.error is not None:
            raise outcome.error
    return [cast(T, outcome.value) for outcome in outcomes]
