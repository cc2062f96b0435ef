"""Benchmark: a burst of gpu-nic-pairs Pods created at once on one real node, managed against hand-written.

Starts the lab on two real nodes as ``bench/pod_start.py`` does and creates :data:`BURST` Pods of
the gpu-nic-pairs shape (two GPU/VF pairs by PCIe root, ``bench/realkit/podkit.py``) at once on
its first node, alternately managed and hand-written (each hand-written Pod with its own two NADs,
one per VF), after one uncounted single-Pod warm-up of each. A burst's time runs from the first
create call until the watch has seen every Pod Running; each Pod must show both rails'
interfaces, and after each burst the lab is checked for leftovers. Prints the median burst per
variant and managed / hand-written against :data:`GOAL_RATIO`, the kubelet's, plugin's and guard's
own histograms across the bursts (mean per call), the CPU seconds each component spent on a burst
(:func:`cpu_seconds`: with 2 cores a burst is bound by the CPU all of them need), and each side's
concurrency limits as the code and the node's kubelet (its ``/configz``) set them.

The lab's synthetic GPU slice holds one GPU per PCIe root; the bench publishes as many per root as
Pods it starts (at most ``session.MAX_GPUS_PER_ROOT``), and sizes the burst down, saying so, when
the node has fewer VFs on a rail.

Run as root: ``.venv/bin/python bench/pod_burst.py [--rounds N] [--pods N]`` (default 2 bursts per
variant of 16 Pods). Nothing is asserted on time: it exits 0 on a MISS, and prints ``SKIP`` with
what is missing without real nodes.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import inspect
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.realkit import kubeletmetrics, podkit
from kubernetes import client

from sriov_dra.guard import settings as guard_settings
from sriov_dra.kubeletapi import plugin_server
from sriov_dra_lab import demo, real_node, real_stack, session, stack, stack_base, workloads

GOAL_RATIO: Final = 1.05
BURST: Final = 16
LABEL: Final = "bench.sriov-dra.dev/burst"
PROCESSES: Final = ("plugin", "guard")
"""The DaemonSet containers whose CPU the bench reads (both in the plugin's install namespace)."""
KUBELET_LIMITS: Final = (
    "kubeAPIQPS",
    "kubeAPIBurst",
    "serializeImagePulls",
    "maxParallelImagePulls",
    "maxPods",
    "podPidsLimit",
)
"""The kubelet settings that bound how many Pods it starts at once and how fast it writes their status."""


@dataclass
class Burst:
    """One measured burst (seconds from the first create call)."""

    all_running_s: float
    running_s: list[float]
    histograms: dict[str, tuple[float, float]]
    cpu_s: dict[str, float]
    """CPU seconds per process across the burst (:func:`cpu_seconds`)."""


@dataclass
class Variant:
    """A variant's Pods and its measured bursts."""

    name: str
    pods: list[dict[str, Any]]
    bursts: list[Burst] = field(default_factory=list)


def variants(
    docs: list[dict[str, Any]], node: str, vfs: dict[str, list[str]], count: int
) -> tuple[Variant, Variant, list[dict[str, Any]]]:
    """(managed, hand-written, the hand-written variant's NADs and template) of ``count`` Pods on ``node``."""
    (managed_pod,) = [d for d in docs if d["kind"] == "Pod"]
    base = podkit.pinned(managed_pod, node)
    managed, hand, extra = [], [], [podkit.gpu_only_template(docs)]
    for i in range(count):
        pod = json.loads(json.dumps(base))
        pod["metadata"]["name"] = f"burst-managed-{i}"
        pod["metadata"]["labels"] = {LABEL: "managed"}
        managed.append(pod)
        nads, networks = podkit.hand_nads(docs, {pf: pcis[i] for pf, pcis in vfs.items()})
        extra[:0] = nads
        hand.append(podkit.hand_pod(base, f"burst-hand-{i}", networks, {LABEL: "hand-written"}))
    return Variant("managed", managed), Variant("hand-written", hand), extra


def publish_gpus(lab: stack.LabStack, node: str, per_root: int) -> int:
    """Replace ``node``'s synthetic GPU slice by one with ``per_root`` GPUs under each root; return the GPUs per root."""
    api = client.ResourceV1Api(lab.api)
    name = session.gpu_slice(node)["metadata"]["name"]
    current = api.read_resource_slice(name)
    body = session.gpu_slice(node, per_root)
    body["metadata"]["resourceVersion"] = current.metadata.resource_version
    body["spec"]["pool"]["generation"] = current.spec.pool.generation + 1
    api.replace_resource_slice(name, body)
    return per_root


def cpu_seconds(lab: stack.LabStack, node: str) -> dict[str, float]:
    """CPU seconds (user + system, with reaped children) so far of the control plane's components,
    ``node``'s kubelet and containerd (the CNI plugins it runs: the shim, hand-written Pods' Multus)
    and its plugin and guard containers (the guard's: managed Pods' Multus), by component name."""
    pids = {p.name: p.pid for p in lab.cp.processes if p.pid is not None}
    real = next(n.real for n in lab.nodes if n.name == node)
    if real is not None:
        pids.update({name: p.pid for name, p in real.processes.items() if p.pid is not None})
        for name in PROCESSES:
            pids[name] = real_stack.container_pid(real, stack_base.PLUGIN_SERVICE_ACCOUNT[0], name)
    out = {}
    for name, pid in pids.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, TypeError):
            continue
        out[name] = sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return out


