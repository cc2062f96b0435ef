"""The guard in the lab: install it into a CNI setup and run its daemon, both through its entrypoint.

The lab treats the guard like an installed service, started as a process through its entrypoint
(docs/layout.md): ``sriov-dra-guard install`` writes the ``multus-guard`` shim
and ``00-multus-guard.conflist`` exactly as the Ansible role would, and ``sriov-dra-guard serve``
runs the daemon with a given identity. Readiness is the daemon's own ``/readyz``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sriov_dra_lab import processes

ENTRYPOINT = [sys.executable, "-m", "sriov_dra.guard.main"]


class InstallFailed(RuntimeError):
    """``sriov-dra-guard install`` failed or reported an installation problem."""


def install(
    *,
    bin_dir: Path,
    conf_dir: Path,
    mode: str,
    primary_config: Path,
    socket_path: Path,
    multus: Mapping[str, Any] | None = None,
    interpreter: str = sys.executable,
    check: Sequence[str] = (),
    plugin_checkpoint: Path | None = None,
    verify_ordinary_selections: bool = False,
) -> Path:
    """Install the shim into ``bin_dir`` and the guard's conflist into ``conf_dir``; return the conflist.

    ``check`` holds extra ``install`` flags (``--multus-master-cni``, ``--autoconfig-dir``);
    ``plugin_checkpoint`` and ``verify_ordinary_selections`` are ``--plugin-checkpoint`` and
    ``--verify-ordinary-selections``.
    Raises: :class:`InstallFailed` with the command's output.
    """
    argv = [
        *ENTRYPOINT,
        "install",
        f"--bin-dir={bin_dir}",
        f"--conf-dir={conf_dir}",
        f"--mode={mode}",
        f"--primary-config={primary_config}",
        f"--socket={socket_path}",
        f"--interpreter={interpreter}",
        f"--multus={json.dumps(dict(multus or {}))}",
        *([f"--plugin-checkpoint={plugin_checkpoint}"] if plugin_checkpoint else []),
        *(["--verify-ordinary-selections"] if verify_ordinary_selections else []),
        *check,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    if proc.returncode != 0:
        raise InstallFailed(f"{' '.join(argv)} exited {proc.returncode}: {proc.stdout}{proc.stderr}")
    return conf_dir / "00-multus-guard.conflist"


@dataclass
class GuardDaemon:
    """A running ``sriov-dra-guard serve`` process."""

    socket_path: Path
    kubeconfig: Path
    log_path: Path
    node_name: str | None = None
    extra_args: Sequence[str] = ()
    metrics_port: int = field(default_factory=processes.free_port)
    env: Mapping[str, str] | None = None
    """Variables added to the daemon's environment (e.g. the image's ``PYTHONOPTIMIZE``)."""
    process: processes.Process | None = field(default=None, init=False)

    @property
    def metrics_url(self) -> str:
        """Base URL of ``/metrics``, ``/healthz`` and ``/readyz``."""
        return f"http://127.0.0.1:{self.metrics_port}"

    def start(self, *, timeout_s: float = 30.0) -> None:
        """Start the daemon and wait for ``/readyz``. Raises: ``processes.ProcessFailed``."""
        argv = [
            *ENTRYPOINT,
            "serve",
            f"--socket={self.socket_path}",
            f"--kubeconfig={self.kubeconfig}",
            f"--metrics-address=127.0.0.1:{self.metrics_port}",
            "--log-format=json",
            *([f"--node-name={self.node_name}"] if self.node_name else []),
            *self.extra_args,
        ]
        self.process = processes.Process(
            name="sriov-dra-guard",
            argv=argv,
            log_path=self.log_path,
            stop_grace_s=15.0,
            env={**os.environ, **self.env} if self.env else None,
        )
        self.process.start()
        processes.wait_until(
            "guard /readyz", self.healthy, timeout_s=timeout_s, process=self.process, interval_s=0.1
        )

    def healthy(self) -> bool:
        """True when ``/readyz`` answers 200 (the socket listens)."""
        try:
            with urllib.request.urlopen(f"{self.metrics_url}/readyz", timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def metrics(self) -> str:
        """The current ``/metrics`` text."""
        with urllib.request.urlopen(f"{self.metrics_url}/metrics", timeout=5) as answer:
            return str(answer.read().decode())

    def stop(self) -> None:
        """SIGTERM (the daemon drains in-flight requests), then reap."""
        if self.process is not None:
            self.process.stop()
