"""Child processes of the lab: start with a log file, stop by PID, report log tails on failure.

Owns the lifecycle of every long-running binary the lab starts (etcd, the Kubernetes components,
Multus daemons, our own services). Each child runs in its own session so that a stop reaches
every process it forked; stopping is SIGTERM, a grace period, then SIGKILL, and always reaps.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that was free a moment ago (the kernel picks it).

    The port is released before returning, so a race with another process is possible; callers
    that start a server on it retry on "address in use".
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a text file, or a note when it cannot be read."""
    try:
        data = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    return "\n".join(data[-lines:])


#: Process-group IDs of every child started in this interpreter (each child leads its own group).
STARTED_GROUPS: set[int] = set()


def survivors() -> list[str]:
    """Processes still alive in any group this interpreter started, as ``"pid cmdline"`` lines.

    Reads ``/proc/<pid>/stat`` (field 5 is the process group) so that grandchildren count too.
    """
    found: list[str] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            pgrp = int(stat.rsplit(")", 1)[1].split()[2])
            state = stat.rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError, ValueError):
            continue
        if pgrp in STARTED_GROUPS and state != "Z":
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                cmd = "?"
            found.append(f"{entry.name} {cmd[:200]}")
    return found


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """Ask the kernel to SIGKILL this child when the process that started it dies.

    Keeps a crashed or killed test run (or ``lab up``) from leaving etcd and the API server behind.
    Runs between fork and exec, so it only makes one system call.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class ProcessFailed(RuntimeError):
    """A child exited or never became ready; the message carries its log tail."""


@dataclass
class Process:
    """One child process with its command line, environment and log file.

    Units: ``stop_grace_s`` seconds between SIGTERM and SIGKILL.
    """

    name: str
    argv: Sequence[str]
    log_path: Path
    env: Mapping[str, str] | None = None
    cwd: Path | None = None
    stop_grace_s: float = 10.0
    die_with_parent: bool = True
    """SIGKILL the child if this interpreter (precisely: the starting thread) dies first."""
    popen: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> None:
        """Start the child in a new session with stdout and stderr appended to ``log_path``.

        Raises: ``ProcessFailed`` if the executable cannot be started.
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ if self.env is None else self.env)
        with self.log_path.open("ab") as log:
            log.write(f"# {self.name}: {' '.join(self.argv)}\n".encode())
            log.flush()
            try:
                self.popen = subprocess.Popen(
                    list(self.argv),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.cwd,
                    start_new_session=True,
                    preexec_fn=_die_with_parent if self.die_with_parent else None,
                )
            except OSError as exc:
                raise ProcessFailed(f"cannot start {self.name} ({self.argv[0]}): {exc}") from exc
        STARTED_GROUPS.add(self.popen.pid)

    @property
    def pid(self) -> int | None:
        """The child's PID, or None before start."""
        return self.popen.pid if self.popen else None

    def running(self) -> bool:
        """True while the child has not exited."""
        return self.popen is not None and self.popen.poll() is None

    def check_running(self) -> None:
        """Raise ``ProcessFailed`` with the log tail if the child has exited."""
        if self.popen is None:
            raise ProcessFailed(f"{self.name} was never started")
        code = self.popen.poll()
        if code is not None:
            raise ProcessFailed(
                f"{self.name} exited with status {code}; "
                f"last lines of {self.log_path}:\n{tail(self.log_path)}"
            )

    def stop(self) -> None:
        """SIGTERM the child's process group, wait ``stop_grace_s``, SIGKILL, and reap.

        Idempotent; safe on a child that already exited.
        """
        if self.popen is None:
            return
        pgid = self.popen.pid
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=self.stop_grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGKILL)
                self.popen.wait(timeout=10)
        # Children that outlived the leader keep the group alive: kill what is left.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def wait_until(
    predicate_name: str,
    predicate: object,
    *,
    timeout_s: float,
    process: Process | None = None,
    interval_s: float = 0.2,
) -> None:
    """Poll ``predicate()`` until true; fail early if ``process`` exits.

    Units: seconds. Raises: ``ProcessFailed`` with the log tail on exit or timeout.
    """
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None:
            process.check_running()
        if predicate():
            return
        time.sleep(interval_s)
    where = f"; last lines of {process.log_path}:\n{tail(process.log_path)}" if process else ""
    raise ProcessFailed(f"timed out after {timeout_s:.0f}s waiting for {predicate_name}{where}")
