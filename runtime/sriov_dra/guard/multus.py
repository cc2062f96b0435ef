"""Run stock Multus (thin ``multus`` or thick ``multus-shim``) for one CNI command, within a budget.

Owns the process boundary between the guard daemon and Multus: the executable and stdin config come
from :mod:`~sriov_dra.guard.shim` (one definition shared with the shim's own pass-through), the
environment is the runtime's ``CNI_*`` variables (with the guard's one CNI_ARGS edit on ADD) over a
minimal base (``PATH``), stdout is kept byte for byte so a successful result is relayed unchanged,
and a run that outlives its budget is killed with every process it started (its own session).

It must never alter Multus's output, run a delegate itself, or leave a Multus process behind.
"""

from __future__ import annotations

import contextlib
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


class MultusRunner:
    """Runs Multus as a child process (the production implementation of the guard's seam)."""

    def run(
        self, conf: shim.GuardConf, env: Mapping[str, str], *, command: str, timeout_s: float
    ) -> MultusRun:
        """Run Multus for ``command`` with the synthesized config on stdin.

        Units: ``timeout_s`` seconds; at least 0.1 s is granted.
        Raises: :class:`MultusUnavailable` when the binary cannot be found or started, or the
        thin primary config cannot be read on ADD.
        """
        try:
            binary = shim.multus_binary(conf, env.get("CNI_PATH", ""))
            config = json.dumps(shim.multus_config(conf, teardown=command != "ADD")).encode()
        except shim.GuardConfError as exc:
            raise MultusUnavailable(str(exc)) from exc
        child_env = {"PATH": os.environ.get("PATH", DEFAULT_PATH)}
        child_env.update({k: v for k, v in env.items() if k.startswith("CNI_")})
        child_env["CNI_COMMAND"] = command
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                [binary],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_env,
                start_new_session=True,
            )
        except OSError as exc:
            raise MultusUnavailable(f"cannot start {binary}: {exc}") from exc
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
