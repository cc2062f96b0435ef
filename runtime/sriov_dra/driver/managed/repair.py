"""The repair worker (docs/design.md#repair) and the periodic orphan scan (docs/design.md#orphans).

Started after the checkpoint is loaded; the plugin registers only after its first complete pass
(:meth:`RepairWorker.wait_first_pass`). Each pass ensures ``Pending``/``Ready`` records forward
per Pod, under the claim-then-Pod locks, when the Node, the claim and the Pod still match (a
mismatch releases nothing, except a claim gone past its grace, ``gone_claims``); resumes the
releases the kubelet authorized; writes claim ``networkData``. Work per pass is bounded, failures
back off, Events go out on transitions only. Never finalizes an orphan.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from sriov_dra.core.plugin import checkpoint_lifecycle
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import ensure as ensure_mod
from sriov_dra.driver.managed import (
    gone_claims,
    host_gate,
    listed_shadows,
    network_data_writer,
    observe,
    orphans,
    release,
    seams,
    service,
    template_changes,
)
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import views
from sriov_dra.kube import watches as kube_watches
from sriov_dra.servicekit import probes
from sriov_dra.servicekit import threads as svc_threads
from sriov_dra_rules import errors

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class RepairSettings:
    """Timing and bounds of the worker."""

    interval_s: float = 30.0
    """Seconds between passes; watch events are not needed, a missed change waits one period."""
    orphan_interval_s: float = 300.0
    """Seconds between orphan LISTs (one all-namespace LIST each; cheap but not free)."""
    first_retry_s: float = 5.0
    """Seconds a failed Pod/claim waits before its next attempt; doubled per failure."""
    max_retry_s: float = 300.0
    """Cap of that wait, so an API outage is not hammered and recovery is still prompt."""
    max_items_per_pass: int = 256
    """Pods plus releasing claims handled per pass; the rest wait for the next pass."""
    claim_gone_grace_s: float = 600.0
    """Seconds a record's claim must stay gone before the record is released (``gone_claims``)."""


@dataclass
class PassReport:
    """What one pass did (for tests and logs)."""

    ensured_pods: list[str] = field(default_factory=list)
    stopped: dict[str, str] = field(default_factory=dict)
    released: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    deferred: list[str] = field(default_factory=list)
    orphans: list[orphans.ShadowReport] = field(default_factory=list)


class _Stop(Exception):
    """Forward repair does not apply (Pod/claim gone, replaced, terminating, elsewhere)."""

    def __init__(self, why: str, *, claim_gone: bool = False) -> None:
        super().__init__(why)
        self.claim_gone = claim_gone


