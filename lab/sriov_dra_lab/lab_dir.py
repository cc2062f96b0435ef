"""A lab's work directory: the state file that names the lab, and the cleanup of what a killed lab left.

This module owns :data:`STATE_FILE` (the lab id, written first at start), :data:`LOCK_FILE` (held by
the process that runs the lab, so :func:`reset_workdir` and :func:`down` refuse a running lab's
directory instead of tearing it down under it), :func:`clean_stale`
(what a lab killed without its stop left, found by that id: the processes in its real nodes' and
its runs' cgroups (:func:`run_cgroups`), mounts under the work directory, the node network namespaces, the real nodes' bridge and
veths, their cgroups and the run directory) and :func:`reset_workdir` (only a directory holding
one of :data:`LAB_MARKERS`).

It must never touch a directory that is not a lab's, or another lab's namespaces, links or cgroups:
every name it removes carries the lab id of the work directory's state file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Final

from sriov_dra_lab import cgroups as cgroups_mod
from sriov_dra_lab import iproute, real_node, topology

STATE_FILE: Final = "lab.json"
LOCK_FILE: Final = "lab.lock"


class LabRunning(RuntimeError):
    """The work directory belongs to a lab that is still running (its process holds :data:`LOCK_FILE`)."""


_HELD: dict[Path, int] = {}
"""Lock descriptors this process holds, by work directory (a second :func:`hold` returns the same one)."""


def hold(workdir: Path) -> int:
    """Take the lab's lock in ``workdir`` for this process (until :func:`release` or exit); return the descriptor.

    Taken before a new lab resets the directory and kept while it runs (:func:`reset_workdir` never
    removes the lock file), so two ``lab up`` on one directory cannot both pass. The file holds
    this process's pid, for the message of :func:`refuse_if_running`. Holding it twice in one
    process returns the same descriptor.
    Raises: :class:`LabRunning` when another process holds it; ``OSError`` from the file system.
    """
    workdir = workdir.resolve()
    if workdir in _HELD:
        return _HELD[workdir]
    workdir.mkdir(parents=True, exist_ok=True)
    fd = os.open(workdir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            refuse_if_running(workdir)
            raise LabRunning(
                f"the lab directory {workdir} is being checked or stopped by another sriov-dra lab command; "
                "retry when it is done"
            ) from None
        raise
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _HELD[workdir] = fd
    return fd


def release(workdir: Path) -> None:
    """Give up the lock :func:`hold` took on ``workdir`` (nothing when this process does not hold it)."""
    fd = _HELD.pop(workdir.resolve(), None)
    if fd is not None:
        os.close(fd)


def refuse_if_running(workdir: Path) -> None:
    """Raise :class:`LabRunning` naming the pid when a live process holds ``workdir``'s lab lock.

    Raises: :class:`LabRunning` (stop that lab first: Ctrl-C where it runs, or ``kill -TERM <pid>``).
    """
    if workdir.resolve() in _HELD:  # this process's own lab or reset
        return
    path = workdir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise LabRunning(
                f"a lab is still running in {workdir} (process {pid}); stop it first: Ctrl-C where it runs, "
                f"or kill -TERM {pid}, and wait until it prints 'lab stopped'"
            ) from None
    finally:
        os.close(fd)


def clean_stale(workdir: Path) -> list[str]:
    """Remove what a lab killed without its stop left in ``workdir``; return what it removed, one line each.

    Reads the lab id from ``<workdir>/lab.json``. In this order: kills every process left in the
    real nodes' cgroups ``/sdrn<id>-<n>`` (containerd shims, pause and containers run in their own
    sessions and outlive a SIGKILLed lab) and in the runs' ``/sdl<id>-run-<name>`` (the
    ``ansible-playbook`` runs and the workers that left their session), unmounts every mount under ``workdir`` (deepest first:
    the node mount-namespace files), deletes the network namespaces ``sdl<id>-*`` and
    ``sdrn<id>-<n>``, the real nodes' bridge ``sdrnb<id>`` and host veths ``sdrnv<id><n>``, the
    cgroups and ``/run/sdl-<id>``. The real nodes' iptables rules and sysctls live in their own
    namespaces and go with them; the image mirror is a thread of the lab process. Never raises
    on a single failed step; touches nothing of another lab.
    """
    done: list[str] = []
    root = workdir.resolve()
    lab_id = _lab_id(root)
    cgroups = _lab_cgroups(lab_id) if lab_id else []
    killed = cgroups_mod.kill_processes(cgroups)
    if killed:
        done.append(f"killed {len(killed)} processes left in the lab's cgroups")
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        mounts = [line.split()[4] for line in f]
    for target in sorted(
        {m for m in mounts if m == str(root) or m.startswith(f"{root}/")}, key=len, reverse=True
    ):
        if subprocess.run(["umount", target], capture_output=True, check=False).returncode == 0:
            done.append(f"unmounted {target}")
    if lab_id is None:
        return done
    owned = re.compile(rf"sdl{lab_id}-.+|sdrn{lab_id}-\d+")
    if iproute.NETNS_DIR.is_dir():
        for entry in sorted(iproute.NETNS_DIR.iterdir()):
            if owned.fullmatch(entry.name):
                with contextlib.suppress(iproute.IpError):
                    iproute.del_netns(entry.name)
                    done.append(f"removed network namespace {entry.name}")
    links = re.compile(rf"sdrnb{lab_id}|sdrnv{lab_id}\d+")
    for link in sorted(p.name for p in Path("/sys/class/net").iterdir() if links.fullmatch(p.name)):
        if subprocess.run(["ip", "link", "del", link], capture_output=True, check=False).returncode == 0:
            done.append(f"removed link {link}")
    for top in cgroups:
        if cgroups_mod.remove_tree(top):
            done.append(f"removed cgroup {top}")
    run_dir = topology.run_root(lab_id)
    if run_dir.exists():
        shutil.rmtree(run_dir, ignore_errors=True)
        done.append(f"removed {run_dir}")
    return done


def _lab_id(root: Path) -> str | None:
    """The lab id of the state file, when it is one (4 hex digits, as the lab writes it)."""
    try:
        lab_id = json.loads((root / STATE_FILE).read_text())["labId"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return lab_id if isinstance(lab_id, str) and re.fullmatch(r"[0-9a-f]{4}", lab_id) else None


def run_cgroups(lab_id: str, name: str) -> list[Path]:
    """The trees ``/sdl<id>-run-<name>`` of every hierarchy, where the lab starts its run ``name``.

    ``name`` is a lower-case word (``cluster``, ``nodes``); :func:`clean_stale` kills what is left in them.
    """
    return [h / f"sdl{lab_id}-run-{name}" for h in real_node.cgroup_hierarchies()]


def _lab_cgroups(lab_id: str) -> list[Path]:
    """The lab's cgroup trees of every hierarchy: the real nodes' roots ``/sdrn<id>-<n>``
    (``RealNode.cgroup_root``) and the runs' ``/sdl<id>-run-<name>`` (:func:`run_cgroups`)."""
    owned = re.compile(rf"sdrn{lab_id}-\d+|sdl{lab_id}-run-[a-z0-9-]+")
    found: list[Path] = []
    for hierarchy in real_node.cgroup_hierarchies():
        with contextlib.suppress(OSError):
            found += sorted(p for p in hierarchy.iterdir() if p.is_dir() and owned.fullmatch(p.name))
    return found


