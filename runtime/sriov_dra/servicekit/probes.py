"""One health, readiness and metrics endpoint with the same meaning in every service.

``/healthz`` (alive): 200 ``ok`` until an essential background worker crashes, then 503 naming
it, so the liveness probe restarts the container; slow or not-yet-ready is still alive.
``/readyz`` (serving): 200 only when alive and every declared readiness condition holds (the
plugin: registered after the repair worker's first pass; the guard: its socket listens; the
operator: caches synced), else 503 listing each unmet condition. ``/metrics``: the Prometheus
registry. :class:`Health` is thread-safe; the server runs on one daemon thread.

Services on the node's network run twice side by side during a rollout and only one binds the
address: a probe that sends ``X-Pod-Uid`` gets 503 "served by another instance" from a server
of another Pod, so each Pod's probes are answered only by its own instance
(docs/plugin.md#rolling-update). Without the header the answer is unchanged. The one exception:
the liveness probe of an instance this one superseded (:meth:`Health.vouch_for`) gets 200, as
a restart of that idle instance would only start it again to idle (docs/guard.md#rolling-update).
"""

from __future__ import annotations

import errno
import http.server
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

import prometheus_client

from sriov_dra.servicekit import threads

LOG = logging.getLogger("sriov_dra.servicekit.probes")


class Health:
    """Liveness (crashed essential workers) and readiness (named conditions) of one service.

    Shapes: ``conditions`` names the readiness conditions, all unmet at first (reason "starting");
    ``pod_uid`` the serving Pod's UID (empty: none), compared with a probe's ``X-Pod-Uid`` header.
    """

    def __init__(self, conditions: Iterable[str] = (), *, pod_uid: str = "") -> None:
        self.pod_uid = pod_uid
        self._lock = threading.Lock()
        self._unmet: dict[str, str] = {name: "starting" for name in conditions}
        self._checks: dict[str, Callable[[], tuple[bool, str]]] = {}
        self._crashed: dict[str, str] = {}
        self._superseded: frozenset[str] = frozenset()

    def vouch_for(self, pod_uids: Iterable[str]) -> None:
        """Answer the liveness probes of ``pod_uids`` 200: instances this one superseded, which
        idle until their Pods are deleted and must not be restarted (their readiness stays 503)."""
        with self._lock:
            self._superseded = frozenset(uid for uid in pod_uids if uid and uid != self.pod_uid)

    def vouches_for(self, pod_uid: str) -> bool:
        """Whether :meth:`vouch_for` named ``pod_uid``."""
        with self._lock:
            return pod_uid in self._superseded

    def check(self, name: str, probe: Callable[[], tuple[bool, str]]) -> None:
        """Add readiness condition ``name`` decided by ``probe()`` at each ``/readyz`` request.

        Shapes: ``probe`` returns ``(met, reason)``; it must be cheap and must not raise (an
        exception counts as unmet with its text).
        """
        with self._lock:
            self._checks[name] = probe

    def set(self, name: str, ok: bool, reason: str = "") -> None:
        """Mark condition ``name`` met (``ok``) or unmet with ``reason``; declares it when new."""
        with self._lock:
            if ok:
                self._unmet.pop(name, None)
            else:
                self._unmet[name] = reason or "not met"

    def worker_crashed(self, name: str, error: BaseException) -> None:
        """Record that the essential worker ``name`` died of ``error``: the service is no longer alive."""
        with self._lock:
            self._crashed[name] = f"{type(error).__name__}: {error}"

    def alive(self) -> tuple[bool, str]:
        """``(True, "ok")``, or ``(False, "worker <name> crashed: <error>; ...")``."""
        with self._lock:
            if not self._crashed:
                return True, "ok"
            return False, "; ".join(f"worker {n} crashed: {e}" for n, e in sorted(self._crashed.items()))

    def ready(self) -> tuple[bool, str]:
        """``(True, "ok")`` when alive with every condition met, else ``(False, <every reason>)``."""
        ok, why = self.alive()
        if not ok:
            return False, why
        with self._lock:
            unmet = dict(self._unmet)
            probes = dict(self._checks)
        for name, probe in probes.items():
            try:
                met, reason = probe()
            except Exception as exc:
                met, reason = False, f"{type(exc).__name__}: {exc}"
            if not met:
                unmet[name] = reason or "not met"
        if not unmet:
            return True, "ok"
        return False, "; ".join(f"{n}: {r}" for n, r in sorted(unmet.items()))


