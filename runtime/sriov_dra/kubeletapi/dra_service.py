"""The DRA node services the kubelet calls: DRAPlugin v1 and v1beta1, and the health stream.

Owns the per-claim result contract with the driver layer's :class:`ClaimHandler`: exactly one
response entry per requested claim UID, an empty request answered without calling the handler,
and one claim's failure reported in its ``error`` string without failing the others (a gRPC
error would make the kubelet discard every claim's result). The kubelet's deadline is 45 s per
call and it repeats calls, so handlers must be idempotent. v1beta1 converts its messages and
uses the same handler. No sockets, files or API calls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import NoReturn, Protocol, TypeVar

from sriov_dra.kubeletapi import dra_v1_pb2, dra_v1beta1_pb2, drahealth_v1alpha1_pb2, messages

LOG = logging.getLogger(__name__)

_Outcome = TypeVar("_Outcome")
"""One claim's converted handler result (``messages.PrepareOutcome`` or ``UnprepareOutcome``)."""


class RpcContext(Protocol):
    """The part of ``grpc.ServicerContext`` the servicers use (grpc ships no type information)."""

    def add_callback(self, callback: Callable[[], None]) -> bool:
        """Run ``callback`` when the RPC ends (client cancel, deadline or completion)."""
        ...

    def abort(self, code: object, details: str) -> NoReturn:
        """End the RPC with status ``code`` (a ``grpc.StatusCode``) and ``details``; raises."""
        ...


PrepareValue = messages.Prepared | messages.ClaimError | Exception
UnprepareValue = messages.ClaimError | Exception | None


class ClaimHandler(Protocol):
    """What the driver layer implements to prepare and unprepare claims.

    Each method gets the distinct claims of one kubelet call (never an empty list) and returns a
    mapping keyed by claim UID. A value may be an ``Exception`` instead of a ``ClaimError``; it is
    reported as that claim's error. A missing entry is reported as an error for that claim. If
    the method raises, the batch is re-run one claim at a time (the calls are idempotent), so an
    exception lands on the claim that caused it.
    """

    def prepare_resources(self, claims: Sequence[messages.ClaimRef]) -> Mapping[str, PrepareValue]:
        """Prepare ``claims``; ``Prepared`` (with devices) or an error per claim UID."""
        ...

    def unprepare_resources(self, claims: Sequence[messages.ClaimRef]) -> Mapping[str, UnprepareValue]:
        """Unprepare ``claims``; ``None`` (success) or an error per claim UID."""
        ...


HealthSource = Callable[[], Iterable[messages.DeviceHealthReport]]
"""Returns every watched device's current health (no I/O: the latest reading, e.g. ``sriov_dra.driver.device_health_monitor``)."""


def _distinct(claims: Iterable[messages.ClaimRef]) -> list[messages.ClaimRef]:
    seen: dict[str, messages.ClaimRef] = {}
    for claim in claims:
        first = seen.setdefault(claim.uid, claim)
        if first != claim:
            LOG.warning(
                "kubelet sent claim UID %s twice with different names (%s, %s)", claim.uid, first, claim
            )
    return list(seen.values())


