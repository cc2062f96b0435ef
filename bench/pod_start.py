"""Benchmark: apply→Running of the gpu-nic-pairs Pod on real kubelets, managed against hand-written.

Starts the lab on two real nodes (kubelet + containerd each, the roles, Multus thin, the guard,
the plugin with auto-attach, the synthetic GPU plugin), applies the gpu-nic-pairs example
(examples/gpu-nic-pairs) and alternately starts two variants of its Pod on the first node, after
one uncounted warm-up start of each:

- **managed**: the example's Pod unchanged (the plugin prepares both VFs, creates a shadow NAD per
  VF and patches the Pod's selections);
- **hand-written** (the best a user can do without this project, whose auto-attach never falls
  back to manual mode, docs/design.md#settings): the same Pod with a networks annotation naming
  one hand-written NAD per VF (the rail's source config plus one VF's ``deviceID`` read from the
  node's ResourceSlice) and the same GPUs through a GPU-only claim. The guard passes its ADD
  through (``PassedUnmanaged``).

Per start it prints apply→Running, scheduling and ``PodReadyToStartContainers`` as the watch saw
them, the node kubelet's histograms across the start and the plugin's and the guard's own
(``bench/realkit/kubeletmetrics.py``); medians against the goals managed / hand-written <=
:data:`GOAL_RATIO`, the plugin's NodePrepareResources <= :data:`GOAL_PREPARE_S` and the guard's
part of a managed ADD <= :data:`GOAL_GUARD_ADD_S`. Each start must show both rails' interfaces in
the Pod's Multus network-status (a Pod running without its VFs stops the bench). Between starts the lab is
checked for leftovers. Then the plugin's and guard's RSS with 64 prepared claims on one node
(8 Pods × 8 one-VF claims) against :data:`RSS_GOALS_MIB`.

Run as root: ``.venv/bin/python bench/pod_start.py [--rounds N]`` (default 10 per variant).
Nothing is asserted on time: it exits 0 on a MISS, and prints ``SKIP`` with what is missing
(root, the pinned kubelet/containerd) and exits 0 without the real-node parts.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.realkit import kubeletmetrics
from bench.realkit.podkit import NAMESPACE, RAIL_PFS, attached, follow, handwritten, node_vfs, pinned, remove
from kubernetes import client

from sriov_dra_lab import demo, real_node, real_stack, stack, stack_base, workloads

GOAL_RATIO: Final = 1.03
GOAL_PREPARE_S: Final = 0.050
"""The sriov plugin's NodePrepareResources median (the kubelet's gRPC histogram; its own timer beside it)."""
GOAL_GUARD_ADD_S: Final = 0.050
"""The guard's added ADD time: the median of its own part of a managed ADD (its histogram)."""
STATIC_POD: Final = "gpu-sriov-pairs-handwritten"
VF_TEMPLATE: Final = "one-vf"
LOAD_PODS: Final = 8
CLAIMS_PER_POD: Final = 8
VFS_PER_PF: Final = 32
"""64 VFs per node: one node holds the 64 one-VF claims of the RSS load."""
PROCESSES: Final = ("plugin", "guard")
RSS_GOALS_MIB: Final = {"plugin": 120.0, "guard": 80.0}
"""The RSS goals ``bench/scale.py`` prints the plugin and the guard against."""


@dataclass
class Start:
    """One measured Pod start (seconds, from the create call; None when not seen)."""

    running_s: float
    scheduled_s: float | None
    sandbox_s: float | None
    conditions: dict[str, float]
    kubelet: dict[str, tuple[float, float]]
    """Per :data:`kubeletmetrics.PHASES` and ``SERVICE_PHASES`` title: (seconds, observations)."""


@dataclass
class Variant:
    """A Pod variant and its measured starts."""

    name: str
    pod: dict[str, Any]
    starts: list[Start] = field(default_factory=list)


