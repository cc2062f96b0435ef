"""Run stock Multus (thin ``multus`` or thick ``multus-shim``) for one CNI command, within a budget.

The process boundary between the guard daemon and Multus: executable and stdin config from
:mod:`~sriov_dra.guard.shim`, the runtime's ``CNI_*`` environment (with the guard's one CNI_ARGS
edit on ADD) over a minimal base, stdout kept byte for byte, and a run past its budget killed with
every process it started. In a container Multus runs chrooted into the node's root (``host_root``)
so it and its delegates see the node's files exactly as the shim's DEL does. Never alters
Multus's output, runs a delegate itself, or leaves a Multus process behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sriov_dra.guard import shim

DEFAULT_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_STDERR_LIMIT: Final = 4096
CHROOT: Final = "chroot"
"""coreutils ``chroot`` (on the daemon's PATH): a child chroots without a ``preexec_fn``, which is
unsafe in the guard's threaded daemon."""


class MultusUnavailable(Exception):
    """Multus could not be started (not installed, not executable, bad guard config)."""


@dataclass(frozen=True)
class MultusRun:
    """One finished (or killed) Multus run.

    Units: ``duration_s`` seconds of wall time. Shapes: ``stdout`` exactly as printed;
    ``stderr`` its last 4 KiB; ``timed_out`` true when the budget ran out and it was killed.
    """

    command: str
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """True when Multus exited 0 within the budget."""
        return self.exit_code == 0 and not self.timed_out


MAX_SYMLINKS: Final = 40
"""Links followed while resolving one path under the node's root (the kernel's own limit)."""


def resolve_in_root(root: str, path: str) -> str | None:
    """``path`` (a node path) resolved under ``root`` as a process chrooted there resolves it.

    Every symlink on the way is followed inside ``root``: an absolute target starts again at
    ``root``, ``..`` never climbs above it. Shapes: the resolved path as the daemon opens it (under
    ``root``); ``None`` when more than :data:`MAX_SYMLINKS` links are met (a loop). A missing
    component is not an error: the path is returned as resolved so far plus the rest.
    """
    parts = [p for p in path.split("/") if p]
    resolved: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == ".":
            continue
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        here = os.path.join(root, *resolved, part)
        if not os.path.islink(here):
            resolved.append(part)
            continue
        hops += 1
        if hops > MAX_SYMLINKS:
            return None
        target = os.readlink(here)
        if target.startswith("/"):
            resolved = []
        parts = [p for p in target.split("/") if p] + parts
    return os.path.join(root, *resolved)


def node_path(host_root: str | None, path: str) -> str:
    """``path`` (absolute, as the node knows it) as the daemon opens it: resolved under ``host_root``.

    Symlinks on the way are the node's (:func:`resolve_in_root`): ``/var/run/netns/cni-1`` on a
    node whose ``/var/run`` links to ``/run`` is ``<host_root>/run/netns/cni-1``. Shapes:
    ``node_path("/host", "/etc/cni/net.d/10-a.conflist")`` is ``"/host/etc/cni/net.d/10-a.conflist"``;
    ``host_root`` None (a guard on the node itself) returns ``path`` unchanged, and so does an empty
    ``path`` (no netns given); a symlink loop gives the plain join (opening it then fails).
    """
    if not host_root or not path:
        return path
    return resolve_in_root(host_root, path) or os.path.join(host_root, path.lstrip("/"))


class MultusRunner:
    """Runs Multus as a child process (the production implementation of the guard's seam).

    ``host_root``: the node's root filesystem as the daemon sees it (``--host-root``, e.g. ``/host``
    in the guard DaemonSet); Multus then runs as ``chroot <host_root> <multus>``. None: Multus runs
    in the daemon's own filesystem (a guard started on the node itself).
    """

    def __init__(self, host_root: str | None = None) -> None:
        self.host_root = host_root or None

    def _binary(self, conf: shim.GuardConf, cni_path: str) -> str:
        """The Multus executable as the node knows it (``multus.binary`` or found on ``CNI_PATH``).

        Under ``host_root`` each candidate is resolved as the chrooted Multus will resolve it: a
        symlink's absolute target is a node path (``/opt/cni/bin/multus`` linked to
        ``/usr/lib/cni/multus`` is found).
        Raises: ``shim.GuardConfError`` naming the searched directories (node paths) and the root
        when none is executable.
        """
        if not self.host_root or conf.binary:
            return shim.multus_binary(conf, cni_path)
        dirs = [d for d in cni_path.split(os.pathsep) if d]
        for directory in dirs:
            candidate = os.path.join(directory, conf.multus_name)
            resolved = resolve_in_root(self.host_root, candidate)
            if resolved is not None and os.path.isfile(resolved) and os.access(resolved, os.X_OK):
                return candidate
        raise shim.GuardConfError(
            "",
            f"{conf.multus_name} not found in CNI_PATH {dirs} under the node's root {self.host_root}; "
            "install Multus or set multus.binary",
        )

    def _config(self, conf: shim.GuardConf, *, teardown: bool) -> dict[str, object]:
        """The synthesized config, its primary read at the node's path (``shim.multus_config``)."""
        if not self.host_root:
            return shim.multus_config(conf, teardown=teardown)
        rooted = dataclasses.replace(conf, primary_config=node_path(self.host_root, conf.primary_config))
        out = shim.multus_config(rooted, teardown=teardown)
        if not conf.cluster_network and out.get("clusterNetwork") == rooted.primary_config:
            out["clusterNetwork"] = conf.primary_config  # teardown's fallback names the node's path
        return out

    def run(
        self, conf: shim.GuardConf, env: Mapping[str, str], *, command: str, timeout_s: float
    ) -> MultusRun:
        """Run Multus for ``command`` with the synthesized config on stdin.

        Units: ``timeout_s`` seconds; at least 0.1 s is granted.
        Raises: :class:`MultusUnavailable` when the binary cannot be found or started, or the
        thin primary config cannot be read on ADD.
        """
        try:
            binary = self._binary(conf, env.get("CNI_PATH", ""))
            config = json.dumps(self._config(conf, teardown=command != "ADD")).encode()
        except shim.GuardConfError as exc:
            raise MultusUnavailable(str(exc)) from exc
        argv = [CHROOT, self.host_root, binary] if self.host_root else [binary]
        child_env = {"PATH": os.environ.get("PATH", DEFAULT_PATH)}
        child_env.update({k: v for k, v in env.items() if k.startswith("CNI_")})
        child_env["CNI_COMMAND"] = command
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_env,
                start_new_session=True,
            )
        except OSError as exc:
            raise MultusUnavailable(f"cannot start {' '.join(argv)}: {exc}") from exc
        timed_out = False
        try:
            out, err = proc.communicate(config, timeout=max(timeout_s, 0.1))
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        return MultusRun(
            command=command,
            exit_code=proc.returncode if not timed_out else -signal.SIGKILL,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace")[-_STDERR_LIMIT:],
            duration_s=time.monotonic() - start,
            timed_out=timed_out,
        )
