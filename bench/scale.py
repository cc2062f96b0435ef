"""Benchmark: the design's scale target (docs/design.md#scale): 1,000 Pods with 8 managed VFs each.

Against a real control plane (with the garbage collector), the objects of ``--pods`` Pods with
``--vfs-per-pod`` managed VFs are created over simulated nodes of 256 VFs each:

* **one node runs the real plugin** (``bench/scalekit/plugin_child.py``, its API requests
  counted); its ``--prepared-claims`` claims are prepared through the real NodePrepare path over
  gRPC (``sriov_dra_lab.kubelet``);
* **every other Pod's objects are created exactly as the plugin creates them**
  (``bench/scalekit/objects.py``, the product's own builders; a test proves them identical to a
  real prepare), without a plugin per node.

Measured, each printed against its goal (``PASS``/``MISS``; ``INFO`` without a goal): the plugin
node's orphan scan and repair pass (requests, time, peak RSS), apiserver and etcd RSS and object
counts, the largest Pod's annotations against the 256 KiB limit, the plugin's and guard's RSS with
the product image's Python environment, a tracemalloc top 10 of the plugin, and the cleanup of
the whole set: the plugin's node through the real NodeUnprepare path; then every Pod deleted and
each simulated node's shadows released as that node's plugin releases them at NodeUnprepare
(``bench/scalekit/node_release.py``: the product's ``release_managed_claim`` in one process per
node, with the plugin's concurrency bounds), nodes in parallel, the garbage collector running as
it does. The release rate (shadows/s) is printed against its goal with the time split.

Nothing is asserted on time: it exits 0 on a MISS. Run:
``.venv/bin/python bench/scale.py [--pods N] [--vfs-per-pod K] [--prepared-claims C]``; the
defaults are the full size and it prints its time estimate first. ``make bench`` runs it with
``SCALE_ARGS`` (default ``--pods 200``); the full size: ``make bench SCALE_ARGS=--pods=1000``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml
from bench.scalekit import node_release, objects
from kubernetes import client

from sriov_dra.core import limits
from sriov_dra.core.plugin import checkpoint_codec
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver import publisher
from sriov_dra.host import discovery
from sriov_dra.kube import apply, nad_client, pod_patch, resource_slices, watches
from sriov_dra.kubeletapi import messages
from sriov_dra.servicekit import fanout
from sriov_dra_lab import binaries, control_plane, guard, image_env, kubelet, processes
from sriov_dra_lab.fakes import fake_pci, fake_sysfs
from sriov_dra_lab.nodes import SimulatedNode
from sriov_dra_rules import checkpoint_doc, names

D: Final = names.DOMAIN
DRIVER: Final = names.DRIVER_NAME
PLUGIN_NS: Final = "dra-driver-sriov"
MANIFESTS: Final = Path(publisher.__file__).resolve().parents[1] / "manifests"
ROOT: Final = Path(__file__).resolve().parents[1]
VFS_PER_PF: Final = 128
NODE_VFS: Final = 2 * VFS_PER_PF
PODS_PER_NAMESPACE: Final = 100
CLAIMS_PER_POD: Final = 2
RAILS: Final = (
    ("rail-a-net", "ai-rail-a", "192.0.2.0/24", "enp3s0f0"),
    ("rail-b-net", "ai-rail-b", "198.51.100.0/24", "enp129s0f0"),
)
THREADS: Final = 8
"""Concurrent writers of the bulk objects and of the Pod deletions."""

GOAL_SCAN_LISTS: Final = 1
GOAL_SCAN_S: Final = 2.0
GOAL_SCAN_RSS_MIB: Final = 256.0
GOAL_PLUGIN_RSS_MIB: Final = 120.0
GOAL_GUARD_RSS_MIB: Final = 80.0
GOAL_RELEASE_PER_S: Final = 100.0
"""Shadows released per second once a job's Pods are deleted (its namespaces and IPs freed)."""
ANNOTATION_LIMIT_B: Final = limits.TOTAL_ANNOTATION_SIZE_LIMIT_B


# ---------------------------------------------------------------------------------------- report
@dataclass
class Report:
    """Figures printed one per line: ``PASS``/``MISS`` against a goal, ``INFO`` without one."""

    lines: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    passes: int = 0

    def figure(self, name: str, measured: str, goal: str | None = None, ok: bool | None = None) -> None:
        verdict = "INFO" if ok is None else ("PASS" if ok else "MISS")
        if ok is True:
            self.passes += 1
        elif ok is False:
            self.misses.append(name)
        line = f"{verdict}  {name}: {measured}" + (f" (goal {goal})" if goal else "")
        self.lines.append(line)
        print(line, flush=True)

    def note(self, text: str) -> None:
        self.lines.append(f"      {text}")
        print(f"      {text}", flush=True)


def _mib(value: float) -> str:
    return f"{value:.1f} MiB"


IMPORTS: Final = (
    ("a bare interpreter", "pass"),
    ("kubernetes.client", "import kubernetes.client"),
    ("grpc", "import grpc"),
    ("the guard's modules", "import sriov_dra.guard.main"),
    ("the plugin's modules", "import sriov_dra.driver.main"),
)
"""What the services' RSS is made of before they do anything: a fresh interpreter per import."""


