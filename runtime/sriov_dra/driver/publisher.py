"""ResourceSlice publisher: discovery, policy evaluation and node-scoped slices, kept in sync.

The publication loop of one node: VF discovery once at start (as upstream), the
:class:`~sriov_dra.driver.policy_controller.PolicyController` watches, a watch of this driver's
slices on this node (a deleted slice is recreated), and one worker that re-plans
(``core.plugin.slices.plan_writes``) after any change and every ``resync_s``, writing only what
differs (an idle resync writes nothing). ``taints`` gives the device taints of unhealthy VFs
(``driver.health_taints``); when the API server drops them (its ``DRADeviceTaints`` gate is
off) the publisher logs it once, counts ``taints_dropped`` and publishes without taints. :meth:`Publisher.start` raises on a missing policy
namespace, CRD or sysfs. A failed sync backs off and retries; no lock is held across API calls.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from sriov_dra.core import attributes
from sriov_dra.core.plugin import slices
from sriov_dra.driver import mapping_report, policy_controller
from sriov_dra.host import discovery
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import resource_slices, watches
from sriov_dra.servicekit import probes
from sriov_dra.servicekit import threads as svc_threads
from sriov_dra_rules import names

LOG = logging.getLogger(__name__)
POLICY_SYNC_TIMEOUT_S = 60.0
"""How long startup waits for the policy watches' first lists (:meth:`Publisher.wait_evaluated`)."""


@dataclass(frozen=True)
class PublisherStats:
    """Counters since start. ``writes`` counts every successful slice create/update/delete."""

    syncs: int = 0
    writes: int = 0
    creates: int = 0
    updates: int = 0
    deletes: int = 0
    conflicts: int = 0
    failures: int = 0
    handler_errors: int = 0
    generation: int = 0
    published_devices: int = 0
    tainted_devices: int = 0
    taints_dropped: bool = False
    last_error: str = ""