class ClaimDispatcher:
    """Runs a :class:`ClaimHandler` under the per-claim result contract.

    With ``serialize=True`` (the default, as in the Go helper) at most one handler call runs at a
    time, prepare and unprepare alike; the kubelet may call concurrently for different Pods.
    """

    def __init__(self, handler: ClaimHandler, *, serialize: bool = True) -> None:
        self._handler = handler
        self._lock: AbstractContextManager[object] = threading.Lock() if serialize else nullcontext()

    def prepare(self, claims: Iterable[messages.ClaimRef]) -> dict[str, messages.PrepareOutcome]:
        """Prepare ``claims`` and return exactly one outcome per distinct claim UID.

        Shapes: ``{claim_uid: Prepared | ClaimError}``; ``{}`` for an empty request.
        """
        return self._dispatch("prepare", claims, self._handler.prepare_resources, _as_prepare_outcome)

    def unprepare(self, claims: Iterable[messages.ClaimRef]) -> dict[str, messages.UnprepareOutcome]:
        """Unprepare ``claims`` and return exactly one outcome per distinct claim UID.

        Shapes: ``{claim_uid: None | ClaimError}``; ``{}`` for an empty request.
        """
        return self._dispatch("unprepare", claims, self._handler.unprepare_resources, _as_unprepare_outcome)

    def _dispatch(
        self,
        verb: str,
        claims: Iterable[messages.ClaimRef],
        call: Callable[[Sequence[messages.ClaimRef]], Mapping[str, object]],
        convert: Callable[[messages.ClaimRef, object], _Outcome],
    ) -> dict[str, _Outcome | messages.ClaimError]:
        wanted = _distinct(claims)
        if not wanted:
            return {}
        with self._lock:
            try:
                return _collect(verb, wanted, call(wanted), convert)
            except Exception as exc:
                if len(wanted) == 1:
                    LOG.exception("%s handler raised for %s", verb, wanted[0])
                    return {wanted[0].uid: messages.ClaimError.from_exception(exc)}
                LOG.exception(
                    "%s handler raised for a batch of %d claims; retrying each alone", verb, len(wanted)
                )
            outcomes: dict[str, _Outcome | messages.ClaimError] = {}
            for claim in wanted:
                try:
                    outcomes.update(_collect(verb, [claim], call([claim]), convert))
                except Exception as exc:
                    LOG.exception("%s handler raised for %s", verb, claim)
                    outcomes[claim.uid] = messages.ClaimError.from_exception(exc)
            return outcomes


def _collect(
    verb: str,
    wanted: Sequence[messages.ClaimRef],
    results: Mapping[str, object],
    convert: Callable[[messages.ClaimRef, object], _Outcome],
) -> dict[str, _Outcome | messages.ClaimError]:
    unknown = set(results) - {c.uid for c in wanted}
    if unknown:
        LOG.warning(
            "%s handler returned results for unrequested claim UIDs %s; dropped", verb, sorted(unknown)
        )
    outcomes: dict[str, _Outcome | messages.ClaimError] = {}
    for claim in wanted:
        if claim.uid not in results:
            outcomes[claim.uid] = messages.ClaimError(
                f"the driver returned no {verb} result for {claim}; this is a driver bug, the kubelet will retry"
            )
        else:
            outcomes[claim.uid] = convert(claim, results[claim.uid])
    return outcomes


def _as_prepare_outcome(claim: messages.ClaimRef, value: object) -> messages.PrepareOutcome:
    if isinstance(value, messages.Prepared | messages.ClaimError):
        return value
    if isinstance(value, Exception):
        return messages.ClaimError.from_exception(value)
    return messages.ClaimError(
        f"the driver returned {type(value).__name__} instead of Prepared or ClaimError for {claim}"
    )


def _as_unprepare_outcome(claim: messages.ClaimRef, value: object) -> messages.UnprepareOutcome:
    if value is None or isinstance(value, messages.ClaimError):
        return value
    if isinstance(value, Exception):
        return messages.ClaimError.from_exception(value)
    return messages.ClaimError(
        f"the driver returned {type(value).__name__} instead of None or ClaimError for {claim}"
    )


class DraV1Servicer:
    """``k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin`` backed by a :class:`ClaimDispatcher`."""

    def __init__(self, dispatcher: ClaimDispatcher) -> None:
        self._dispatcher = dispatcher

    def NodePrepareResources(
        self, request: dra_v1_pb2.NodePrepareResourcesRequest, context: RpcContext
    ) -> dra_v1_pb2.NodePrepareResourcesResponse:
        claims = [messages.claim_from_wire(c) for c in request.claims]
        return messages.prepare_response_v1(self._dispatcher.prepare(claims))

    def NodeUnprepareResources(
        self, request: dra_v1_pb2.NodeUnprepareResourcesRequest, context: RpcContext
    ) -> dra_v1_pb2.NodeUnprepareResourcesResponse:
        claims = [messages.claim_from_wire(c) for c in request.claims]
        return messages.unprepare_response_v1(self._dispatcher.unprepare(claims))


