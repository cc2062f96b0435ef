"""The lab's API relay forwards bytes both ways unchanged, and sends each write at once on both legs.

Without ``TCP_NODELAY`` a request whose headers and body the client writes separately waits for the
API server's delayed ACK before the body is forwarded (Nagle), on every write a lab node's process
sends; the relay's sockets are checked for the option, not timed. The relay runs on this host's
loopback here (``serve`` is given a listening socket; entering a node namespace is ``listen_in``'s).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from sriov_dra_lab import api_proxy


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.create_server(("127.0.0.1", 0))
    yield sock
    sock.close()


def _read_all(sock: socket.socket) -> bytes:
    got = b""
    while chunk := sock.recv(1024):
        got += chunk
    return got


def _nodelay(sock: socket.socket) -> bool:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_both_legs_of_a_relayed_connection_send_each_write_at_once(listener: socket.socket) -> None:
    conn = api_proxy.upstream(listener.getsockname()[1])
    peer, _ = listener.accept()
    try:
        assert _nodelay(conn)
        assert not _nodelay(peer)  # a plain accepted socket has Nagle on: accepted() must turn it off
        assert _nodelay(api_proxy.accepted(peer))
        assert conn.gettimeout() is None and peer.gettimeout() is None
    finally:
        conn.close()
        peer.close()


def test_the_relay_forwards_a_request_and_its_answer_unchanged(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    front = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    relay = threading.Thread(target=api_proxy.serve, args=(front, port, stop), daemon=True)
    relay.start()
    try:
        with socket.create_connection(front.getsockname(), timeout=10) as client:
            server, _ = listener.accept()
            with server:
                client.sendall(b"PATCH headers\r\n\r\n")
                client.sendall(b"body")
                client.shutdown(socket.SHUT_WR)
                assert _read_all(server) == b"PATCH headers\r\n\r\nbody"
                server.sendall(b"200 OK")
                server.shutdown(socket.SHUT_WR)
                assert _read_all(client) == b"200 OK"
    finally:
        stop.set()
        relay.join(timeout=5)
    assert not relay.is_alive()