def import_costs() -> list[tuple[str, float]]:
    """``(what, RSS in MiB)`` of a fresh interpreter after each of :data:`IMPORTS`."""
    probe = (
        "import sys; exec(sys.argv[1]); print(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])"
    )
    out = []
    for what, statement in IMPORTS:
        done = subprocess.run(
            [sys.executable, "-c", probe, statement], capture_output=True, text=True, check=True, cwd=ROOT
        )
        out.append((what, int(done.stdout.split()[-1]) / 1024))
    return out


def rss_mib(pid: int) -> float:
    """VmRSS of process ``pid`` in MiB (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _requests(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


# ---------------------------------------------------------------------------------------- cluster
def count_objects(api: client.ApiClient) -> dict[str, int]:
    """Objects per resource from one ``limit=1`` LIST each (items + ``remainingItemCount``)."""
    paths = {
        "pods": "/api/v1/pods",
        "network-attachment-definitions": "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions",
        "resourceclaims": "/apis/resource.k8s.io/v1/resourceclaims",
        "resourceslices": "/apis/resource.k8s.io/v1/resourceslices",
        "nodes": "/api/v1/nodes",
        "events": "/api/v1/events",
    }
    out = {}
    for name, path in paths.items():
        answer = api.call_api(
            path, "GET", query_params=[("limit", 1)], auth_settings=["BearerToken"], _preload_content=False
        )
        doc = json.loads(answer.data)
        out[name] = len(doc.get("items") or []) + int(
            (doc.get("metadata") or {}).get("remainingItemCount") or 0
        )
    return out


def etcd_db_mib(cp: control_plane.ControlPlane) -> float:
    """etcd's ``etcd_mvcc_db_total_size_in_bytes`` from its client port's ``/metrics``, in MiB."""
    with urllib.request.urlopen(f"http://127.0.0.1:{cp.ports['etcd']}/metrics", timeout=10) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith("etcd_mvcc_db_total_size_in_bytes "):
                return float(line.split()[1]) / 2**20
    return 0.0


def control_plane_memory(cp: control_plane.ControlPlane) -> dict[str, float]:
    """RSS of kube-apiserver and etcd (MiB) and etcd's database size."""
    pids = {p.name: p.pid for p in cp.processes if p.pid is not None}
    return {
        "kube-apiserver": rss_mib(pids["kube-apiserver"]),
        "etcd": rss_mib(pids["etcd"]),
        "etcd db": etcd_db_mib(cp),
    }


def install(api: client.ApiClient, namespaces: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """CRDs, the plugin's policy namespace, workload namespaces with their rail source NADs.

    Shapes: namespace → source name → the source NAD as the API server returned it.
    """
    crds = [
        yaml.safe_load((MANIFESTS / "crds" / f"{D}_{n}.yaml").read_text())
        for n in ("sriovresourcepolicies", "deviceattributes")
    ]
    apply.apply_objects(api, crds)
    apply.wait_crds_established(api, [c["metadata"]["name"] for c in crds])
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    sources: dict[str, dict[str, dict[str, Any]]] = {}
    for ns in (PLUGIN_NS, *namespaces):
        core.create_namespace({"metadata": {"name": ns}})
    for ns in namespaces:
        sources[ns] = {}
        for name, cni_name, cidr, _ in RAILS:
            ipam = {"type": "whereabouts", "network_name": cni_name, "range": cidr}
            config = json.dumps(
                {"cniVersion": "1.0.0", "name": cni_name, "type": "sriov", "ipam": ipam}, indent=2
            )
            body = {
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"config": config},
            }
            sources[ns][name] = custom.create_namespaced_custom_object(
                "k8s.cni.cncf.io", "v1", ns, "network-attachment-definitions", body
            )
    return sources


def rail_mapping(node: str) -> list[dict[str, Any]]:
    """DeviceAttributes (netAttachDefName per rail) + one SriovResourcePolicy (rail per PF) for ``node``."""
    objs: list[dict[str, Any]] = []
    configs = []
    for name, _, _, pf in RAILS:
        label = {"networking.example.com/template": f"{name}-{node}"}
        objs.append(
            {
                "apiVersion": f"{D}/v1alpha1",
                "kind": "DeviceAttributes",
                "metadata": {"name": f"{name}-{node}", "namespace": PLUGIN_NS, "labels": label},
                "spec": {"attributes": {f"{D}/netAttachDefName": {"string": name}}},
            }
        )
        configs.append(
            {
                "deviceAttributesSelector": {"matchLabels": label},
                "resourceFilters": [{"vendors": ["8086"], "pfNames": [pf], "linkType": "eth"}],
            }
        )
    terms = [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]
    objs.append(
        {
            "apiVersion": f"{D}/v1alpha1",
            "kind": "SriovResourcePolicy",
            "metadata": {"name": f"rails-{node}", "namespace": PLUGIN_NS},
            "spec": {"nodeSelector": {"nodeSelectorTerms": terms}, "configs": configs},
        }
    )
    return objs


