"""Benchmark: API requests and latency of one auto-attach prepare of a 2-VF claim.

Against a real kube-apiserver (started with ``sriov_dra.lab.controlplane.running``; the pinned
binaries must be built), ``rounds`` times: a fresh Pod (bound to a simulated node) and a fresh
claim allocated two VFs on two rails (status written as the scheduler would), then one
NodePrepare through the real handler (``driver.prepare`` with ``driver.managed`` on a fake-sysfs
host, real checkpoint and CDI files), counting every API request by verb and resource. In the
same run the **same requests** are issued bare (claim GET, Pod GET, two source GETs, two NAD
creates, one Pod JSON Patch, one claim status patch) through the same clients, and the prepare's
median latency is reported as a ratio to the bare median.

Goals (issue 5): the managed happy path costs ``3 + 2k`` requests for ``k`` VFs (claim GET, Pod
GET, Pod patch, k source GETs, k shadow creates) — the plain path's best-effort diagnostic
``status.devices`` write comes on top; and latency ≤ 1.3 × the bare requests. Absolute times
depend on the machine; starting the control plane is not part of any number.

Where the rest goes (profiled, issue 5): the three checkpoint writes the spec orders (``Pending``
before the first shadow create, the shadow UIDs before the Pod patch, ``Ready`` durably before
the answer; spec §8.1 steps 2, 3, 5) each cost a file and a directory ``fsync``, and the
plugin's own CPU work (rendering, identity hashing, checkpoint encoding and validation) runs on
the same cores as the local control plane. The CDI specs are written without ``fsync``
(``host.cdi``: derived files, rebuilt by every prepare).

Run as a script: ``.venv/bin/python bench/prepare.py [rounds]``.
"""

from __future__ import annotations

import collections
import functools
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import yaml
from kubernetes import client

from sriov_dra.core import attributes, identities, names
from sriov_dra.driver import claim_context, locks, prepare
from sriov_dra.driver.managed import lockorder, seams, service
from sriov_dra.host import binding, cdi, checkpoint, discovery, fakesysfs
from sriov_dra.kube import apply, podpatch, shadows
from sriov_dra.kube import claims as kube_claims
from sriov_dra.kubeletapi import messages
from sriov_dra.lab import binaries, controlplane
from sriov_dra.lab.nodes import SimulatedNode

NS: Final = "bench-prepare"
NAD_CRD: Final = (
    Path(prepare.__file__).resolve().parents[1] / "manifests" / "crds" / "network-attachment-definitions.yaml"
)
Counter = collections.Counter[str]


class Counting:
    """Wraps a client: every public call is one API request, counted as ``<name>.<method>``."""

    def __init__(self, inner: Any, name: str, counts: Counter) -> None:
        self._inner, self._name, self._counts = inner, name, counts

    def __getattr__(self, attr: str) -> Any:
        target = getattr(self._inner, attr)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            if attr == "update_device_status":  # a GET-free merge patch when the claim is passed in
                self._counts[f"{self._name}.status-patch"] += 1
            else:
                self._counts[f"{self._name}.{attr}"] += 1
            return target(*args, **kwargs)

        return call


