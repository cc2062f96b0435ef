"""LAB ONLY: cgroup trees the lab starts processes in, the processes in them killed, the trees removed.

A process placed in a tree stays in it, with everything it forks, whatever session or parent it
takes later: a real node's kubelet, containerd and shims (:class:`~sriov_dra_lab.real_node.RealNode`)
and the lab's ``ansible-playbook`` runs, whose workers leave the run's session
(:class:`~sriov_dra_lab.roles.PlaybookRun`). So a node's stop and the cleanup after a killed lab
(:func:`~sriov_dra_lab.lab_dir.clean_stale`) find them all. A tree is one directory of a cgroup
hierarchy (v1 or v2) with its children; callers pass only trees the lab created.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

_JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1"; shift; done; shift; exec "$@"'


def create(tops: Iterable[Path]) -> None:
    """Create each directory of ``tops`` (parents first), with the cpuset a v1 hierarchy needs to admit a task."""
    for path in tops:
        path.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            parent = path.parent / name
            if parent.exists():
                (path / name).write_text(parent.read_text())


def joined(tops: Iterable[Path], argv: Sequence[str]) -> list[str]:
    """``argv`` run by a shell that first moves itself into every tree of ``tops``, then execs it."""
    return ["sh", "-c", _JOIN, "sh", *(str(t / "cgroup.procs") for t in tops), "--", *argv]


def pids(tops: Iterable[Path]) -> set[int]:
    """Every PID in ``cgroup.procs`` of the trees under ``tops`` (a tree that vanished counts none)."""
    found: set[int] = set()
    for top in tops:
        for dirpath, _dirs, files in os.walk(top):
            if "cgroup.procs" in files:
                with contextlib.suppress(OSError, ValueError):
                    found.update(int(p) for p in (Path(dirpath) / "cgroup.procs").read_text().split())
    return found


def kill_processes(tops: Iterable[Path], timeout_s: float = 20.0) -> set[int]:
    """SIGKILL every process in the trees under ``tops`` until none is left or ``timeout_s`` passed.

    Returns: the PIDs it signalled (those still there after the timeout are in :func:`pids`).
    """
    tops = list(tops)
    killed: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while (left := pids(tops)) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed |= left
        time.sleep(0.2)
    return killed


def remove_tree(top: Path) -> bool:
    """Remove ``top`` and its children, deepest first; True when ``top`` is gone.

    A killed process leaves its cgroup a moment later: each directory is retried for 5 s.
    """
    for dirpath, _dirs, _files in os.walk(top, topdown=False):
        for _ in range(50):
            try:
                os.rmdir(dirpath)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
    return not top.exists()
