"""Rolling updates of the plugin and the guard on real kubelets while managed Pods come and go.

One lab on two real nodes (kubelet v1.36 + containerd, the roles, Multus thin, the guard and the
plugin as their roles' DaemonSets). Worker threads create and delete Pods with one managed VF each
(the one-network-deviceclass example) in a loop while the plugin's DaemonSet, then the guard's,
rolls to a new template (``maxSurge: 1, maxUnavailable: 0``; a changed Pod template annotation
replaces every Pod as a changed image digest does). Proves docs/plugin.md#rolling-update and
docs/guard.md#rolling-update where it matters, on the kubelet's own counters and events: every
Pod of the loop runs and goes, no NodePrepareResources or NodeUnprepareResources call fails
(the kubelet's ``dra_operations_duration_seconds`` errors and ``dra_grpc_operations_duration_seconds``
codes other than OK), every loop Pod runs with its managed interface ``dra0`` (Multus's
network-status), no ADD fails (no Warning Event of any loop Pod), no ResourceSlice is created
again (every slice keeps its UID), and nothing is left after the loop.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client
from tests.waiting import eventually

from sriov_dra_lab import plugin_pods

NAMESPACE = "ai-workloads"
WORKERS = 6
PODS_PER_ROLLOUT = 20
LAB_NAMESPACE = "dra-driver-sriov"
LAB_WARNING = "MissingClusterDNS:"
MAX_ROLLOUTS = 20


def _example() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from sriov_dra_lab import demo, workloads

    docs = workloads.load(demo.ONE_NETWORK / "one-network.yaml")
    (pod,) = workloads.load(demo.ONE_NETWORK / "pod.yaml")
    return docs, pod


@dataclass
class Loop:
    """Worker threads creating and deleting one-VF Pods until :attr:`stop`; what happened to each."""

    lab: Any
    template: dict[str, Any]
    stop: threading.Event = field(default_factory=threading.Event)
    done: list[tuple[str, float, float]] = field(default_factory=list)
    """(Pod name, monotonic times it was created and was gone) of every Pod that ran and was deleted."""
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    count: int = 0

    def run(self, worker: int) -> None:
        from sriov_dra_lab import workloads

        while not self.stop.is_set():
            with self.lock:
                self.count += 1
                name = f"rollout-{worker}-{self.count}"
            pod = {**self.template, "metadata": {**self.template["metadata"], "name": name}}
            created = time.monotonic()
            try:
                workloads.apply_docs(self.lab.api, [pod])
                workloads.wait_running(self.lab.api, NAMESPACE, name, timeout_s=180)
                attached = _interfaces(self.lab.api, name)
                workloads.delete_docs(self.lab.api, [pod], timeout_s=180)
            except Exception as exc:
                with self.lock:
                    self.failures.append(f"{name}: {exc}")
                return
            # The lab's kubelets have no cluster DNS: that warning is the lab's, every other one counts.
            warned = [
                w for w in workloads.warnings(self.lab.api, NAMESPACE, name) if not w.startswith(LAB_WARNING)
            ]
            with self.lock:
                if warned:
                    self.failures.append(f"{name}: {warned}")
                if "dra0" not in attached:  # the managed ADD ran: Multus reports the VF's interface
                    self.failures.append(
                        f"{name}: ran without its managed interface dra0 (network-status {attached})"
                    )
                self.done.append((name, created, time.monotonic()))

    def during(self, windows: list[tuple[float, float]]) -> int:
        """Pods created or deleted (their NodePrepare, NodeUnprepare, ADD, DEL) in any of ``windows``, each once."""
        with self.lock:
            return sum(
                1
                for _, made, gone in self.done
                if any(start <= made <= end or start <= gone <= end for start, end in windows)
            )


def _interfaces(api: client.ApiClient, name: str) -> list[str]:
    """The interfaces Multus's network-status annotation reports for Pod ``name`` (empty without one)."""
    from sriov_dra_rules import names

    pod = client.CoreV1Api(api).read_namespaced_pod(name, NAMESPACE)
    status = json.loads((pod.metadata.annotations or {}).get(names.NETWORK_STATUS_ANNOTATION) or "[]")
    return [str(entry.get("interface")) for entry in status if isinstance(entry, dict)]


def _slices(lab: Any) -> dict[str, str]:
    items = client.ResourceV1Api(lab.api).list_resource_slice().items
    return {s.metadata.name: s.metadata.uid for s in items if s.spec.driver.startswith("sriovnetwork.")}


_ERRORS = re.compile(
    r'^(dra_operations_duration_seconds_count\{[^}]*is_error="true"[^}]*\}'
    r'|dra_grpc_operations_duration_seconds_count\{[^}]*grpc_status_code="(?!OK")[^"]*"[^}]*\})\s+(\S+)$',
    re.M,
)


_PREPARED = re.compile(
    r'^dra_operations_duration_seconds_count\{[^}]*is_error="false"[^}]*operation_name="PrepareResources"[^}]*\}\s+(\S+)$'
    r'|^dra_operations_duration_seconds_count\{[^}]*operation_name="PrepareResources"[^}]*is_error="false"[^}]*\}\s+(\S+)$',
    re.M,
)


