"""Wiring of the operator: watches → router → work queue → controllers, under one Lease.

:class:`Operator` is the leader's machinery: five watches (node policies in the operator
namespace; SriovNetworks, NADs, Namespaces and Nodes cluster-wide), one worker processing queue
keys one at a time, and a resync loop re-queueing everything every ``resync_period_s``.
:func:`run` adds leader election: losing the Lease stops reconciliation and exits non-zero, so the
Deployment restarts it as a standby. Threads start here and stop through one Event; handler and
reconcile exceptions are contained, logged and counted.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from sriov_dra.core.operator import dra_verdicts, network_refs
from sriov_dra.kube import errors as api_errors
from sriov_dra.kube import events, leader, objects
from sriov_dra.kube import watches as kube_watches
from sriov_dra.operator import metrics as metrics_mod
from sriov_dra.operator import network_controller, policy_controller, queue, settings, status, watches
from sriov_dra.servicekit import probes
from sriov_dra.servicekit import threads as svc_threads
from sriov_dra_rules import names

log = logging.getLogger(__name__)
SHADOW_EXCLUDING_SELECTOR = f"{names.LABEL_MANAGED_BY}!={names.MANAGED_BY_VALUE}"


class Operator:
    """Watches, controllers and worker of the leading instance."""

    def __init__(
        self,
        client: objects.Objects,
        config: settings.OperatorSettings,
        metrics: metrics_mod.Metrics,
        *,
        recorder: events.Recorder | None = None,
        now: Callable[[], str] = status.utc_now,
        health: probes.Health | None = None,
    ) -> None:
        rc = config.reconcile
        self.health = health or probes.Health()
        self.config = config
        self.metrics = metrics
        self.queue = queue.WorkQueue(
            backoff_initial_s=config.retry.initial_s, backoff_max_s=config.retry.max_s
        )
        self.router = watches.Router(
            self.queue.add, operator_namespace=rc.namespace, resource_prefix=rc.resource_prefix
        )
        relist = rc.resync_period_s

        def watcher(
            res: objects.Resource,
            handler: kube_watches.Handler,
            name: str,
            *,
            namespace: str | None = None,
            label_selector: str = "",
        ) -> kube_watches.Watch:
            return kube_watches.Watch(
                client.api,
                kube_watches.Target.of(res, namespace, label_selector=label_selector),
                _routed(handler),
                name=name,
                relist_period_s=relist,
                on_handler_error=lambda w: metrics.handler_errors.labels(w).inc(),
            )

        self.watchers = {
            "policies": watcher(
                objects.NODE_POLICY, self.router.on_policy, "policies", namespace=rc.namespace
            ),
            "networks": watcher(objects.SRIOV_NETWORK, self.router.on_network, "networks"),
            "nads": watcher(
                objects.NAD, self.router.on_nad, "nads", label_selector=SHADOW_EXCLUDING_SELECTOR
            ),
            "namespaces": watcher(objects.NAMESPACE, self.router.on_namespace, "namespaces"),
            "nodes": watcher(objects.NODE, self.router.on_node, "nodes"),
        }
        writer = status.StatusWriter(client, now=now, recorder=recorder)
        self.networks = network_controller.NetworkController(client, rc, writer, self.router.marked_nads)
        self.policies = policy_controller.PolicyController(
            client, rc, writer, policies=self.watchers["policies"].items, nodes=self.watchers["nodes"].items
        )
        self.synced = threading.Event()

    def resync(self) -> None:
        """Queue every known network (including ones only named by NAD markers) and the plan."""
        for ref in self.router.known_networks():
            self.queue.add(queue.network_key(ref.namespace, ref.name))
        self.queue.add(queue.POLICIES)

    def process(self, key: queue.Key) -> bool:
        """Run one key's reconcile; contain failures. Returns True on success."""
        controller = key[0]
        start = time.monotonic()
        ok, outcome, detail = False, "error", ""
        try:
            if key == queue.POLICIES:
                result = self.policies.reconcile()
                ok, outcome, detail = not result.retry, result.outcome, "; ".join(result.failed_writes)
                self.metrics.set_policy_reasons(result.reasons.values())
            else:
                net = self.networks.reconcile(network_refs.ObjectRef(key[1], key[2]))
                ok, outcome, detail = not net.retry, net.outcome, net.detail
        except api_errors.ApiError as exc:
            detail = str(exc)
        except Exception as exc:  # contain: one bad object must not stop the worker
            log.exception("reconcile crashed", extra={"controller": controller, "key": "/".join(key[1:])})
            detail = f"{type(exc).__name__}: {exc}"
        elapsed = time.monotonic() - start
        self.metrics.reconciles.labels(controller, outcome).inc()
        self.metrics.duration.labels(controller).observe(elapsed)
        log.info(
            "reconciled",
            extra={
                "controller": controller,
                "key": "/".join(key[1:]) or dra_verdicts.CONDITION_TYPE,
                "outcome": outcome,
                "duration_ms": round(elapsed * 1000, 1),
                **({"detail": detail[:512]} if detail else {}),
            },
        )
        return ok

    def run(self, stop: threading.Event, *, sync_timeout_s: float = 60.0) -> None:
        """Start everything, work until ``stop`` is set, then stop and join everything."""
        for w in self.watchers.values():
            w.start()
        threads: list[threading.Thread] = []
        try:
            deadline = time.monotonic() + sync_timeout_s
            for name, w in self.watchers.items():
                while not w.wait_synced(0.2):
                    if stop.is_set():
                        return
                    if time.monotonic() > deadline:
                        log.warning("watch not synced yet; continuing", extra={"watch": name})
                        break
            self.synced.set()
            self.resync()
            # A crashed worker stops reconciling (``stop``) and fails liveness: dead work must not
            # look alive behind a held Lease.
            threads = [
                svc_threads.start(
                    "operator-worker", self._work, stop, health=self.health, on_crash=lambda _: stop.set()
                ),
                svc_threads.start(
                    "operator-resync",
                    self._resync_loop,
                    stop,
                    health=self.health,
                    on_crash=lambda _: stop.set(),
                ),
            ]
            stop.wait()
        finally:
            for t in threads:
                t.join(timeout=30)
            for w in self.watchers.values():  # interrupt every stream first, then join each
                w.close(timeout_s=0)
            for w in self.watchers.values():
                w.close()
            self.synced.clear()

    def _work(self, stop: threading.Event) -> None:
        while True:
            key = self.queue.get(stop)
            if key is None:
                return
            ok = self.process(key)
            self.queue.done(key, failed=not ok)

    def _resync_loop(self, stop: threading.Event) -> None:
        while not stop.wait(self.config.reconcile.resync_period_s):
            self.resync()


