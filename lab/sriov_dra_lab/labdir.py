"""A lab's work directory: the state file that names the lab, and the cleanup of what a killed lab left.

This module owns :data:`STATE_FILE` (the lab id, written first at start), :func:`clean_stale`
(mounts under the work directory, the lab's node network namespaces and run directory, found by
that id) and :func:`reset_workdir` (only a directory holding one of :data:`LAB_MARKERS`).

It must never touch a directory that is not a lab's, or another lab's namespaces.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Final

from sriov_dra_lab import iproute, topology

STATE_FILE: Final = "lab.json"


def clean_stale(workdir: Path) -> list[str]:
    """Remove what a lab killed without its stop left in ``workdir``: mounts, node netns, socket dirs.

    Reads the lab id from ``<workdir>/lab.json``; unmounts every mount under ``workdir`` (deepest
    first), deletes the network namespaces ``sdl<id>-*`` and ``/run/sdl-<id>``. Returns what it
    removed (one line each); touches nothing of another lab.
    """
    done: list[str] = []
    root = workdir.resolve()
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        mounts = [line.split()[4] for line in f]
    for target in sorted(
        {m for m in mounts if m == str(root) or m.startswith(f"{root}/")}, key=len, reverse=True
    ):
        if subprocess.run(["umount", target], capture_output=True, check=False).returncode == 0:
            done.append(f"unmounted {target}")
    try:
        lab_id = json.loads((root / STATE_FILE).read_text())["labId"]
    except (OSError, ValueError, KeyError):
        return done
    prefix = f"sdl{lab_id}-"
    if iproute.NETNS_DIR.is_dir():
        for entry in sorted(iproute.NETNS_DIR.iterdir()):
            if entry.name.startswith(prefix):
                iproute.del_netns(entry.name)
                done.append(f"removed network namespace {entry.name}")
    run_dir = topology.run_root(lab_id)
    if run_dir.exists():
        shutil.rmtree(run_dir, ignore_errors=True)
        done.append(f"removed {run_dir}")
    return done


LAB_MARKERS: Final = (STATE_FILE, "controlplane", "admin.kubeconfig", "pki")
"""Files only a lab work directory holds (the last two: the layout earlier ``lab up`` runs left)."""


def reset_workdir(workdir: Path) -> list[str]:
    """Make ``workdir`` ready for a new lab: clean a previous lab's leftovers and remove its files.

    Touches ``workdir`` only when it holds one of :data:`LAB_MARKERS` (never a directory that is
    not a lab's). Returns what :func:`clean_stale` removed, one line each.
    """
    if not any((workdir / marker).exists() for marker in LAB_MARKERS):
        return []
    done = clean_stale(workdir)  # a lab killed before its stop
    shutil.rmtree(workdir)
    return done
