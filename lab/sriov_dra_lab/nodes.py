"""Simulated nodes: a Node object kept Ready with a renewed Lease by a background thread.

There is no kubelet on the lab machine, so without a heartbeat the node-lifecycle controller
would taint the Node unreachable and evict its Pods. One daemon thread per node repeats the
heartbeat every ``interval_s`` until stopped.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Mapping

from kubernetes import client

from sriov_dra_lab.fakes import heartbeats

log = logging.getLogger(__name__)


class SimulatedNode:
    """A registered Node with a heartbeat thread.

    Units: ``interval_s`` seconds between heartbeats (the lease lasts 40 s).
    """

    def __init__(
        self,
        api: client.ApiClient,
        name: str,
        *,
        labels: Mapping[str, str] | None = None,
        interval_s: float = 10.0,
        schedulable_timeout_s: float = 60.0,
    ) -> None:
        self.api = api
        self.name = name
        self.labels = dict(labels or {})
        self.interval_s = interval_s
        self.schedulable_timeout_s = schedulable_timeout_s
        self.uid = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> SimulatedNode:
        """Register the Node, send one heartbeat synchronously, keep it fresh, wait until schedulable.

        The node-lifecycle controller may have tainted the new Node ``not-ready`` before its first
        heartbeat; a Pod scheduled in that window would be refused for the taint, not for what a
        test means to exercise. So this returns only once those taints are gone.
        Raises: ``TimeoutError`` naming the taints still present after ``schedulable_timeout_s``.
        """
        self.uid = heartbeats.ensure_node(self.api, self.name, labels=self.labels)
        self._beat()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.name}", daemon=True)
        self._thread.start()
        self._wait_schedulable()
        return self

    def _wait_schedulable(self) -> None:
        blocking = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
        deadline = time.monotonic() + self.schedulable_timeout_s
        left: list[str] = []
        while time.monotonic() < deadline:
            left = [k for k in heartbeats.taint_keys(self.api, self.name) if k in blocking]
            if not left:
                return
            self._stop.wait(0.2)
        raise TimeoutError(
            f"Node {self.name} still has taints {left} after {self.schedulable_timeout_s:.0f}s; "
            "is kube-controller-manager (node-lifecycle controller) running?"
        )

    def _beat(self) -> None:
        now = dt.datetime.now(dt.UTC)
        heartbeats.mark_ready(self.api, self.name, now=now)
        heartbeats.renew_lease(self.api, self.name, self.uid, now=now)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._beat()
            except Exception:  # keep beating through transient API errors
                log.exception("node heartbeat failed", extra={"node": self.name})

    def stop(self, *, delete: bool = False) -> None:
        """Stop the heartbeat (within one API call) and optionally delete the Node."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)
        if delete:
            heartbeats.delete_node(self.api, self.name)