def _routed(handler: kube_watches.Handler) -> kube_watches.Handler:
    """``handler`` without the watch's :data:`kube_watches.SYNCED` marker (the router needs objects)."""

    def route(kind: str, obj: kube_watches.JsonObject) -> None:
        if kind != kube_watches.SYNCED:
            handler(kind, obj)

    return route


def default_identity() -> str:
    """``$POD_NAME`` or ``<hostname>_<pid>``."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"


def standby_ready(leading: bool, answer_age_s: float | None, lease_duration_s: float) -> tuple[bool, str]:
    """The API part of readiness: ``(ready, why not)``.

    A leader is judged by its watches (the ``caches`` check). A standby is ready only while the
    API server answers its Lease reads: never yet (``answer_age_s`` ``None``), or not within one
    lease duration (seconds), is not ready, so a rollout does not pass on replicas that cannot
    reach the API (they could never take over).
    """
    if leading:
        return True, ""
    if answer_age_s is None:
        return False, "standby: the API server has not answered a Lease read yet"
    if answer_age_s > lease_duration_s:
        return False, f"standby: no answer from the API server to the Lease reads for {answer_age_s:.0f} s"
    return True, ""


def run(config: settings.OperatorSettings, api: kube_watches.ApiClient, stop: threading.Event) -> int:
    """Serve metrics, win the Lease (if enabled), operate until ``stop``; exit code 1 on a lost Lease.

    ``api`` is the ``kubernetes.client.ApiClient`` built by :mod:`sriov_dra.kube.client`.
    """
    metrics = metrics_mod.Metrics()
    client = objects.Objects(api, field_manager=config.reconcile.field_manager, on_write=metrics.count_write)
    identity = config.leader.identity or default_identity()
    recorder = events.Recorder(client, controller="sriov-dra-operator", instance=identity)
    state = probes.Health()
    operator = Operator(client, config, metrics, recorder=recorder, health=state)
    leading = threading.Event()
    election_thread = None
    lock: leader.LeaseLock | None = None
    # The leader is ready once its watches listed; a standby once the API server answers its
    # Lease reads (it serves its probes and waits for the Lease).
    state.check(
        "caches",
        lambda: (
            (True, "") if operator.synced.is_set() or not leading.is_set() else (False, "watches not synced")
        ),
    )
    state.check(
        "api",
        lambda: standby_ready(
            leading.is_set(), None if lock is None else lock.answer_age_s(), config.leader.lease_duration_s
        ),
    )
    endpoint = None
    if config.serve.metrics_address:
        endpoint = probes.HttpServer(
            config.serve.metrics_address, state, probes.registry_renderer(metrics.registry)
        )
        endpoint.start()
    halt = threading.Event()
    lost = threading.Event()
    try:
        if config.leader.enabled:
            lease = leader.LeaseSettings(
                name=config.leader.lease_name,
                namespace=config.leader.lease_namespace or config.reconcile.namespace,
                identity=identity,
                lease_duration_s=config.leader.lease_duration_s,
                renew_deadline_s=config.leader.renew_deadline_s,
                retry_period_s=config.leader.retry_period_s,
            )
            lock = leader.LeaseLock(client, lease.name, lease.namespace, identity)

            def stopped() -> None:
                if not stop.is_set():
                    lost.set()
                halt.set()

            election = leader.make_election(
                lock, lease, leader.StopClock(stop), on_started=leading.set, on_stopped=stopped
            )
            # A crashed election loop renews nothing: stop reconciling as on a lost Lease.
            election_thread = svc_threads.start(
                "leader-election", election.run, health=state, on_crash=lambda _: stopped()
            )
            log.info(
                "waiting for leadership", extra={"op": "elect", "lease": f"{lease.namespace}/{lease.name}"}
            )
            while not leading.wait(0.2):
                if stop.is_set() or lost.is_set():
                    return 0
        else:
            leading.set()
        metrics.leader.set(1)
        log.info("leading", extra={"op": "elect", "outcome": "leader", "identity": identity})

        def relay() -> None:
            stop.wait()
            halt.set()

        svc_threads.start("operator-stop", relay)
        operator.run(halt)
        if lost.is_set() and not stop.is_set():
            log.error("leadership lost; exiting", extra={"op": "elect", "outcome": "lost"})
            return 1
        alive, why = state.alive()
        if not alive:
            log.error("operator stopped: a worker crashed", extra={"op": "run", "reason": why})
            return 1
        return 0
    finally:
        metrics.leader.set(0)
        halt.set()
        stop.set()
        if election_thread is not None:
            election_thread.join(timeout=5)
        if lock is not None and not lost.is_set():
            leader.release(lock)
        if endpoint is not None:
            endpoint.stop()
