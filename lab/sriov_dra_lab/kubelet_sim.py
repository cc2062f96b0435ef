"""A kubelet for one lab node: Pods bound to the node get their claims prepared and their network.

The lab has no kubelet and no container runtime. This simulator does the parts of a kubelet's Pod
sync that the product depends on, in the kubelet's order, against the real API server and over
the plugin's real sockets:

Start (a Pod bound to this node, not terminating, without a live sandbox):
  1. resolve ``spec.resourceClaims`` (direct names, template claims through
     ``status.resourceClaimStatuses``); wait while a claim is missing, unallocated or not
     reserved for the Pod;
  2. register plugins found in the node's plugin registry, then ``prepare_pod`` through
     :class:`~sriov_dra_lab.kubelet.KubeletDraManager` (one NodePrepareResources per driver, only
     claims not yet prepared); checkpoint the claim cache;
  3. create the sandbox: network namespace + CNI ADD through the node's CNI config
     (:mod:`~sriov_dra_lab.sandboxes`); checkpoint the sandbox;
  4. report the Pod ``Running`` with its IPs (status subresource, UID-tested JSON Patch).
  A failure emits the kubelet's Warning Event (``FailedPrepareDynamicResources``,
  ``FailedCreatePodSandBox``) and is retried with backoff, as the kubelet does.

Stop (``deletionTimestamp`` set, or the Pod vanished while a sandbox exists): CNI DEL and remove
the namespace, ``unprepare_pod`` (NodeUnprepareResources for claims no other Pod uses),
checkpoint, then delete the Pod with grace period 0 and a UID precondition (the kubelet's final
delete). Failures are retried.

Restart: a new simulator on the same checkpoint restores the claim cache (prepared claims are not
prepared again) and the sandboxes.

Runs one daemon sync thread per node and one short-lived daemon worker thread per Pod with work
to do (Pods proceed in parallel, one Pod's steps in order, as the kubelet's pod workers do);
never changes namespace itself (every CNI call is a child process entering the node's
namespaces).

This module owns the node's sync loop and Pod workers (dispatch, retry with backoff) and what
tests inspect; one Pod's steps and the settings are :mod:`~sriov_dra_lab.kubelet_pods`'s.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kubernetes import client

from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import objects
from sriov_dra_lab import iproute, sandboxes
from sriov_dra_lab import kubelet_state as state
from sriov_dra_lab.kubelet_pods import POD, NotReady, PodRecord, PodSteps, SimSettings

log = logging.getLogger(__name__)


def quiet_failure(exc: BaseException, *, stopping: bool) -> bool:
    """True when a failed sync or Pod step is logged as one line, without its traceback.

    That is an API server that cannot be reached (a transport failure, status 0: the lab's control
    plane stopped first, e.g. on Ctrl-C) or any failure once the simulator is stopping; anything
    else is unexpected and keeps its traceback.
    """
    return stopping or (isinstance(exc, kube_errors.ApiError) and exc.status == 0)


class KubeletSimulator(PodSteps):
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

    def start(self) -> KubeletSimulator:
        """Load the checkpoint (restoring prepared claims), then sync in a daemon thread.

        Raises: :class:`~sriov_dra_lab.kubelet_state.StateCorrupt`.
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

    def _log_failure(self, what: str, exc: Exception, extra: dict[str, str]) -> None:
        if quiet_failure(exc, stopping=self._stop.is_set()):
            log.warning("%s: %s", what, exc, extra=extra)
        else:
            log.exception(what, extra=extra)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync_once()
            except Exception as exc:  # one bad sync must not stop the node; it is retried
                self._log_failure("kubelet sync failed", exc, {"node": self.settings.node_name})
            self._stop.wait(self.settings.poll_s)

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
        except Exception as exc:  # a worker never dies silently; the Pod is retried on a later sync
            self._log_failure("pod worker failed", exc, {"node": self.settings.node_name, "pod_uid": uid})
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
        except NotReady:
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

    def sandbox(self, pod_uid: str) -> state.SandboxRecord | None:
        """The live sandbox record of ``pod_uid`` (netns path, CNI result), or ``None``."""
        return self.state.sandbox(pod_uid)

    def prepared_claims(self) -> list[state.ClaimRecord]:
        """The claim cache (what the kubelet checkpoint would hold)."""
        return self.manager.export_claims()

    def wait_registered(self, driver: str, *, timeout_s: float) -> bool:
        """Wait until ``driver``'s plugin registered through the node's registry. Units: seconds."""
        return self.manager.wait_for_driver(self.settings.registry_dir, driver, timeout_s=timeout_s)
