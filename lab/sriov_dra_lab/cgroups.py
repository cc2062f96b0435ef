"""LAB ONLY: the processes in a real node's cgroup trees, killed, and the trees removed.

Shared by a real node's stop (:class:`~sriov_dra_lab.real_node.RealNode`) and the cleanup after a
killed lab (:func:`~sriov_dra_lab.lab_dir.clean_stale`). A tree is one directory of a cgroup
hierarchy (v1 or v2) with its children; callers pass only trees the lab created.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path


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
