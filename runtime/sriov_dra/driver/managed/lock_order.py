"""Claim-then-Pod operation locks with the order checked (docs/design.md#prepare).

Wraps the handler's two ``driver.locks.KeyedLocks`` tables (the same instances, so the handler,
the repair worker and the admin paths serialize on one lock per claim UID and one per Pod UID).
:meth:`OperationLocks.hold` takes the claim lock, then the Pod lock, and refuses with a
ContractViolation a reverse or recursive acquisition by a thread. The device snapshot needs no
lock: the policy controller swaps an immutable one. No state but each thread's held locks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sriov_dra.driver import locks
from sriov_dra_rules import errors

Observer = Callable[[str, str], None]
"""Called as ``observer(kind, key)`` right after a lock is acquired (tests record the order)."""


class OperationLocks:
    """The claim and Pod lock tables, acquired only in claim → Pod order, once per thread."""

    def __init__(
        self,
        claim_locks: locks.KeyedLocks,
        pod_locks: locks.KeyedLocks,
        *,
        observer: Observer | None = None,
    ) -> None:
        self.claim_locks = claim_locks
        self.pod_locks = pod_locks
        self._held = threading.local()
        self._observer = observer

    def _holding(self) -> list[tuple[str, str]]:
        held = getattr(self._held, "stack", None)
        if held is None:
            held = []
            self._held.stack = held
        return held

    def _check(self, kind: str, key: str) -> None:
        held = self._holding()
        kinds = [k for k, _ in held]
        if kind == "claim" and kinds:
            raise errors.ContractViolation(
                f"lock order violated: claim {key} requested while holding {held}; take the claim lock first "
                "and only once per operation"
            )
        if kind == "pod" and "pod" in kinds:
            raise errors.ContractViolation(
                f"lock order violated: Pod {key} requested while holding {held}; one Pod lock per operation"
            )

    @contextmanager
    def _one(self, table: locks.KeyedLocks, kind: str, key: str) -> Iterator[None]:
        self._check(kind, key)
        with table.hold(key):
            self._holding().append((kind, key))
            if self._observer is not None:
                self._observer(kind, key)
            try:
                yield
            finally:
                self._holding().pop()

    @contextmanager
    def hold(self, claim_uid: str, pod_uid: str) -> Iterator[None]:
        """Hold the claim lock, then the Pod lock, for the ``with`` block.

        Raises: ContractViolation when this thread already holds either kind of lock.
        """
        with self._one(self.claim_locks, "claim", claim_uid), self._one(self.pod_locks, "pod", pod_uid):
            yield

    @contextmanager
    def claim(self, claim_uid: str) -> Iterator[None]:
        """Hold only the claim lock (the Pod lock may be taken inside with :meth:`pod`)."""
        with self._one(self.claim_locks, "claim", claim_uid):
            yield

    @contextmanager
    def pod(self, pod_uid: str) -> Iterator[None]:
        """Hold the Pod lock; inside a :meth:`claim` block when a claim is involved."""
        with self._one(self.pod_locks, "pod", pod_uid):
            yield
