"""Benchmark: what the guard adds to a CNI ADD, and how fast its shim starts.

``bench_add()`` starts a real control plane and one lab node's CNI stack
(``sriov_dra_lab.cni_node``: Multus v4.3.0 thin and thick, the guard daemon, host-local, the lab
sriov plugin on veth lab VFs), creates a Pod with **2 managed interfaces** exactly as the plugin
would, and then, interleaved in the same run, times the runtime's ADD through the guard
(shim → daemon: live Pod and shadow GETs, checks → Multus → netns and network-status check) and the
same ADD with stock Multus alone (the config Multus would have without the guard). Each ADD gets
a fresh sandbox and is undone with DEL (not timed). The result is the ratio of the best times per
mode; the goal is at most :data:`GOAL_RATIO`. The same for a Pod selecting one ordinary NAD,
which the shim sends to Multus directly once the plugin's checkpoint (here 64 prepared claims)
shows it has no managed binding; the goal is at most :data:`ORDINARY_GOAL_RATIO`.

``bench_start()`` times the process start of the installed ``multus-guard`` shim against the
pinned ``multus-shim`` (both answering ``VERSION``), as a ratio of the best times.

Ratios, not durations, are reported (absolute times depend on the machine). Run as a script
(``make bench`` or ``.venv/bin/python bench/guard.py``); it needs root and the pinned binaries
(``make setup``) and says so, exiting 0, when either is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Final

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes import checkpoint_records

from sriov_dra.core import binding_annotation, identities, registry, render
from sriov_dra.core.plugin import shadow_object
from sriov_dra.guard import install
from sriov_dra.host import checkpoint
from sriov_dra_lab import binaries, cni_node, control_plane, netns
from sriov_dra_rules import names

GOAL_RATIO: Final = 1.2
"""Guard + Multus may take at most this many times Multus alone for an ADD with 2 managed interfaces."""
ORDINARY_GOAL_RATIO: Final = 3.0
"""An ordinary Pod's ADD through the shim (it reads the checkpoint, then execs Multus) may take at most this
many times Multus alone. Nearly all of it is the shim's Python process start, a fixed tens of milliseconds in
front of Multus's Go binary, which the lab's primary (macvlan and host-local) keeps short; a node's real
primary network makes Multus alone slower and the ratio smaller."""
OTHER_CLAIMS: Final = 63
"""Claims of other Pods in the plugin's checkpoint the shim reads (64 prepared claims in all)."""
ITERATIONS: Final = 12
NAMESPACE: Final = "bench"
RAILS: Final = (("rail-a", "0000:03:00.1", "192.0.2.0/24"), ("rail-b", "0000:80:00.1", "198.51.100.0/24"))


def _create_nad(custom: client.CustomObjectsApi, name: str, config: dict[str, Any]) -> dict[str, Any]:
    """Create NAD ``name`` in :data:`NAMESPACE` with CNI ``config``; return it as the API answered."""
    created: dict[str, Any] = custom.create_namespaced_custom_object(
        "k8s.cni.cncf.io",
        "v1",
        NAMESPACE,
        "network-attachment-definitions",
        {
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": name},
            "spec": {"config": json.dumps(config)},
        },
    )
    return created