def burst(lab: stack.LabStack, node: str, pods: list[dict[str, Any]]) -> Burst:
    """Create ``pods`` at once, watch until every one runs, read the node's histograms across the burst."""
    core = client.CoreV1Api(lab.api)
    selector = f"{LABEL}={pods[0]['metadata']['labels'][LABEL]}"
    names = {p["metadata"]["name"] for p in pods}
    running: dict[str, float] = {}

    def seen(pod: Any, now: float) -> bool:
        if pod.status.phase == "Running":
            running.setdefault(pod.metadata.name, now)
        return names <= running.keys()

    real = next(n.real for n in lab.nodes if n.name == node)
    before = kubeletmetrics.read_node(lab.api, node, real)
    cpu_before = cpu_seconds(lab, node)
    done = podkit.follow(lab.api, seen, timeout_s=600, label_selector=selector)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(len(pods)) as pool:
        list(pool.map(lambda body: core.create_namespaced_pod(podkit.NAMESPACE, body), pods))
    if not done.wait(600) or not names <= running.keys():
        late = sorted(names - running.keys())
        raise SystemExit(
            f"Pods did not run: {late[:3]}: {workloads.warnings(lab.api, podkit.NAMESPACE, late[0])}"
        )
    time.sleep(1.0)  # the kubelet and the services observe the last start's histograms
    histograms = kubeletmetrics.across(before, kubeletmetrics.read_node(lab.api, node, real))
    cpu = {k: v - cpu_before[k] for k, v in cpu_seconds(lab, node).items() if k in cpu_before}
    for name in names:
        podkit.attached(core.read_namespaced_pod(name, podkit.NAMESPACE))
    spans = sorted(t - t0 for t in running.values())
    return Burst(spans[-1], spans, histograms, cpu)


def limits(lab: stack.LabStack, node: str) -> list[str]:
    """Each side's concurrency limits, as the code and the node's kubelet set them."""
    workers = inspect.signature(plugin_server.KubeletPluginServer).parameters["max_workers"].default
    guard = guard_settings.GuardSettings.max_concurrent
    resp: Any = client.CoreV1Api(lab.api).connect_get_node_proxy_with_path(
        node, "configz", _preload_content=False
    )
    config = json.loads(resp.data).get("kubeletconfig", {})
    kubelet = ", ".join(f"{k} {config.get(k, 'unset')}" for k in KUBELET_LIMITS)
    return [
        f"plugin (managed only): NodePrepare/NodeUnprepare on a gRPC thread pool of {workers} workers per "
        "instance (KubeletPluginServer max_workers; calls not serialized), one lock per claim and per Pod, "
        "one checkpoint store lock around each durable write, one Python process",
        f"guard (managed ADDs only): one thread per connection, at most {guard} ADDs decided at once "
        "(GuardSettings.max_concurrent; more wait for a slot within their budget); ordinary ADDs exec "
        "Multus from the shim directly",
        f"kubelet ({node}, both sides): one pod worker per Pod, no start limit of its own; {kubelet}",
    ]


def _ms(value: float) -> str:
    return f"{value * 1000:.0f} ms"


def _mean(b: Burst, title: str) -> float | None:
    seconds, count = b.histograms.get(title, (0.0, 0.0))
    return seconds / count if count else None