def _kubelet_counts(lab: Any) -> tuple[dict[str, float], float]:
    """The kubelets' DRA error counters (node and series → count) and their successful PrepareResources calls."""
    from sriov_dra_lab import binaries

    found: dict[str, float] = {}
    prepared = 0.0
    for node in lab.nodes:
        done = subprocess.run(
            [
                str(binaries.find("kubectl")),
                f"--kubeconfig={lab.cp.kubeconfig}",
                "get",
                "--raw",
                f"/api/v1/nodes/{node.name}/proxy/metrics",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "dra_operations_duration_seconds_count" in done.stdout, f"{node.name}: no DRA counters"
        for match in _ERRORS.finditer(done.stdout):
            key = f"{node.name} {match.group(1)}"
            found[key] = found.get(key, 0.0) + float(match.group(2))
        prepared += sum(float(m.group(1) or m.group(2)) for m in _PREPARED.finditer(done.stdout))
    return found, prepared


def _roll(lab: Any, daemonset: str, selector: str, stamp: str) -> None:
    """Change ``daemonset``'s Pod template and wait until every node runs a new, ready Pod and no old one."""
    apps = client.AppsV1Api(lab.api)
    patch = {"spec": {"template": {"metadata": {"annotations": {"sriov-dra.test/rollout": stamp}}}}}
    apps.patch_namespaced_daemon_set(daemonset, LAB_NAMESPACE, patch)
    generation = apps.read_namespaced_daemon_set(daemonset, LAB_NAMESPACE).metadata.generation

    def rolled() -> bool:
        ds = apps.read_namespaced_daemon_set(daemonset, LAB_NAMESPACE)
        status = ds.status
        pods = client.CoreV1Api(lab.api).list_namespaced_pod(LAB_NAMESPACE, label_selector=selector).items
        return (
            (status.observed_generation or 0) >= generation
            and status.updated_number_scheduled == status.desired_number_scheduled
            and status.number_available == status.desired_number_scheduled
            and len(pods) == status.desired_number_scheduled
            and all((p.metadata.annotations or {}).get("sriov-dra.test/rollout") == stamp for p in pods)
        )

    eventually(f"DaemonSet {daemonset} rolled out", rolled, timeout_s=600, interval_s=1)


def test_rolling_the_plugin_and_the_guard_fails_no_call_no_add_and_recreates_no_slice(real_lab: Any) -> None:
    from sriov_dra_lab import leftovers, workloads

    docs, template = _example()
    workloads.apply_docs(real_lab.api, docs)
    loop = Loop(real_lab, template)
    threads = [threading.Thread(target=loop.run, args=(i,), daemon=True) for i in range(WORKERS)]
    try:
        slices = eventually(
            "the plugin's ResourceSlices", lambda: _slices(real_lab) or None, timeout_s=60, interval_s=0.5
        )
        errors_before, prepared_before = _kubelet_counts(real_lab)
        for thread in threads:
            thread.start()
        eventually("the loop's first Pods", lambda: len(loop.done) >= WORKERS, timeout_s=300, interval_s=1)
        for daemonset, selector in (
            ("sriov-dra-plugin", plugin_pods.POD_LABEL),
            ("sriov-dra-guard", plugin_pods.SERVICE_PODS["guard"][0]),
        ):
            # One rollout of a DaemonSet takes seconds on two nodes: it is rolled again (each time a new
            # template, a new Pod per node, a new hand-over) until 20 Pods came or went during rollouts.
            windows: list[tuple[float, float]] = []
            while loop.during(windows) < PODS_PER_ROLLOUT and not loop.failures:
                assert len(windows) < MAX_ROLLOUTS, (
                    f"{daemonset}: fewer than {PODS_PER_ROLLOUT} Pods in {windows}"
                )
                started = time.monotonic()
                _roll(real_lab, daemonset, selector, f"{daemonset}-{len(windows)}")
                windows.append((started, time.monotonic()))
            print(
                f"{daemonset}: {len(windows)} rollouts of "
                + ", ".join(f"{end - start:.1f} s" for start, end in windows)
                + f"; {loop.during(windows)} Pods created or deleted during them"
            )  # measured, not asserted
            assert loop.failures == []
            assert _slices(real_lab) == slices, "every ResourceSlice keeps its UID"
    finally:
        loop.stop.set()
        for thread in threads:
            thread.join(timeout=400)
    assert loop.failures == []
    print(f"{len(loop.done)} Pods ran and were deleted")
    errors_after, prepared_after = _kubelet_counts(real_lab)
    assert errors_after == errors_before, "a NodePrepare or NodeUnprepare failed"
    assert prepared_after - prepared_before >= len(loop.done), "the kubelets counted every Pod's NodePrepare"
    assert _slices(real_lab) == slices
    workloads.delete_docs(real_lab.api, docs, timeout_s=180)
    try:
        eventually("no leftovers", lambda: leftovers.collect(real_lab).empty, timeout_s=90, interval_s=1)
    except BaseException:
        pytest.fail("leftovers: " + leftovers.collect(real_lab).describe())
