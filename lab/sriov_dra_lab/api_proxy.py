"""LAB ONLY: relay the API server's loopback port into a lab node's network namespace.

The lab's kube-apiserver listens on the host's ``127.0.0.1:<port>`` only, but every process of a
lab node (plugin, guard, Multus, whereabouts) runs in the node's own network namespace, where
that loopback is a different one. This process opens a listening socket on ``127.0.0.1:<port>``
*inside* the node namespace and relays each connection, byte for byte, to the same port on the
host's loopback, so the node's processes use the lab kubeconfigs unchanged (same URL, same TLS
certificate with its ``127.0.0.1`` SAN). TLS is never terminated here. Both legs of a relayed
connection have ``TCP_NODELAY`` (:func:`upstream`, :func:`accepted`): a request whose headers and body
arrive as two TLS records would otherwise wait for the API server's delayed ACK (about 40 ms on
Linux) before its body is forwarded, on every write a node's process sends.

How: at start, while the process is still single-threaded, its one thread enters the node
namespace (``setns``), creates and binds the listening socket, and returns to the host namespace
before any thread starts; a socket keeps the namespace it was created in. It is a separate
process, so no thread of the lab itself ever changes namespace.

Run: ``python -m sriov_dra_lab.api_proxy --netns /var/run/netns/<node> --port <apiserver port>``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence

CLONE_NEWNET = 0x40000000
_BUFFER = 65536


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def listen_in(netns_path: str, port: int) -> socket.socket:
    """A listening TCP socket on ``127.0.0.1:port`` inside ``netns_path`` (caller stays in its own).

    Must run before any other thread exists. Raises: ``OSError`` (namespace missing, port taken).
    """
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(netns_path, os.O_RDONLY)
    try:
        _setns(target)
        try:
            server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", port))
            server.listen(128)
        finally:
            _setns(home)
    finally:
        os.close(target)
        os.close(home)
    return server


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(_BUFFER)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def upstream(port: int) -> socket.socket:
    """A blocking connection to the host's ``127.0.0.1:port`` that sends each write at once (``TCP_NODELAY``).

    Raises: ``OSError`` when it cannot connect within 10 s.
    """
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn.settimeout(None)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def accepted(client: socket.socket) -> socket.socket:
    """``client`` (an accepted connection) made blocking, sending each write at once (``TCP_NODELAY``)."""
    client.settimeout(None)
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return client


def _relay(client: socket.socket, port: int) -> None:
    try:
        conn = upstream(port)
    except OSError:
        client.close()
        return
    back = threading.Thread(target=_pump, args=(conn, client), daemon=True)
    back.start()
    _pump(client, conn)
    back.join()
    client.close()
    conn.close()


def serve(server: socket.socket, port: int, stop: threading.Event) -> None:
    """Accept connections until ``stop`` is set; relay each to ``127.0.0.1:port`` on the host."""
    server.settimeout(0.5)
    while not stop.is_set():
        try:
            client, _ = server.accept()
        except TimeoutError:
            continue
        except OSError:
            if stop.is_set():
                break
            raise
        threading.Thread(target=_relay, args=(accepted(client), port), daemon=True).start()
    server.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (1 with one line on stderr when it cannot listen)."""
    parser = argparse.ArgumentParser(prog="sriov-dra-lab-apiproxy", description=__doc__.splitlines()[0])
    parser.add_argument("--netns", required=True, help="path of the node network namespace")
    parser.add_argument("--port", type=int, required=True, help="API server port on the host loopback")
    args = parser.parse_args(argv)
    try:
        server = listen_in(args.netns, args.port)
    except OSError as exc:
        print(f"apiproxy: cannot listen on 127.0.0.1:{args.port} in {args.netns}: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"apiproxy: relaying 127.0.0.1:{args.port} in {args.netns} to the host loopback", flush=True)
    serve(server, args.port, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