def _managed_pod(node: cni_node.CniNode, api: client.ApiClient) -> tuple[str, str]:
    """Create a Pod with one shadow per rail, its selections and registry; return (name, uid)."""
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
    while not any(
        sa.metadata.name == "default" for sa in core.list_namespaced_service_account(NAMESPACE).items
    ):
        time.sleep(0.1)
    pod = core.create_namespaced_pod(
        NAMESPACE,
        {
            "metadata": {"name": "trainer"},
            "spec": {"nodeName": node.settings.node_name, "containers": [{"name": "c", "image": "pause"}]},
        },
    )
    uid = pod.metadata.uid
    assert node.node is not None
    entries = []
    for index, (cni_name, pci, subnet) in enumerate(RAILS):
        config = {
            "cniVersion": "1.0.0",
            "name": cni_name,
            "type": "sriov",
            "ipam": {
                "type": "host-local",
                "dataDir": str(node.host_local_dir),
                "ranges": [[{"subnet": subnet}]],
            },
        }
        source = _create_nad(custom, f"{cni_name}-net", config)
        identity = identities.build_binding_identity(
            node_uid=node.node.uid,
            pod_uid=uid,
            claim_uid=str(uuid.uuid4()),
            pool=node.settings.node_name,
            device=f"vf-{index}",
        )
        rendered = render.render_shadow_config(source, pci)
        meta = source["metadata"]
        binding = binding_annotation.Binding(
            attachment_id=identities.attachment_id(identity),
            pod_uid=identity.pod_uid,
            claim_uid=identity.claim_uid,
            node_name=node.settings.node_name,
            node_uid=identity.node_uid,
            source=binding_annotation.SourceRef(
                meta["namespace"], meta["name"], meta["uid"], meta["resourceVersion"]
            ),
            pci_address=identities.PciAddress(rendered.pci_address),
            interface=f"dra{index}",
            config_sha256=rendered.config_sha256,
        )
        body = shadow_object.build_shadow_nad(
            identity=identity, binding=binding, rendered=rendered, pod_namespace=NAMESPACE, pod_name="trainer"
        )
        created = custom.create_namespaced_custom_object(
            "k8s.cni.cncf.io", "v1", NAMESPACE, "network-attachment-definitions", body
        )
        name = created["metadata"]["name"]
        entries.append(
            registry.RegistryEntry(
                binding.attachment_id, binding.claim_uid, NAMESPACE, name, created["metadata"]["uid"], binding.interface,
                binding.config_sha256,
            )
        )  # fmt: skip
    selections = [{"name": e.name, "namespace": e.namespace, "interface": e.interface} for e in entries]
    annotations = {
        names.NETWORKS_ANNOTATION: json.dumps(selections, separators=(",", ":")),
        names.MANAGED_NETWORKS_ANNOTATION: registry.encode_registry(
            registry.Registry(pod_uid=identities.PodUid(uid), entries=tuple(entries))
        ),
    }
    core.patch_namespaced_pod("trainer", NAMESPACE, {"metadata": {"annotations": annotations}})
    return "trainer", uid


def _record_checkpoint(node: cni_node.CniNode, managed_pod_uid: str) -> None:
    """The plugin's checkpoint the shim reads: the managed Pod's claim and :data:`OTHER_CLAIMS` others."""
    node.plugin_checkpoint.parent.mkdir(parents=True, exist_ok=True)
    store = checkpoint.CheckpointStore(node.plugin_checkpoint)
    store.load()
    try:
        store.set_claim(checkpoint_records.record(str(uuid.uuid4()), managed_pod_uid, indexes=(0, 1)))
        for index in range(OTHER_CLAIMS):
            others = (2 * index % 64, (2 * index + 1) % 64)
            store.set_claim(checkpoint_records.record(str(uuid.uuid4()), str(uuid.uuid4()), indexes=others))
    finally:
        store.close()


def _ordinary_pod(node: cni_node.CniNode, api: client.ApiClient) -> str:
    """Create Pod ``ordinary`` selecting one ordinary macvlan NAD (no managed binding); return its UID."""
    config = {
        "cniVersion": "1.0.0",
        "name": "ordinary",
        "type": "macvlan",
        "master": node.uplink.ifname if node.uplink else "",
        "mode": "bridge",
        "ipam": {
            "type": "host-local",
            "dataDir": str(node.host_local_dir),
            "ranges": [[{"subnet": "203.0.113.0/24"}]],
        },
    }
    _create_nad(client.CustomObjectsApi(api), "ordinary", config)
    pod = client.CoreV1Api(api).create_namespaced_pod(
        NAMESPACE,
        {
            "metadata": {"name": "ordinary", "annotations": {names.NETWORKS_ANNOTATION: "ordinary"}},
            "spec": {"nodeName": node.settings.node_name, "containers": [{"name": "c", "image": "pause"}]},
        },
    )
    return str(pod.metadata.uid)


def _timed_add(node: cni_node.CniNode, mode: str, uid: str, *, guarded: bool, name: str = "trainer") -> float:
    with netns.sandbox("bench") as sandbox:
        att = node.attachment(sandbox, namespace=NAMESPACE, name=name, uid=uid, container_id=uuid.uuid4().hex)
        start = time.perf_counter()
        result = node.run(mode, "ADD", att) if guarded else node.run_multus_alone(mode, "ADD", att)
        elapsed = time.perf_counter() - start
        if not result.ok:
            raise RuntimeError(
                f"{mode} ADD ({'guard' if guarded else 'Multus alone'}) failed: {result.stdout}"
            )
        undo = node.run(mode, "DEL", att) if guarded else node.run_multus_alone(mode, "DEL", att)
        if not undo.ok:
            raise RuntimeError(f"{mode} DEL failed: {undo.stdout}")
    return elapsed