class RepairWorker:
    """Runs passes on a daemon thread; :meth:`run_once` is the whole pass (tests call it)."""

    def __init__(
        self,
        *,
        attach: service.ManagedAttach,
        host_release: release.HostRelease | None,
        host_prepare: host_gate.HostStage,
        settings: RepairSettings | None = None,
        clear_status: release.StatusClear | None = None,
        network_data: network_data_writer.NetworkDataWriter | None = None,
    ) -> None:
        self.attach = attach
        self.host_release = host_release
        self.host_prepare = host_prepare
        self.clear_status = clear_status
        self.network_data = network_data
        self.settings = settings if settings is not None else RepairSettings()
        self.gone = gone_claims.GoneClaims(self.settings.claim_gone_grace_s)
        self.templates = template_changes.TemplateChanges(attach.nads)
        self._retry_at: dict[str, tuple[float, int]] = {}
        self._last_orphan_scan: float | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._queue_lock = threading.Lock()
        self._queued: dict[str, Mapping[str, object]] = {}
        """Pods (by UID) whose network-status changed since it was last handled, newest object."""
        self._handled_status: dict[str, str | None] = {}
        """The network-status value last handled per Pod UID (full pass or queue)."""
        self.watch: kube_watches.Watch | None = None
        """The node's Pod watch feeding :meth:`pod_event` (closed by :meth:`stop`), if any."""
        self.network_data_runs = 0
        """Queue runs that handled at least one Pod (for tests and logs)."""
        self._first = threading.Event()
        self._thread: threading.Thread | None = None
        self._node_stop: str | None = None
        self.passes = 0
        """Passes that ran to their end."""
        self.last_pass_error = ""
        """Why the latest pass ended early (empty after a complete pass)."""

    # ------------------------------------------------------------------ lifecycle
    def start(self, *, health: probes.Health | None = None) -> None:
        """Start the worker thread; its first pass runs immediately.

        A crash of the loop itself (each pass already contains its own errors) is recorded in
        ``health``: liveness fails and the container restarts instead of serving without repair.
        """
        self._thread = svc_threads.start("managed-repair", self._run, health=health, log=LOG)

    def wait_first_pass(self, timeout_s: float) -> bool:
        """Wait until a pass ran to its end (the readiness gate); True when one did.

        A pass that raised does not count; the next one (``interval_s`` later) may.
        Units: ``timeout_s`` seconds.
        """
        return self._first.wait(timeout_s)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the Pod watch, then the worker after its current step (waits at most ``timeout_s``)."""
        self._stop.set()
        self._wake.set()
        if self.watch is not None:
            self.watch.close()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        next_pass = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() >= next_pass:
                try:
                    self.run_once()
                except Exception as exc:
                    self.last_pass_error = f"{type(exc).__name__}: {exc}"[:512]
                    LOG.exception("repair pass failed", extra={"op": "repair"})
                else:
                    self.passes += 1
                    self.last_pass_error = ""
                    self._first.set()
                next_pass = time.monotonic() + self.settings.interval_s
            try:
                self.run_network_data()  # Pods queued meanwhile; those the pass handled are skipped
            except Exception:
                LOG.exception("claim networkData run failed", extra={"op": "networkData"})
            self._wake.wait(max(0.0, next_pass - time.monotonic()))
            self._wake.clear()

    # ------------------------------------------------------------------ Pod watch
    def pod_event(self, kind: str, pod: Mapping[str, object]) -> None:
        """Handler of the node's Pod watch: queue a Pod whose network-status changed, wake the worker.

        Runs on the watch thread and does no API call: a Pod is queued only when it has forward
        records in the checkpoint and its network-status value differs from the one last handled.
        A deleted Pod is forgotten. Without a ``network_data`` writer it does nothing.
        """
        if self.network_data is None:
            return
        meta = pod.get("metadata") if isinstance(pod.get("metadata"), Mapping) else None
        uid = str(meta.get("uid") or "") if isinstance(meta, Mapping) else ""
        if not uid:
            return
        if kind == "DELETED":
            with self._queue_lock:
                self._queued.pop(uid, None)
                self._handled_status.pop(uid, None)
            return
        value = network_data_writer.network_status_of(pod)
        with self._queue_lock:
            if uid in self._handled_status and self._handled_status[uid] == value:
                self._queued.pop(uid, None)  # back to the handled value: nothing to do
                return
        if not any(
            network_data_writer.published(r) for r in ensure_mod.forward_records(self.attach.store, uid)
        ):
            return
        with self._queue_lock:
            self._queued[uid] = pod
        self._wake.set()

    def run_network_data(self) -> list[str]:
        """Write ``networkData`` for every queued Pod (see :meth:`pod_event`); return their UIDs.

        A Pod is handled only when it is still bound to this node, not terminating, and its
        network-status value is not the one last handled; under the claim-then-Pod locks.
        """
        with self._queue_lock:
            queued, self._queued = self._queued, {}
        done: list[str] = []
        writer = self.network_data
        if writer is None:
            return done
        for uid, pod in sorted(queued.items()):
            if self._stop.is_set():
                break
            view = views.decode_pod(pod)
            value = network_data_writer.network_status_of(pod)
            with self._queue_lock:
                if uid in self._handled_status and self._handled_status[uid] == value:
                    continue
            if view.node_name != self.attach.node.name or view.meta.deleting:
                continue
            records = ensure_mod.forward_records(self.attach.store, uid)
            if not records:
                continue
            with self.attach.locks.hold(records[0].claim_uid, uid):
                writer.write(pod, ensure_mod.forward_records(self.attach.store, uid))
            with self._queue_lock:
                self._handled_status[uid] = value
            done.append(uid)
        if done:
            self.network_data_runs += 1
        return done

    # ------------------------------------------------------------------ one pass
    def _due(self, key: str, now: float) -> bool:
        entry = self._retry_at.get(key)
        return entry is None or entry[0] <= now

    def _failed(self, key: str, now: float) -> None:
        _, count = self._retry_at.get(key, (0.0, 0))
        delay = min(self.settings.max_retry_s, self.settings.first_retry_s * (2**count))
        self._retry_at[key] = (now + delay, count + 1)

    def run_once(self) -> PassReport:
        """One pass over the checkpoint (and, when due, one orphan scan)."""
        report = PassReport()
        store = self.attach.store
        clock = self.attach.clock
        records = store.all_claims()
        self.attach.reporter.metrics.count_phases(records.values())
        forward: dict[str, list[model.ClaimRecord]] = {}
        releasing: list[model.ClaimRecord] = []
        for record in records.values():
            if not record.managed_bindings():
                continue
            if checkpoint_lifecycle.release_in_progress(record):
                releasing.append(record)
            else:
                forward.setdefault(record.pod_uid, []).append(record)
        budget = self.settings.max_items_per_pass
        self._forget_network_data(records.values())
        self.gone.forget_except(set(records))
        last_scan = self._last_orphan_scan  # templates are read at the orphan scan's cadence
        self.templates.new_pass(
            due=last_scan is None or clock.monotonic() - last_scan >= self.settings.orphan_interval_s
        )
        node_check = self._node_identity() if forward else None
        listed = self._list_shadows() if forward and node_check is None else None
        for pod_uid, pod_records in sorted(forward.items()):
            key = f"pod/{pod_uid}"
            if node_check is not None:
                stopped, why = node_check
                (report.stopped if stopped else report.failed)[key] = why
                continue
            if budget <= 0 or not self._due(key, clock.monotonic()):
                report.deferred.append(key)
                continue
            budget -= 1
            self._repair_pod(pod_uid, pod_records, report, key, nads=listed)
        for record in releasing:
            key = f"claim/{record.claim_uid}"
            if budget <= 0 or not self._due(key, clock.monotonic()):
                report.deferred.append(key)
                continue
            budget -= 1
            self._resume_release(record, report, key)
        now = clock.monotonic()
        if self._last_orphan_scan is None or now - self._last_orphan_scan >= self.settings.orphan_interval_s:
            self._last_orphan_scan = now
            report.orphans = self.scan_orphans()
        return report

    def _node_identity(self) -> tuple[bool, str] | None:
        """``None`` when the Node still has the recorded UID; else ``(True, why)`` when forward repair
        stops for every Pod this pass (a changed UID: docs/design.md#repair) or ``(False, reason)``
        when the live Node read failed (the Pods' items fail and are retried next pass)."""
        try:
            self.attach.check_node()
        except errors.ContractViolation as exc:
            if self._node_stop is None:  # logged once per change, not every pass
                LOG.error(
                    "node identity changed: forward repair stopped",
                    extra={"op": "repair", "reason": str(exc)},
                )
            self._node_stop = f"node UID mismatch: {exc.summary}"
            return True, self._node_stop
        except kube_errors.ApiError as exc:
            return False, observe.reason_of(exc)
        self._node_stop = None
        return None

    def _list_shadows(self) -> seams.NadApi | None:
        """The pass's one LIST of this node's shadows (``listed_shadows``); ``None`` (each shadow is then
        read with its own GET, as before) when the LIST fails."""
        try:
            return listed_shadows.ListedShadows.of_node(self.attach.nads, self.attach.node.uid)
        except kube_errors.ApiError as exc:
            LOG.warning(
                "shadow LIST failed: this pass reads each shadow",
                extra={"op": "repair", "reason": observe.reason_of(exc)},
            )
            return None

    def _forget_network_data(self, records: Collection[model.ClaimRecord]) -> None:
        """Forget network-status values and noted problems of Pods and claims no longer recorded."""
        pods = {r.pod_uid for r in records}
        with self._queue_lock:
            for uid in [u for u in self._handled_status if u not in pods]:
                del self._handled_status[uid]
        if self.network_data is not None:
            self.network_data.forget({r.claim_uid for r in records}, pods)

    def _consumer(self, record: model.ClaimRecord) -> tuple[Mapping[str, object], Mapping[str, object]]:
        """The live claim and consumer Pod of ``record`` when forward repair applies; raises _Stop otherwise."""
        attach = self.attach
        try:
            claim = attach.claims.get(record.namespace, record.name)
        except kube_errors.NotFound:
            raise _Stop("claim deleted", claim_gone=True) from None
        found = views.decode_claim(claim)
        if found.meta.uid != record.claim_uid:
            raise _Stop("claim replaced (another UID)", claim_gone=True)
        self.gone.seen_present(record.claim_uid)
        reserved = [r for r in found.reserved_for if r.uid == record.pod_uid]
        if not reserved:
            raise _Stop("claim no longer reserved for the recorded Pod")
        try:
            pod = attach.pods.get(record.namespace, reserved[0].name)
        except kube_errors.NotFound:
            raise _Stop("Pod deleted") from None
        view = views.decode_pod(pod)
        if view.meta.uid != record.pod_uid:
            raise _Stop("Pod replaced (another UID)")
        if view.node_name != attach.node.name:
            raise _Stop("Pod is bound to another node")
        if view.meta.deleting:
            raise _Stop("Pod is terminating")
        return claim, pod

    def _repair_pod(
        self,
        pod_uid: str,
        records: list[model.ClaimRecord],
        report: PassReport,
        key: str,
        *,
        nads: seams.NadApi | None,
    ) -> None:
        attach = self.attach
        first = records[0]
        started = attach.clock.monotonic()
        try:
            claim, pod = self._consumer(first)
            with attach.locks.hold(first.claim_uid, pod_uid):
                if not ensure_mod.forward_records(attach.store, pod_uid):
                    return
                result = attach.ensure_pod(pod, host=self.host_prepare, nads=nads)
                if self.network_data is not None:  # diagnostic, never raises (network_data_writer)
                    self.network_data.write(
                        pod,
                        ensure_mod.forward_records(attach.store, pod_uid),
                        current={first.claim_uid: claim},
                    )
                    with self._queue_lock:
                        self._handled_status[pod_uid] = network_data_writer.network_status_of(pod)
        except _Stop as stop:
            report.stopped[key] = str(stop)
            if stop.claim_gone and self.gone.seen_gone(first.claim_uid, attach.clock.monotonic()):
                self._release_gone(first, report, key)
                return
            LOG.info(
                "forward repair stopped", extra={"pod_uid": pod_uid, "reason": str(stop), "op": "repair"}
            )
            return
        except Exception as exc:
            report.failed[key] = observe.reason_of(exc)
            self._failed(key, attach.clock.monotonic())
            meta = first
            attach.reporter.failure(
                "repair",
                exc,
                kind=observe.CLAIM,
                namespace=meta.namespace,
                name=meta.name,
                uid=meta.claim_uid,
            )
            return
        pod_name = views.decode_meta(pod).name
        attach.note(result, namespace=first.namespace, name=pod_name, uid=pod_uid)
        if result.failed:
            report.failed[key] = ",".join(sorted({observe.reason_of(e) for e in result.failed.values()}))
            self._failed(key, attach.clock.monotonic())
            return
        self._retry_at.pop(key, None)
        report.ensured_pods.append(pod_uid)
        self.templates.report(attach.reporter, pod, ensure_mod.forward_records(attach.store, pod_uid))
        if result.created or result.patched:
            attach.reporter.metrics.repair_seconds.observe(attach.clock.monotonic() - started)
            attach.reporter.event(
                observe.POD,
                first.namespace,
                pod_name,
                pod_uid,
                reason=observe.REASON_REPAIRED,
                note=f"repaired managed networks (shadows recreated: {', '.join(result.created) or 'none'}; "
                f"annotation rewritten: {result.patched})",
                warning=True,
                action="Repair",
            )

    def _release_gone(self, record: model.ClaimRecord, report: PassReport, key: str) -> None:
        try:
            if gone_claims.release_gone(self.attach, record, self.host_release, self.clear_status, self.gone):
                report.released.append(record.claim_uid)
        except (errors.SriovDraError, kube_errors.ApiError, OSError) as exc:
            report.failed[key] = observe.reason_of(exc)
            self._failed(key, self.attach.clock.monotonic())

    def _resume_release(self, record: model.ClaimRecord, report: PassReport, key: str) -> None:
        attach = self.attach
        try:
            with attach.locks.hold(record.claim_uid, record.pod_uid):
                current = attach.store.snapshot_claim(record.claim_uid)
                if current is None or not checkpoint_lifecycle.release_in_progress(current):
                    return
                host = None if checkpoint_lifecycle.locally_released(current) else self.host_release
                if host is None and not checkpoint_lifecycle.locally_released(current):
                    report.deferred.append(key)  # Deleting, but no authorized host release wired: wait
                    return
                attach.release(current, release_host=host, clear_status=self.clear_status)
        except (errors.SriovDraError, kube_errors.ApiError, OSError) as exc:
            report.failed[key] = observe.reason_of(exc)
            self._failed(key, attach.clock.monotonic())
            return
        self._retry_at.pop(key, None)
        report.released.append(record.claim_uid)

    def scan_orphans(self) -> list[orphans.ShadowReport]:
        """List this node's shadows and report the orphans (log, Event, metric); never finalize."""
        attach = self.attach
        try:
            found = orphans.scan(nads=attach.nads, store=attach.store, node=attach.node)
        except kube_errors.ApiError as exc:
            attach.reporter.metrics.failed("orphans", exc)
            LOG.warning("orphan scan failed", extra={"op": "orphans", "reason": observe.reason_of(exc)})
            return []
        lost = [r for r in found if r.status is orphans.Status.ORPHANED]
        attach.reporter.metrics.orphans.set(len(lost))
        for item in lost:
            LOG.warning(
                "orphaned shadow",
                extra={
                    "nad": f"{item.namespace}/{item.name}",
                    "claim_uid": item.claim_uid,
                    "pod_uid": item.pod_uid,
                    "reason": item.why,
                    "op": "orphans",
                },
            )
            attach.reporter.event(
                observe.NAD,
                item.namespace,
                item.name,
                item.uid,
                reason=observe.REASON_ORPHAN,
                note=f"shadow of node {attach.node.name} has no matching checkpoint record ({item.why}); it is kept "
                "and protected: inspect it with 'sriov-dra orphans'",
                warning=True,
                action="OrphanScan",
            )
        return found