class DurableWrites:
    """Times the local atomic writes (``host.atomicfile``): the checkpoint's are fsync'd, the CDI
    specs' are not (derived files, rebuilt from the record by every prepare; ``host.cdi``)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def _timed(self, write: Callable[[Path, bytes], None], path: Path, data: bytes) -> None:
        start = time.perf_counter()
        try:
            write(path, data)
        finally:
            self.seconds += time.perf_counter() - start

    def checkpoint(self, path: Path, data: bytes) -> None:
        self._timed(checkpoint.default_write, path, data)

    def cdi(self, path: Path, data: bytes) -> None:
        self._timed(cdi.default_write, path, data)


class Snapshot:
    """The device snapshot the policy controller would hand out: every VF eligible, rail mapping."""

    def __init__(self, found: dict[str, discovery.DiscoveredVf]) -> None:
        self.inventory = found

    def is_eligible(self, device: str) -> bool:
        return device in self.inventory

    def attributes_of(self, device: str) -> dict[str, attributes.AttributeValue]:
        rail = "rail-a-net" if self.inventory[device].pcie_root == "pci0000:00" else "rail-b-net"
        return {
            **self.inventory[device].attributes,
            names.ATTR_NET_ATTACH_DEF_NAME: attributes.string_value(rail),
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


def bare_requests(api: client.ApiClient, ref: messages.ClaimRef, bodies: list[dict[str, Any]]) -> None:
    """The prepare's requests issued directly: claim GET, Pod GET, two source GETs, the creates of
    equivalent NADs, one tested Pod JSON Patch, one claim status merge patch."""
    pods, nads, claims = podpatch.PodClient(api), shadows.NadClient(api), kube_claims.ClaimClient(api)
    claim = claims.get(NS, ref.name)
    pod_name = claim["status"]["reservedFor"][0]["name"]
    pod = pods.get(NS, pod_name)
    nads.get(NS, "rail-a-net")
    nads.get(NS, "rail-b-net")
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
            {"op": "add", "path": "/metadata/annotations", "value": {"bench": "x" * 600}},
        ],
    )
    claims.update_device_status(NS, ref.name, uid=ref.uid, compute=lambda _d: [], current=claim)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench(root: Path, rounds: int) -> tuple[Counter, list[float], list[float], list[float]]:
    """Run the measurement; return the request counts of one prepare, the prepare and bare latency
    samples, and the seconds each prepare spent in durable (fsync'd) checkpoint and CDI writes."""
    fake = fakesysfs.build(root / "sys", fakesysfs.two_root_pfs(2))
    found = dict(discovery.by_name(discovery.discover(fake.sysfs)))
    devices = [n for n in sorted(found) if found[n].vf_id == 0]  # one VF on each rail
    with controlplane.running() as cp, cp.api() as api:
        crd = yaml.safe_load(NAD_CRD.read_text())
        apply.apply_objects(api, [crd])
        apply.wait_crds_established(api, [crd["metadata"]["name"]])
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": NS}})
        while not any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(NS).items):
            time.sleep(0.1)
        for body in (source("rail-a-net", "192.0.2.0/24"), source("rail-b-net", "198.51.100.0/24")):
            client.CustomObjectsApi(api).create_namespaced_custom_object(
                "k8s.cni.cncf.io", "v1", NS, "network-attachment-definitions", body
            )
        node = SimulatedNode(api, f"bench-{uuid.uuid4().hex[:6]}").start()
        try:
            counts: Counter = collections.Counter()
            pods = Counting(podpatch.PodClient(api), "pods", counts)
            nads = Counting(shadows.NadClient(api), "nads", counts)
            claims = Counting(kube_claims.ClaimClient(api), "claims", counts)
            (root / "state").mkdir()
            durable = DurableWrites()
            store = checkpoint.CheckpointStore(root / "state" / "checkpoint.json", write=durable.checkpoint)
            store.load()
            specs = cdi.CdiSpecs(root / "cdi", write=durable.cdi)
            specs.ensure_root()
            claim_locks, pod_locks = locks.KeyedLocks("claim"), locks.KeyedLocks("pod")
            attach = service.ManagedAttach(
                node=seams.NodeIdentity(node.name, identities.NodeUid(node.uid)),
                devices=Snapshot(found),
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
            managed_s: list[float] = []
            bare_s: list[float] = []
            local_s: list[float] = []
            per_prepare: Counter = collections.Counter()
            for round_ in range(rounds + 1):  # round 0 warms connections and caches, not measured
                ref = workload(api, node.name, devices)
                counts.clear()
                durable.seconds = 0.0
                elapsed = timed(functools.partial(handler.prepare_resources, [ref]))
                if round_:
                    managed_s.append(elapsed)
                    local_s.append(durable.seconds)
                    per_prepare = collections.Counter(counts)
                shadow_bodies = [
                    n for n in attach.nads.list_all(label_selector=f"{names.LABEL_CLAIM_UID}={ref.uid}")
                ]
                handler.unprepare_resources([ref])
                # the same requests, bare: reads, two creates of equivalent bodies, one patch, one status patch
                elapsed_bare = timed(
                    functools.partial(bare_requests, api, workload(api, node.name, devices), shadow_bodies)
                )
                if round_:
                    bare_s.append(elapsed_bare)
            return per_prepare, managed_s, bare_s, local_s
        finally:
            node.stop()


def main() -> None:
    """Print the request breakdown and the latency ratio (or why the cluster was not measured)."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    with tempfile.TemporaryDirectory(prefix="sriov-dra-bench-") as tmp:
        try:
            counts, managed_s, bare_s, local_s = bench(Path(tmp), rounds)
        except binaries.BinaryMissing as exc:
            print(f"not measured: the control plane binaries are missing ({exc})")
            return
    k = 2
    managed = sum(v for key, v in counts.items() if key != "claims.status-patch")
    print("requests of one 2-VF prepare: " + ", ".join(f"{key} {v}" for key, v in sorted(counts.items())))
    print(
        f"  auto-attach path: {managed} (goal 3 + 2k = {3 + 2 * k}); plus the diagnostic status write: "
        f"{counts['claims.status-patch']}"
    )
    m, b = statistics.median(managed_s), statistics.median(bare_s)
    print(
        f"latency over {len(managed_s)} rounds: prepare median {m * 1e3:.1f} ms, the same requests bare "
        f"{b * 1e3:.1f} ms, ratio {m / b:.2f} (goal <= 1.3)"
    )
    d = statistics.median(local_s)
    print(
        f"  of which local writes (checkpoint x3 fsync'd, CDI specs x2 atomic without fsync): {d * 1e3:.1f} ms; "
        f"ratio without them {(m - d) / b:.2f}"
    )


if __name__ == "__main__":
    main()