# ---------------------------------------------------------------------------------------- objects
def claims_load(managed_pod: dict[str, Any], node: str) -> list[dict[str, Any]]:
    """The RSS load: a one-VF ResourceClaimTemplate and :data:`LOAD_PODS` Pods on ``node``, each with
    :data:`CLAIMS_PER_POD` claims from it (the gpu-nic-pairs Pod's container, no GPU, no annotation)."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": VF_TEMPLATE, "namespace": NAMESPACE},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "vf",
                            "exactly": {
                                "deviceClassName": "sriov-pcie-netdevice",
                                "allocationMode": "ExactCount",
                                "count": 1,
                            },
                        }
                    ]
                }
            }
        },
    }
    out: list[dict[str, Any]] = [template]
    claims = [f"vf{j}" for j in range(CLAIMS_PER_POD)]
    for i in range(LOAD_PODS):
        pod = pinned(managed_pod, node)
        pod["metadata"] = {"name": f"rss-load-{i}", "namespace": NAMESPACE, "labels": {"app": "rss-load"}}
        pod["spec"]["resourceClaims"] = [
            {"name": c, "resourceClaimTemplateName": VF_TEMPLATE} for c in claims
        ]
        for container in pod["spec"]["containers"]:
            container["resources"] = {"claims": [{"name": c} for c in claims]}
        out.append(pod)
    return out


def run_load(lab: stack.LabStack, docs: list[dict[str, Any]]) -> tuple[dict[str, tuple[float, float]], float]:
    """Apply the load, wait until every Pod runs, read the RSS; delete it and wait until nothing is left.

    Returns (RSS as :func:`rss`, seconds from the apply until every Pod ran).
    """
    began = time.monotonic()
    workloads.apply_docs(lab.api, docs)
    pods = [d["metadata"]["name"] for d in docs if d["kind"] == "Pod"]
    for name in pods:
        workloads.wait_running(lab.api, NAMESPACE, name, timeout_s=600)
    running_s = time.monotonic() - began
    prepared = [
        c
        for c in client.ResourceV1Api(lab.api).list_namespaced_resource_claim(NAMESPACE).items
        if c.status and c.status.reserved_for
    ]
    print(
        f"load: {len(pods)} Pods with {len(prepared)} reserved claims running after {running_s:.0f} s",
        flush=True,
    )
    loaded = rss(lab)
    for name in pods:
        client.CoreV1Api(lab.api).delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=1)
    remove(lab, pods)
    workloads.delete_docs(lab.api, docs[:1], timeout_s=120)
    return loaded, running_s


# ---------------------------------------------------------------------------------------- one start
def _stamp(text: Any) -> float:
    return float(text.timestamp()) if hasattr(text, "timestamp") else 0.0


def condition_spans(pod: Any) -> dict[str, float]:
    """Seconds between the Pod's creation and its conditions' transitions (1 s resolution)."""
    created = _stamp(pod.metadata.creation_timestamp)
    got = {c.type: _stamp(c.last_transition_time) for c in pod.status.conditions or [] if c.status == "True"}
    out = {}
    previous = created
    for kind in ("PodScheduled", "PodReadyToStartContainers", "ContainersReady"):
        if kind in got:
            out[kind] = got[kind] - previous
            previous = got[kind]
    return out


def measure(lab: stack.LabStack, node: str, body: dict[str, Any]) -> Start:
    """Create Pod ``body``, watch it to Running, read the kubelet's histograms across the start."""
    core = client.CoreV1Api(lab.api)
    name = body["metadata"]["name"]
    seen: dict[str, float] = {}

    def event(pod: Any, now: float) -> bool:
        if pod.spec.node_name:
            seen.setdefault("scheduled", now)
        if any(
            c.type == "PodReadyToStartContainers" and c.status == "True" for c in pod.status.conditions or []
        ):
            seen.setdefault("sandbox", now)
        if pod.status.phase == "Running":
            seen["running"] = now
        return "running" in seen

    real = next(n.real for n in lab.nodes if n.name == node)
    before = kubeletmetrics.read_node(lab.api, node, real)
    done = follow(lab.api, event, timeout_s=240, field_selector=f"metadata.name={name}")
    t0 = time.monotonic()
    workloads.apply_docs(lab.api, [body])
    if not done.wait(240) or "running" not in seen:
        raise SystemExit(
            f"Pod {NAMESPACE}/{name} did not run: {workloads.warnings(lab.api, NAMESPACE, name)}"
        )
    after = kubeletmetrics.read_node(lab.api, node, real, _metrics_after(lab, node, before.kubelet))
    attached(core.read_namespaced_pod(name, NAMESPACE))
    histograms = kubeletmetrics.across(before, after)
    pod = core.read_namespaced_pod(name, NAMESPACE)
    rel = {k: v - t0 for k, v in seen.items()}
    return Start(
        rel["running"],
        rel.get("scheduled"),
        rel.get("sandbox"),
        condition_spans(pod),
        histograms,
    )


def _metrics_after(lab: stack.LabStack, node: str, before: Any) -> Any:
    """The kubelet's metrics once it has observed the start (pod start counts up; at most 5 s)."""
    counted = [p for p in kubeletmetrics.PHASES if p.metric.startswith("kubelet_pod_start")]
    deadline = time.monotonic() + 5
    while True:
        after = kubeletmetrics.read(lab.api, node)
        grown = all(
            kubeletmetrics.total(after, p, "_count") > kubeletmetrics.total(before, p, "_count")
            for p in counted
        )
        if grown or time.monotonic() > deadline:
            return after
        time.sleep(0.2)


