"""Settings of the guard daemon (``sriov-dra-guard``), one frozen value decided at start.

Each field's unit is in its name and its docstring says why the default was chosen; the daemon
logs the effective settings once. Per-request Multus settings live in the runtime-facing CNI
config (``guard.shim.GuardConf``), so one daemon serves both Multus modes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sriov_dra.guard import shim


@dataclass(frozen=True)
class GuardSettings:
    """How the guard daemon runs."""

    socket_path: Path = Path(shim.DEFAULT_SOCKET)
    """Unix socket the shim connects to (directory mode 0700, socket 0600, root only)."""
    kubeconfig: Path | None = None
    """Kubeconfig of the guard's identity; ``None`` uses the Pod's service account (in-cluster)."""
    host_root: Path | None = None
    """The node's root filesystem as the daemon sees it (the guard DaemonSet mounts the node's ``/``
    at ``/host``): Multus runs chrooted into it and the Pod's netns is opened under it, so an ADD
    sees the node's IPAM state, Multus cache and netns mounts as the shim's DEL does. ``None``: the
    daemon runs on the node itself and uses paths as given."""
    metadata_dir: Path | None = None
    """The DRA plugin's data directory as the daemon sees it (under ``host_root`` in the DaemonSet):
    after a verified ADD the managed VFs' network data goes into the Pod's device metadata files
    there (docs/design.md#device-metadata). ``None``: the files are left as the plugin wrote them."""
    node_name: str | None = None
    """This node's name; when set, an ADD for a Pod bound elsewhere is refused (``PodNodeMismatch``)."""
    add_budget_s: float = 110.0
    """Total time one ADD may take (reads, Multus, verification). Below the kubelet's default
    2-minute runtime request timeout, so the guard's answer arrives before the runtime gives up."""
    api_timeout_s: float = 5.0
    """Upper bound of one live GET (connect and read); the remaining budget bounds it further."""
    api_retry_window_s: float = 5.0
    """How long a retryable read failure (5xx, timeout, connection refused, 429) is retried."""
    del_after_failure_min_s: float = 30.0
    """Time granted to the Multus DEL that undoes a failed verification even when the ADD budget is
    spent: leaving delegates attached would leak addresses until the runtime's own DEL."""
    max_concurrent: int = 32
    """ADDs handled at once; more wait for a slot within their budget (then fail with code 11)."""
    metrics_address: str = "127.0.0.1:9617"
    """``host:port`` of ``/metrics`` and ``/healthz``; empty disables the endpoint."""
    drain_grace_s: float = 10.0
    """On SIGTERM, how long in-flight requests may finish before the daemon exits."""

    def describe(self) -> dict[str, Any]:
        """The settings as a flat dict for the start-up log line."""
        return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