class Publisher:
    """Publishes the node's advertised VFs as ResourceSlices until ``stop`` is set.

    Units: ``resync_s`` seconds between idle syncs; ``settle_s`` seconds to coalesce a burst of
    events into one sync; ``backoff_max_s`` the longest pause after failed syncs.
    """

    def __init__(
        self,
        *,
        api: watches.ApiClient,
        node_name: str,
        sysfs: sysfs_mod.Sysfs,
        policy_namespace: str,
        driver_name: str = names.DRIVER_NAME,
        stop: threading.Event,
        managed: bool = False,
        resync_s: float = 60.0,
        settle_s: float = 0.1,
        backoff_max_s: float = 30.0,
        watch_timeout_s: int = 300,
        eswitch_modes: discovery.EswitchModeSource | None = None,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] = LOG,
        health: probes.Health | None = None,
        mapping: mapping_report.MappingReporter | None = None,
        taints: Callable[[], slices.Taints] | None = None,
    ) -> None:
        self._health = health
        self._mapping = mapping
        self._taints = taints
        self._taints_dropped = False
        self.api = api
        self.node_name = node_name
        self.sysfs = sysfs
        self.policy_namespace = policy_namespace
        self.driver_name = driver_name
        self.managed = managed
        self._stop = stop
        self._resync_s = resync_s
        self._settle_s = settle_s
        self._backoff_max_s = backoff_max_s
        self._watch_timeout_s = watch_timeout_s
        self._eswitch_modes = eswitch_modes
        self._log = log
        self._dirty = threading.Event()
        self._published = threading.Event()
        self._sync_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._stats = PublisherStats()
        self._last_generation = 0
        self._controller: policy_controller.PolicyController | None = None
        self._slices: watches.Watch | None = None
        self._worker: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Publisher:
        """Discover VFs, check the policy namespace and CRDs, start the watches and the worker.

        Raises: ``sysfs.SysfsReadError`` when discovery cannot read the PCI tree;
        ``PolicyNamespaceMissing`` / ``PolicyCrdMissing`` with the fix; ``kube.errors.ApiError``
        when the API server refuses the checks.
        """
        inventory = discovery.discover(self.sysfs, eswitch_modes=self._eswitch_modes, log=self._log)
        controller = policy_controller.PolicyController(
            api=self.api,
            node_name=self.node_name,
            namespace=self.policy_namespace,
            inventory=inventory,
            managed=self.managed,
            stop=self._stop,
            on_change=self.request_sync,
            watch_timeout_s=self._watch_timeout_s,
            log=self._log,
        )
        controller.check()
        self._controller = controller
        self._slices = watches.Watch(
            self.api,
            resource_slices.watch_target(driver=self.driver_name, node=self.node_name),
            self._slice_event,
            name="resourceslices",
            stop=self._stop,
            timeout_s=self._watch_timeout_s,
            log=self._log,
        )
        controller.start()
        self._slices.start()
        # A crash outside the per-sync handling records itself in ``health`` (liveness fails).
        self._worker = svc_threads.start(
            f"publisher-{self.node_name}", self._run, health=self._health, log=self._log
        )
        self._log.info(
            "publisher started",
            extra={"op": "publish", "node": self.node_name, "outcome": f"{len(inventory)} vfs discovered"},
        )
        return self

    def wait_evaluated(self, timeout_s: float = POLICY_SYNC_TIMEOUT_S) -> bool:
        """Wait until the policy watches finished their first lists, then evaluate them once (under the
        sync lock, as the worker does), so :meth:`snapshot` holds the eligible devices, not the empty
        snapshot a fresh controller starts with: a kubelet call held at the rolling-update gate is
        answered the moment it opens. Units: seconds. Returns False, with a warning, when the lists did
        not finish in time (the snapshot stays empty until they do; the worker evaluates then).
        Raises: RuntimeError before :meth:`start`.
        """
        controller = self._require_controller()
        deadline = time.monotonic() + timeout_s
        for watch in (controller.policies, controller.device_attributes, controller.node):
            if not watch.wait_synced(max(0.0, deadline - time.monotonic())):
                self._log.warning(
                    "policy watches not synced; claims fail DeviceNotEligible until they are",
                    extra={"op": "publish", "node": self.node_name, "timeout_s": timeout_s},
                )
                return False
        with self._sync_lock:
            controller.evaluate()
        return True

    def close(self, *, timeout_s: float = 5.0) -> None:
        """Stop the worker and the watches (sets ``stop``); idempotent. Units: seconds."""
        self._stop.set()
        self._dirty.set()
        if self._controller is not None:
            self._controller.close(timeout_s=timeout_s)
        if self._slices is not None:
            self._slices.close(timeout_s=timeout_s)
        if self._worker is not None:
            self._worker.join(timeout_s)

    # ------------------------------------------------------------------ queries
    def snapshot(self) -> policy_controller.DeviceSnapshot:
        """The current immutable device snapshot (eligibility, attributes, full inventory).

        Raises: RuntimeError before :meth:`start`.
        """
        return self._require_controller().snapshot()

    def watched_node_uid(self) -> str | None:
        """The Node's UID in the policy controller's Node watch cache (``None``: not known).

        Raises: RuntimeError before :meth:`start`.
        """
        return self._require_controller().watched_node_uid()

    def stats(self) -> PublisherStats:
        """A copy of the counters."""
        with self._stats_lock:
            errors_now = self._handler_errors()
            return replace(self._stats, handler_errors=errors_now)

    def wait_published(self, timeout_s: float) -> bool:
        """Wait until a sync has published (or confirmed) the pool at least once. Units: seconds."""
        return self._published.wait(timeout_s)

    def request_sync(self) -> None:
        """Ask the worker for a sync soon (called by the watches; cheap and thread-safe)."""
        self._dirty.set()

    # ------------------------------------------------------------------ sync
    def sync(self) -> slices.SliceWrites | None:
        """Evaluate and publish once, now; return the applied plan (``None`` if not ready).

        Not ready means the watches have not finished their first lists or the Node is not
        known yet (its UID owns the slices). Thread-safe; the worker calls the same method.
        Raises: ``kube.errors.ApiError`` from the list or a write (``Conflict``/``NotFound``
        when the pool changed under the plan: sync again).
        """
        controller = self._require_controller()
        with self._sync_lock:
            if not controller.synced:
                return None
            snap = controller.evaluate()
            if self._mapping is not None:
                self._mapping.report(snap, controller.cached_objects())
            if snap.node_uid is None:
                self._log.warning(
                    "node not found; not publishing", extra={"op": "publish", "node": self.node_name}
                )
                return None
            current = resource_slices.list_slices(self.api, driver=self.driver_name, node=self.node_name)
            taints = {} if self._taints is None or self._taints_dropped else self._taints()
            taints = {d: t for d, t in taints.items() if d in snap.published}
            writes = slices.plan_writes(
                current,
                snap.devices,
                driver=self.driver_name,
                node=self.node_name,
                node_uid=snap.node_uid,
                last_generation=self._last_generation,
                taints=taints,
            )
            counts: dict[str, int] = {}

            def wrote(verb: str, name: str) -> None:
                counts[verb] = counts.get(verb, 0) + 1

            try:
                resource_slices.apply_writes(self.api, writes, on_write=wrote, on_stored=self._check_stored)
            finally:
                self._count(counts)
            self._last_generation = writes.generation
            self._count({}, generation=writes.generation, devices=len(snap.published))
            with self._stats_lock:
                self._stats = replace(
                    self._stats, tainted_devices=len(taints), taints_dropped=self._taints_dropped
                )
            if not writes.empty:
                self._log.info(
                    "slices published",
                    extra={
                        "op": "publish",
                        "node": self.node_name,
                        "outcome": f"generation {writes.generation}, {len(snap.published)} devices, "
                        f"{writes.count} writes",
                    },
                )
            self._published.set()
            return writes

    def _check_stored(self, sent: Mapping[str, Any], stored: Mapping[str, Any]) -> None:
        if self._taints_dropped or not slices.dropped_taints(sent, stored):
            return
        self._taints_dropped = True
        self._dirty.set()  # republish without taints, so the next syncs write nothing
        self._log.error(
            "the API server dropped the device taints of the slice; unhealthy VFs stay allocatable. "
            "Turn on the DRADeviceTaints feature gate of kube-apiserver, kube-scheduler and "
            "kube-controller-manager (on by default in Kubernetes 1.36) and restart the plugin",
            extra={
                "op": "publish",
                "node": self.node_name,
                "slice": str(sent.get("metadata", {}).get("name")),
            },
        )

    def _count(
        self, counts: Mapping[str, int], *, generation: int | None = None, devices: int | None = None
    ) -> None:
        with self._stats_lock:
            s = self._stats
            self._stats = replace(
                s,
                writes=s.writes + sum(counts.values()),
                creates=s.creates + counts.get("create", 0),
                updates=s.updates + counts.get("update", 0),
                deletes=s.deletes + counts.get("delete", 0),
                generation=s.generation if generation is None else generation,
                published_devices=s.published_devices if devices is None else devices,
            )

    def _bump(
        self, *, syncs: int = 0, conflicts: int = 0, failures: int = 0, error: str | None = None
    ) -> None:
        with self._stats_lock:
            s = self._stats
            self._stats = replace(
                s,
                syncs=s.syncs + syncs,
                conflicts=s.conflicts + conflicts,
                failures=s.failures + failures,
                last_error=s.last_error if error is None else error,
            )

    # ------------------------------------------------------------------ worker
    def _run(self) -> None:
        backoff = 0.0
        next_resync = time.monotonic() + self._resync_s
        while not self._stop.is_set():
            woken = self._dirty.wait(min(1.0, max(0.0, next_resync - time.monotonic())))
            if self._stop.is_set():
                break
            if not woken and time.monotonic() < next_resync:
                continue
            if woken and self._settle_s > 0:
                self._stop.wait(self._settle_s)
            self._dirty.clear()
            next_resync = time.monotonic() + self._resync_s
            try:
                self.sync()
                self._bump(syncs=1)
                backoff = 0.0
            except (kube_errors.Conflict, kube_errors.NotFound) as exc:
                self._bump(syncs=1, conflicts=1, error=str(exc))
                self._log.info(
                    "pool changed during sync; retrying", extra={"op": "publish", "error": str(exc)}
                )
                backoff = min(max(backoff * 2, 0.1), self._backoff_max_s)
                self._retry_after(backoff)
            except Exception as exc:  # keep publishing through API outages; count and back off
                self._bump(syncs=1, failures=1, error=f"{type(exc).__name__}: {exc}"[:512])
                self._log.exception("slice sync failed", extra={"op": "publish", "node": self.node_name})
                backoff = min(max(backoff * 2, 0.5), self._backoff_max_s)
                self._retry_after(backoff)
        if self._controller is not None:
            self._controller.close()
        if self._slices is not None:
            self._slices.close()

    def _retry_after(self, seconds: float) -> None:
        if not self._stop.wait(seconds):
            self._dirty.set()

    def _slice_event(self, kind: str, obj: watches.JsonObject) -> None:
        if kind != watches.SYNCED:
            self._dirty.set()

    def _handler_errors(self) -> int:
        total = self._slices.handler_errors if self._slices is not None else 0
        return total + (self._controller.handler_errors if self._controller is not None else 0)

    def _require_controller(self) -> policy_controller.PolicyController:
        if self._controller is None:
            raise RuntimeError("Publisher.start() has not run yet")
        return self._controller


class SnapshotInventory:
    """``claim_context.Inventory`` over the publisher's current snapshot (full inventory)."""

    def __init__(self, pub: Publisher) -> None:
        self._pub = pub

    def vfs(self) -> Mapping[str, discovery.DiscoveredVf]:
        return self._pub.snapshot().inventory

    def published(self, device: str) -> Mapping[str, attributes.AttributeValue] | None:
        """The device's attributes as advertised now, or None when it is not advertised."""
        found = self._pub.snapshot().published.get(device)
        return found.attributes if found is not None else None