# ---------------------------------------------------------------------------------------- report
def rss(lab: stack.LabStack) -> dict[str, tuple[float, float]]:
    """``{"<node> <service>": (VmRSS MiB, VmHWM MiB)}`` of the plugin and guard: their DaemonSet Pods'
    container processes on real nodes (found through the CRI), their lab processes otherwise."""
    out = {}
    for node in lab.nodes:
        for name in PROCESSES:
            proc = node.processes.get(name)
            pid = proc.pid if proc is not None else None
            if pid is None and node.real is not None:
                # Both DaemonSets run in the plugin's install namespace (the lab's guard_namespace is the same).
                pid = real_stack.container_pid(node.real, stack_base.PLUGIN_SERVICE_ACCOUNT[0], name)
            if pid is None:
                continue
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
            kib = {ln.split(":")[0]: int(ln.split()[1]) for ln in status if ln.startswith(("VmRSS", "VmHWM"))}
            out[f"{node.name} {name}"] = (kib["VmRSS"] / 1024, kib["VmHWM"] / 1024)
    return out


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _seen(start: Start, title: str) -> float | None:
    """The seconds of histogram ``title`` during ``start``; None when it observed nothing."""
    seconds, count = start.kubelet.get(title, (0.0, 0.0))
    return seconds if count else None


def _verdict(value: float, goal: float) -> str:
    """``PASS`` when ``value`` is at most ``goal``, ``MISS`` otherwise (or when not measured)."""
    return "PASS" if value <= goal else "MISS"


def _ms(value: float) -> str:
    return "     n/a" if value != value else f"{value * 1000:7.0f} ms"


def report(
    variants: list[Variant],
    idle: dict[str, tuple[float, float]],
    loaded: dict[str, tuple[float, float]],
    claims: dict[str, tuple[float, float]],
) -> None:
    """Print every figure (``PASS``/``MISS`` against its goal, ``INFO`` without one)."""
    managed, static = variants

    def med(v: Variant, f: Callable[[Start], float | None]) -> float:
        return _median([x for s in v.starts if (x := f(s)) is not None])

    m_run, s_run = med(managed, lambda s: s.running_s), med(static, lambda s: s.running_s)
    ratio = m_run / s_run
    print(f"\n{len(managed.starts)} starts per variant, interleaved; medians:", flush=True)
    print(f"{'':56}{'managed':>11}{'hand-written':>14}")
    rows: list[tuple[str, Callable[[Start], float | None]]] = [
        ("apply→Running (client: create call → watch Running)", lambda s: s.running_s),
        ("  watch: create → spec.nodeName (scheduling)", lambda s: s.scheduled_s),
        ("  watch: create → PodReadyToStartContainers", lambda s: s.sandbox_s),
        (
            "  watch: PodReadyToStartContainers → Running",
            lambda s: None if s.sandbox_s is None else s.running_s - s.sandbox_s,
        ),
    ]
    for cond in ("PodScheduled", "PodReadyToStartContainers", "ContainersReady"):
        rows.append((f"  condition {cond} (after previous, 1 s res.)", lambda s, c=cond: s.conditions.get(c)))
    service_phases = [p for phases in kubeletmetrics.SERVICE_PHASES.values() for p in phases]
    for phase in kubeletmetrics.PHASES:
        rows.append((f"  kubelet: {phase.title}", lambda s, t=phase.title: _seen(s, t)))
    for phase in service_phases:
        rows.append((f"  {phase.title}", lambda s, t=phase.title: _seen(s, t)))
    for title, fn in rows:
        print(f"INFO  {title:50}{_ms(med(managed, fn)):>11}{_ms(med(static, fn)):>14}")
    verdict = _verdict(ratio, GOAL_RATIO)
    print(
        f"{verdict}  apply→Running managed / hand-written: {ratio:.2f} "
        f"({_ms(m_run).strip()} / {_ms(s_run).strip()}) (goal <= {GOAL_RATIO})"
    )
    grpc = kubeletmetrics.PHASES[1]
    prepare = med(managed, lambda s: s.kubelet[grpc.title][0] if s.kubelet[grpc.title][1] else None)
    own = med(managed, lambda s: _seen(s, kubeletmetrics.PLUGIN_PREPARE.title))
    print(
        f"{_verdict(prepare, GOAL_PREPARE_S)}  sriov plugin NodePrepareResources, managed, kubelet's gRPC histogram: "
        f"{_ms(prepare).strip()} (its own timer: {_ms(own).strip()}) (goal <= {_ms(GOAL_PREPARE_S).strip()})"
    )
    guard = med(managed, lambda s: _seen(s, kubeletmetrics.GUARD_PART.title))
    sandbox = kubeletmetrics.PHASES[3].title
    extra = med(managed, lambda s: _seen(s, sandbox)) - med(static, lambda s: _seen(s, sandbox))
    print(
        f"{_verdict(guard, GOAL_GUARD_ADD_S)}  guard's added ADD time, managed, its own histogram: "
        f"{_ms(guard).strip()} (kubelet RunPodSandbox managed − hand-written: {_ms(extra).strip()}) "
        f"(goal <= {_ms(GOAL_GUARD_ADD_S).strip()})"
    )
    spread = {
        v.name: (min(s.running_s for s in v.starts), max(s.running_s for s in v.starts)) for v in variants
    }
    print(
        "INFO  apply→Running range: "
        + ", ".join(f"{k} {_ms(a).strip()}–{_ms(b).strip()}" for k, (a, b) in spread.items())
    )
    nan = (float("nan"), float("nan"))
    for key in idle:
        (r0, _), (r1, _), (r2, h2) = idle[key], loaded.get(key, nan), claims.get(key, nan)
        goal = RSS_GOALS_MIB[key.rsplit(" ", 1)[1]]
        print(
            f"{'PASS' if max(r0, r1, r2) <= goal else 'MISS'}  RSS {key}: idle {r0:.1f} MiB, after the rounds "
            f"{r1:.1f} MiB, with {LOAD_PODS * CLAIMS_PER_POD} prepared claims on {variants[0].pod['spec']['nodeSelector']['kubernetes.io/hostname']} "
            f"{r2:.1f} MiB (peak VmHWM {h2:.1f} MiB) (goal <= {goal:.0f} MiB)"
        )


