"""LAB ONLY: thick Multus as the multus role's DaemonSet on real lab nodes.

On real nodes thick Multus is not a lab process: the multus role renders its DaemonSet (the
``multus-daemon`` of the Multus thick image assembled from the pinned binaries, its init container
installing ``multus-shim``) and its node part writes ``/etc/cni/net.d/multus.d/daemon-config.json``.
The lab runs the role's node and cluster parts as two concurrent playbook runs, so the daemon could
start before its config exists and crash-loop. As an operator does for nodes whose files are not there
yet, the DaemonSet selects :data:`CONFIG_LABEL` (the role's ``multus_node_selector``) and the lab sets
it on a node once the node run wrote the config (:func:`mark_config_written`), then waits until that
node's daemon Pod is Ready and its socket is there (:func:`wait_running`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from kubernetes import client

from sriov_dra_lab import plugin_pods, processes

CONFIG_LABEL: Final = "lab.sriov-dra.dev/multus-daemon-config"
"""Node label the thick Multus DaemonSet selects (``multus_node_selector``): the daemon config is written."""
NAMESPACE: Final = "kube-system"
POD_LABEL: Final = "app.kubernetes.io/name=multus"
SOCKET: Final = "/run/multus/multus.sock"
"""The daemon's socket on the node: the role's ``socketDir`` (``/host/run/multus/`` in the container) and
``multus-shim``'s default ``daemonSocketDir``."""


def mark_config_written(api: Any, node: str) -> None:
    """Label Node ``node`` with :data:`CONFIG_LABEL`: the DaemonSet schedules the daemon there."""
    client.CoreV1Api(api).patch_node(node, {"metadata": {"labels": {CONFIG_LABEL: "true"}}})


def wait_running(api: Any, node: str, socket_exists: Callable[[], bool], *, timeout_s: float) -> client.V1Pod:
    """Wait until ``node``'s thick Multus Pod is Ready and ``socket_exists()`` (the daemon listens).

    The role's DaemonSet has no readiness probe (as upstream's), so Ready only says the container
    runs; the socket says the daemon serves. Returns the Pod. Raises: ``processes.ProcessFailed``
    naming the Pod's state and how to see its log.
    """
    found: list[client.V1Pod | None] = [None]

    def running() -> bool:
        pod = found[0] = plugin_pods.node_pod(api, NAMESPACE, node, selector=POD_LABEL)
        if pod is None or pod.status is None:
            return False
        ready = {c.type: c.status for c in pod.status.conditions or []}.get("Ready") == "True"
        return ready and socket_exists()

    try:
        processes.wait_until(f"thick Multus's daemon Pod on {node} serving", running, timeout_s=timeout_s)
    except processes.ProcessFailed as exc:
        pod = found[0]
        state = plugin_pods.describe(pod) if pod is not None else "no Multus Pod was scheduled on the node"
        raise processes.ProcessFailed(f"{exc}; {state}") from exc
    pod = found[0]
    assert pod is not None
    return pod