def bench_add(workdir: Path, *, iterations: int = ITERATIONS) -> dict[str, float]:
    """Return ``{"<pod> <mode>": best(guard + Multus) / best(Multus alone)}`` measured now, interleaved.

    For the managed Pod (``managed thin``, ``managed thick``) and the ordinary one (``ordinary
    thin``, ``ordinary thick``), with the plugin's checkpoint holding :data:`OTHER_CLAIMS` more
    claims. Units: a dimensionless ratio of the lowest ADD wall time of each variant (the least
    disturbed run; the same rule as the other benchmarks), over ``iterations`` interleaved pairs.
    """
    with control_plane.running(control_plane.ControlPlaneSettings(workdir=workdir / "cp")) as cp:
        node = cni_node.CniNode(
            cp, workdir / "node", cni_node.CniNodeSettings(node_name="bench-node", record_calls=False)
        )
        node.start()
        vfs = netns.create_vfs([pci for _, pci, _ in RAILS], prefix="bvf")
        node.use_vfs(vfs)
        try:
            with cp.api() as api:
                name, uid = _managed_pod(node, api)
                pods = {"managed": (name, uid), "ordinary": ("ordinary", _ordinary_pod(node, api))}
            _record_checkpoint(node, uid)
            ratios = {}
            for kind, (pod, pod_uid) in pods.items():
                for mode in cni_node.MODES:
                    for guarded in (True, False):  # warm-up: caches, informers, first connections
                        _timed_add(node, mode, pod_uid, guarded=guarded, name=pod)
                    best: dict[bool, list[float]] = {True: [], False: []}
                    for _ in range(iterations):
                        for guarded in (True, False):
                            best[guarded].append(_timed_add(node, mode, pod_uid, guarded=guarded, name=pod))
                    ratios[f"{kind} {mode}"] = min(best[True]) / min(best[False])
            return ratios
        finally:
            netns.delete_vfs(vfs)
            node.stop()


def _start_times(argv: list[str], *, runs: int) -> float:
    env = {"CNI_COMMAND": "VERSION", "PATH": os.environ.get("PATH", "")}
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, input=b'{"cniVersion":"1.0.0"}', env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return min(times)


def bench_start(workdir: Path, *, runs: int = 31) -> float:
    """Return best start of the installed ``multus-guard`` shim / best start of ``multus-shim``."""
    shim_path = install.write_shim(workdir / "bin", interpreter=sys.executable)
    multus_shim = binaries.find("multus-shim")
    _start_times([str(shim_path)], runs=3)
    _start_times([str(multus_shim)], runs=3)
    return _start_times([str(shim_path)], runs=runs) / _start_times([str(multus_shim)], runs=runs)


def main() -> None:
    """Print both ratios and whether the ADD ratio meets :data:`GOAL_RATIO`."""
    if os.geteuid() != 0:
        print("guard benchmark skipped: needs root (network namespaces, veth, the Multus daemon)")
        return
    try:
        for name in ("multus", "multus-shim", "multus-daemon", "kube-apiserver", "etcd"):
            binaries.find(name)
    except binaries.BinaryMissing as exc:
        print(f"guard benchmark skipped: {exc}")
        return
    with tempfile.TemporaryDirectory(prefix="sriov-dra-bench-") as tmp:
        work = Path(tmp)
        start_ratio = bench_start(work)
        print(f"multus-guard shim start / multus-shim start: {start_ratio:.2f}x")
        results: Any = bench_add(work)
        for key, ratio in results.items():
            kind, mode = key.split()
            goal = GOAL_RATIO if kind == "managed" else ORDINARY_GOAL_RATIO
            what = (
                "with 2 managed interfaces" if kind == "managed" else "of an ordinary Pod (one ordinary NAD)"
            )
            print(
                f"ADD {what}, {mode}: guard+Multus / Multus alone: {ratio:.2f}x "
                f"({'meets' if ratio <= goal else 'MISSES'} goal <= {goal}x)"
            )


if __name__ == "__main__":
    main()
