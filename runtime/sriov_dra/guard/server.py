"""The guard daemon's unix socket: accept shim requests, hand them to the CNI hooks, answer.

Wire format (:mod:`~sriov_dra.guard.shim`): one JSON request, write side shut, one JSON answer
``{exitCode, stdout}``. Directory 0700, socket 0600 (only root asks); a stale socket, or a
previous daemon's during a rollout, is replaced by a rename (docs/guard.md#rolling-update).
One thread per connection, at most ``max_concurrent`` decided at once; a request without a slot
within its ADD budget gets CNI error 11. Stop: close the socket and unlink it while it is still
this daemon's, let in-flight requests finish within the grace period, return. Decides nothing itself; an undecodable request gets a
CNI error.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from pathlib import Path

from sriov_dra.guard import cni_hooks, decisions, shim
from sriov_dra.servicekit import probes, threads

log = logging.getLogger("sriov_dra.guard")


class GuardServer:
    """Serves the shim on a unix socket from a background accept thread."""

    def __init__(
        self,
        hooks: cni_hooks.CniHooks,
        socket_path: Path,
        *,
        max_concurrent: int,
        health: probes.Health | None = None,
    ) -> None:
        """``health`` records a crash of the accept loop (the guard is then no longer alive)."""
        self.hooks = hooks
        self._health = health
        self.socket_path = socket_path
        self.ready = threading.Event()
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._stopping = threading.Event()
        self._active: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._inode = -1  # the bound socket file's, to leave a newer daemon's socket in place
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind the socket (atomically replacing a stale one or a previous daemon's) and start accepting.

        Raises: ``OSError`` when the socket cannot be created.
        """
        directory = self.socket_path.parent
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
        # Bound beside the path, then renamed over it: a shim connecting meanwhile reaches the
        # previous daemon (a rollout's old Pod) or this one, never no socket (docs/guard.md#rolling-update).
        staging = directory / f".{self.socket_path.name}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            staging.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(staging))
            os.chmod(staging, 0o600)
            sock.listen(128)
            self._inode = os.stat(staging).st_ino
            os.rename(staging, self.socket_path)
        except BaseException:
            sock.close()
            with contextlib.suppress(FileNotFoundError):
                staging.unlink()
            raise
        sock.settimeout(0.2)
        self._sock = sock
        self._thread = threads.start("guard-accept", self._accept_loop, health=self._health)
        self.ready.set()

    def superseded(self) -> bool:
        """Whether a newer daemon took the socket path over (the file there is another socket)."""
        try:
            return self._inode != -1 and os.stat(self.socket_path).st_ino != self._inode
        except FileNotFoundError:
            return False

    def stop(self, *, grace_s: float) -> None:
        """Stop accepting, wait up to ``grace_s`` seconds for in-flight requests, release the socket.

        The socket file is removed only while it is still this daemon's: a newer daemon that took the
        path over keeps it.
        """
        self._stopping.set()
        self.ready.clear()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self._sock is not None:
            self._sock.close()
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.socket_path).st_ino == self._inode:  # a newer daemon's socket stays
                self.socket_path.unlink()
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
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
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
                conn.sendall(answer)
        except OSError as exc:
            log.warning("guard could not answer the shim", extra={"error": str(exc)})
        finally:
            with self._lock:
                self._active.discard(threading.current_thread())

    def _answer(self, conn: socket.socket) -> bytes:
        try:
            data = shim.read_all(conn)
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
