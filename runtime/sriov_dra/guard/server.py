"""The guard daemon's unix socket: accept shim requests, hand them to the CNI hooks, answer.

Wire format (:mod:`~sriov_dra.guard.shim`): one JSON request, write side shut, one JSON answer
``{exitCode, stdout}``. Directory 0700, socket 0600 (only root asks); a stale socket, or a
previous daemon's during a rollout, is replaced by a rename under the path's lock, and a daemon
superseded by a newer Pod takes the path back only once no daemon accepts there
(``host.socket_takeover``, docs/guard.md#rolling-update); a connection closed without a request
(that look) gets no answer. One thread per connection, at most ``max_concurrent`` decided at
once; a request without a slot within its ADD budget gets CNI error 11. Stop: give the path up
while it is still this daemon's, answer every connection already queued on the socket, close it,
let in-flight requests finish within the grace period, return. Decides nothing itself; an
undecodable request gets a CNI error.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from pathlib import Path

from sriov_dra.guard import cni_hooks, decisions, shim
from sriov_dra.host import socket_takeover
from sriov_dra.servicekit import probes, threads

log = logging.getLogger("sriov_dra.guard")
ACCEPT_POLL_S = 0.2
"""How long one ``accept`` waits (s): a stopping daemon's accept loop ends after one that found nothing."""


class GuardServer:
    """Serves the shim on a unix socket from a background accept thread."""

    def __init__(
        self,
        hooks: cni_hooks.CniHooks,
        socket_path: Path,
        *,
        max_concurrent: int,
        health: probes.Health | None = None,
        instance: str = "",
    ) -> None:
        """``health`` records a crash of the accept loop (the guard is then no longer alive);
        ``instance`` names this daemon's Pod (its UID) for the path's ordering rule (empty: none)."""
        self.hooks = hooks
        self._health = health
        self.socket_path = socket_path
        self.instance = instance
        self.superseded_instances: tuple[str, ...] = ()
        """After :meth:`start`: the instances listed before this one, which idle while it serves (Pod UIDs)."""
        self.ready = threading.Event()
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._stopping = threading.Event()
        self._active: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._inode = -1  # the bound socket file's, to leave a newer daemon's socket in place
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind the socket and take the path over (replacing a stale one or a previous daemon's), start accepting.

        Raises: ``socket_takeover.Retired`` when a newer instance superseded this one and its
        daemon accepts at the path (nothing bound); ``OSError`` when the socket cannot be created.
        """
        directory = self.socket_path.parent
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

        def bind(staging: Path) -> None:
            sock.bind(str(staging))
            os.chmod(staging, 0o600)
            sock.listen(128)

        try:
            holding = socket_takeover.take_over(self.socket_path, self.instance, bind)
        except BaseException:
            sock.close()
            raise
        self._inode = holding.inode
        self.superseded_instances = holding.superseded
        sock.settimeout(ACCEPT_POLL_S)
        self._sock = sock
        self._thread = threads.start("guard-accept", self._accept_loop, health=self._health)
        self.ready.set()

    def superseded(self) -> bool:
        """Whether a newer daemon took the socket path over (the file there is another socket)."""
        return self._inode != -1 and not socket_takeover.holds(self.socket_path, self._inode)

    def stop(self, *, grace_s: float) -> None:
        """Give the path up, answer what is queued, wait up to ``grace_s`` s for in-flight requests.

        The socket file is removed only while it is still this daemon's (a newer daemon that took
        the path over keeps it). Once no shim can reach the socket any more, every connection
        already in its listen backlog is still accepted and answered before the socket closes.
        """
        if self._inode != -1:
            socket_takeover.release(self.socket_path, self._inode)
        self._stopping.set()
        self.ready.clear()
        if self._thread is not None:
            self._thread.join(timeout=grace_s + ACCEPT_POLL_S)
        if self._sock is not None:
            self._sock.close()
        deadline = time.monotonic() + grace_s
        for thread in self._snapshot():
            thread.join(timeout=max(deadline - time.monotonic(), 0.0))
        left = [t.name for t in self._snapshot() if t.is_alive()]
        if left:
            log.warning("guard stopped with requests still running", extra={"requests": len(left)})

    def _snapshot(self) -> list[threading.Thread]:
        with self._lock:
            return list(self._active)

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while True:
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                if self._stopping.is_set():  # the path was given up first: the backlog is empty
                    return
                continue
            except OSError:
                if self._stopping.is_set():
                    return
                raise
            thread = threading.Thread(target=self._serve, args=(conn,), name="guard-request", daemon=True)
            with self._lock:
                self._active.add(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.settimeout(30.0)  # the request itself is small; a stuck writer must not hold a slot
                answer = self._answer(conn)
                conn.settimeout(None)
                if answer:
                    conn.sendall(answer)
        except OSError as exc:
            log.warning("guard could not answer the shim", extra={"error": str(exc)})
        finally:
            with self._lock:
                self._active.discard(threading.current_thread())

    def _answer(self, conn: socket.socket) -> bytes:
        try:
            data = shim.read_all(conn)
            if not data:  # another daemon's look whether one accepts here (socket_takeover.accepting)
                return b""
            try:
                obj = json.loads(data)
            except RecursionError:
                raise ValueError("arrays or objects are nested too deeply") from None
            protocol = obj.get("protocol") if isinstance(obj, dict) else obj
            if type(protocol) is not int or protocol != shim.PROTOCOL:
                raise ValueError(f"unknown protocol {protocol!r}")
            env, stdin = obj.get("env"), obj.get("stdin")
            if (
                not isinstance(env, dict)
                or not all(isinstance(v, str) for v in env.values())
                or not isinstance(stdin, str)
            ):
                raise ValueError("request needs env (object of strings) and stdin (string)")
            stdin_bytes = stdin.encode("utf-8")  # a lone surrogate has no UTF-8 form: ValueError
        except (ValueError, OSError) as exc:
            msg = f"multus-guard: the guard daemon could not decode the shim's request: {exc}"
            return shim.encode_response(1, shim.cni_error("1.0.0", shim.CniErrorCode.DECODE, msg))
        if not self._slots.acquire(timeout=self.hooks.settings.add_budget_s):
            msg = f"multus-guard: {decisions.Reason.OVERLOADED}: no free slot within the ADD budget"
            self.hooks.metrics.decided(decisions.Reason.OVERLOADED)
            return shim.encode_response(1, shim.cni_error("1.0.0", shim.CniErrorCode.TRY_AGAIN, msg))
        try:
            outcome = self.hooks.handle({str(k): str(v) for k, v in env.items()}, stdin_bytes)
        finally:
            self._slots.release()
        return shim.encode_response(outcome.exit_code, outcome.stdout)
