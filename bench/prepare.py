"""Benchmark: API requests and latency of one auto-attach prepare of a k-VF claim (default k = 2).

Against a real kube-apiserver, ``rounds`` times: a fresh Pod and a fresh claim allocated k VFs,
each on its own rail, then one NodePrepare through the real handler (fake-sysfs host, real
checkpoint and CDI files), counting every API request by verb and resource. Each round also
issues the **floor**: the same requests with the same bodies, bare, each waiting only for the
answers it needs, concurrent ones concurrently (``servicekit.fanout``).

Goals: ``3 + 2k`` requests on the auto-attach path (claim GET, Pod GET, Pod patch, k source GETs,
k shadow creates; the diagnostic ``status.devices`` write on top), the prepare's median at most
:data:`GOAL_VS_FLOOR` times the floor's and :data:`GOAL_VS_SERIAL` times the same requests one
after the other. The gap to the floor is the three durable checkpoint writes
(docs/design.md#checkpoint) and the plugin's CPU between requests; the bench prints the wall-clock
span of each phase against the floor's, and the client's own cost per request. Absolute times
depend on the machine and its load; starting the control plane is not part of any number.

Run as a script: ``.venv/bin/python bench/prepare.py [rounds] [vfs]`` (vfs 1–8; 8 = a GPU node's rails).
"""

from __future__ import annotations

import collections
import contextlib
import copy
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.inventory import StaticInventory

from sriov_dra.core import attributes, identities
from sriov_dra.driver import claim_context, locks, prepare
from sriov_dra.driver.managed import lock_order, seams, service
from sriov_dra.host import cdi, checkpoint, checkpoint_files, discovery, vf_driver_binding
from sriov_dra.kube import apply, nad_client, pod_patch
from sriov_dra.kube import claims as kube_claims
from sriov_dra.kubeletapi import messages
from sriov_dra.servicekit import fanout
from sriov_dra_lab import binaries, control_plane
from sriov_dra_lab.fakes import fake_pci, fake_sysfs
from sriov_dra_lab.nodes import SimulatedNode
from sriov_dra_rules import checkpoint_doc, names

NS: Final = "bench-prepare"
NAD_CRD: Final = (
    Path(prepare.__file__).resolve().parents[1] / "manifests" / "crds" / "network-attachment-definitions.yaml"
)
MAX_VFS: Final = 8
GOAL_VS_FLOOR: Final = 1.15
GOAL_VS_SERIAL: Final = 1.3
Counter = collections.Counter[str]
Phases = dict[str, tuple[float, float]]
"""Label → (wall-clock span, sum of its requests' durations), seconds."""


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


