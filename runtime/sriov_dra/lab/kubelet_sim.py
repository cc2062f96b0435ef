"""A kubelet for one lab node: Pods bound to the node get their claims prepared and their network.

The lab has no kubelet and no container runtime. This simulator does the parts of a kubelet's Pod
sync that the product depends on, in the kubelet's order, against the real API server and over
the plugin's real sockets:

Start (a Pod bound to this node, not terminating, without a live sandbox):
  1. resolve ``spec.resourceClaims`` (direct names, template claims through
     ``status.resourceClaimStatuses``); wait while a claim is missing, unallocated or not
     reserved for the Pod;
  2. register plugins found in the node's plugin registry, then ``prepare_pod`` through
     :class:`~sriov_dra.lab.kubelet.KubeletDraManager` (one NodePrepareResources per driver, only
     claims not yet prepared); checkpoint the claim cache;
  3. create the sandbox: network namespace + CNI ADD through the node's CNI config
     (:mod:`~sriov_dra.lab.sandboxes`); checkpoint the sandbox;
  4. report the Pod ``Running`` with its IPs (status subresource, UID-tested JSON Patch).
  A failure emits the kubelet's Warning Event (``FailedPrepareDynamicResources``,
  ``FailedCreatePodSandBox``) and is retried with backoff, as the kubelet does.

Stop (``deletionTimestamp`` set, or the Pod vanished while a sandbox exists): CNI DEL and remove
the namespace, ``unprepare_pod`` (NodeUnprepareResources for claims no other Pod uses),
checkpoint, then delete the Pod with grace period 0 and a UID precondition (the kubelet's final
delete). Failures are retried.

Restart: a new simulator on the same checkpoint restores the claim cache (prepared claims are not
prepared again) and the sandboxes; :meth:`KubeletSimulator.kill_sandbox` stops a sandbox as a
dying runtime sandbox would be cleaned up, and the next sync recreates it without a new prepare.

Runs one daemon sync thread per node and one short-lived daemon worker thread per Pod with work
to do (Pods proceed in parallel, one Pod's steps in order, as the kubelet's pod workers do);
never changes namespace itself (every CNI call is a child process entering the node's
namespaces).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import objects
from sriov_dra.kubeletapi import messages
from sriov_dra.lab import iproute, kubelet, sandboxes
from sriov_dra.lab import kubelet_state as state

log = logging.getLogger(__name__)

POD = objects.Resource("", "v1", "pods", "Pod")
CLAIM = objects.Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim")
EVENT = objects.Resource("", "v1", "events", "Event")


@dataclass(frozen=True)
class SimSettings:
    """One node's simulator settings.

    Units: ``poll_s`` seconds between Pod list syncs; backoffs in seconds (doubling per failure).
    """

    node_name: str
    registry_dir: Path
    state_file: Path
    runtime: sandboxes.RuntimeSettings
    host_ip: str = "127.0.0.1"
    poll_s: float = 0.2
    backoff_min_s: float = 0.5
    backoff_max_s: float = 8.0


@dataclass
class PodRecord:
    """What the simulator did for one Pod (for tests and inspection).

    Shapes: ``prepare_calls`` / ``unprepare_calls`` list every RPC made for the Pod (driver, claim
    UIDs); ``failures`` the Event messages emitted, oldest first.
    """

    prepare_calls: list[kubelet.DriverCall] = field(default_factory=list)
    unprepare_calls: list[kubelet.DriverCall] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    sandboxes_started: int = 0


class _NotReady(Exception):
    """The Pod cannot start yet (claims not created/allocated/reserved); wait without an Event."""


class KubeletSimulator:
    """The kubelet of one lab node (see the module docstring)."""

    def __init__(self, api: client.ApiClient, settings: SimSettings) -> None:
        self.api = api
        self.settings = settings
        self.objects = objects.Objects(api, field_manager="kubelet")
        self.manager = state.CheckpointedDraManager()
        self.runtime = sandboxes.SandboxRuntime(settings.runtime)
        self.state = state.SimState(settings.state_file)
        self.records: dict[str, PodRecord] = {}
        self._retry_at: dict[str, tuple[float, float]] = {}
        self._workers: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> KubeletSimulator:
        """Load the checkpoint (restoring prepared claims), then sync in a daemon thread.

        Raises: :class:`~sriov_dra.lab.kubelet_state.StateCorrupt`.
        """
        self.state.load()
        self.manager.restore_claims(self.state.claims)
        self._thread = threading.Thread(
            target=self._run, name=f"kubelet-{self.settings.node_name}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop syncing, let busy Pod workers finish, close plugin connections; sandboxes stay."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=150)
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            worker.join(timeout=150)
        self.manager.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync_once()
            except Exception:  # one bad sync must not stop the node; it is retried
                log.exception("kubelet sync failed", extra={"node": self.settings.node_name})
            self._stop.wait(self.settings.poll_s)

    # ------------------------------------------------------------------ sync
    def _pods(self) -> list[dict[str, Any]]:
        query = [("fieldSelector", f"spec.nodeName={self.settings.node_name}")]
        doc = self.objects._call(f"list pods on {self.settings.node_name}", "GET", POD.path(), query=query)
        return [p for p in doc.get("items") or [] if isinstance(p, dict)]

    def sync_once(self) -> None:
        """One pass over the node's Pods and sandboxes (the loop calls it every ``poll_s``)."""
        pods = self._pods()
        seen = set()
        for pod in pods:
            if self._stop.is_set():
                return
            meta, status = pod["metadata"], pod.get("status") or {}
            uid = meta["uid"]
            seen.add(uid)
            if not self._due(uid):
                continue
            if meta.get("deletionTimestamp"):
                self._dispatch(uid, pod, self._terminate)
            elif status.get("phase") in ("Succeeded", "Failed"):
                continue
            else:
                record = self.state.sandbox(uid)
                if record is None or not self.runtime.alive(record):
                    self._dispatch(uid, pod, self._start_pod)
        for record in self.state.all_sandboxes():
            if record.pod_uid not in seen and self._due(record.pod_uid):
                self._dispatch(record.pod_uid, None, lambda _pod, rec=record: self._teardown(rec, None))

    def _dispatch(self, uid: str, pod: dict[str, Any] | None, step: Any) -> None:
        """Run ``step`` for one Pod on its own worker thread unless one is already busy with it.

        Like the kubelet's per-Pod workers: Pods proceed in parallel, one Pod's steps in order.
        """
        with self._lock:
            if uid in self._workers:
                return
            worker = threading.Thread(
                target=self._work, args=(uid, pod, step), name=f"podworker-{uid[:8]}", daemon=True
            )
            self._workers[uid] = worker
        worker.start()

    def _work(self, uid: str, pod: dict[str, Any] | None, step: Any) -> None:
        try:
            self._guarded(uid, pod, step)
        except Exception:  # a worker never dies silently; the Pod is retried on a later sync
            log.exception("pod worker failed", extra={"node": self.settings.node_name, "pod_uid": uid})
            self._backoff(uid)
        finally:
            with self._lock:
                self._workers.pop(uid, None)

    def _due(self, uid: str) -> bool:
        with self._lock:
            at = self._retry_at.get(uid)
        return at is None or time.monotonic() >= at[0]

    def _guarded(self, uid: str, pod: dict[str, Any] | None, step: Any) -> None:
        try:
            step(pod)
        except _NotReady:
            self._backoff(uid, quiet=True)
            return
        except (
            kube_errors.ApiError,
            sandboxes.SandboxError,
            iproute.IpError,
            OSError,
            ValueError,
        ) as exc:
            log.warning(
                "pod sync failed", extra={"node": self.settings.node_name, "pod_uid": uid, "error": str(exc)}
            )
            self._backoff(uid)
            return
        with self._lock:
            self._retry_at.pop(uid, None)

    def _backoff(self, uid: str, *, quiet: bool = False) -> None:
        with self._lock:
            previous = self._retry_at.get(uid, (0.0, 0.0))[1]
            delay = (
                self.settings.backoff_min_s
                if quiet or not previous
                else min(previous * 2, self.settings.backoff_max_s)
            )
            self._retry_at[uid] = (time.monotonic() + delay, delay)

    def record(self, pod_uid: str) -> PodRecord:
        """The simulator's record of ``pod_uid`` (created empty on first use)."""
        with self._lock:
            return self.records.setdefault(pod_uid, PodRecord())

    # ------------------------------------------------------------------ start
    def _claims(self, pod: dict[str, Any]) -> list[kubelet.PodClaim]:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        generated = {
            s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []
        }
        out: dict[str, kubelet.PodClaim] = {}
        for entry in spec.get("resourceClaims") or []:
            if entry.get("resourceClaimName"):
                claim_name = entry["resourceClaimName"]
            elif entry.get("name") in generated:
                claim_name = generated[entry["name"]]
                if not claim_name:
                    continue  # the template needs no claim (nil name): skipped, as the kubelet does
            else:
                raise _NotReady(f"claim of {entry.get('name')} not generated yet")
            if claim_name in out:
                continue
            claim = self.objects.get_or_none(CLAIM, claim_name, meta["namespace"])
            if claim is None:
                raise _NotReady(f"ResourceClaim {claim_name} not found")
            cstatus = claim.get("status") or {}
            reserved = {r.get("uid") for r in cstatus.get("reservedFor") or []}
            results = ((cstatus.get("allocation") or {}).get("devices") or {}).get("results") or []
            if not cstatus.get("allocation") or meta["uid"] not in reserved:
                raise _NotReady(f"ResourceClaim {claim_name} not allocated/reserved for the Pod yet")
            ref = messages.ClaimRef(meta["namespace"], claim_name, claim["metadata"]["uid"])
            out[claim_name] = kubelet.PodClaim(ref, tuple(sorted({r["driver"] for r in results})))
        return list(out.values())

    def _start_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        uid, ns, name = meta["uid"], meta["namespace"], meta["name"]
        claims = self._claims(pod)
        if claims:
            self.manager.sync_registry(self.settings.registry_dir)
        begin = time.monotonic()
        prepared = self.manager.prepare_pod(uid, claims)
        prepare_ms = int((time.monotonic() - begin) * 1000)
        self.record(uid).prepare_calls.extend(prepared.calls)
        self.state.save(self.manager.export_claims())
        if prepared.failure is not None:
            self._event(pod, "FailedPrepareDynamicResources", prepared.failure.message)
            raise ValueError(prepared.failure.message)
        cdi = {
            ref.uid: [cid for devices in by_driver.values() for d in devices for cid in d.cdi_device_ids]
            for ref, by_driver in prepared.devices.items()
        }
        old = self.state.sandbox(uid)
        if old is not None:  # the sandbox died: the runtime cleans it up before a new one
            self.runtime.stop(old)
            self.state.drop_sandbox(uid)
        begin = time.monotonic()
        try:
            record = self.runtime.start(namespace=ns, name=name, uid=uid, cdi_devices=cdi)
        except sandboxes.SandboxError as exc:
            self._event(pod, "FailedCreatePodSandBox", f"Failed to create pod sandbox: {exc}")
            raise
        self.state.put_sandbox(record)
        self.record(uid).sandboxes_started += 1
        sandbox_ms = int((time.monotonic() - begin) * 1000)
        self._report_running(pod, record)
        log.info(
            "pod running",
            extra={
                "node": self.settings.node_name,
                "pod": f"{ns}/{name}",
                "netns": record.netns,
                "prepare_ms": prepare_ms,
                "sandbox_ms": sandbox_ms,
            },
        )

    def _report_running(self, pod: dict[str, Any], record: state.SandboxRecord) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ips = sandboxes.pod_ips(record.result)
        status = dict(pod.get("status") or {})
        conditions = [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
        ]
        scheduled = [c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"]
        status.update(
            {
                "phase": "Running",
                "conditions": scheduled + conditions,
                "hostIP": self.settings.host_ip,
                "hostIPs": [{"ip": self.settings.host_ip}],
                "startTime": status.get("startTime") or now,
                "containerStatuses": [
                    {
                        "name": c["name"],
                        "image": c.get("image", ""),
                        "imageID": "",
                        "containerID": f"lab://{record.container_id}",
                        "ready": True,
                        "started": True,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": now}},
                    }
                    for c in spec.get("containers") or []
                ],
            }
        )
        if ips:
            status["podIP"] = ips[0]
            status["podIPs"] = [{"ip": ip} for ip in ips]
        ops = [
            {"op": "test", "path": "/metadata/uid", "value": meta["uid"]},
            {"op": "replace", "path": "/status", "value": status},
        ]
        self.objects.json_patch(POD, meta["name"], meta["namespace"], ops, subresource="status")

    # ------------------------------------------------------------------ stop
    def _terminate(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        record = self.state.sandbox(meta["uid"])
        self._teardown(record, pod)

    def _teardown(self, record: state.SandboxRecord | None, pod: dict[str, Any] | None) -> None:
        uid = record.pod_uid if record is not None else pod["metadata"]["uid"] if pod else ""
        begin = time.monotonic()
        if record is not None:
            try:
                self.runtime.stop(record)
            except sandboxes.SandboxError as exc:
                if pod is not None:
                    self._event(pod, "FailedKillPod", f"error killing pod: {exc}")
                raise
            self.state.drop_sandbox(uid)
        sandbox_ms = int((time.monotonic() - begin) * 1000)
        result = self.manager.unprepare_pod(uid)
        unprepare_ms = int((time.monotonic() - begin) * 1000) - sandbox_ms
        log.info(
            "pod torn down",
            extra={
                "node": self.settings.node_name,
                "pod_uid": uid,
                "sandbox_ms": sandbox_ms,
                "unprepare_ms": unprepare_ms,
            },
        )
        self.record(uid).unprepare_calls.extend(result.calls)
        self.state.save(self.manager.export_claims())
        if result.failure is not None:
            if pod is not None:
                self._event(pod, "FailedUnprepareDynamicResources", result.failure.message)
            raise ValueError(result.failure.message)
        if pod is not None:
            self._delete(pod)

    def _delete(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": meta["uid"]},
        }
        try:
            self.objects._call(
                f"delete pod {meta['namespace']}/{meta['name']}",
                "DELETE",
                POD.path(meta["namespace"], meta["name"]),
                body=body,
            )
        except (kube_errors.NotFound, kube_errors.Conflict):
            return  # already gone, or replaced by a new Pod with the same name
        log.info(
            "pod deleted",
            extra={"node": self.settings.node_name, "pod": f"{meta['namespace']}/{meta['name']}"},
        )

    # ------------------------------------------------------------------ helpers
    def _event(self, pod: dict[str, Any], reason: str, message: str) -> None:
        meta = pod["metadata"]
        self.record(meta["uid"]).failures.append(f"{reason}: {message}")
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": "kubelet", "host": self.settings.node_name},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": "kubelet",
            "reportingInstance": self.settings.node_name,
        }
        try:
            self.objects.create(EVENT, body)
        except kube_errors.ApiError as exc:
            log.warning("cannot record event", extra={"reason": reason, "error": str(exc)})

    def kill_sandbox(self, pod_uid: str) -> None:
        """Stop the sandbox of ``pod_uid`` as the runtime does when a sandbox dies (DEL, netns removed).

        The next sync finds the running Pod without a sandbox and starts a new one; its claims stay
        prepared, so no NodePrepareResources call is made. Raises:
        :class:`~sriov_dra.lab.sandboxes.SandboxError` or ``KeyError`` if the Pod has no sandbox.
        """
        record = self.state.sandbox(pod_uid)
        if record is None:
            raise KeyError(f"no sandbox for Pod UID {pod_uid} on {self.settings.node_name}")
        self.runtime.stop(record)
        self.state.drop_sandbox(pod_uid)

    def sandbox(self, pod_uid: str) -> state.SandboxRecord | None:
        """The live sandbox record of ``pod_uid`` (netns path, CNI result), or ``None``."""
        return self.state.sandbox(pod_uid)

    def prepared_claims(self) -> list[state.ClaimRecord]:
        """The claim cache (what the kubelet checkpoint would hold)."""
        return self.manager.export_claims()

    def wait_registered(self, driver: str, *, timeout_s: float) -> bool:
        """Wait until ``driver``'s plugin registered through the node's registry. Units: seconds."""
        return self.manager.wait_for_driver(self.settings.registry_dir, driver, timeout_s=timeout_s)
