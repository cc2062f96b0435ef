"""The plugin's side of a rolling update: the gate of a new instance, the hand-over of an old one.

docs/plugin.md#rolling-update: an instance records itself in the node's instance order
(:func:`how_to_start`); the newest registers first and holds calls at its :class:`Gate` until it
owns the node; the owning instance polls for a waiting newer one (:func:`watch_successor`) and
hands over in :func:`hand_over`'s order, which ends once the successor confirmed or went away.
``driver.main`` wires them.
"""

from __future__ import annotations

import enum
import functools
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Final, NoReturn

from sriov_dra.core.plugin import instance_order
from sriov_dra.driver import faults, policy_controller, settings
from sriov_dra.host import checkpoint, checkpoint_files, discovery
from sriov_dra.kubeletapi import dra_service, endpoints, messages, plugin_server

LOG = logging.getLogger("sriov_dra.driver")

REGISTRATION_WAIT_S: Final = 30.0
"""How long a new instance waits for the kubelet's registration verdict; without one it stops
(the container restarts and tries again) and never asks for the node."""
HANDOVER_POLL_S: Final = 0.1
"""How often the owning instance looks for a newer one waiting for the checkpoint, and a handing-over
one for its successor's confirmation (s)."""
GATE_ANSWER_MARGIN_S: Final = 1.0
"""What a call held at the gate keeps of the kubelet's deadline for its retryable answer to arrive (s)."""
GATE_WAIT_S: Final = endpoints.PREPARE_CALL_TIMEOUT_S - GATE_ANSWER_MARGIN_S
"""How long a call that reached a new instance waits for it to own the node: as long as the
kubelet still takes an answer. The old instance's drain may take the whole deadline (its calls
started before the hand-over, each under its own 45 s), so a call that waits longer could only
be answered after the kubelet gave up on it; one that gives up earlier fails where waiting could
have succeeded (docs/plugin.md#rolling-update)."""
DEAD_SOCKET_SWEEP_S: Final = 60.0
"""How often the owning instance removes dead instances' sockets (:func:`remove_dead_instances`):
one bound less than ``plugin_server.DEAD_SOCKET_MIN_AGE_S`` before a sweep goes at a later one (s)."""
HANDED_OVER_ENV: Final = "SRIOV_DRA_HANDED_OVER"
"""Set to ``1`` by :func:`replace_process` in the environment of the fresh start after a confirmed
hand-over, read and removed at start (:func:`fresh_after_hand_over`): an instance without a Pod
UID is not in the node's order, so only this tells it to idle rather than ask for the node back."""
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
"""The signals that stop the plugin process (:func:`catch_stop_signals`)."""


class Start(enum.Enum):
    """How an instance with a Pod UID starts (:func:`how_to_start`)."""

    ASK = "ask"
    """The newest recorded instance: serve, register, then ask for the node."""
    TAKE = "take"
    """A newer instance is recorded but nobody holds or asks for the node: take it at once."""
    IDLE = "idle"
    """A newer instance holds or asks for the node: never serve, never ask."""


class Outcome(enum.Enum):
    """How :func:`hand_over` ended; either way the process ends (:func:`replace_process`)."""

    HANDED_OVER = "handed over"
    """The successor confirmed it serves the node."""
    ABORTED = "aborted"
    """The successor went away before it confirmed: the node must be taken back."""


def instance_id(pod_uid: str) -> str:
    """This process's name in the owner record: its Pod UID, or a random name without one."""
    return pod_uid or f"process-{uuid.uuid4().hex}"


def how_to_start(state_dir: Path, pod_uid: str, fresh_after_hand_over: bool = False) -> Start:
    """Record this instance in the node's instance order and decide how it starts (logged unless ASK).

    Without a Pod UID the instance is not in the order: it idles in the fresh start after its
    confirmed hand-over (:func:`fresh_after_hand_over`) and takes the node otherwise. Creates
    ``state_dir`` when missing. Raises: ``OSError`` when the record cannot be read or written,
    or a lock file cannot be opened.
    """
    if not pod_uid:
        if fresh_after_hand_over:
            LOG.warning(
                "this process handed the node over; idle until its Pod is deleted", extra={"op": "startup"}
            )
            return Start.IDLE
        return Start.TAKE
    state_dir.mkdir(mode=0o750, parents=True, exist_ok=True)
    later = instance_order.newer(checkpoint_files.record_instance(state_dir, pod_uid), pod_uid)
    if not later:
        return Start.ASK
    fields = {"op": "startup", "instance": pod_uid, "newer": ", ".join(later)}
    if checkpoint_files.node_claimed(state_dir):
        LOG.warning(
            "a newer instance holds the node or asks for it; idle until its Pod is deleted", extra=fields
        )
        return Start.IDLE
    LOG.warning("a newer instance is recorded but nobody holds the node: taking it", extra=fields)
    return Start.TAKE


