"""Prometheus metrics and the HTTP endpoint serving ``/metrics``, ``/healthz`` and ``/readyz``.

Each operator instance owns its own registry (tests run several in one process). Label values
are bounded: controller names, outcome words, API verbs, resource names and condition reasons.

It must never block reconciliation: the endpoint runs on its own daemon thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

from sriov_dra.kube import objects


class Metrics:
    """The operator's metrics on a private registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.reconciles = Counter(
            "sriov_dra_operator_reconcile_total",
            "Reconcile passes by controller and outcome.",
            ["controller", "outcome"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "sriov_dra_operator_reconcile_duration_seconds",
            "Duration of reconcile passes.",
            ["controller"],
            registry=self.registry,
        )
        self.writes = Counter(
            "sriov_dra_operator_api_writes_total",
            "Successful API writes by verb and resource.",
            ["verb", "resource"],
            registry=self.registry,
        )
        self.handler_errors = Counter(
            "sriov_dra_operator_watch_handler_errors_total",
            "Watch handler exceptions contained by the watch.",
            ["watch"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "sriov_dra_operator_leader", "1 while this instance holds the Lease.", registry=self.registry
        )
        self.policies = Gauge(
            "sriov_dra_operator_dra_policies",
            "Node policies with a dra block, by DRAConfigurationReady reason.",
            ["reason"],
            registry=self.registry,
        )
        self._policy_reasons: set[str] = set()

    def count_write(self, verb: str, res: objects.Resource, _name: str) -> None:
        """``Objects.on_write`` hook."""
        self.writes.labels(verb, str(res)).inc()

    def set_policy_reasons(self, reasons: Iterable[str]) -> None:
        """Publish how many DRA policies report each reason (reasons seen before drop to 0)."""
        counts: dict[str, int] = {}
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + 1
        self._policy_reasons |= set(counts)
        for reason in self._policy_reasons:
            self.policies.labels(reason).set(counts.get(reason, 0))


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Access logs would drown the structured log; probes are frequent."""


class Endpoint:
    """``/metrics`` (Prometheus text), ``/healthz`` (process alive), ``/readyz`` (``ready()`` true)."""

    def __init__(self, metrics: Metrics, address: str, ready: Callable[[], bool]) -> None:
        host, _, port = address.rpartition(":")
        self._metrics_app = make_wsgi_app(metrics.registry)
        self._ready = ready
        self.server: WSGIServer = make_server(
            host or "0.0.0.0", int(port), self._app, handler_class=_QuietHandler
        )
        self._thread = threading.Thread(target=self.server.serve_forever, name="metrics-http", daemon=True)

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        return int(self.server.server_port)

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok\n"]
        if path == "/readyz":
            ok = self._ready()
            start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"ok\n" if ok else b"not ready\n"]
        if path == "/metrics":
            result: Iterable[bytes] = self._metrics_app(environ, start_response)
            return result
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]

    def start(self) -> None:
        """Serve on a daemon thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)
