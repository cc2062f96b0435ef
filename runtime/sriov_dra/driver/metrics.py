"""Prometheus metrics and the health endpoints of the plugin, on one small HTTP server.

Owns the plugin's metric names and the HTTP server behind ``--metrics-bind-address``:
``/metrics`` (Prometheus text format, from a registry of this process only), ``/healthz`` and
``/readyz`` (200 ``ok`` only once the kubelet has registered the plugin and every background
part is alive, else 503 with the reason). Label values are bounded: operations, outcomes, and
``sriov_dra_rules.errors.Reason`` values or error class names.

It must never block a request on the API server or the kubelet.
"""

from __future__ import annotations

import http.server
import logging
import threading
from collections.abc import Callable
from typing import Any, Final

import prometheus_client

LOG = logging.getLogger(__name__)

HealthCheck = Callable[[], tuple[bool, str]]
"""Returns ``(healthy, reason)``; the reason is shown on a 503."""

_PREFIX: Final = "sriov_dra_plugin"


class PluginMetrics:
    """The plugin's metrics in their own registry (implements ``ClaimMetrics``)."""

    def __init__(self) -> None:
        self.registry = prometheus_client.CollectorRegistry()
        self.claim_operations = prometheus_client.Counter(
            f"{_PREFIX}_claim_operations",
            "Claim prepare/unprepare operations by outcome and reason.",
            ["operation", "outcome", "reason"],
            registry=self.registry,
        )
        self.claim_seconds = prometheus_client.Histogram(
            f"{_PREFIX}_claim_operation_seconds",
            "Wall time of one claim prepare/unprepare.",
            ["operation"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 45),
            registry=self.registry,
        )
        self.registered = prometheus_client.Gauge(
            f"{_PREFIX}_kubelet_registered",
            "1 once the kubelet accepted the plugin's registration.",
            registry=self.registry,
        )
        self.discovered_vfs = prometheus_client.Gauge(
            f"{_PREFIX}_discovered_vfs", "VFs found by discovery at startup.", registry=self.registry
        )
        self.prepared_claims = prometheus_client.Gauge(
            f"{_PREFIX}_prepared_claims", "Claims recorded in the checkpoint.", registry=self.registry
        )

    def observe_claim(self, operation: str, outcome: str, reason: str, seconds: float) -> None:
        """Count one claim operation and its duration (``ClaimMetrics``). Units: seconds."""
        self.claim_operations.labels(operation, outcome, reason).inc()
        self.claim_seconds.labels(operation).observe(seconds)

    def render(self) -> bytes:
        """The registry in Prometheus text format."""
        return bytes(prometheus_client.generate_latest(self.registry))


class _Handler(http.server.BaseHTTPRequestHandler):
    metrics: PluginMetrics
    health: HealthCheck

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._reply(200, self.metrics.render(), prometheus_client.CONTENT_TYPE_LATEST)
        elif path in ("/healthz", "/readyz"):
            ok, reason = self.health()
            self._reply(200 if ok else 503, (b"ok\n" if ok else f"{reason}\n".encode()), "text/plain")
        else:
            self._reply(404, b"not found\n", "text/plain")

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("http request", extra={"op": "http", "detail": format % args})


class HttpServer:
    """``/metrics``, ``/healthz``, ``/readyz`` on ``address`` (``host:port``; port 0 = any free).

    Raises (on :meth:`start`): ``OSError`` when the address cannot be bound.
    """

    def __init__(self, address: str, metrics: PluginMetrics, health: HealthCheck) -> None:
        host, _, port = address.rpartition(":")
        self._bind = (host.strip("[]") or "0.0.0.0", int(port))
        handler = type("Handler", (_Handler,), {"metrics": metrics, "health": staticmethod(health)})
        self._server: http.server.ThreadingHTTPServer | None = None
        self._handler = handler
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("the metrics server is not started")
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Bind and serve on a daemon thread."""
        self._server = http.server.ThreadingHTTPServer(self._bind, self._handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True)
        self._thread.start()
        LOG.info(
            "metrics and health endpoints serving",
            extra={"op": "http", "address": f"{self._bind[0]}:{self.port}"},
        )

    def stop(self) -> None:
        """Stop serving and close the socket; idempotent."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