POD_UID_HEADER = "X-Pod-Uid"
"""The probing Pod's UID; a server of another Pod answers its probes 503."""


class _Handler(http.server.BaseHTTPRequestHandler):
    health: Health
    render_metrics: Callable[[], bytes]

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._reply(200, self.render_metrics(), prometheus_client.CONTENT_TYPE_LATEST)
            return
        probe = {"/healthz": self.health.alive, "/readyz": self.health.ready}.get(path)
        if probe is None:
            self._reply(404, b"not found\n", "text/plain; charset=utf-8")
            return
        asker = (self.headers.get(POD_UID_HEADER) or "").strip()
        if asker and asker != self.health.pod_uid and path == "/healthz" and self.health.vouches_for(asker):
            body = f"Pod {asker} was superseded by Pod {self.health.pod_uid}: alive, idle until deleted\n"
            self._reply(200, body.encode(), "text/plain; charset=utf-8")
            return
        if asker and asker != self.health.pod_uid:
            body = (
                f"served by another instance (Pod {self.health.pod_uid or 'unknown'}), not by Pod {asker}\n"
            )
            self._reply(503, body.encode(), "text/plain; charset=utf-8")
            return
        ok, why = probe()
        self._reply(200 if ok else 503, f"{why}\n".encode(), "text/plain; charset=utf-8")

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        LOG.debug("http request", extra={"op": "http", "detail": format % args})


def registry_renderer(registry: prometheus_client.CollectorRegistry) -> Callable[[], bytes]:
    """A ``render_metrics`` callable for ``registry`` (Prometheus text exposition)."""
    return lambda: bytes(prometheus_client.generate_latest(registry))


class HttpServer:
    """``/healthz``, ``/readyz`` and ``/metrics`` on ``address`` (``host:port``; port 0 = any free).

    Shapes: ``address`` ``host:port``, ``[v6]:port`` or ``:port`` (all interfaces).
    Raises (on :meth:`start`): OSError when the address cannot be bound.
    """

    def __init__(self, address: str, health: Health, render_metrics: Callable[[], bytes]) -> None:
        host, _, port = address.rpartition(":")
        self._bind = (host.strip("[]") or "0.0.0.0", int(port))
        self._handler = type(
            "Handler", (_Handler,), {"health": health, "render_metrics": staticmethod(render_metrics)}
        )
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`). Raises: RuntimeError before it."""
        if self._server is None:
            raise RuntimeError("the health server is not started")
        return int(self._server.server_address[1])

    def start(self) -> None:
        """Bind and serve on a daemon thread."""
        self._server = http.server.ThreadingHTTPServer(self._bind, self._handler)
        self._server.daemon_threads = True
        self._thread = threads.start("health-http", self._server.serve_forever)
        LOG.info(
            "health and metrics endpoints serving",
            extra={"op": "http", "address": f"{self._bind[0]}:{self.port}"},
        )

    def start_when_free(self, stop: threading.Event, *, retry_s: float = 0.5) -> None:
        """:meth:`start` now, or, while the address is in use, on a daemon thread as soon as it is free.

        For a service on the node's network that a rollout runs twice side by side (the old Pod
        holds the address until it exits); gives up when ``stop`` is set.
        Raises: OSError other than "address in use".
        """
        if self._started_unless_in_use():
            return
        LOG.warning(
            "health and metrics address in use (the previous Pod during a rollout?); serving once it is free",
            extra={"op": "http", "address": f"{self._bind[0]}:{self._bind[1]}"},
        )

        def retry() -> None:
            while not stop.wait(retry_s) and not self._started_unless_in_use():
                pass

        threads.start("health-http-bind", retry)

    def _started_unless_in_use(self) -> bool:
        try:
            self.start()
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            return False
        return True

    def stop(self) -> None:
        """Stop serving and close the socket; idempotent."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