def report(managed: Variant, hand: Variant, count: int, lines: list[str]) -> None:
    """Print the medians, the ratio against :data:`GOAL_RATIO`, the histograms and the limits."""
    m = statistics.median(b.all_running_s for b in managed.bursts)
    h = statistics.median(b.all_running_s for b in hand.bursts)
    print(f"\n{len(managed.bursts)} bursts of {count} Pods per variant, interleaved; medians:")
    print(f"{'':62}{'managed':>12}{'hand-written':>14}")

    def row(title: str, fn: Any) -> None:
        values = [[x for b in v.bursts if (x := fn(b)) is not None] for v in (managed, hand)]
        cells = [_ms(statistics.median(v)) if v else "n/a" for v in values]
        print(f"INFO  {title:56}{cells[0]:>12}{cells[1]:>14}")

    row("create → every Pod Running", lambda b: b.all_running_s)
    row("create → first Pod Running", lambda b: b.running_s[0])
    row("create → median Pod Running", lambda b: statistics.median(b.running_s))
    phases = [*kubeletmetrics.PHASES, *(p for ps in kubeletmetrics.SERVICE_PHASES.values() for p in ps)]
    for phase in phases:
        row(f"mean per call: {phase.title.strip()}"[:56], lambda b, t=phase.title: _mean(b, t))
    for name in sorted({k for v in (managed, hand) for b in v.bursts for k in b.cpu_s}):
        row(f"CPU of the burst: {name}", lambda b, n=name: b.cpu_s.get(n))
    row("CPU of the burst: all of the above", lambda b: sum(b.cpu_s.values()))
    ratio = m / h
    verdict = "PASS" if ratio <= GOAL_RATIO else "MISS"
    print(
        f"{verdict}  burst of {count} Pods create → all Running managed / hand-written: {ratio:.2f} "
        f"({_ms(m)} / {_ms(h)}) (goal <= {GOAL_RATIO})"
    )
    for line in lines:
        print(f"INFO  concurrency limits, {line}")


def main(argv: list[str] | None = None) -> int:
    """Start the lab on real nodes, run the interleaved bursts, print the report, stop the lab."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="bursts per variant (default 2)")
    parser.add_argument("--pods", type=int, default=BURST, help=f"Pods per burst (default {BURST})")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="lab work directory, kept (default: a temp dir)"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or not 1 <= args.pods <= session.MAX_GPUS_PER_ROOT:
        parser.error(f"--rounds must be >= 1 and --pods 1 to {session.MAX_GPUS_PER_ROOT}")
    missing = real_node.missing_parts()
    if missing:
        print("SKIP  real nodes cannot run here: " + "; ".join(missing))
        return 0
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-pod-burst-"))
    began = time.monotonic()
    lab = stack.LabStack(
        stack_base.LabOptions(workdir=workdir, real_nodes=True, operator=False, vfs_per_pf=max(args.pods, 4))
    )
    lab.start()
    try:
        node = lab.nodes[0].name
        print(f"lab on real nodes started in {time.monotonic() - began:.0f} s; bursts on {node}")
        docs = workloads.load(demo.PAIRS)
        setup = [d for d in docs if d["kind"] != "Pod"]
        workloads.apply_docs(lab.api, setup)
        rails = [pf for _, pf, _ in podkit.RAIL_PFS]
        vfs = workloads.eventually(
            f"{node}'s VFs of both rails in its ResourceSlice",
            lambda: found if set(rails) <= (found := podkit.node_vf_lists(lab.api, node)).keys() else None,
            timeout_s=120,
        )
        count = min(args.pods, *(len(vfs[pf]) for pf in rails))
        gpus = publish_gpus(lab, node, count)
        print(
            f"{node}: VFs per rail {', '.join(f'{pf} {len(vfs[pf])}' for pf in rails)} (lab vfs_per_pf "
            f"{args.pods}); synthetic GPUs per PCIe root raised from 1 to {gpus} for the burst; burst of "
            f"{count} Pods × 2 VFs"
            + ("" if count == args.pods else f" (asked {args.pods}: the lab allows {count})")
        )
        managed, hand, extra = variants(docs, node, {pf: vfs[pf] for pf in rails}, count)
        workloads.apply_docs(lab.api, extra)
        for variant in (managed, hand):  # warm-up: one Pod, not counted
            warm = burst(lab, node, variant.pods[:1])
            podkit.remove(lab, [variant.pods[0]["metadata"]["name"]])
            print(f"warm-up {variant.name}: one Pod Running after {_ms(warm.all_running_s)}", flush=True)
        for i in range(args.rounds):
            line = []
            for variant in (managed, hand) if i % 2 == 0 else (hand, managed):
                measured = burst(lab, node, variant.pods)
                variant.bursts.append(measured)
                podkit.remove(lab, [p["metadata"]["name"] for p in variant.pods], timeout_s=300)
                line.append(f"{variant.name} {_ms(measured.all_running_s)}")
            print(f"round {i + 1}/{args.rounds}: every Pod Running after " + ", ".join(line), flush=True)
        report(managed, hand, count, limits(lab, node))
        workloads.delete_docs(lab.api, [*extra, *setup[::-1]], timeout_s=180)
    finally:
        lab.stop()
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"total {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
