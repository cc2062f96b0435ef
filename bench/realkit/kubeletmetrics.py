"""The kubelet's own histograms, read through the apiserver proxy (``nodes/<node>/proxy/metrics``),
and the plugin's and the guard's own (their ``/metrics`` on the node's loopback).

``bench/pod_start.py`` reads a node's ``/metrics`` before and after each Pod start; with one Pod
starting at a time on that node, the change of a histogram's ``_sum`` (and ``_count``) between two
readings is that Pod's time in the phase the histogram measures. Only the Prometheus text format's
sample lines are parsed (``name{labels} value``); ``# HELP``/``# TYPE`` lines are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kubernetes import client

from sriov_dra_lab import real_node

SAMPLE: Final = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
LABEL: Final = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass(frozen=True)
class Phase:
    """One histogram the bench splits a Pod start by: ``name`` (without ``_sum``) and label filter."""

    title: str
    metric: str
    labels: Mapping[str, str]


# What kubelet v1.36.3 exposes (read on this machine's real nodes): the DRA manager's
# PrepareResources span (every driver of the Pod's claims), its gRPC call per driver, the sandbox
# (RunPodSandbox: containerd's sandbox and CNI ADD), the CRI container calls as the kubelet's
# runtime client times them, and the Pod start spans.
PHASES: Final = (
    Phase(
        "kubelet DRA PrepareResources (all drivers)",
        "dra_operations_duration_seconds",
        {"operation_name": "PrepareResources"},
    ),
    Phase(
        "  NodePrepareResources gRPC, sriov plugin",
        "dra_grpc_operations_duration_seconds",
        {
            "driver_name": "sriovnetwork.k8snetworkplumbingwg.io",
            "method_name": "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
        },
    ),
    Phase(
        "  NodePrepareResources gRPC, GPU plugin",
        "dra_grpc_operations_duration_seconds",
        {
            "driver_name": "gpu.nvidia.com",
            "method_name": "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
        },
    ),
    Phase("kubelet RunPodSandbox (sandbox + CNI ADD)", "kubelet_run_podsandbox_duration_seconds", {}),
    Phase(
        "CRI CreateContainer",
        "kubelet_runtime_operations_duration_seconds",
        {"operation_type": "create_container"},
    ),
    Phase(
        "CRI StartContainer",
        "kubelet_runtime_operations_duration_seconds",
        {"operation_type": "start_container"},
    ),
    Phase("kubelet pod start SLI (creation→running, no pulls)", "kubelet_pod_start_sli_duration_seconds", {}),
    Phase("kubelet pod start (kubelet saw it→running)", "kubelet_pod_start_duration_seconds", {}),
    Phase("kubelet pod start total (creation→running)", "kubelet_pod_start_total_duration_seconds", {}),
    Phase("kubelet pod worker start", "kubelet_pod_worker_start_duration_seconds", {}),
)

PLUGIN_PORT: Final = 9402
"""The plugin role's default ``plugin_metrics_bind_address`` port (127.0.0.1)."""
GUARD_PORT: Final = 9617
"""The guard role's default ``guard_metrics_port`` (127.0.0.1)."""
PLUGIN_PREPARE: Final = Phase(
    "plugin: prepare, its own timer (all claims)",
    "sriov_dra_plugin_claim_operation_seconds",
    {"operation": "prepare"},
)
GUARD_PART: Final = Phase(
    "guard: ADD, the guard's own part", "sriov_dra_guard_add_duration_seconds", {"part": "guard"}
)
GUARD_MULTUS: Final = Phase(
    "guard: ADD, the Multus it ran", "sriov_dra_guard_add_duration_seconds", {"part": "multus"}
)
SERVICE_PHASES: Final = {PLUGIN_PORT: (PLUGIN_PREPARE,), GUARD_PORT: (GUARD_PART, GUARD_MULTUS)}
"""What :func:`read_service` is read for, by port: the plugin's and the guard's own histograms
(``sriov_dra.driver.metrics``, ``sriov_dra.guard.metrics``)."""


def read(api: client.ApiClient, node: str) -> Samples:
    """Every sample of ``node``'s kubelet ``/metrics``: ``{(name, labels): value}``.

    Raises: ``kubernetes.client.ApiException`` when the proxy call fails.
    """
    resp: Any = client.CoreV1Api(api).connect_get_node_proxy_with_path(
        node, "metrics", _preload_content=False
    )
    return parse(resp.data.decode())


def read_service(node: real_node.RealNode, port: int) -> Samples:
    """Every sample of the ``/metrics`` served on ``node``'s loopback at ``port`` (the plugin's and
    the guard's DaemonSet Pods use the node's network); empty when it cannot be read."""
    done = node.run_in_node(
        ["curl", "-sf", "--max-time", "5", f"http://127.0.0.1:{port}/metrics"], timeout_s=10
    )
    return parse(done.stdout) if done.returncode == 0 else {}


@dataclass(frozen=True)
class Reading:
    """One reading of a node: its kubelet's samples and, on a real node, the plugin's and the
    guard's by port (:data:`SERVICE_PHASES`)."""

    kubelet: Samples
    services: dict[int, Samples]


def read_node(
    api: client.ApiClient, node: str, real: real_node.RealNode | None, kubelet: Samples | None = None
) -> Reading:
    """:func:`read` of ``node`` (or ``kubelet`` when already read) and :func:`read_service` of each service port."""
    services = {port: read_service(real, port) for port in SERVICE_PHASES} if real else {}
    return Reading(read(api, node) if kubelet is None else kubelet, services)


def across(before: Reading, after: Reading) -> dict[str, tuple[float, float]]:
    """Per title of :data:`PHASES` and the service phases: (seconds, observations) between two readings."""
    out = delta(before.kubelet, after.kubelet)
    for port, samples in before.services.items():
        out.update(delta(samples, after.services.get(port, {}), SERVICE_PHASES[port]))
    return out


def parse(text: str) -> Samples:
    """The sample lines of Prometheus text ``text``: ``{(name, labels): value}``."""
    out: Samples = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match is None:
            continue
        name, labels, value = match.groups()
        try:
            out[(name, frozenset(LABEL.findall(labels or "")))] = float(value)
        except ValueError:
            continue
    return out


def total(
    samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float], phase: Phase, suffix: str
) -> float:
    """The sum of ``phase.metric + suffix`` over every label set that includes ``phase.labels``."""
    want = set(phase.labels.items())
    return sum(v for (name, labels), v in samples.items() if name == phase.metric + suffix and want <= labels)


def delta(
    before: Mapping[tuple[str, frozenset[tuple[str, str]]], float],
    after: Mapping[tuple[str, frozenset[tuple[str, str]]], float],
    phases: tuple[Phase, ...] = PHASES,
) -> dict[str, tuple[float, float]]:
    """Per title of ``phases``: (seconds, observations) added between the two readings."""
    return {
        p.title: (
            total(after, p, "_sum") - total(before, p, "_sum"),
            total(after, p, "_count") - total(before, p, "_count"),
        )
        for p in phases
    }


def names(samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float], *words: str) -> list[str]:
    """The metric names containing any of ``words`` (what this kubelet exposes)."""
    return sorted({n for n, _ in samples if any(w in n for w in words)})