class DraV1beta1Servicer:
    """``k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin``: converts and delegates to the same dispatcher.

    A device's ``share_id`` cannot be expressed in v1beta1 and is dropped, as in the kubelet's
    own conversion; drivers that use consumable capacity need the kubelet to pick v1.
    """

    def __init__(self, dispatcher: ClaimDispatcher) -> None:
        self._dispatcher = dispatcher

    def NodePrepareResources(
        self, request: dra_v1beta1_pb2.NodePrepareResourcesRequest, context: RpcContext
    ) -> dra_v1beta1_pb2.NodePrepareResourcesResponse:
        claims = [messages.claim_from_wire(c) for c in request.claims]
        outcomes = self._dispatcher.prepare(claims)
        dropped = [
            uid
            for uid, o in outcomes.items()
            if isinstance(o, messages.Prepared) and any(d.share_id is not None for d in o.devices)
        ]
        if dropped:
            LOG.warning("v1beta1 cannot carry share IDs; dropped them for claim UIDs %s", dropped)
        return messages.prepare_response_v1beta1(outcomes)

    def NodeUnprepareResources(
        self, request: dra_v1beta1_pb2.NodeUnprepareResourcesRequest, context: RpcContext
    ) -> dra_v1beta1_pb2.NodeUnprepareResourcesResponse:
        claims = [messages.claim_from_wire(c) for c in request.claims]
        return messages.unprepare_response_v1beta1(self._dispatcher.unprepare(claims))


class HealthServicer:
    """``v1alpha1.DRAResourceHealth``: streams the health ``source`` reports, on change and periodically.

    Each open stream sends a complete report at once, again as soon as :meth:`notify` is called
    (a device's health or reason changed) and otherwise every ``interval_s`` seconds, until the
    kubelet closes the stream or :meth:`close` is called (server shutdown). The kubelet 1.36
    stamps each entry with its receive time and reads a device Unknown once it was not reported
    for 30 s (``DefaultHealthTimeout``; ``health_check_timeout_seconds`` left at 0), so keep
    ``interval_s`` well under that. If ``source`` raises, that report is skipped (logged), so
    devices age to Unknown at the kubelet rather than being reported on stale data.

    Units: ``interval_s`` seconds; ``clock`` returns Unix time in seconds (for ``last_updated_time``).
    """

    def __init__(self, source: HealthSource, *, interval_s: float, clock: Callable[[], float]) -> None:
        self._source = source
        self._interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._closed = False
        self._streams: dict[threading.Event, list[bool]] = {}  # wake-up -> [ended]

    def close(self) -> None:
        """End every open stream now and refuse new ones (they end after no report)."""
        with self._lock:
            self._closed = True
            for wake, ended in self._streams.items():
                ended[0] = True
                wake.set()

    def notify(self) -> None:
        """Make every open stream send a report now (a device's health changed)."""
        with self._lock:
            for wake in self._streams:
                wake.set()

    def NodeWatchResources(
        self, request: drahealth_v1alpha1_pb2.NodeWatchResourcesRequest, context: RpcContext
    ) -> Iterator[drahealth_v1alpha1_pb2.NodeWatchResourcesResponse]:
        wake, ended = threading.Event(), [False]
        with self._lock:
            if self._closed:
                return
            self._streams[wake] = ended

        def cancelled() -> None:
            ended[0] = True
            wake.set()

        context.add_callback(cancelled)
        try:
            while not ended[0]:
                wake.clear()
                try:
                    reports = list(self._source())
                except Exception:
                    LOG.exception("device health source raised; skipping this health report")
                else:
                    yield messages.health_response(reports, now_s=int(self._clock()))
                wake.wait(self._interval_s)
        finally:
            with self._lock:
                self._streams.pop(wake, None)
