"""The plugin's side of a rolling update: the gate of a new instance, the hand-over of an old one.

docs/plugin.md#rolling-update: a new instance registers first and holds calls at its
:class:`Gate` until it owns the node; the owning instance polls for a waiting successor
(:func:`watch_successor`) and hands over in :func:`hand_over`'s order. ``driver.main`` wires both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final

from sriov_dra.driver import policy_controller
from sriov_dra.host import checkpoint, checkpoint_files, discovery
from sriov_dra.kubeletapi import dra_service, endpoints, messages, plugin_server

LOG = logging.getLogger("sriov_dra.driver")

REGISTRATION_WAIT_S: Final = 30.0
"""How long a new instance waits for the kubelet's registration verdict before it asks for the node."""
HANDOVER_POLL_S: Final = 0.1
"""How often the owning instance looks for a newer one waiting for the checkpoint (s)."""
GATE_ANSWER_MARGIN_S: Final = 1.0
"""What a call held at the gate keeps of the kubelet's deadline for its retryable answer to arrive (s)."""
GATE_WAIT_S: Final = endpoints.PREPARE_CALL_TIMEOUT_S - GATE_ANSWER_MARGIN_S
"""How long a call that reached a new instance waits for it to own the node: as long as the
kubelet still takes an answer. The old instance's drain may take the whole deadline (its calls
started before the hand-over, each under its own 45 s), so a call that waits longer could only
be answered after the kubelet gave up on it; one that gives up earlier fails where waiting could
have succeeded (docs/plugin.md#rolling-update)."""


def retired(state_dir: Path, pod_uid: str) -> bool:
    """Whether this instance already handed the node over (its container restarted before its Pod
    was deleted): it must idle, never ask for the node back. Logged when true."""
    if pod_uid not in checkpoint_files.retired(state_dir):
        return False
    LOG.warning(
        "this instance handed the node over to a newer one; idle until its Pod is deleted",
        extra={"op": "startup", "instance": pod_uid},
    )
    return True


def inventory_and_published(
    snapshot: policy_controller.DeviceSnapshot,
) -> tuple[Mapping[str, discovery.DiscoveredVf], Iterable[str]]:
    """The discovered VFs and the advertised device names of one snapshot (for device health)."""
    return snapshot.inventory, snapshot.published


def remove_dead_instances(own: endpoints.PluginSockets, driver_name: str) -> None:
    """Remove the per-instance sockets of this driver's instances that were killed (none listens).

    Run by the instance that owns the node; its own sockets and any live instance's stay.
    """
    paths = [
        *own.registration.parent.glob(f"{driver_name}-*-reg.sock"),
        *own.dra.parent.glob("dra-*.sock"),
    ]
    plugin_server.remove_dead_sockets(paths, keep=(own.registration, own.dra))


def await_registration(
    seen: threading.Event, server: plugin_server.KubeletPluginServer, registration: Path
) -> str | None:
    """Wait (at most :data:`REGISTRATION_WAIT_S`) for the kubelet's verdict on a new instance.

    Returns the reason to stop when the kubelet rejected it (a kubelet older than 1.33 accepts one
    instance of a driver), else ``None`` (registered, or no verdict: the hand-over goes on).
    """
    if not seen.wait(REGISTRATION_WAIT_S):
        LOG.warning(
            "no registration verdict from the kubelet; asking for the checkpoint anyway",
            extra={"op": "startup", "socket": str(registration)},
        )
    state = server.registration
    if state is not None and not state.registered:
        return (
            f"the kubelet rejected the registration of {registration}: {state.error}; "
            "per-instance sockets (--pod-uid) need kubelet 1.33 or newer: unset POD_UID on older nodes"
        )
    return None


def watch_successor(
    store: checkpoint.CheckpointStore, stop: threading.Event, hand_over: Callable[[], None]
) -> None:
    """Poll for a newer instance waiting for the checkpoint until ``stop``; call ``hand_over`` once."""
    while not stop.wait(HANDOVER_POLL_S):
        try:
            waiting = store.successor_waiting()
        except OSError as exc:
            LOG.warning("cannot check for a hand-over request", extra={"op": "handover", "reason": str(exc)})
            continue
        if waiting:
            hand_over()
            return


def hand_over(
    *,
    stop_serving: Callable[[], None] | None,
    stop_workers: Sequence[Callable[[], None]],
    store: checkpoint.CheckpointStore | None,
    state_dir: Path,
    pod_uid: str,
    lock: threading.Lock,
) -> None:
    """Hand the node to the instance waiting for the checkpoint, in this order, holding ``lock``.

    ``stop_serving`` (``None``: not serving) deregisters and lets in-flight kubelet calls finish; ``stop_workers`` stop
    the repair worker, the publisher (the successor adopts the slices) and the metrics server;
    ``pod_uid`` is recorded as retired; then the checkpoint closes, which releases the writer lock
    (after that this process never writes it).
    """
    LOG.info("a newer instance waits: handing over", extra={"op": "handover", "instance": pod_uid})
    with lock:  # the process's stop (on a signal) waits: it closes what the drained calls use
        if stop_serving is not None:
            stop_serving()
        for stop in stop_workers:
            stop()
        if pod_uid:
            try:
                checkpoint_files.record_retired(state_dir, pod_uid)
            except OSError as exc:
                LOG.warning("cannot record the hand-over", extra={"op": "handover", "reason": str(exc)})
        if store is not None:
            store.close()
    LOG.info("handed over", extra={"op": "handover", "instance": pod_uid})


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
