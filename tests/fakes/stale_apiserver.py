"""A watching proxy to the lab API server that can hand out an older copy of one Pod.

It stands for the stale source a Multus can read from (thick Multus's Pod informer): thin Multus is pointed at this proxy, which authenticates upstream as the lab
admin and forwards everything, except that a Pod armed with :meth:`StaleApiProxy.serve_stale`
is answered, for its next ``times`` GETs, with a copy recorded earlier (same UID, older
annotations). Every request is recorded, so a test can also assert what was (not) read.
"""

from __future__ import annotations

import http.client
import http.server
import json
import ssl
import threading
from pathlib import Path
from typing import Any

import yaml

_HOP_HEADERS = {"host", "authorization", "connection", "keep-alive", "transfer-encoding", "content-length"}


class StaleApiProxy:
    """Plain HTTP on 127.0.0.1 in front of the lab API server (see the module docstring)."""

    def __init__(self, admin_kubeconfig: Path) -> None:
        doc = yaml.safe_load(admin_kubeconfig.read_text())
        cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
        self._upstream = cluster["server"].removeprefix("https://")
        self._tls = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self._tls.load_cert_chain(user["client-certificate"], user["client-key"])
        self._stale: dict[str, list[bytes]] = {}
        self._lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []
        self.served_stale: list[str] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                with proxy._lock:
                    proxy.requests.append((self.command, self.path))
                    queued = proxy._stale.get(self.path.split("?")[0]) if self.command == "GET" else None
                    body = queued.pop(0) if queued else None
                    if body is not None:
                        proxy.served_stale.append(self.path)
                if body is not None:
                    self._reply(200, {"Content-Type": "application/json"}, body)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
                conn = http.client.HTTPSConnection(proxy._upstream, context=proxy._tls, timeout=30)
                try:
                    conn.request(self.command, self.path, body=data, headers=headers)
                    answer = conn.getresponse()
                    payload = answer.read()
                    kept = {k: v for k, v in answer.getheaders() if k.lower() not in _HOP_HEADERS}
                    self._reply(answer.status, kept, payload)
                finally:
                    conn.close()

            def _reply(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="stale-proxy", daemon=True)

    @property
    def url(self) -> str:
        """The proxy's base URL."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> StaleApiProxy:
        """Start serving."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def serve_stale(self, namespace: str, name: str, pod: dict[str, Any], *, times: int = 1) -> None:
        """Answer the next ``times`` GETs of Pod ``namespace/name`` with ``pod`` (an older copy)."""
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        with self._lock:
            self._stale[path] = [json.dumps(pod).encode()] * times

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig that reaches the API server through this proxy (no credentials needed)."""
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "proxy", "cluster": {"server": self.url}}],
            "users": [{"name": "proxy", "user": {}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "proxy"}}],
            "current-context": "proxy",
        }
        path.write_text(yaml.safe_dump(doc))
        return path