def serving(
    config: settings.PluginSettings, instance: str
) -> tuple[tuple[str, ...], Callable[[], None] | None]:
    """Record that ``instance`` serves the node now (confirms a hand-over to it); with a Pod UID
    remove dead instances' sockets (:func:`remove_dead_instances`) a first time.

    Returns the instances recorded before it (:func:`instance_order.older`; ``()`` when the record
    cannot be read): they idle, and the owner answers their liveness probes
    (:meth:`probes.Health.vouch_for`), as a restart of an idle instance would only start it to
    idle again; and the sweep to repeat while owning (``None`` without a Pod UID).
    Raises: ``OSError`` when the owner record cannot be written: the instance must not serve, or
    the one it took the node from would wait for the confirmation for as long as it serves.
    """
    sweep = None
    if config.pod_uid:
        sweep = functools.partial(remove_dead_instances, config.sockets, config.driver_name)
        sweep()
    checkpoint_files.record_owner(config.state_dir, instance)
    try:
        return instance_order.older(checkpoint_files.instances(config.state_dir), instance), sweep
    except OSError:
        return (), sweep


def inventory_and_published(
    snapshot: policy_controller.DeviceSnapshot,
) -> tuple[Mapping[str, discovery.DiscoveredVf], Iterable[str]]:
    """The discovered VFs and the advertised device names of one snapshot (for device health)."""
    return snapshot.inventory, snapshot.published


def remove_dead_instances(own: endpoints.PluginSockets, driver_name: str) -> None:
    """Remove the per-instance sockets of this driver's instances that were killed (none listens).

    Run by the instance that owns the node; its own sockets and any live instance's stay. A
    failure is logged (the next sweep tries again).
    """
    try:
        paths = [
            *own.registration.parent.glob(f"{driver_name}-*-reg.sock"),
            *own.dra.parent.glob("dra-*.sock"),
        ]
        plugin_server.remove_dead_sockets(paths, keep=(own.registration, own.dra))
    except OSError as exc:
        LOG.warning("cannot remove dead instances' sockets", extra={"op": "handover", "reason": str(exc)})


def await_registration(
    seen: threading.Event, server: plugin_server.KubeletPluginServer, registration: Path
) -> str | None:
    """Wait (at most :data:`REGISTRATION_WAIT_S`) for the kubelet's verdict on a new instance.

    Returns ``None`` once the kubelet registered it, else the reason to stop: rejected (a kubelet
    older than 1.33 accepts one instance of a driver) or no verdict (the kubelet does not see the
    socket). Either way the instance never asks for the node, and the previous one keeps it.
    """
    if not seen.wait(REGISTRATION_WAIT_S):
        return (
            f"the kubelet sent no registration verdict for {registration} within {REGISTRATION_WAIT_S:g} s; "
            "the previous instance keeps the node. Check that --kubelet-registrar-directory-path is the "
            "kubelet's plugins_registry directory and that the kubelet runs"
        )
    state = server.registration
    if state is not None and not state.registered:
        return (
            f"the kubelet rejected the registration of {registration}: {state.error}; "
            "per-instance sockets (--pod-uid) need kubelet 1.33 or newer: unset POD_UID on older nodes"
        )
    return None


def watch_successor(
    store: checkpoint.CheckpointStore,
    stop: threading.Event,
    hand_over: Callable[[], None],
    state_dir: Path,
    pod_uid: str,
    sweep: Callable[[], None] | None = None,
) -> None:
    """Poll for a newer instance waiting for the checkpoint until ``stop``; call ``hand_over`` once.

    A request while no instance newer than ``pod_uid`` is recorded is refused (logged once): the
    node never goes back to an older instance (``core.plugin.instance_order``). ``sweep`` (the
    owner's :func:`remove_dead_instances`) runs every :data:`DEAD_SOCKET_SWEEP_S` meanwhile.
    """
    refused = False
    swept = time.monotonic()
    while not stop.wait(HANDOVER_POLL_S):
        if sweep is not None and time.monotonic() - swept >= DEAD_SOCKET_SWEEP_S:
            swept = time.monotonic()
            sweep()
        try:
            waiting = store.successor_waiting()
            allowed = waiting and instance_order.may_hand_over(checkpoint_files.instances(state_dir), pod_uid)
        except OSError as exc:
            LOG.warning("cannot check for a hand-over request", extra={"op": "handover", "reason": str(exc)})
            continue
        if allowed:
            hand_over()
            return
        if waiting and not refused:
            refused = True
            LOG.warning(
                "an instance that is not newer than this one asks for the node; it stays here",
                extra={"op": "handover", "instance": pod_uid},
            )