def node_vfs() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(device, pci)`` of the lab node's VFs per PF (rail A, rail B), in VF order."""
    pfs = fake_pci.two_root_pfs(VFS_PER_PF)
    return tuple(  # type: ignore[return-value]
        [
            (discovery.device_name(fake_pci.vf_address(pf.bdf, i)), fake_pci.vf_address(pf.bdf, i))
            for i in range(VFS_PER_PF)
        ]
        for pf in pfs
    )


def pod_devices(slot: int, vfs_per_pod: int) -> list[list[tuple[str, str, str]]]:
    """The VFs of the ``slot``-th Pod of a node: per claim, ``(device, pci, rail)``; half from each PF."""
    rail_a, rail_b = node_vfs()
    per_claim = vfs_per_pod // CLAIMS_PER_POD
    out = []
    for c in range(CLAIMS_PER_POD):
        first = slot * (vfs_per_pod // 2) + c * (per_claim // 2)
        claim = []
        for i in range(per_claim // 2):
            claim.append((*rail_a[first + i], RAILS[0][0]))
            claim.append((*rail_b[first + i], RAILS[1][0]))
        out.append(claim)
    return out


def pod_body(name: str, node: str, claims: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """A Pod bound to ``node`` naming its claims (``(alias, claim name)``)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "resourceClaims": [{"name": a, "resourceClaimName": c} for a, c in claims],
            "containers": [
                {
                    "name": "workload",
                    "image": "registry.invalid/toolbox",
                    "resources": {"claims": [{"name": a} for a, _ in claims]},
                }
            ],
        },
    }


def create_pod(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    answer = client.CoreV1Api(api).create_namespaced_pod(namespace, body, _preload_content=False)
    return dict(json.loads(answer.data))


# ---------------------------------------------------------------------------------------- bulk
@dataclass(frozen=True)
class BulkPod:
    """One simulated node's Pod: where it lives and the plugin's records for it (shadow UIDs set)."""

    namespace: str
    name: str
    uid: str
    records: tuple[Any, ...]


def bulk_pod(
    api: client.ApiClient,
    node: SimulatedNode,
    slot: int,
    namespace: str,
    sources: dict[str, dict[str, Any]],
    vfs_per_pod: int,
) -> BulkPod:
    """Create one Pod, its shadows and its Pod patch exactly as the plugin would (``scalekit.objects``)."""
    name = f"w-{node.name}-{slot}"
    aliases = [(f"vfs-{c}", f"{name}-vfs-{c}") for c in range(CLAIMS_PER_POD)]
    pod = create_pod(api, namespace, pod_body(name, node.name, aliases))
    claims = [
        objects.Claim(
            name=claim_name,
            uid=str(uuid.uuid4()),
            alias=alias,
            vfs=tuple(
                objects.Vf(request=f"nic-{i}", pool=node.name, device=dev, pci=pci, source=sources[rail])
                for i, (dev, pci, rail) in enumerate(devices)
            ),
        )
        for (alias, claim_name), devices in zip(aliases, pod_devices(slot, vfs_per_pod), strict=True)
    ]
    uid = pod["metadata"]["uid"]
    recs = objects.records(
        node_name=node.name, node_uid=node.uid, namespace=namespace, pod_uid=uid, claims=claims
    )
    nads = nad_client.NadClient(api)
    uids = {}
    for body in objects.shadow_bodies(recs, pod_name=name):
        created = nads.create(body)
        uids[created["metadata"]["name"]] = created["metadata"]["uid"]
    recs = objects.with_shadow_uids(recs, uids)
    pod_patch.PodClient(api).json_patch(namespace, name, list(objects.pod_patch(pod, recs)))
    return BulkPod(namespace, name, uid, tuple(recs))


def run_parallel(calls: Sequence[Callable[[], Any]], threads: int = THREADS) -> list[Any]:
    """Run ``calls`` on ``threads`` workers; results in order; the first error is raised."""
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return [f.result() for f in [pool.submit(c) for c in calls]]


# ---------------------------------------------------------------------------------------- plugin
class ChildProcess:
    """A ``bench.scalekit`` module run as a process as the image runs Python: one JSON line per command.

    The child writes one line when it is ready (:attr:`ready`), then answers each ``{"cmd": ...}``
    line with one line; its stderr (product logs) goes to ``log``.
    """

    def __init__(self, module: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.label = module.rsplit(".", 1)[-1]
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            cwd=ROOT,
            env={**os.environ, **image_env.python_env(), "PYTHONPATH": str(ROOT), **(env or {})},
            text=True,
        )
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.label} process exited ({self.proc.wait()}); see {self.log.name}")
        return dict(json.loads(line))

    def ask(self, cmd: str, **extra: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": cmd, **extra}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(BrokenPipeError, RuntimeError):
                self.ask("stop")
            self.proc.wait(timeout=60)
        self.log.close()


class PluginChild(ChildProcess):
    """``bench/scalekit/plugin_child.py`` as a process."""

    def __init__(self, argv: list[str], log: Path, *, tracemalloc_frames: int = 0) -> None:
        env = {"SRIOV_DRA_BENCH_TRACEMALLOC": str(tracemalloc_frames)} if tracemalloc_frames else {}
        super().__init__("bench.scalekit.plugin_child", argv, log, env)
        if not self.ready.get("ready"):
            raise RuntimeError(f"the plugin did not start: {self.ready.get('error')} (log {log})")


@dataclass
class PluginNode:
    """The node whose plugin really runs: fake sysfs, directories, the kubelet's DRA client."""

    root: Path
    node: SimulatedNode
    kubeconfig: Path
    kubelet: kubelet.KubeletDraManager = field(default_factory=kubelet.KubeletDraManager)

    def __post_init__(self) -> None:
        fake_sysfs.build(self.root / "host", fake_pci.two_root_pfs(VFS_PER_PF))

    def argv(self) -> list[str]:
        return [
            f"--node-name={self.node.name}",
            f"--kubeconfig={self.kubeconfig}",
            f"--sysfs-root={self.root / 'host'}",
            f"--kubelet-plugins-directory-path={self.root / 'plugins'}",
            f"--kubelet-registrar-directory-path={self.root / 'registry'}",
            f"--cdi-root={self.root / 'cdi'}",
            f"--state-dir={self.root / 'state'}",
            f"--namespace={PLUGIN_NS}",
            f"--metrics-bind-address=127.0.0.1:{processes.free_port()}",
            "--multus-auto-attach",
            "--log-format=json",
            "--log-level=warning",
        ]

    def start(self, *, tracemalloc_frames: int = 0) -> PluginChild:
        child = PluginChild(self.argv(), self.root / "plugin.log", tracemalloc_frames=tracemalloc_frames)
        self.kubelet.deregister(DRIVER)
        if not self.kubelet.wait_for_driver(self.root / "registry", DRIVER, timeout_s=60):
            child.stop()
            raise RuntimeError(f"the plugin did not register (log {self.root / 'plugin.log'})")
        return child

    def checkpoint_records(self) -> int:
        path = self.root / "state" / checkpoint_doc.CHECKPOINT_FILE_NAME
        return len(checkpoint_codec.decode_checkpoint(path.read_bytes()).claims) if path.exists() else 0


@dataclass(frozen=True)
class PreparedPod:
    namespace: str
    name: str
    uid: str
    claims: tuple[messages.ClaimRef, ...]


def allocated_pod(
    api: client.ApiClient, node: str, slot: int, namespace: str, vfs_per_pod: int
) -> tuple[str, str, list[messages.ClaimRef]]:
    """A Pod on the plugin node with its claims allocated its VFs and reserved for it."""
    name = f"p-{slot}"
    aliases = [(f"vfs-{c}", f"{name}-vfs-{c}") for c in range(CLAIMS_PER_POD)]
    pod = create_pod(api, namespace, pod_body(name, node, aliases))
    res = client.ResourceV1Api(api)
    refs = []
    for (alias, claim_name), devices in zip(aliases, pod_devices(slot, vfs_per_pod), strict=True):
        del alias
        requests = [{"name": f"nic-{i}", "exactly": {"deviceClassName": "any"}} for i in range(len(devices))]
        claim = res.create_namespaced_resource_claim(
            namespace,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": claim_name},
                "spec": {"devices": {"requests": requests}},
            },
            _preload_content=False,
        )
        meta = json.loads(claim.data)["metadata"]
        results = [
            {"request": f"nic-{i}", "driver": DRIVER, "pool": node, "device": dev}
            for i, (dev, _, _) in enumerate(devices)
        ]
        selector = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
        status = {
            "allocation": {"devices": {"results": results}, "nodeSelector": selector},
            "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}],
        }
        res.patch_namespaced_resource_claim_status(
            claim_name, namespace, {"status": status}, _preload_content=False
        )
        refs.append(messages.ClaimRef(namespace=namespace, name=claim_name, uid=meta["uid"]))
    return name, pod["metadata"]["uid"], refs


def wait_published(api: client.ApiClient, node: str, devices: int, timeout_s: float = 120.0) -> float:
    """Seconds until the node's slices hold ``devices`` devices."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        current = resource_slices.list_slices(api, driver=DRIVER, node=node)
        if sum(len((s.get("spec") or {}).get("devices") or []) for s in current) >= devices:
            return time.monotonic() - start
        time.sleep(0.5)
    raise TimeoutError(f"node {node} did not publish {devices} devices within {timeout_s:.0f} s")


# ---------------------------------------------------------------------------------------- cleanup
def managed_shadows_listed(api: client.ApiClient) -> list[dict[str, Any]]:
    """Every shadow of every node (one LIST by the managed-by label)."""
    return nad_client.NadClient(api, timeout_s=120).list_all(
        label_selector=f"{names.LABEL_MANAGED_BY}={names.MANAGED_BY_VALUE}"
    )


def node_release_bounds() -> str:
    """The per-node concurrency the simulated nodes' release processes keep, as text."""
    return f"{node_release.UNPREPARE_CALLS} calls at once, {fanout.DEFAULT_MAX_IN_FLIGHT} requests per release step"


class NodeReleaseChild(ChildProcess):
    """``bench/scalekit/node_release.py`` as a process: one simulated node's plugin releasing its claims."""

    def __init__(self, node: str, records: Sequence[model.ClaimRecord], kubeconfig: Path, work: Path) -> None:
        (work / node).mkdir(parents=True)
        path = work / node / checkpoint_doc.CHECKPOINT_FILE_NAME
        claims = {r.claim_uid: r for r in records}
        path.write_bytes(checkpoint_codec.encode_checkpoint(model.Checkpoint(claims=claims)))
        super().__init__(
            "bench.scalekit.node_release", [str(kubeconfig), str(path)], work / node / "release.log"
        )
        if self.ready.get("claims") != len(claims):
            raise RuntimeError(f"node {node}'s release process loaded {self.ready}, not {len(claims)} claims")


@dataclass
class Teardown:
    """Seconds after the first Pod deletion: Pods deleted, the nodes' releases returned, each
    shadow's deletion seen requested and its object seen gone (its protection finalizer removed)."""

    pods_deleted_s: float = 0.0
    releases_s: float = 0.0
    marked_s: dict[str, float] = field(default_factory=dict)
    gone_s: dict[str, float] = field(default_factory=dict)
    answers: list[dict[str, Any]] = field(default_factory=list)


def delete_and_release(
    api: client.ApiClient,
    delete_pods: Callable[[], object],
    nodes: Sequence[NodeReleaseChild],
    shadows: set[str],
    timeout_s: float,
) -> Teardown:
    """Delete the Pods, then have every simulated node release its claims, all nodes at once.

    A watch of every managed shadow (one label-selected list, then events) records when each of
    ``shadows`` turns terminating and when it is gone. Ends when the watch's cache is empty.
    Raises: TimeoutError after ``timeout_s``; RuntimeError when a node's release failed.
    """
    out = Teardown()
    start = time.monotonic()

    def on_event(kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name, now = str(meta.get("name")), time.monotonic() - start
        if name not in shadows:
            return
        if meta.get("deletionTimestamp") or kind == "DELETED":
            out.marked_s.setdefault(name, now)
        if kind == "DELETED":
            out.gone_s.setdefault(name, now)

    target = watches.Target(
        "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions",
        label_selector=f"{names.LABEL_MANAGED_BY}={names.MANAGED_BY_VALUE}",
    )
    watch = watches.Watch(api, target, on_event, name="scale-shadows").start()
    try:
        if not watch.wait_synced(300):
            raise TimeoutError("the shadow watch did not list within 300 s")
        start = time.monotonic()
        delete_pods()
        out.pods_deleted_s = time.monotonic() - start
        out.answers = run_parallel(
            [functools.partial(n.ask, "release") for n in nodes], threads=max(1, len(nodes))
        )
        out.releases_s = time.monotonic() - start
        while watch.items():
            if time.monotonic() - start > timeout_s:
                raise TimeoutError(f"{len(watch.items())} shadows still present after {timeout_s:.0f} s")
            time.sleep(0.2)
    finally:
        watch.close()
    failed = [f for a in out.answers for f in a["failed"]]
    if failed:
        raise RuntimeError(f"{len(failed)} claim releases failed, first: {failed[0]}")
    return out


def delete_pod(api: client.ApiClient, namespace: str, name: str) -> None:
    with contextlib.suppress(client.ApiException):
        client.CoreV1Api(api).delete_namespaced_pod(
            name, namespace, grace_period_seconds=0, propagation_policy="Background", _preload_content=False
        )


# ---------------------------------------------------------------------------------------- main
@dataclass(frozen=True)
class Sizes:
    pods: int
    vfs_per_pod: int
    prepared_claims: int

    @property
    def pods_per_node(self) -> int:
        return NODE_VFS // self.vfs_per_pod

    @property
    def prepared_pods(self) -> int:
        return self.prepared_claims // CLAIMS_PER_POD

    @property
    def bulk_pods(self) -> int:
        return self.pods - self.prepared_pods

    @property
    def bulk_nodes(self) -> int:
        return -(-self.bulk_pods // self.pods_per_node)

    def estimate_s(self) -> float:
        """Rough wall time on two shared, busy cores (load ~12), from the full-size run.

        Measured there: the control plane, plugin restarts and the guard ~90 s; ~40 bulk writes/s
        with 8 writers; ~1.5 s per prepared Pod (allocation writes, NodePrepare, unprepare); and the
        simulated nodes releasing their shadows at the goal's rate (:data:`GOAL_RELEASE_PER_S`).
        """
        writes = self.bulk_pods * (2 + self.vfs_per_pod)
        released = self.bulk_pods * self.vfs_per_pod / GOAL_RELEASE_PER_S
        return 90 + writes / 40 + released + self.prepared_pods * 1.5


def parse(argv: Sequence[str]) -> Sizes:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000, help="Pods in all (default 1000)")
    parser.add_argument(
        "--vfs-per-pod", type=int, default=8, help="managed VFs per Pod, even, 4..64 (default 8)"
    )
    parser.add_argument(
        "--prepared-claims",
        type=int,
        default=64,
        help="claims the real plugin prepares on its node (default 64)",
    )
    args = parser.parse_args(argv)
    sizes = Sizes(args.pods, args.vfs_per_pod, args.prepared_claims)
    if sizes.vfs_per_pod % 4 or not 4 <= sizes.vfs_per_pod <= 64:
        parser.error(
            f"--vfs-per-pod must be a multiple of 4 from 4 to 64 (two claims, two PFs), got {sizes.vfs_per_pod}"
        )
    if sizes.prepared_claims % CLAIMS_PER_POD or sizes.prepared_claims < 2:
        parser.error(f"--prepared-claims must be even and >= 2, got {sizes.prepared_claims}")
    if sizes.prepared_pods > sizes.pods_per_node:
        parser.error(
            f"--prepared-claims {sizes.prepared_claims} needs {sizes.prepared_pods * sizes.vfs_per_pod} VFs; "
            f"the plugin's node has {NODE_VFS}"
        )
    if sizes.pods < sizes.prepared_pods:
        parser.error(f"--pods must be at least the prepared Pods ({sizes.prepared_pods})")
    return sizes


def annotation_size_32(sources: dict[str, dict[str, Any]]) -> int:
    """Annotation bytes of a Pod with 32 managed VFs (two claims of 16), built, not created."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "w-32-vfs",
            "namespace": "ns-00",
            "uid": str(uuid.uuid4()),
            "resourceVersion": "1",
        },
        "spec": {},
    }
    claims = [
        objects.Claim(
            name=f"w-32-vfs-{c}",
            uid=str(uuid.uuid4()),
            alias=f"vfs-{c}",
            vfs=tuple(
                objects.Vf(request=f"nic-{i}", pool="node-32", device=dev, pci=pci, source=sources[rail])
                for i, (dev, pci, rail) in enumerate(devices)
            ),
        )
        for c, devices in enumerate(pod_devices(0, 32))
    ]
    recs = objects.records(
        node_name="node-32",
        node_uid=str(uuid.uuid4()),
        namespace="ns-00",
        pod_uid=pod["metadata"]["uid"],
        claims=claims,
    )
    recs = objects.with_shadow_uids(
        recs, {b.shadow_name: str(uuid.uuid4()) for r in recs for b in r.managed_bindings()}
    )
    return limits.annotations_size(objects.pod_annotations(pod, recs))


def bench(sizes: Sizes, work: Path, report: Report) -> None:
    namespaces = [f"ns-{i:02d}" for i in range(-(-sizes.pods // PODS_PER_NAMESPACE))]
    with (
        control_plane.running(control_plane.ControlPlaneSettings(workdir=work / "cp")) as cp,
        cp.api() as api,
    ):
        api.configuration.connection_pool_maxsize = THREADS * 2
        sources = install(api, namespaces)
        before_mem, before_objs = control_plane_memory(cp), count_objects(api)

        # --- the plugin's node and the real plugin, idle
        plugin_node_name = "scale-plugin"
        sim = SimulatedNode(
            api, plugin_node_name, labels={"kubernetes.io/hostname": plugin_node_name}, interval_s=10.0
        ).start()
        apply.apply_objects(api, rail_mapping(plugin_node_name))
        pn = PluginNode(work / "plugin", sim, cp.kubeconfig)
        child = pn.start()
        wait_published(api, plugin_node_name, NODE_VFS)
        time.sleep(2.0)  # let the watches settle after the first publication
        idle = child.ask("status")["memory"]
        report.figure(
            f"plugin RSS at idle, {NODE_VFS} VFs published, no claim",
            _mib(idle["VmRSS"]),
            f"<= {GOAL_PLUGIN_RSS_MIB:.0f} MiB",
            idle["VmRSS"] <= GOAL_PLUGIN_RSS_MIB,
        )

        # --- prepared claims through the real NodePrepare path (gRPC)
        ns_of = lambda i: namespaces[i // PODS_PER_NAMESPACE]  # noqa: E731
        prepared: list[PreparedPod] = []
        prepare_s = []
        for slot in range(sizes.prepared_pods):
            name, uid, refs = allocated_pod(api, plugin_node_name, slot, ns_of(slot), sizes.vfs_per_pod)
            start = time.perf_counter()
            outcome = pn.kubelet.prepare_pod(uid, [kubelet.PodClaim(r, (DRIVER,)) for r in refs])
            prepare_s.append(time.perf_counter() - start)
            if not outcome.ok:
                raise RuntimeError(f"NodePrepare of Pod {name} failed: {outcome.failure}")
            prepared.append(PreparedPod(ns_of(slot), name, uid, tuple(refs)))
        after_prepare = child.ask("status")
        report.figure(
            f"plugin RSS after {after_prepare['claims']} prepared claims ({sizes.prepared_pods} Pods x "
            f"{sizes.vfs_per_pod} VFs)",
            _mib(after_prepare["memory"]["VmRSS"]),
            f"<= {GOAL_PLUGIN_RSS_MIB:.0f} MiB",
            after_prepare["memory"]["VmRSS"] <= GOAL_PLUGIN_RSS_MIB,
        )
        report.figure(
            "NodePrepare per Pod (2 claims) through gRPC",
            f"median {statistics.median(prepare_s) * 1e3:.0f} ms, max {max(prepare_s) * 1e3:.0f} ms",
        )

        # --- every other Pod: the plugin's objects, created as it creates them
        sims = [
            SimulatedNode(api, f"scale-{i:03d}", interval_s=20.0).start() for i in range(sizes.bulk_nodes)
        ]
        calls = []
        for index in range(sizes.bulk_pods):
            node, slot = sims[index // sizes.pods_per_node], index % sizes.pods_per_node
            ns = ns_of(sizes.prepared_pods + index)
            calls.append(
                lambda node=node, slot=slot, ns=ns: bulk_pod(
                    api, node, slot, ns, sources[ns], sizes.vfs_per_pod
                )
            )
        start = time.perf_counter()
        bulk: list[BulkPod] = run_parallel(calls)
        bulk_s = time.perf_counter() - start
        writes = sizes.bulk_pods * (2 + sizes.vfs_per_pod)
        report.figure(
            f"created {sizes.bulk_pods} Pods on {sizes.bulk_nodes} simulated nodes with "
            f"{sizes.bulk_pods * sizes.vfs_per_pod} shadows",
            f"{bulk_s:.1f} s, {writes} writes ({writes / bulk_s:.0f}/s, {THREADS} writers)",
        )

        # --- the full set: control plane, annotation sizes
        after_mem, after_objs = control_plane_memory(cp), count_objects(api)
        shadows_now = len(managed_shadows_listed(api))
        for name in ("kube-apiserver", "etcd"):
            report.figure(
                f"{name} RSS, before -> with the whole set",
                f"{_mib(before_mem[name])} -> {_mib(after_mem[name])} (x{after_mem[name] / max(before_mem[name], 0.1):.2f})",
            )
        report.figure("etcd database size", f"{_mib(before_mem['etcd db'])} -> {_mib(after_mem['etcd db'])}")
        report.figure(
            "objects before -> after",
            ", ".join(f"{k} {before_objs[k]} -> {after_objs[k]}" for k in after_objs)
            + f"; managed shadows {shadows_now}",
        )
        pods = json.loads(client.CoreV1Api(api).list_pod_for_all_namespaces(_preload_content=False).data)[
            "items"
        ]
        largest = max(limits.annotations_size(p["metadata"].get("annotations") or {}) for p in pods)
        report.figure(
            f"largest Pod's annotations, {sizes.vfs_per_pod} VFs (live)",
            f"{largest} B ({largest / ANNOTATION_LIMIT_B:.1%} of the limit)",
            f"<= {ANNOTATION_LIMIT_B} B",
            largest <= ANNOTATION_LIMIT_B,
        )
        size_32 = annotation_size_32(sources[namespaces[0]])
        report.figure(
            "Pod annotations with 32 VFs (two claims of 16, built by the plugin's builders)",
            f"{size_32} B ({size_32 / ANNOTATION_LIMIT_B:.1%} of the limit)",
            f"<= {ANNOTATION_LIMIT_B} B",
            size_32 <= ANNOTATION_LIMIT_B,
        )

        # --- repair pass and orphan scan in the plugin process
        passed = child.ask("repair")
        report.figure(
            f"repair pass over {passed['claims']} prepared claims: requests",
            _requests(passed["requests"]),
        )
        report.figure(
            "repair pass: writes when nothing changed",
            f"{passed['writes']} (ensured Pods {passed['ensured']}, failed {len(passed['failed'])}, "
            f"stopped {len(passed['stopped'])})",
            "0",
            passed["writes"] == 0 and not passed["failed"] and not passed["stopped"],
        )
        report.figure("repair pass: wall time", f"{passed['seconds'] * 1e3:.0f} ms")
        scan = child.ask("orphans")
        lists = sum(v for k, v in scan["requests"].items() if k.startswith("list "))
        report.figure(
            f"orphan scan with {shadows_now} shadows in the cluster: requests",
            _requests(scan["requests"]),
            f"{GOAL_SCAN_LISTS} label-selected LIST",
            lists == GOAL_SCAN_LISTS and sum(scan["requests"].values()) == GOAL_SCAN_LISTS,
        )
        report.figure(
            f"orphan scan: wall time ({scan['shadows']} shadows of the node: {dict(scan['by_status'])})",
            f"{scan['seconds'] * 1e3:.0f} ms",
            f"<= {GOAL_SCAN_S:.0f} s",
            scan["seconds"] <= GOAL_SCAN_S,
        )
        report.figure(
            "orphan scan: plugin peak RSS during it",
            _mib(scan["memory"]["VmHWM"]),
            f"<= {GOAL_SCAN_RSS_MIB:.0f} MiB",
            scan["memory"]["VmHWM"] <= GOAL_SCAN_RSS_MIB,
        )
        child.stop()

        # --- guard daemon at idle
        daemon = guard.GuardDaemon(
            work / "guard" / "guard.sock",
            cp.kubeconfig,
            work / "guard.log",
            node_name=plugin_node_name,
            env=image_env.python_env(),
        )
        (work / "guard").mkdir(mode=0o700)
        daemon.start()
        time.sleep(2.0)
        assert daemon.process is not None and daemon.process.pid is not None
        guard_rss = rss_mib(daemon.process.pid)
        daemon.stop()
        report.figure(
            "guard daemon RSS at idle",
            _mib(guard_rss),
            f"<= {GOAL_GUARD_RSS_MIB:.0f} MiB",
            guard_rss <= GOAL_GUARD_RSS_MIB,
        )
        report.note(
            "RSS of a fresh interpreter after importing only: "
            + ", ".join(f"{what} {_mib(rss)}" for what, rss in import_costs())
        )

        # --- where the plugin's memory goes: restarted on the same checkpoint under tracemalloc
        child = pn.start(tracemalloc_frames=1)
        traced = child.ask("tracemalloc", top=10)
        report.figure(
            f"plugin restarted on the checkpoint under tracemalloc: traced {traced['traced_mib']:.1f} MiB "
            f"(peak {traced['traced_peak_mib']:.1f}), RSS {_mib(traced['memory']['VmRSS'])} of which "
            f"tracemalloc's own {_mib(traced['memory'].get('tracemalloc_overhead', 0.0))}",
            "top 10 lines:",
        )
        for entry in traced["top_lines"]:
            report.note(f"{entry['mib']:7.2f} MiB {entry['blocks']:7d} blocks  {entry['where']}")
        report.note("top 10 files:")
        for entry in traced["top_files"]:
            report.note(f"{entry['mib']:7.2f} MiB  {entry['where']}")
        child.ask("tracemalloc-stop")

        # --- cleanup of the whole set: each simulated node's plugin ready to release its claims
        releasers = [
            NodeReleaseChild(
                node.name,
                [r for p in bulk for r in p.records if r.managed_bindings()[0].node_name == node.name],
                cp.kubeconfig,
                work / "release",
            )
            for node in sims
        ]
        start = time.perf_counter()
        for pod in prepared:
            outcome = pn.kubelet.unprepare_pod(pod.uid)
            if not outcome.ok:
                raise RuntimeError(f"NodeUnprepare of Pod {pod.name} failed: {outcome.failure}")
        release_s = time.perf_counter() - start
        report.figure(
            f"release of the plugin node's {sizes.prepared_claims} claims through NodeUnprepare (real release path, "
            "one Pod after the other)",
            f"{release_s:.1f} s; checkpoint records left {pn.checkpoint_records()}",
        )
        shadows = {b.shadow_name for p in bulk for r in p.records for b in r.managed_bindings()}
        every_pod: list[PreparedPod | BulkPod] = [*prepared, *bulk]
        try:
            done = delete_and_release(
                api,
                lambda: run_parallel(
                    [functools.partial(delete_pod, api, p.namespace, p.name) for p in every_pod]
                ),
                releasers,
                shadows,
                timeout_s=3600,
            )
        finally:
            for releaser in releasers:
                releaser.stop()
        left_shadows = managed_shadows_listed(api)
        left_finalizers = sum(
            names.FINALIZER_ATTACHMENT_PROTECTION in (n["metadata"].get("finalizers") or [])
            for n in left_shadows
        )
        marked_s = max(done.marked_s.values(), default=0.0)
        gone_s = max(done.gone_s.values(), default=0.0)
        report.figure(
            f"cleanup of the whole set: {len(prepared) + len(bulk)} Pods deleted after {done.pods_deleted_s:.1f} s; "
            f"{len(shadows)} shadows of {len(sims)} simulated nodes, each node's plugin releasing its Pods' claims "
            f"(NodeUnprepare, {node_release_bounds()}), nodes in parallel: every deletion requested after "
            f"{marked_s:.1f} s, the nodes' releases returned after {done.releases_s:.1f} s, every finalizer "
            f"removed and nothing left after {gone_s:.1f} s",
            f"shadows left {len(left_shadows)}, finalizers left {left_finalizers}, "
            f"checkpoint records left {pn.checkpoint_records()}",
            "0 left",
            not left_shadows and not left_finalizers and pn.checkpoint_records() == 0,
        )
        rate = len(shadows) / gone_s if gone_s else 0.0
        report.figure(
            f"release rate of the simulated nodes' shadows, from the first Pod deletion until the last shadow is gone "
            f"({len(shadows)} in {gone_s:.1f} s)",
            f"{rate:.0f} shadows/s",
            f">= {GOAL_RELEASE_PER_S:.0f}/s",
            rate >= GOAL_RELEASE_PER_S,
        )
        child.stop()
        pn.kubelet.close()
        for node in [sim, *sims]:
            node.stop()


def main(argv: Sequence[str] | None = None) -> int:
    sizes = parse(sys.argv[1:] if argv is None else argv)
    print(
        f"scale: {sizes.pods} Pods x {sizes.vfs_per_pod} managed VFs = {sizes.pods * sizes.vfs_per_pod} shadows; "
        f"{sizes.prepared_pods} Pods ({sizes.prepared_claims} claims) prepared by the real plugin on its node, "
        f"{sizes.bulk_pods} created as the plugin creates them on {sizes.bulk_nodes} simulated nodes; "
        f"estimated {sizes.estimate_s() / 60:.0f} min on two shared cores",
        flush=True,
    )
    report = Report()
    image_env.compile_like_the_image(
        image_env.python_env()
    )  # the plugin and guard run as the image runs them
    with tempfile.TemporaryDirectory(prefix="scale-", dir="/tmp") as tmp:  # short: unix socket paths
        try:
            bench(sizes, Path(tmp), report)
        except binaries.BinaryMissing as exc:
            print(f"not measured: the control plane binaries are missing ({exc})")
            return 0
    print(
        f"summary: {report.passes} PASS, {len(report.misses)} MISS"
        + (f" ({'; '.join(report.misses)})" if report.misses else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
