"""The Pod steps of the lab's kubelet simulator: claims, prepare, sandbox, Running; teardown, delete.

This module owns what :class:`~sriov_dra_lab.kubelet_sim.KubeletSimulator` does for one Pod, as
methods it inherits, in the kubelet's order (see :mod:`~sriov_dra_lab.kubelet_sim`): resolving
the Pod's claims (:class:`NotReady` while one is missing, unallocated or not reserved), prepare
through the plugins and the sandbox with its CNI ADD, each checkpointed, the ``Running`` status
under a UID test; on stop the CNI DEL, unprepare and the final UID-preconditioned delete; and the
kubelet's Warning Events on failure. It also holds the simulator's settings and per-Pod records.

It must never loop, start a thread, or enter a namespace itself (every CNI call is a child
process entering the node's namespaces).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import objects
from sriov_dra.kubeletapi import messages
from sriov_dra_lab import kubelet, kubelet_state, sandboxes

# The Pod steps log under the simulator's logger name, as before they were split out of it.
log = logging.getLogger("sriov_dra_lab.kubelet_sim")

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


class NotReady(Exception):
    """The Pod cannot start yet (claims not created/allocated/reserved); wait without an Event."""


class PodSteps:
    """One Pod's start and stop steps; :class:`~sriov_dra_lab.kubelet_sim.KubeletSimulator` sets every field."""

    settings: SimSettings
    objects: objects.Objects
    manager: kubelet_state.CheckpointedDraManager
    runtime: sandboxes.SandboxRuntime
    state: kubelet_state.SimState
    records: dict[str, PodRecord]
    _lock: threading.Lock

    def record(self, pod_uid: str) -> PodRecord:
        """The simulator's record of ``pod_uid`` (created empty on first use)."""
        with self._lock:
            return self.records.setdefault(pod_uid, PodRecord())

    def _claims(self, pod: dict[str, Any]) -> list[kubelet.PodClaim]:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        generated = {
            s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []
        }
        names: list[str] = []
        for entry in spec.get("resourceClaims") or []:
            if entry.get("resourceClaimName"):
                names.append(entry["resourceClaimName"])
            elif entry.get("name") in generated:
                if generated[
                    entry["name"]
                ]:  # a nil name: the template needs no claim, skipped as the kubelet does
                    names.append(generated[entry["name"]])
            else:
                raise NotReady(f"claim of {entry.get('name')} not generated yet")
        extended = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        if extended:  # the scheduler's claim for the Pod's extended resources, prepared like the others
            names.append(extended)
        out: dict[str, kubelet.PodClaim] = {}
        for claim_name in names:
            if claim_name in out:
                continue
            claim = self.objects.get_or_none(CLAIM, claim_name, meta["namespace"])
            if claim is None:
                raise NotReady(f"ResourceClaim {claim_name} not found")
            cstatus = claim.get("status") or {}
            reserved = {r.get("uid") for r in cstatus.get("reservedFor") or []}
            results = ((cstatus.get("allocation") or {}).get("devices") or {}).get("results") or []
            if not cstatus.get("allocation") or meta["uid"] not in reserved:
                raise NotReady(f"ResourceClaim {claim_name} not allocated/reserved for the Pod yet")
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

    def _report_running(self, pod: dict[str, Any], record: kubelet_state.SandboxRecord) -> None:
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

    def _terminate(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        record = self.state.sandbox(meta["uid"])
        self._teardown(record, pod)

    def _teardown(self, record: kubelet_state.SandboxRecord | None, pod: dict[str, Any] | None) -> None:
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
