"""Benchmark: API requests and latency of one auto-attach prepare of a k-VF claim (default k = 2).

Against a real kube-apiserver (started with ``sriov_dra_lab.controlplane.running``; the pinned
binaries must be built), ``rounds`` times: a fresh Pod (bound to a simulated node) and a fresh
claim allocated k VFs, each on its own rail (its own source NAD, as on a GPU node with one rail
per GPU; status written as the scheduler would), then one NodePrepare through the real handler
(``driver.prepare`` with ``driver.managed`` on a fake-sysfs host, real checkpoint and CDI files),
counting every API request by verb and resource. In the same run the **same requests** are
issued bare and one after the other (claim GET, Pod GET, k source GETs, k NAD creates, one Pod
JSON Patch, one claim status patch) through the same clients, and the prepare's median latency
is reported as a ratio to the bare median.

Phases: every API request and local write of a prepare is put on a timeline (start and end
relative to the prepare's start); per phase the bench prints the median wall-clock span (first
start to last end, so requests that overlap count once) and the rest (plugin CPU, locks, host
and CDI work between them). The source GETs and the shadow creates each run concurrently
(``driver.managed.fanout``), so their span is about one request, not k.

Goals (issue 5): the managed happy path costs ``3 + 2k`` requests for ``k`` VFs (claim GET, Pod
GET, Pod patch, k source GETs, k shadow creates) — the plain path's best-effort diagnostic
``status.devices`` write comes on top (it runs concurrently with the Pod patch, so its span
overlaps the patch's; the bare sequence issues it last); and latency ≤ 1.3 × the bare requests.
Absolute times depend on the machine; starting the control plane is not part of any number.

Where the rest goes (profiled, issue 5): the three checkpoint writes the spec orders (``Pending``
before the first shadow create, the shadow UIDs before the Pod patch, ``Ready`` durably before
the answer; spec §8.1 steps 2, 3, 5) each cost a file and a directory ``fsync``, and the
plugin's own CPU work (rendering, identity hashing, checkpoint encoding and validation) runs on
the same cores as the local control plane. The CDI specs are written without ``fsync``
(``host.cdi``: derived files, rebuilt by every prepare). A checkpoint write validates only the
claim it changes (``core.checkpoint_codec``), so its cost no longer grows with the node's other
claims. cProfile of the prepare (50 rounds, 2 VFs, main thread) finds no single avoidable cost
left in the plugin's own CPU: planning (template render, identities, the dry-run annotation
merge) about 1 ms, the host stage (binding, two CDI files) about 1 ms, three checkpoint encodes
(validation included) of 0.13 ms each at 2 VFs and 0.4 ms at 8, and the dozen record copies of
a prepare (0.1 ms at 8 VFs since they are made field by field; about 1 ms before). Every API call
already decodes raw JSON (no client model deserialization). The rest of "rest" is thread
hand-offs and scheduling on the loaded cores. The fan-out overlaps requests, but a
local API server on two busy cores serves concurrent requests mostly one after the other (the
"sum of requests" column grows with k while the span shrinks less): the gain here is a floor
for a real cluster, where a request's time is mostly network round trip.

Run as a script: ``.venv/bin/python bench/prepare.py [rounds] [vfs]`` (vfs 1–8; 8 = a GPU node's rails).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import yaml
from kubernetes import client

from sriov_dra.core import attributes, identities
from sriov_dra.driver import claim_context, locks, prepare
from sriov_dra.driver.managed import fanout, lockorder, seams, service
from sriov_dra.host import binding, cdi, checkpoint, discovery
from sriov_dra.kube import apply, podpatch, shadows
from sriov_dra.kube import claims as kube_claims
from sriov_dra.kubeletapi import messages
from sriov_dra_lab import binaries, controlplane
from sriov_dra_lab.fakes import fakesysfs
from sriov_dra_lab.nodes import SimulatedNode
from sriov_dra_rules import names

NS: Final = "bench-prepare"
NAD_CRD: Final = (
    Path(prepare.__file__).resolve().parents[1] / "manifests" / "crds" / "network-attachment-definitions.yaml"
)
MAX_VFS: Final = 8
Counter = collections.Counter[str]


class Timeline:
    """Start/end (seconds after :meth:`reset`) of every labelled request or write of one prepare."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.origin = time.perf_counter()
        self.spans: list[tuple[str, float, float]] = []

    def reset(self) -> None:
        with self.lock:
            self.origin = time.perf_counter()
            self.spans = []

    def timed(self, label: str, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        try:
            return fn()
        finally:
            end = time.perf_counter()
            with self.lock:
                self.spans.append((label, start - self.origin, end - self.origin))

    def phases(self) -> dict[str, tuple[float, float]]:
        """Label → (wall-clock span: first start to last end, so overlapping requests count once;
        sum of the single requests' durations)."""
        out: dict[str, tuple[float, float]] = {}
        for label in {s[0] for s in self.spans}:
            mine = [s for s in self.spans if s[0] == label]
            span = max(e for _, _, e in mine) - min(b for _, b, _ in mine)
            out[label] = (span, sum(e - b for _, b, e in mine))
        return out

    def covered(self) -> float:
        """Seconds in which at least one labelled request or write was running."""
        total, until = 0.0, 0.0
        for _, start, end in sorted(self.spans, key=lambda s: s[1]):
            if end > until:
                total += end - max(start, until)
                until = end
        return total


class Counting:
    """Wraps a client: every public call is one API request, counted as ``<name>.<method>`` and
    put on the timeline under its phase label."""

    def __init__(self, inner: Any, name: str, counts: Counter, timeline: Timeline) -> None:
        self._inner, self._name, self._counts, self._timeline = inner, name, counts, timeline

    def __getattr__(self, attr: str) -> Any:
        target = getattr(self._inner, attr)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            # a GET-free merge patch when the claim is passed in
            key = f"{self._name}.status-patch" if attr == "update_device_status" else f"{self._name}.{attr}"
            with self._timeline.lock:
                self._counts[key] += 1
            return self._timeline.timed(PHASE_OF.get(key, key), lambda: target(*args, **kwargs))

        return call


PHASE_OF: Final = {
    "claims.get": "api: claim GET",
    "pods.get": "api: Pod GET",
    "nads.get": "api: source GETs (concurrent)",
    "nads.create": "api: shadow creates (concurrent)",
    "pods.json_patch": "api: Pod patch",
    "claims.status-patch": "api: claim status patch",
}
CHECKPOINT_WRITES: Final = ("write: checkpoint Pending", "write: checkpoint UIDs", "write: checkpoint Ready")


class DurableWrites:
    """Times the local atomic writes (``host.atomicfile``): the checkpoint's are fsync'd, the CDI
    specs' are not (derived files, rebuilt from the record by every prepare; ``host.cdi``)."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.checkpoints = 0

    def checkpoint(self, path: Path, data: bytes) -> None:
        index = min(self.checkpoints, len(CHECKPOINT_WRITES) - 1)
        self.checkpoints += 1
        self.timeline.timed(CHECKPOINT_WRITES[index], lambda: checkpoint.default_write(path, data))

    def cdi(self, path: Path, data: bytes) -> None:
        self.timeline.timed("write: CDI specs", lambda: cdi.default_write(path, data))


class Snapshot:
    """The device snapshot the policy controller would hand out: every VF eligible, one rail each."""

    def __init__(self, found: dict[str, discovery.DiscoveredVf], rails: dict[str, str]) -> None:
        self.inventory = found
        self.rails = rails

    def is_eligible(self, device: str) -> bool:
        return device in self.inventory

    def attributes_of(self, device: str) -> dict[str, attributes.AttributeValue]:
        return {
            **self.inventory[device].attributes,
            names.ATTR_NET_ATTACH_DEF_NAME: attributes.string_value(self.rails.get(device, "rail-0")),
        }

    def snapshot(self) -> Snapshot:
        return self


def source(name: str, cidr: str) -> dict[str, Any]:
    ipam = {"type": "whereabouts", "range": cidr}
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"config": json.dumps({"cniVersion": "1.0.0", "name": name, "type": "sriov", "ipam": ipam})},
    }


def workload(api: client.ApiClient, node: str, devices: list[str]) -> messages.ClaimRef:
    """A Pod bound to ``node`` and a claim allocated ``devices`` and reserved for it."""
    suffix = uuid.uuid4().hex[:8]
    pod = client.CoreV1Api(api).create_namespaced_pod(
        NS,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"w-{suffix}"},
            "spec": {
                "nodeName": node,
                "containers": [{"name": "c", "image": "registry.invalid/x"}],
                "resourceClaims": [{"name": "devices", "resourceClaimName": f"c-{suffix}"}],
            },
        },
    )
    res = client.ResourceV1Api(api)
    claim = res.create_namespaced_resource_claim(
        NS,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": f"c-{suffix}"},
            "spec": {
                "devices": {
                    "requests": [
                        {"name": f"nic-{i}", "exactly": {"deviceClassName": "any"}}
                        for i in range(len(devices))
                    ]
                }
            },
        },
    )
    results = [
        {"request": f"nic-{i}", "driver": names.DRIVER_NAME, "pool": node, "device": d}
        for i, d in enumerate(devices)
    ]
    res.patch_namespaced_resource_claim_status(
        claim.metadata.name,
        NS,
        {
            "status": {
                "allocation": {
                    "devices": {"results": results},
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                        ]
                    },
                },
                "reservedFor": [{"resource": "pods", "name": pod.metadata.name, "uid": pod.metadata.uid}],
            }
        },
    )
    return messages.ClaimRef(namespace=NS, name=claim.metadata.name, uid=claim.metadata.uid)


def bare_requests(
    api: client.ApiClient,
    ref: messages.ClaimRef,
    bodies: list[dict[str, Any]],
    rails: list[str],
    timeline: Timeline | None = None,
) -> None:
    """The prepare's requests issued directly, one after the other: claim GET, Pod GET, the k
    source GETs, the creates of equivalent NADs, one tested Pod JSON Patch, one claim status
    merge patch (each on ``timeline`` under the prepare's phase labels when given)."""
    pods: Any = podpatch.PodClient(api)
    nads: Any = shadows.NadClient(api)
    claims: Any = kube_claims.ClaimClient(api)
    if timeline is not None:
        unused: Counter = collections.Counter()
        pods, nads = Counting(pods, "pods", unused, timeline), Counting(nads, "nads", unused, timeline)
        claims = Counting(claims, "claims", unused, timeline)
    claim = claims.get(NS, ref.name)
    pod_name = claim["status"]["reservedFor"][0]["name"]
    pod = pods.get(NS, pod_name)
    for rail in rails:
        nads.get(NS, rail)
    for body in bodies:
        meta = {"name": f"bare-{uuid.uuid4().hex[:12]}", "namespace": NS}
        nads.create(
            {"apiVersion": body["apiVersion"], "kind": body["kind"], "spec": body["spec"], "metadata": meta}
        )
    pods.json_patch(
        NS,
        pod_name,
        [
            {"op": "test", "path": "/metadata/uid", "value": pod["metadata"]["uid"]},
            {"op": "add", "path": "/metadata/annotations", "value": {"bench": "x" * 300 * len(bodies)}},
        ],
    )
    claims.update_device_status(NS, ref.name, uid=ref.uid, compute=lambda _d: [], current=claim)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@dataclasses.dataclass
class Result:
    """One run: request counts of one prepare, latency samples, per-phase spans per prepare."""

    counts: Counter
    managed_s: list[float]
    sequential_s: list[float]
    bare_s: list[float]
    phases: list[dict[str, tuple[float, float]]]
    covered_s: list[float]
    bare_phases: list[dict[str, tuple[float, float]]] = dataclasses.field(default_factory=list)


@contextlib.contextmanager
def sequential() -> Iterator[None]:
    """Within the block every fan-out runs its calls one after the other (the pre-issue-5 path)."""
    concurrent = fanout.run_all

    def one_by_one(calls: Sequence[Callable[[], Any]], *, max_in_flight: int = 1) -> list[Any]:
        return concurrent(calls, max_in_flight=1)

    fanout.run_all = one_by_one
    try:
        yield
    finally:
        fanout.run_all = concurrent


def bench(root: Path, rounds: int, vfs: int) -> Result:
    """Run the measurement for claims of ``vfs`` VFs, each on its own rail (source NAD)."""
    fake = fakesysfs.build(root / "sys", fakesysfs.two_root_pfs(max(2, (vfs + 1) // 2)))
    found = dict(discovery.by_name(discovery.discover(fake.sysfs)))
    devices = sorted(found, key=lambda n: (found[n].vf_id, n))[:vfs]  # alternate the two PFs
    rails = {device: f"rail-{i}" for i, device in enumerate(devices)}
    with controlplane.running() as cp, cp.api() as api:
        crd = yaml.safe_load(NAD_CRD.read_text())
        apply.apply_objects(api, [crd])
        apply.wait_crds_established(api, [crd["metadata"]["name"]])
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": NS}})
        while not any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(NS).items):
            time.sleep(0.1)
        for i, rail in enumerate(rails.values()):
            client.CustomObjectsApi(api).create_namespaced_custom_object(
                "k8s.cni.cncf.io", "v1", NS, "network-attachment-definitions", source(rail, f"10.{i}.0.0/16")
            )
        node = SimulatedNode(api, f"bench-{uuid.uuid4().hex[:6]}").start()
        try:
            counts: Counter = collections.Counter()
            timeline = Timeline()
            pods = Counting(podpatch.PodClient(api), "pods", counts, timeline)
            nads = Counting(shadows.NadClient(api), "nads", counts, timeline)
            claims = Counting(kube_claims.ClaimClient(api), "claims", counts, timeline)
            (root / "state").mkdir()
            durable = DurableWrites(timeline)
            store = checkpoint.CheckpointStore(root / "state" / "checkpoint.json", write=durable.checkpoint)
            store.load()
            specs = cdi.CdiSpecs(root / "cdi", write=durable.cdi)
            specs.ensure_root()
            claim_locks, pod_locks = locks.KeyedLocks("claim"), locks.KeyedLocks("pod")
            attach = service.ManagedAttach(
                node=seams.NodeIdentity(node.name, identities.NodeUid(node.uid)),
                devices=Snapshot(found, rails),
                pods=pods,
                nads=nads,
                claims=claims,
                store=store,
                locks=lockorder.OperationLocks(claim_locks, pod_locks),
            )
            ctx = claim_context.ClaimContext(
                driver_name=names.DRIVER_NAME,
                node_name=node.name,
                claims=claims,
                inventory=claim_context.StaticInventory(found),
                store=store,
                binder=binding.DriverBinder(fake.sysfs, kernel=fake.kernel()),
                cdi=specs,
                sysfs=fake.sysfs,
                require_netdevice=True,
                claim_locks=claim_locks,
                pod_locks=pod_locks,
                managed=attach,
            )
            handler = prepare.DraHandler(ctx)
            result = Result(collections.Counter(), [], [], [], [], [])
            for round_ in range(rounds + 1):  # round 0 warms connections and caches, not measured
                ref = workload(api, node.name, devices)  # the same prepare without the fan-out first
                with sequential():
                    elapsed_seq = timed(functools.partial(handler.prepare_resources, [ref]))
                handler.unprepare_resources([ref])
                if round_:
                    result.sequential_s.append(elapsed_seq)
                ref = workload(api, node.name, devices)
                counts.clear()
                timeline.reset()
                durable.checkpoints = 0
                elapsed = timed(functools.partial(handler.prepare_resources, [ref]))
                if round_:
                    result.managed_s.append(elapsed)
                    result.counts = collections.Counter(counts)
                    result.phases.append(timeline.phases())
                    result.covered_s.append(timeline.covered())
                shadow_bodies = list(
                    attach.nads.list_all(label_selector=f"{names.LABEL_CLAIM_UID}={ref.uid}")
                )
                handler.unprepare_resources([ref])
                bare_timeline = Timeline()
                elapsed_bare = timed(
                    functools.partial(
                        bare_requests,
                        api,
                        workload(api, node.name, devices),
                        shadow_bodies,
                        list(rails.values()),
                        bare_timeline,
                    )
                )
                if round_:
                    result.bare_s.append(elapsed_bare)
                    result.bare_phases.append(bare_timeline.phases())
            return result
        finally:
            node.stop()


def main() -> None:
    """Print the request breakdown, the latency ratio and the phases (or why nothing was measured)."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    if not 1 <= k <= MAX_VFS:
        sys.exit(f"vfs must be 1..{MAX_VFS} (the fake node's VFs), got {k}")
    with tempfile.TemporaryDirectory(prefix="sriov-dra-bench-") as tmp:
        try:
            run = bench(Path(tmp), rounds, k)
        except binaries.BinaryMissing as exc:
            print(f"not measured: the control plane binaries are missing ({exc})")
            return
    counts = run.counts
    managed = sum(v for key, v in counts.items() if key != "claims.status-patch")
    print(f"requests of one {k}-VF prepare: " + ", ".join(f"{key} {v}" for key, v in sorted(counts.items())))
    print(
        f"  auto-attach path: {managed} (goal 3 + 2k = {3 + 2 * k}); plus the diagnostic status write: "
        f"{counts['claims.status-patch']}"
    )
    m, b = statistics.median(run.managed_s), statistics.median(run.bare_s)
    q = statistics.median(run.sequential_s)
    print(
        f"latency over {len(run.managed_s)} rounds: prepare median {m * 1e3:.1f} ms, the same requests bare "
        f"(sequential) {b * 1e3:.1f} ms, ratio {m / b:.2f} (goal <= 1.3)"
    )
    print(
        f"  the same prepare with every fan-out run one by one (interleaved rounds): {q * 1e3:.1f} ms, "
        f"ratio {q / b:.2f}"
    )
    print(
        "phases, medians per prepare: wall-clock span (overlapping requests count once) | sum of requests "
        "| the same requests bare (sum)"
    )
    labels = sorted({label for p in run.phases for label in p}, key=lambda x: (not x.startswith("api"), x))
    for label in labels:
        span = statistics.median(p.get(label, (0.0, 0.0))[0] for p in run.phases) * 1e3
        total = statistics.median(p.get(label, (0.0, 0.0))[1] for p in run.phases) * 1e3
        bare = (
            f" | {statistics.median(p.get(label, (0.0, 0.0))[1] for p in run.bare_phases) * 1e3:6.1f} ms"
            if label.startswith("api") and run.bare_phases
            else ""
        )
        print(f"  {label:<40} {span:6.1f} ms | {total:6.1f} ms{bare}")
    rest = statistics.median(t - c for t, c in zip(run.managed_s, run.covered_s, strict=True))
    print(f"  {'rest (plugin CPU, locks, host binding)':<40} {rest * 1e3:6.1f} ms")


if __name__ == "__main__":
    main()