def hand_over(
    *,
    stop_serving: Callable[[], None] | None,
    stop_workers: Sequence[Callable[[], None]],
    store: checkpoint.CheckpointStore | None,
    state_dir: Path,
    instance: str,
    lock: threading.Lock,
    poll_s: float = HANDOVER_POLL_S,
    fault: faults.FaultHook = faults.NO_FAULTS,
) -> Outcome:
    """Hand the node to the instance waiting for the checkpoint, in this order, holding ``lock``.

    ``stop_serving`` (``None``: not serving) deregisters and lets in-flight kubelet calls finish;
    ``stop_workers`` stop the repair worker, the publisher (the successor adopts the slices) and
    the metrics server. If the request is gone by then, nothing is released: :attr:`Outcome.ABORTED`.
    Else ``instance`` is written to the owner record (a name left there by an earlier hand-over
    would otherwise hide the successor's), the checkpoint closes, which releases the writer lock
    (this process never writes it again), and this waits until the successor records itself as the node's owner
    (:attr:`Outcome.HANDED_OVER`, ``instance`` then recorded as retired), or until nobody holds
    or asks for the writer lock any more (the successor went away unconfirmed: ABORTED).
    """
    fields = {"op": "handover", "instance": instance}
    LOG.info("a newer instance waits: handing over", extra=fields)
    before: str | None = None
    with lock:  # the process's stop (on a signal) waits: it closes what the drained calls use
        if stop_serving is not None:
            stop_serving()
        for stop in stop_workers:
            stop()
        fault("handover:drained")
        if store is not None:
            if not _still_asked(store):
                LOG.warning(
                    "the newer instance stopped asking before the hand-over: keeping the node", extra=fields
                )
                return Outcome.ABORTED
            before = _own_owner_record(state_dir, instance)
            store.close()
    while not instance_order.confirmed(now := _owner(state_dir), instance, before):
        # a successor takes the lock before it records itself: read the record again after the probe
        if not _claimed(state_dir) and not instance_order.confirmed(
            now := _owner(state_dir), instance, before
        ):
            LOG.warning(
                "the newer instance went away before it served the node: taking it back", extra=fields
            )
            return Outcome.ABORTED
        time.sleep(poll_s)
    try:
        checkpoint_files.record_retired(state_dir, instance)
    except OSError as exc:
        LOG.warning("cannot record the hand-over", extra={"op": "handover", "reason": str(exc)})
    LOG.info("handed over", extra={**fields, "owner": now})
    return Outcome.HANDED_OVER


class ProcessEnd:
    """How the plugin process ends: once a hand-over began (:meth:`hand_over`), only after it ended,
    never returning (:func:`replace_process`); else with status 0. ``signalled``: a stop signal
    arrived; ``fresh_after_hand_over``: this process is the fresh start after a confirmed one."""

    def __init__(self, fresh_after_hand_over: bool = False) -> None:
        self.fresh_after_hand_over = fresh_after_hand_over
        self.signalled = threading.Event()
        self._ended: threading.Event | None = None
        self._outcome: Outcome | None = None

    def hand_over(self, run: Callable[[], Outcome], *, then: Callable[[], None]) -> None:
        """Run ``run`` (:func:`hand_over`) and keep its outcome; ``then`` afterwards, even on an error."""
        self._ended = threading.Event()
        try:
            self._outcome = run()
        finally:
            self._ended.set()
            then()

    def finish(self) -> int:
        """0 without a hand-over; else wait for it to end and replace or end the process (1 when
        the hand-over failed with an error, logged by its thread)."""
        if self._ended is None:
            return 0
        self._ended.wait()
        if self._outcome is not None:
            replace_process(self._outcome, self.signalled)
        return 1