LAB_MARKERS: Final = (STATE_FILE, "controlplane", "admin.kubeconfig", "pki")
"""Files only a lab work directory holds (the last two: the layout earlier ``lab up`` runs left)."""


def reset_workdir(workdir: Path) -> list[str]:
    """Make ``workdir`` ready for a new lab: clean a previous lab's leftovers and remove its files.

    Touches ``workdir`` only when it holds one of :data:`LAB_MARKERS` (never a directory that is
    not a lab's); its files go, except :data:`LOCK_FILE` (the caller holds it first, see
    :func:`hold`). Returns what :func:`clean_stale` removed, one line each.
    Raises: :class:`LabRunning` when a lab still runs there (nothing is touched).
    """
    if not any((workdir / marker).exists() for marker in LAB_MARKERS):
        return []
    refuse_if_running(workdir)
    done = clean_stale(workdir)  # a lab killed before its stop
    for child in workdir.iterdir():  # all but the lock, which the next lab holds from before the reset
        if child.name == LOCK_FILE:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    if not any(workdir.iterdir()):
        workdir.rmdir()
    return done


def down(workdir: Path) -> list[str]:
    """``sriov-dra lab down``: remove what a lab that did not stop left (:func:`clean_stale`); keep its files.

    Touches ``workdir`` only when it holds one of :data:`LAB_MARKERS`. Returns what was removed,
    one line each (empty: nothing was left).
    Raises: :class:`LabRunning` when a lab still runs there (nothing is touched).
    """
    if not any((workdir / marker).exists() for marker in LAB_MARKERS):
        return []
    held = workdir.resolve() in _HELD
    hold(workdir)  # no lab may start here while this cleans
    try:
        return clean_stale(workdir)
    finally:
        if not held:
            release(workdir)