# ---------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    """Start the lab on real nodes, run the interleaved rounds, print the report, stop the lab."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="measured starts per variant (default 10)")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="lab work directory, kept (default: a temp dir, removed)"
    )
    parser.add_argument(
        "--no-rss-load",
        action="store_true",
        help=f"skip the RSS load ({LOAD_PODS} Pods × {CLAIMS_PER_POD} claims) after the rounds",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    missing = real_node.missing_parts()
    if missing:
        print("SKIP  real nodes cannot run here: " + "; ".join(missing))
        return 0
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-pod-start-"))
    began = time.monotonic()
    lab = stack.LabStack(
        stack_base.LabOptions(workdir=workdir, real_nodes=True, operator=False, vfs_per_pf=VFS_PER_PF)
    )
    lab.start()
    try:
        node = lab.nodes[0].name
        kubelet, runtime = lab.nodes[0].real_versions()
        print(
            f"lab on real nodes started in {time.monotonic() - began:.0f} s ({kubelet}, {runtime}); Pods on {node}"
        )
        idle = rss(lab)
        docs = workloads.load(demo.PAIRS)
        (managed_pod,) = [d for d in docs if d["kind"] == "Pod"]
        setup = [d for d in docs if d["kind"] != "Pod"]
        workloads.apply_docs(lab.api, setup)
        # The plugin advertises the VFs once the example's SriovResourcePolicy matches them.
        vfs = workloads.eventually(
            f"{node}'s VFs of both rails in its ResourceSlice",
            lambda: found if len(found := node_vfs(lab.api, node)) == len(RAIL_PFS) else None,
            timeout_s=120,
        )
        extra = handwritten(docs, managed_pod, vfs, STATIC_POD)
        workloads.apply_docs(lab.api, extra[:-1])
        variants = [
            Variant("managed", pinned(managed_pod, node)),
            Variant("hand-written", pinned(extra[-1], node)),
        ]
        print(
            "hand-written NADs: "
            + ", ".join(
                f"{d['metadata']['name']} deviceID {json.loads(d['spec']['config'])['deviceID']}"
                for d in extra[:2]
            )
        )
        for variant in variants:  # warm-up, not counted
            start = measure(lab, node, variant.pod)
            remove(lab, [variant.pod["metadata"]["name"]])
            print(f"warm-up {variant.name}: apply→Running {_ms(start.running_s).strip()}", flush=True)
        for i in range(args.rounds):
            order = variants if i % 2 == 0 else variants[::-1]
            line = []
            for variant in order:
                start = measure(lab, node, variant.pod)
                variant.starts.append(start)
                remove(lab, [variant.pod["metadata"]["name"]])
                line.append(f"{variant.name} {_ms(start.running_s).strip()}")
            print(f"round {i + 1}/{args.rounds}: " + ", ".join(line), flush=True)
        after_rounds = rss(lab)
        with_claims = {} if args.no_rss_load else run_load(lab, claims_load(managed_pod, node))[0]
        report(variants, idle, after_rounds, with_claims)
        exposed = kubeletmetrics.names(
            kubeletmetrics.read(lab.api, node), "dra_", "pod_start", "sandbox", "runtime_op"
        )
        print("INFO  kubelet histograms and counters read from: " + ", ".join(exposed))
        workloads.delete_docs(lab.api, [*extra[:-1], *setup[::-1]], timeout_s=180)
    finally:
        lab.stop()
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)  # its logs are kept only with --workdir
    print(f"total {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
