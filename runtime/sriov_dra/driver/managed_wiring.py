"""Production wiring of auto-attach for the plugin entrypoint (``driver.main``).

Builds :class:`~sriov_dra.driver.managed.service.ManagedAttach` from the plugin's API client and
settings (the real Pod, NAD, claim and Event clients, the Node's UID read once as the recorded
identity and a reader of its current UID, the publisher's snapshot, metric families, shared lock
tables) and the repair worker, whose first pass must finish before the plugin registers
(docs/design.md#repair), with its ``networkData`` writer and the node's Pod watch. Starts nothing
the entrypoint cannot stop; never runs with a node UID it did not read.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Final, TypedDict

import prometheus_client

from sriov_dra.core import identities
from sriov_dra.core.plugin import auto_attach_gate
from sriov_dra.driver import claim_context, locks, prepare, settings, unprepare
from sriov_dra.driver.managed import (
    lock_order,
    multus_layout,
    network_data_writer,
    observe,
    repair,
    seams,
    service,
)
from sriov_dra.kube import claims as kube_claims
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import nad_client, node_info, plugin_events, plugin_pod, pod_patch, watches
from sriov_dra.servicekit import fanout, probes

LOG = logging.getLogger(__name__)

CONTROLLER: Final = "sriov-dra-plugin"
"""``reportingController`` of the plugin's Events."""


def gated_settings(
    api: watches.ApiClient, cfg: settings.PluginSettings, store: seams.Store
) -> settings.PluginSettings:
    """``cfg`` in the auto-attach mode ``--multus-auto-attach-node-label`` gives this node; the mode
    reported on the plugin's Pod (:func:`report_mode`).

    Without the label flag (or without auto-attach) ``cfg`` as it is. Else the Node's labels are
    read once and ``core.plugin.auto_attach_gate`` decides: full (``cfg``), release-only
    (``auto_attach_gate_closed`` set to the reason) or off (``multus_auto_attach`` false); the
    decision and its reason are logged (``auto-attach gate``).
    Raises: ``kube.errors`` classes when the Node cannot be read (startup fails visibly).
    """
    gated = _gate(api, cfg, store)
    report_mode(api, gated)
    return gated


def _gate(
    api: watches.ApiClient, cfg: settings.PluginSettings, store: seams.Store
) -> settings.PluginSettings:
    if not (cfg.multus_auto_attach and cfg.multus_auto_attach_node_label):
        return cfg
    labels = node_info.node_labels(api, cfg.node_name, timeout_s=cfg.api_timeout_s)
    managed = [uid for uid, r in store.all_claims().items() if r.managed_bindings()]
    decision = auto_attach_gate.decide(cfg.multus_auto_attach_node_label, cfg.node_name, labels, managed)
    LOG.info(
        "auto-attach gate",
        extra={
            "op": "startup",
            "node": cfg.node_name,
            "auto_attach": "off" if decision.mode is auto_attach_gate.Mode.OFF else "on",
            "mode": str(decision.mode),
            "reason": decision.why,
        },
    )
    if decision.mode is auto_attach_gate.Mode.OFF:
        return dataclasses.replace(cfg, multus_auto_attach=False)
    if decision.mode is auto_attach_gate.Mode.RELEASE_ONLY:
        return dataclasses.replace(cfg, auto_attach_gate_closed=decision.why)
    return cfg


def report_mode(api: watches.ApiClient, cfg: settings.PluginSettings) -> None:
    """Annotate the plugin's Pod (``--pod-name``, ``--pod-namespace``, ``--pod-uid``) with the mode
    ``cfg`` runs (``kube.plugin_pod``); nothing without a Pod name and namespace.

    A failed patch is logged (``auto-attach mode not reported``) and startup goes on: the plugin
    serves in its mode, and the preflight's gate reports the Pod whose mode it cannot read.
    """
    if not (cfg.pod_name and cfg.pod_namespace):
        return
    mode = str(cfg.auto_attach_mode)
    fields = {"op": "startup", "pod": f"{cfg.pod_namespace}/{cfg.pod_name}", "mode": mode}
    try:
        plugin_pod.report_mode(
            api, cfg.pod_namespace, cfg.pod_name, cfg.pod_uid, mode, timeout_s=cfg.api_timeout_s
        )
    except kube_errors.ApiError as exc:
        LOG.error(
            "auto-attach mode not reported",
            extra={
                **fields,
                "reason": f"{exc}; grant the plugin's ServiceAccount pods patch (docs/design.md#rbac)",
            },
        )
        return
    LOG.info("auto-attach mode reported", extra=fields)


class ClaimFields(TypedDict):
    """The fields of ``claim_context.ClaimContext`` that depend on auto-attach."""

    managed: service.ManagedAttach | None
    gate_closed: str
    require_netdevice: bool
    claim_locks: locks.KeyedLocks
    pod_locks: locks.KeyedLocks


