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
from collections.abc import Iterator, Mapping, Sequence
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


#: Process groups of every child started in this interpreter (each child leads its own group):
#: group ID -> the leader's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22).
STARTED_GROUPS: dict[int, int] = {}


def _stat_fields(pid: int | str) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (state is index 0), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def _start_ticks(pid: int | str) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def survivors() -> list[str]:
    """Processes still alive in any group this interpreter started, as ``"pid cmdline"`` lines.

    Reads ``/proc/<pid>/stat`` (the process group) so that grandchildren count too. A group ID
    whose leader is alive with a different start time was reused by an unrelated process after
    our group ended (PIDs wrap), and is not reported.
    """
    found: list[str] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(entry.name)
        if not fields or len(fields) < 3:
            continue
        try:
            pgrp = int(fields[2])
        except ValueError:
            continue
        if pgrp not in STARTED_GROUPS or fields[0] == "Z":
            continue
        leader_start = _start_ticks(pgrp)
        if leader_start is not None and leader_start != STARTED_GROUPS[pgrp]:
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            cmd = "?"
        found.append(f"{entry.name} {cmd[:200]}")
    return found


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Run a cleanup block that a second Ctrl-C (or SIGTERM) cannot cut short.

    In the main thread, SIGINT and SIGTERM received inside the block are remembered and turned
    into one ``KeyboardInterrupt`` after it; elsewhere the block runs unchanged.
    Raises: ``KeyboardInterrupt`` after the block when such a signal came during it.
    """
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, _frame: received.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        raise KeyboardInterrupt


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
        STARTED_GROUPS[self.popen.pid] = _start_ticks(self.popen.pid) or 0

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

        Idempotent; safe on a child that already exited. The group is signalled only while its
        leader is unreaped (running or a zombie): a process group id is the leader's PID, and once
        the leader is reaped the kernel may hand that PID (so that group id) to an unrelated
        process, which a late ``killpg`` would kill. So the leader is waited for without being
        reaped (``waitid`` with ``WNOWAIT``), what is left of its group is killed, and only then it
        is reaped. A leader already reaped (by :meth:`running` or :meth:`check`) is never signalled.
        """
        if self.popen is None or self.popen.returncode is not None:
            return
        pgid = self.popen.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        if not _wait_unreaped(pgid, self.stop_grace_s):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            _wait_unreaped(pgid, 10.0)
        # Children that outlived the leader keep the group alive: kill what is left, while the
        # unreaped leader still holds the group id.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)


def _wait_unreaped(pid: int, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` seconds for child ``pid`` to exit, leaving it unreaped; True if it did."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
                return True
        except ChildProcessError:  # already reaped elsewhere
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


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