def replace_process(outcome: Outcome, stop_requested: threading.Event) -> NoReturn:
    """End everything of this instance after :func:`hand_over`: the process replaces itself (exec)
    with a fresh start of the same command, so no thread of the old one (a kubelet call abandoned
    after the drain's grace, a worker) can write to the node or the API any more.

    The fresh start finds its place in the node's order (:func:`how_to_start`; without a Pod UID
    :data:`HANDED_OVER_ENV`): after a hand-over it idles, after an aborted one it takes the node
    back. The container is not restarted (same process, no back-off). When ``stop_requested`` is
    set (a stop signal arrived) or the exec fails, the process exits at once instead,
    :func:`exit_status`. The stop signals are blocked from that check on: one arriving later stays
    pending across the exec, and the fresh start takes it in :func:`catch_stop_signals`. Left: a
    signal the kernel hands to another thread of this process between the check and the exec is
    lost (the fresh start serves or idles on until the kubelet's kill).
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    env = {k: v for k, v in os.environ.items() if k != HANDED_OVER_ENV}
    if outcome is Outcome.HANDED_OVER:
        env[HANDED_OVER_ENV] = "1"
    fields = {"op": "handover", "reason": outcome.value}
    if not stop_requested.is_set():
        LOG.info("replacing this process with a fresh start", extra=fields)
        _flush_logs()
        try:
            if not stop_requested.is_set():  # again right before the exec: the flush may have waited
                os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
        except OSError as exc:
            LOG.error("cannot restart this process in place; exiting", extra={**fields, "reason": str(exc)})
    if stop_requested.is_set():
        LOG.info("told to stop during the hand-over: exiting", extra=fields)
    _flush_logs()
    os._exit(exit_status(outcome))  # no interpreter shutdown: it would join stray threads


def exit_status(outcome: Outcome) -> int:
    """The status of a process that ends after :func:`hand_over` without replacing itself: 0 after
    a hand-over, 1 after an aborted one (nobody serves the node; a restarted container takes it)."""
    return 0 if outcome is Outcome.HANDED_OVER else 1


def catch_stop_signals(handler: Callable[[int, FrameType | None], None]) -> None:
    """Install ``handler`` for :data:`STOP_SIGNALS`, then unblock them: a signal that arrived while
    :func:`replace_process` held them blocked across the exec is handled now rather than lost
    (PID 1 in a container drops a signal it has no handler for). Main thread only."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def fresh_after_hand_over(environ: MutableMapping[str, str]) -> bool:
    """Whether this process is the fresh start after a confirmed hand-over (:data:`HANDED_OVER_ENV`);
    the marker is removed from ``environ``, so no later exec or child process inherits it."""
    return environ.pop(HANDED_OVER_ENV, None) == "1"


def _flush_logs() -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()


def _own_owner_record(state_dir: Path, instance: str) -> str | None:
    """Write ``instance`` to the owner record; return what the record names now (a failed write is
    logged: then a successor already named there confirms only by going away)."""
    try:
        checkpoint_files.record_owner(state_dir, instance)
    except OSError as exc:
        LOG.warning("cannot rewrite the owner record", extra={"op": "handover", "reason": str(exc)})
    return _owner(state_dir)


def _still_asked(store: checkpoint.CheckpointStore) -> bool:
    try:
        return store.successor_waiting()
    except OSError:
        return True  # cannot tell: the request was seen a moment ago; the confirmation decides


def _owner(state_dir: Path) -> str | None:
    try:
        return checkpoint_files.owner(state_dir)
    except OSError:
        return None


def _claimed(state_dir: Path) -> bool:
    try:
        return checkpoint_files.node_claimed(state_dir)
    except OSError:
        return True  # cannot tell: wait on


class Gate:
    """The claim handler and health source of an instance that registered before owning the node.

    Calls wait until :meth:`open` hands over the real handler, at most :data:`GATE_WAIT_S`, then
    each claim gets an error naming the wait (the kubelet retries it); health reports are empty
    until then.
    """

    def __init__(self) -> None:
        self._opened = threading.Event()
        self._handler: dra_service.ClaimHandler | None = None
        self._reports: dra_service.HealthSource | None = None

    def open(self, handler: dra_service.ClaimHandler, reports: dra_service.HealthSource) -> None:
        """Let calls through to ``handler``; health comes from ``reports`` from now on."""
        self._handler, self._reports = handler, reports
        self._opened.set()

    def is_open(self) -> bool:
        """Whether :meth:`open` ran."""
        return self._opened.is_set()

    def _wait(self, claims: Sequence[messages.ClaimRef]) -> dict[str, messages.ClaimError] | None:
        if self._opened.wait(GATE_WAIT_S):
            return None
        error = messages.ClaimError(
            f"this plugin instance is still taking the node over from the previous one after {GATE_WAIT_S:g} s "
            "(docs/plugin.md#rolling-update); the kubelet retries the call"
        )
        return {claim.uid: error for claim in claims}

    def prepare_resources(
        self, claims: Sequence[messages.ClaimRef]
    ) -> Mapping[str, dra_service.PrepareValue]:
        waited = self._wait(claims)
        if waited is not None or self._handler is None:
            return waited or {}
        return self._handler.prepare_resources(claims)

    def unprepare_resources(
        self, claims: Sequence[messages.ClaimRef]
    ) -> Mapping[str, dra_service.UnprepareValue]:
        waited = self._wait(claims)
        if waited is not None or self._handler is None:
            return waited or {}
        return self._handler.unprepare_resources(claims)

    def reports(self) -> Iterable[messages.DeviceHealthReport]:
        return self._reports() if self._reports is not None else ()