def claim_fields(attach: service.ManagedAttach | None, cfg: settings.PluginSettings) -> ClaimFields:
    """The claim context's auto-attach part: ``attach`` (``None``: manual mode), the release-only
    reason of ``cfg`` (``auto_attach_gate_closed``), netdevice VFs required in auto-attach, and the
    lock tables auto-attach shares with the handler (fresh ones without it)."""
    return ClaimFields(
        managed=attach,
        gate_closed=cfg.auto_attach_gate_closed,
        require_netdevice=cfg.multus_auto_attach,
        claim_locks=attach.locks.claim_locks if attach is not None else locks.KeyedLocks("claim"),
        pod_locks=attach.locks.pod_locks if attach is not None else locks.KeyedLocks("pod"),
    )


PROGRESS_EVERY_S: Final = 15.0
"""Seconds between "still waiting for the first repair pass" log lines."""

POD_WATCH_TIMEOUT_S: Final = 300
"""Server-side timeout of one Pod watch stream (seconds); the stream then resumes from its
resourceVersion, so this bounds a stuck stream, not the freshness of events."""


class FirstPassTimeout(Exception):
    """The repair worker's first pass did not finish within the configured bound."""


class LiveNodeUid:
    """The Node's current UID: the plugin's Node watch, or a live GET when the watch has none.

    ``watched()`` returns the UID in the policy controller's Node watch cache (``None`` before
    its first list or while the Node is absent). Why the watch is fresh enough for the Node
    identity check (docs/design.md#consumer): it delivers the Node's DELETED/ADDED events within
    the stream's latency, while a new prepare on a re-registered Node needs that Node to exist
    first and then a Pod bound, admitted and sent to this plugin by the kubelet; the ResourceSlices
    this node publishes are owned by the same watched UID. Only while the stream is reconnecting
    (``kube.watches`` backoff, at most 10 s) can a re-registration go unseen; a prepare in that
    window still records one consistent identity (the old one) that the restarted plugin stops with
    ``ShadowConflict`` and the kubelet's unprepare releases. A live GET per prepare would add one
    request to the ``3 + 2k`` of the happy path (``bench/prepare.py``) for that window only; it is
    made when the watch has no Node (not listed yet, or the Node was deleted), where the cache
    cannot answer. Without ``watched`` every call is a live GET (``read``: ``node_info.node_uid``).
    Raises (``__call__``): ``kube.errors`` classes other than NotFound for the live GET.
    """

    def __init__(self, *, read: Callable[[], str], watched: Callable[[], str | None] | None = None) -> None:
        self._read = read
        self._watched = watched
        self.live_reads = 0
        """Live GETs made (the watch had no Node)."""

    def __call__(self) -> str | None:
        """The Node's UID now; ``None`` when the Node does not exist."""
        if self._watched is not None:
            uid = self._watched()
            if uid:
                return uid
        self.live_reads += 1
        try:
            return self._read()
        except kube_errors.NotFound:
            return None


def build_attach(
    *,
    api: watches.ApiClient,
    node_name: str,
    devices: seams.DeviceSource,
    store: seams.Store,
    registry: prometheus_client.CollectorRegistry,
    api_timeout_s: float,
    multus: multus_layout.LayoutSource = multus_layout.DEFAULT_SOURCE,
    watched_node_uid: Callable[[], str | None] | None = None,
    max_in_flight: int = fanout.DEFAULT_MAX_IN_FLIGHT,
) -> service.ManagedAttach:
    """The node's :class:`ManagedAttach` with real clients; records the Node UID read now.

    ``multus`` is where the node's Multus delegate layout is read for interface-name checks;
    ``watched_node_uid`` is the publisher's watched Node UID (``Publisher.watched_node_uid``)
    that :class:`LiveNodeUid` prefers over a live GET; ``max_in_flight`` is ``--api-max-in-flight``.
    A checkpoint holding bindings of another
    node UID is logged (the orphan scan of this identity cannot see their shadows).
    Raises: ``kube.errors`` classes when the Node cannot be read (startup fails visibly).
    """
    uid = node_info.node_uid(api, node_name, timeout_s=api_timeout_s)
    metrics = observe.ManagedMetrics(registry)
    events = plugin_events.EventRecorder(api, controller=CONTROLLER, instance=node_name)
    attach = service.ManagedAttach(
        node=seams.NodeIdentity(node_name, identities.NodeUid(uid), multus=multus),
        devices=devices,
        pods=pod_patch.PodClient(api, timeout_s=api_timeout_s),
        nads=nad_client.NadClient(api, timeout_s=api_timeout_s),
        claims=kube_claims.ClaimClient(api, timeout_s=api_timeout_s),
        store=store,
        locks=lock_order.OperationLocks(locks.KeyedLocks("claim"), locks.KeyedLocks("pod")),
        reporter=observe.Reporter(events, metrics),
        max_in_flight=max_in_flight,
        node_uid=LiveNodeUid(
            read=lambda: node_info.node_uid(api, node_name, timeout_s=api_timeout_s), watched=watched_node_uid
        ),
    )
    LOG.info("auto-attach enabled", extra={"op": "startup", "node": node_name, "node_uid": uid})
    foreign = sorted({b.node_uid for r in store.all_claims().values() for b in r.managed_bindings()} - {uid})
    if foreign:
        LOG.error(
            "checkpoint holds bindings of another node identity",
            extra={
                "op": "startup",
                "node": node_name,
                "node_uid": uid,
                "reason": f"recorded node UIDs {', '.join(foreign)}: the Node was registered again; those "
                "bindings are not repaired (ShadowConflict) and their shadows are listed by "
                f"'sriov-dra orphans --node {node_name} --node-uid <old uid>'; drain the node to release them",
            },
        )
    return attach


