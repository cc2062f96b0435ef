"""The host's way to the guest's real kubelet: an HTTP CONNECT proxy for the apiserver's egress.

The realvf guest is on QEMU user networking: the host cannot reach its address (``10.0.2.15``),
only the ports QEMU forwards from the host's loopback (``hostfwd``). The apiserver reaches a
kubelet (``kubectl exec``, logs) at the Node's address, so its egress selector for ``cluster``
traffic names this proxy's unix socket (``control_plane.ControlPlaneSettings.kubelet_proxy``; the
apiserver speaks HTTP CONNECT over a unix socket without TLS, over TCP only with client
certificates), which answers every ``CONNECT <address>:<port>`` by connecting to
``127.0.0.1:<forwarded port>`` and relaying bytes both ways. Test infrastructure only; it serves
one session.
"""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import tempfile
import threading


class _Handler(socketserver.BaseRequestHandler):
    server: KubeletProxy

    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.request.recv(4096)
            if not chunk:
                return
            head += chunk
        line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(line) < 2 or line[0] != "CONNECT":
            self.request.sendall(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.server.forwarded_port), timeout=30)
        except OSError as exc:
            self.request.sendall(f"HTTP/1.1 502 Bad Gateway\r\n\r\n{exc}".encode())
            return
        with upstream:
            upstream.settimeout(None)
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            rest = head.split(b"\r\n\r\n", 1)[1]
            if rest:
                upstream.sendall(rest)
            pump = threading.Thread(target=_relay, args=(upstream, self.request), daemon=True)
            pump.start()
            _relay(self.request, upstream)
            pump.join(timeout=5)


def _relay(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


class KubeletProxy(socketserver.ThreadingUnixStreamServer):
    """Serves on a unix socket (``path``) in a daemon thread; every tunnel goes to ``forwarded_port``."""

    daemon_threads = True

    def __init__(self, forwarded_port: int) -> None:
        self.directory = tempfile.mkdtemp(prefix="realvf-kubelet-proxy-")
        self.path = os.path.join(self.directory, "proxy.sock")
        super().__init__(self.path, _Handler)
        self.forwarded_port = forwarded_port
        threading.Thread(target=self.serve_forever, name="kubelet-proxy", daemon=True).start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
            os.rmdir(self.directory)