class HttpTimer:
    """Times every request at the client's urllib3 pool on ``timeline`` (label ``http``)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.timeline: Timeline | None = None
        pool = api.rest_client.pool_manager
        inner = pool.request

        def request(*args: Any, **kwargs: Any) -> Any:
            timeline = self.timeline
            if timeline is None:
                return inner(*args, **kwargs)
            return timeline.timed(HTTP, lambda: inner(*args, **kwargs))

        pool.request = request


HTTP: Final = "http"


class Counting:
    """Wraps a client: every public call is one API request, counted as ``<name>.<method>`` and
    put on the timeline under its phase label; the arguments of each call are kept in ``calls``
    (the floor replays the prepare's own request bodies)."""

    def __init__(self, inner: Any, name: str, counts: Counter, timeline: Timeline) -> None:
        self._inner, self._name, self._counts, self._timeline = inner, name, counts, timeline
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, attr: str) -> Any:
        target = getattr(self._inner, attr)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            # a GET-free merge patch when the claim is passed in
            key = f"{self._name}.status-patch" if attr == "update_device_status" else f"{self._name}.{attr}"
            with self._timeline.lock:
                self._counts[key] += 1
                self.calls.append((attr, args, kwargs))
            return self._timeline.timed(PHASE_OF.get(key, key), lambda: target(*args, **kwargs))

        return call

    def args_of(self, attr: str) -> list[tuple[Any, ...]]:
        """Positional arguments of every recorded call of ``attr``, in call order."""
        with self._timeline.lock:
            return [args for name, args, _ in self.calls if name == attr]


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
    """Times the local writes: each checkpoint write (durable in the slot file with one
    ``fdatasync``, the readable copy renamed without a flush beside it; ``host.checkpoint_files``) and
    the CDI specs (derived files, rebuilt from the record by every prepare, not flushed; ``host.cdi``)."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.checkpoints = 0

    def checkpoint(self, files: checkpoint_files.CheckpointFiles, data: bytes) -> None:
        index = min(self.checkpoints, len(CHECKPOINT_WRITES) - 1)
        self.checkpoints += 1
        self.timeline.timed(
            CHECKPOINT_WRITES[index], lambda: checkpoint_files.CheckpointFiles.write(files, data)
        )

    def cdi(self, path: Path, data: bytes) -> None:
        self.timeline.timed("write: CDI specs", lambda: cdi.default_write(path, data))


class TimedFiles(checkpoint_files.CheckpointFiles):
    """The real checkpoint files, each write routed through ``write(files, data)`` (timed)."""

    def __init__(self, path: Path, write: Callable[[checkpoint_files.CheckpointFiles, bytes], None]) -> None:
        super().__init__(path)
        self._timed_write = write

    def write(self, data: bytes) -> None:
        self._timed_write(self, data)


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


@dataclasses.dataclass(frozen=True)
class Requests:
    """The request bodies one managed prepare sent, to replay bare on a fresh Pod and claim.

    Shapes: ``rails`` the source NAD names read; ``shadows`` the create bodies (name and owner
    rewritten per replay); ``pod_ops`` the JSON Patch (its ``test`` values rewritten per replay);
    ``status_devices`` the ``status.devices`` list the prepare wrote.
    """

    rails: list[str]
    shadows: list[dict[str, Any]]
    pod_ops: list[dict[str, Any]]
    status_devices: list[dict[str, Any]]


def recorded(pods: Counting, nads: Counting, api: client.ApiClient, ref: messages.ClaimRef) -> Requests:
    """The requests of the prepare just run through ``pods``/``nads`` (the claim's status read after)."""
    claim = kube_claims.ClaimClient(api).get(NS, ref.name)
    return Requests(
        rails=[str(args[1]) for args in nads.args_of("get")],
        shadows=[copy.deepcopy(dict(args[0])) for args in nads.args_of("create")],
        pod_ops=[dict(op) for op in pods.args_of("json_patch")[-1][2]],
        status_devices=list((claim.get("status") or {}).get("devices") or []),
    )


def _for_pod(body: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """A recorded shadow create body under a fresh name, owned by ``pod``."""
    out = copy.deepcopy(body)
    meta = out["metadata"]
    meta["name"] = f"bare-{uuid.uuid4().hex[:12]}"
    for owner in meta.get("ownerReferences") or []:
        owner.update(name=pod["metadata"]["name"], uid=pod["metadata"]["uid"])
    return out


def _tests_for(ops: list[dict[str, Any]], pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The recorded Pod patch with its ``test`` ops checking ``pod``'s UID and resourceVersion."""
    values = {
        "/metadata/uid": pod["metadata"]["uid"],
        "/metadata/resourceVersion": pod["metadata"]["resourceVersion"],
    }
    return [
        {**op, "value": values[op["path"]]} if op["op"] == "test" and op["path"] in values else op
        for op in ops
    ]


def bare_requests(
    api: client.ApiClient,
    ref: messages.ClaimRef,
    requests: Requests,
    timeline: Timeline | None = None,
    *,
    concurrent: bool,
) -> None:
    """The prepare's requests issued directly with its bodies: claim GET, Pod GET, the k source
    GETs, the k shadow creates, the tested Pod JSON Patch and the claim status write.

    ``concurrent``: the floor. Each request waits only for the ones whose answer it needs (the
    Pod's name comes from the claim, the creates need the Pod's UID, the patch needs the
    creates' UIDs), and requests the prepare issues together run together through the same
    fan-out (``servicekit.fanout``): the source GETs, the creates, and the Pod patch beside
    the status write. Otherwise every request runs after the previous one.
    Each request is on ``timeline`` under the prepare's phase labels when given.
    """
    pods: Any = pod_patch.PodClient(api)
    nads: Any = nad_client.NadClient(api)
    claims: Any = kube_claims.ClaimClient(api)
    if timeline is not None:
        unused: Counter = collections.Counter()
        pods, nads = Counting(pods, "pods", unused, timeline), Counting(nads, "nads", unused, timeline)
        claims = Counting(claims, "claims", unused, timeline)

    def step(calls: list[Callable[[], Any]]) -> list[Any]:
        if not concurrent:
            return [call() for call in calls]
        outcomes = fanout.run_all(calls)
        failed = [o.error for o in outcomes if o.error is not None]
        if failed:
            raise failed[0]
        return [o.value for o in outcomes]

    claim = claims.get(NS, ref.name)
    pod_name = claim["status"]["reservedFor"][0]["name"]
    pod = pods.get(NS, pod_name)
    step([functools.partial(nads.get, NS, rail) for rail in requests.rails])
    step([functools.partial(nads.create, _for_pod(body, pod)) for body in requests.shadows])
    devices = requests.status_devices
    step(
        [
            functools.partial(pods.json_patch, NS, pod_name, _tests_for(requests.pod_ops, pod)),
            functools.partial(
                claims.update_device_status,
                NS,
                ref.name,
                uid=ref.uid,
                compute=lambda _d: devices,
                current=claim,
            ),
        ]
    )


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
    floor_s: list[float]
    phases: list[Phases]
    covered_s: list[float]
    floor_phases: list[Phases]


@contextlib.contextmanager
def sequential() -> Iterator[None]:
    """Within the block every fan-out runs its calls one after the other."""
    concurrent, started = fanout.run_all, fanout.start

    def one_by_one(calls: Sequence[Callable[[], Any]], *, max_in_flight: int = 1) -> list[Any]:
        return concurrent(calls, max_in_flight=1)

    def deferred(calls: Sequence[Callable[[], Any]], *, max_in_flight: int = 1) -> Any:
        return started(calls, max_in_flight=1)

    fanout.run_all, fanout.start = one_by_one, deferred
    try:
        yield
    finally:
        fanout.run_all, fanout.start = concurrent, started


def bench(root: Path, rounds: int, vfs: int) -> Result:
    """Run the measurement for claims of ``vfs`` VFs, each on its own rail (source NAD)."""
    fake = fake_sysfs.build(root / "sys", fake_pci.two_root_pfs(max(2, (vfs + 1) // 2)))
    found = dict(discovery.by_name(discovery.discover(fake.sysfs)))
    devices = sorted(found, key=lambda n: (found[n].vf_id, n))[:vfs]  # alternate the two PFs
    rails = {device: f"rail-{i}" for i, device in enumerate(devices)}
    with control_plane.running() as cp, cp.api() as api:
        http = HttpTimer(api)
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
            pods = Counting(pod_patch.PodClient(api), "pods", counts, timeline)
            nads = Counting(nad_client.NadClient(api), "nads", counts, timeline)
            claims = Counting(kube_claims.ClaimClient(api), "claims", counts, timeline)
            (root / "state").mkdir()
            durable = DurableWrites(timeline)
            path = root / "state" / checkpoint_doc.CHECKPOINT_FILE_NAME
            store = checkpoint.CheckpointStore(path, files=TimedFiles(path, durable.checkpoint))
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
                locks=lock_order.OperationLocks(claim_locks, pod_locks),
            )
            ctx = claim_context.ClaimContext(
                driver_name=names.DRIVER_NAME,
                node_name=node.name,
                claims=claims,
                inventory=StaticInventory(found),
                store=store,
                binder=vf_driver_binding.DriverBinder(fake.sysfs, kernel=fake.kernel()),
                cdi=specs,
                sysfs=fake.sysfs,
                require_netdevice=True,
                claim_locks=claim_locks,
                pod_locks=pod_locks,
                managed=attach,
            )
            handler = prepare.DraHandler(ctx)
            result = Result(collections.Counter(), [], [], [], [], [], [], [])
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
                for wrapper in (pods, nads, claims):
                    wrapper.calls.clear()
                http.timeline = timeline
                elapsed = timed(functools.partial(handler.prepare_resources, [ref]))
                http.timeline = None
                if round_:
                    result.managed_s.append(elapsed)
                    result.counts = collections.Counter(counts)
                    result.phases.append(timeline.phases())
                    result.covered_s.append(timeline.covered())
                sent = recorded(pods, nads, api, ref)
                handler.unprepare_resources([ref])
                floor_timeline = Timeline()
                fresh = workload(api, node.name, devices)
                http.timeline = floor_timeline
                elapsed_floor = timed(
                    functools.partial(bare_requests, api, fresh, sent, floor_timeline, concurrent=True)
                )
                http.timeline = None
                fresh = workload(api, node.name, devices)
                elapsed_bare = timed(functools.partial(bare_requests, api, fresh, sent, concurrent=False))
                if round_:
                    result.floor_s.append(elapsed_floor)
                    result.floor_phases.append(floor_timeline.phases())
                    result.bare_s.append(elapsed_bare)
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
    m, f = statistics.median(run.managed_s), statistics.median(run.floor_s)
    b, q = statistics.median(run.bare_s), statistics.median(run.sequential_s)
    print(
        f"latency over {len(run.managed_s)} rounds (medians): prepare {m * 1e3:.1f} ms; floor (the same "
        f"requests bare, dependent ones in order, concurrent ones concurrently) {f * 1e3:.1f} ms; "
        f"ratio {m / f:.2f} (goal <= {GOAL_VS_FLOOR})"
    )
    print(
        f"  the same requests bare one after the other {b * 1e3:.1f} ms: ratio {m / b:.2f} (goal <= {GOAL_VS_SERIAL}); "
        f"the prepare with every fan-out run one by one {q * 1e3:.1f} ms: ratio {q / b:.2f}"
    )
    print(
        "phases, medians per prepare: wall-clock span (overlapping requests count once) | sum of requests | floor span"
    )
    labels = sorted(
        {label for p in run.phases for label in p} - {HTTP}, key=lambda x: (not x.startswith("api"), x)
    )

    def median_ms(samples: list[Phases], label: str, index: int) -> float:
        return statistics.median(p.get(label, (0.0, 0.0))[index] for p in samples) * 1e3

    for label in labels:
        floor = f" | {median_ms(run.floor_phases, label, 0):6.1f} ms" if label.startswith("api") else ""
        print(
            f"  {label:<40} {median_ms(run.phases, label, 0):6.1f} ms | {median_ms(run.phases, label, 1):6.1f} ms{floor}"
        )
    rest = statistics.median(t - c for t, c in zip(run.managed_s, run.covered_s, strict=True))
    print(f"  {'rest (plugin CPU, locks, host binding)':<40} {rest * 1e3:6.1f} ms")
    print(
        f"  {'client (call span minus HTTP span, sum)':<40} {client_ms(run.phases):6.1f} ms | floor "
        f"{client_ms(run.floor_phases):.1f} ms (building, encoding and decoding requests in the client calls)"
    )


def client_ms(samples: list[Phases]) -> float:
    """Median per prepare of the summed client-call spans minus the summed HTTP spans, in ms."""
    return (
        statistics.median(
            sum(v[1] for label, v in p.items() if label.startswith("api")) - p.get(HTTP, (0.0, 0.0))[1]
            for p in samples
        )
        * 1e3
    )


if __name__ == "__main__":
    main()