def pod_watch(
    api: watches.ApiClient,
    node_name: str,
    worker: repair.RepairWorker,
    *,
    stop: threading.Event | None = None,
) -> watches.Watch:
    """The watch of the Pods bound to ``node_name`` (``fieldSelector=spec.nodeName=<node>``), feeding
    ``worker.pod_event``; not started.

    Why it is cheap at scale: the API server indexes Pods by ``spec.nodeName`` in its watch cache
    (the kubelet's own watch), so each node's plugin receives only its own Pods' events (at most
    the node's ``maxPods``, cached here), and its handler makes no API call; a claim request
    follows only when a Pod's network-status changed. RBAC: ``pods`` list, watch.
    """
    target = watches.Target("/api/v1/pods", f"spec.nodeName={node_name}", api_version="v1", kind="Pod")
    return watches.Watch(api, target, worker.pod_event, name="pods", stop=stop, timeout_s=POD_WATCH_TIMEOUT_S)


def start_worker(
    attach: service.ManagedAttach,
    context: claim_context.ClaimContext,
    *,
    settings: repair.RepairSettings | None = None,
    first_pass_timeout_s: float = 300.0,
    stop: threading.Event | None = None,
    watch_api: watches.ApiClient | None = None,
    health: probes.Health | None = None,
) -> repair.RepairWorker:
    """Start the repair worker and wait until its first pass ran to its end (docs/design.md#repair).

    ``health`` records a crash of the worker's loop (the plugin is then no longer alive).

    The worker releases hosts and completes interrupted host stages through the handler's
    context (``unprepare.release_host``, ``prepare.ensure_host``) and fills claim ``networkData``
    through the handler's claim client (``network_data_writer``). With ``watch_api`` the node's Pod watch
    (:func:`pod_watch`) is started too, so ``networkData`` follows network-status at once instead
    of at the next pass; the worker's ``stop`` closes it. The wait logs progress every
    :data:`PROGRESS_EVERY_S` seconds and ends early when ``stop`` is set (shutdown during startup).
    Units: ``first_pass_timeout_s`` seconds; 0 = no bound.
    Raises: FirstPassTimeout after ``first_pass_timeout_s`` seconds without a complete pass (the
    worker is stopped first), naming the last pass error and the flag.
    """
    worker = repair.RepairWorker(
        attach=attach,
        host_release=lambda record: unprepare.release_host(context, record),
        host_prepare=lambda record: prepare.ensure_host(context, record),
        clear_status=lambda record: unprepare.clear_status(context, record),
        settings=settings,
        network_data=network_data_writer.NetworkDataWriter(
            claims=context.claims, driver_name=context.driver_name
        ),
    )
    worker.start(health=health)
    if watch_api is not None:
        worker.watch = pod_watch(watch_api, attach.node.name, worker, stop=stop).start()
    wait_first_pass(worker, timeout_s=first_pass_timeout_s, stop=stop)
    return worker


def wait_first_pass(
    worker: repair.RepairWorker,
    *,
    timeout_s: float,
    stop: threading.Event | None = None,
    progress_every_s: float = PROGRESS_EVERY_S,
) -> None:
    """Block until ``worker`` completed a pass, ``stop`` is set, or ``timeout_s`` (0: never) passed.

    Units: seconds. Raises: FirstPassTimeout (after stopping the worker).
    """
    started = time.monotonic()
    while True:
        elapsed = time.monotonic() - started
        left = timeout_s - elapsed if timeout_s > 0 else progress_every_s
        if left <= 0:
            worker.stop()
            raise FirstPassTimeout(
                f"the auto-attach repair worker did not finish its first pass within {timeout_s:g} s "
                f"({worker.passes} complete passes; last error: {worker.last_pass_error or 'none, still running'}); "
                "the plugin does not register with the kubelet before its bindings were checked: "
                "check the API server's reachability and the plugin's RBAC, or raise "
                "--repair-first-pass-timeout-s (0 waits without bound)"
            )
        if worker.wait_first_pass(min(left, progress_every_s)) or (stop is not None and stop.is_set()):
            return
        LOG.warning(
            "waiting for the repair worker's first pass before registering",
            extra={
                "op": "startup",
                "elapsed_s": round(time.monotonic() - started, 1),
                "reason": worker.last_pass_error or "pass still running",
            },
        )
