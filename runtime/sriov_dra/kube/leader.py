"""Leader election on a ``coordination.k8s.io/v1`` Lease with the official client's elector.

The official ``kubernetes.leaderelection`` ships only a ConfigMap lock. :class:`LeaseLock` is the
lock protocol on a Lease, every update a PUT under the last read's resourceVersion, so two
candidates never both win; :class:`Election` makes the official loops stoppable (``stop.wait``,
monotonic deadlines: a leader that cannot renew within ``renew_deadline_s`` gives up even when the
wall clock jumps); :func:`release` hands the Lease over on clean shutdown. Callers decide what
leading means. Source: kubernetes-client/python ``leaderelection``; client-go ``LeaseLock``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes.leaderelection import electionconfig, leaderelection, leaderelectionrecord

from sriov_dra.kube import errors, objects

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseSettings:
    """Lease identity and timing (client-go defaults).

    Units: seconds. ``lease_duration_s`` > ``renew_deadline_s`` > 1.2 × ``retry_period_s`` ≥ 1.2;
    checked here so the official ``Config`` never calls ``sys.exit``.
    """

    name: str
    namespace: str
    identity: str
    lease_duration_s: int = 15
    """How long followers wait after the last observed renewal before taking over."""
    renew_deadline_s: int = 10
    """How long the leader keeps retrying a failed renewal before it stops leading."""
    retry_period_s: int = 2
    """Pause between attempts; also the renewal interval."""

    def __post_init__(self) -> None:
        if not (self.name and self.namespace and self.identity):
            raise ValueError("lease name, namespace and identity are required")
        if self.retry_period_s < 1:
            raise ValueError(f"retry period {self.retry_period_s}s must be at least 1s")
        if self.renew_deadline_s <= 1.2 * self.retry_period_s:
            raise ValueError(
                f"renew deadline {self.renew_deadline_s}s must exceed 1.2 × retry period {self.retry_period_s}s"
            )
        if self.lease_duration_s <= self.renew_deadline_s:
            raise ValueError(
                f"lease duration {self.lease_duration_s}s must exceed renew deadline {self.renew_deadline_s}s"
            )


class Clock(Protocol):
    """Time source of the election loops: a monotonic reading and an interruptible wait."""

    def monotonic(self) -> float: ...

    def wait(self, seconds: float) -> bool:
        """Pause up to ``seconds``; True when the election must stop."""
        ...


class StopClock:
    """The production clock: ``time.monotonic`` and ``stop.wait``."""

    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop

    def monotonic(self) -> float:
        return time.monotonic()

    def wait(self, seconds: float) -> bool:
        return self._stop.wait(seconds)


class _Failure:
    """What ``LeaderElection`` reads from a failed ``get``: a JSON ``body`` with ``code``, a ``reason``."""

    def __init__(self, status: int, reason: str) -> None:
        self.body = json.dumps({"code": status})
        self.reason = reason


def _micro_time(value: object) -> str:
    """Convert a record time (Python ``str(datetime)`` or RFC 3339) to a Lease MicroTime (UTC)."""
    text = str(value)
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        parsed = dt.datetime.now(dt.UTC)
    parsed = parsed.astimezone(dt.UTC)  # a naive value is local time, as the elector writes it
    return parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseLock:
    """The official elector's lock protocol on one Lease.

    It also remembers when the API server last answered one of its requests (any HTTP status,
    a refusal included; not a transport failure): :meth:`answer_age_s`, which a standby's
    readiness uses, since a standby sends nothing else.
    """

    def __init__(
        self,
        client: objects.Objects,
        name: str,
        namespace: str,
        identity: str,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self._last: objects.JsonObject | None = None
        self._monotonic = monotonic
        self._answered: float | None = None

    def _heard(self, exc: errors.ApiError | None = None) -> None:
        if exc is None or exc.status > 0:
            self._answered = self._monotonic()

    def answer_age_s(self) -> float | None:
        """Seconds since the API server last answered a Lease request (``None``: never yet)."""
        return None if self._answered is None else self._monotonic() - self._answered

    def get(self, name: str, namespace: str) -> tuple[bool, Any]:
        """``(True, record)``, ``(True, None)`` for a Lease without holder, ``(False, failure)``."""
        try:
            lease = self.client.get(objects.LEASE, name, namespace)
        except errors.ApiError as exc:
            self._heard(exc)
            return False, _Failure(exc.status, str(exc))
        self._heard()
        self._last = lease
        spec = lease.get("spec") or {}
        if not spec.get("holderIdentity"):
            return True, None
        duration = spec.get("leaseDurationSeconds")
        return True, leaderelectionrecord.LeaderElectionRecord(
            spec.get("holderIdentity"),
            str(duration) if duration is not None else None,
            spec.get("acquireTime"),
            spec.get("renewTime"),
        )

    def _spec(self, record: Any, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": record.holder_identity,
            "leaseDurationSeconds": int(float(record.lease_duration)),
            "acquireTime": _micro_time(record.acquire_time),
            "renewTime": _micro_time(record.renew_time),
            "leaseTransitions": transitions,
        }

    def create(self, name: str, namespace: str, election_record: Any) -> bool:
        """Create the Lease held by us; False when someone else created it first."""
        body = {
            "apiVersion": objects.LEASE.api_version,
            "kind": objects.LEASE.kind,
            "metadata": {"name": name, "namespace": namespace},
            "spec": self._spec(election_record, 0),
        }
        try:
            self._last = self.client.create(objects.LEASE, body)
        except errors.ApiError as exc:
            self._heard(exc)
            log.info("lease create failed", extra={"op": "create", "outcome": str(exc)[:200]})
            return False
        self._heard()
        return True

    def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        """PUT the record over the Lease last read; False on a conflict or any error."""
        if self._last is None:
            return False
        old = self._last.get("spec") or {}
        transitions = int(old.get("leaseTransitions") or 0)
        if old.get("holderIdentity") != updated_record.holder_identity:
            transitions += 1
        body = dict(self._last)
        body["spec"] = self._spec(updated_record, transitions)
        try:
            self._last = self.client.replace(objects.LEASE, body)
        except errors.ApiError as exc:
            self._heard(exc)
            log.info("lease update failed", extra={"op": "update", "outcome": str(exc)[:200]})
            return False
        self._heard()
        return True


class Election(leaderelection.LeaderElection):  # type: ignore[misc]
    """The official elector with stoppable waits and monotonic deadlines.

    Waits use ``stop.wait``, so a stop takes effect within one wait; deadlines use a monotonic
    clock, so a leader that cannot renew within ``renew_deadline_s`` gives up
    (``onstopped_leading`` runs) even when the wall clock jumps. The official
    ``try_acquire_or_renew`` still measures expiry with ``time.time()`` between its own
    observations (never against another node's clock).
    """

    def __init__(self, config: Any, clock: Clock) -> None:
        super().__init__(config)
        self.clock = clock

    def acquire(self) -> bool:
        """Try until acquired (True) or told to stop (False)."""
        while True:
            if self.try_acquire_or_renew():
                return True
            if self.clock.wait(self.election_config.retry_period):
                return False

    def renew_loop(self) -> None:
        """Renew every retry period; return when a renewal misses the deadline or on stop."""
        retry = self.election_config.retry_period
        while True:
            deadline = self.clock.monotonic() + self.election_config.renew_deadline
            renewed = False
            while self.clock.monotonic() < deadline:
                renewed = self.try_acquire_or_renew()
                if renewed or self.clock.wait(retry):
                    break
            if not renewed:
                log.warning("leadership lost", extra={"op": "renew", "outcome": "deadline"})
                return
            if self.clock.wait(retry):
                return


def make_election(
    lock: Any,
    settings: LeaseSettings,
    clock: Clock,
    *,
    on_started: Callable[[], None],
    on_stopped: Callable[[], None],
) -> Election:
    """Build an :class:`Election` from validated settings (the official Config never exits then)."""
    config = electionconfig.Config(
        lock,
        settings.lease_duration_s,
        settings.renew_deadline_s,
        settings.retry_period_s,
        on_started,
        on_stopped,
    )
    return Election(config, clock)


def release(lock: LeaseLock) -> bool:
    """Give up a Lease we hold (holder cleared) so a standby takes over at once; False otherwise."""
    ok, record = lock.get(lock.name, lock.namespace)
    if not ok or record is None or record.holder_identity != lock.identity:
        return False
    assert lock._last is not None
    body = dict(lock._last)
    spec = dict(body.get("spec") or {})
    spec.update({"holderIdentity": None, "leaseDurationSeconds": 1})
    body["spec"] = spec
    try:
        lock.client.replace(objects.LEASE, body)
    except errors.ApiError:
        return False
    return True
