"""``lab.processes.Process.stop`` kills its whole group and never signals a group id it no longer holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sriov_dra_lab import processes


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def test_stop_kills_children_that_outlive_the_leader(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    # The leader starts a child in its own group that ignores SIGTERM, then exits at once on SIGTERM.
    script = f"import os,signal,subprocess,time; p=subprocess.Popen(['sleep','300'], preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN)); open({str(pidfile)!r},'w').write(str(p.pid)); time.sleep(300)"
    proc = processes.Process(name="leader", argv=[sys.executable, "-c", script], log_path=tmp_path / "l.log")
    proc.start()
    processes.wait_until("the child pid file", pidfile.exists, timeout_s=20, process=proc)
    time.sleep(0.1)
    child = int(pidfile.read_text())
    proc.stop()
    for _ in range(100):
        if not alive(child):
            break
        time.sleep(0.05)
    assert not alive(child), "the child that ignored SIGTERM outlived stop()"
    assert proc.popen is not None and proc.popen.returncode is not None


def test_stop_after_the_leader_was_reaped_signals_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once reaped, the group id may belong to someone else: stop() must not killpg it."""
    proc = processes.Process(name="short", argv=["true"], log_path=tmp_path / "s.log")
    proc.start()
    assert proc.popen is not None
    proc.popen.wait(timeout=10)  # reaped, as running()/check() do
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "killpg", lambda pgid, sig: sent.append((pgid, sig)))
    proc.stop()
    proc.stop()
    assert sent == []


def test_stop_is_idempotent_for_a_running_leader(tmp_path: Path) -> None:
    proc = processes.Process(name="sleeper", argv=["sleep", "300"], log_path=tmp_path / "z.log")
    proc.start()
    assert proc.popen is not None
    pid = proc.popen.pid
    proc.stop()
    proc.stop()
    assert proc.popen.returncode == -signal.SIGTERM
    assert not alive(pid)
    assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0
