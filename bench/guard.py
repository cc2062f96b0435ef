"""Benchmark: what the guard adds to a CNI ADD, and how fast its shim starts.

``bench_add()`` starts a real control plane and one lab node's CNI stack
(``sriov_dra_lab.cni_node``: Multus v4.3.0 thin and thick, the guard daemon, host-local, the lab
sriov plugin on veth lab VFs), creates a Pod with **2 managed interfaces** exactly as the plugin
would, and then, interleaved in the same run, times the runtime's ADD through the guard
(shim → daemon: live Pod and shadow GETs, checks → Multus → netns and network-status check) and the
same ADD with stock Multus alone (the config Multus would have without the guard). Each ADD gets
a fresh sandbox and is undone with DEL (not timed). The result is the ratio of the best times per
mode; the goal is at most :data:`GOAL_RATIO`.

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

from sriov_dra.core import binding_annotation, identities, registry, render
from sriov_dra.core.plugin import shadow_object
from sriov_dra.guard import install
from sriov_dra_lab import binaries, cni_node, control_plane, netns
from sriov_dra_rules import names

GOAL_RATIO: Final = 1.2
"""Guard + Multus may take at most this many times Multus alone for an ADD with 2 managed interfaces."""
ITERATIONS: Final = 12
NAMESPACE: Final = "bench"
RAILS: Final = (("rail-a", "0000:03:00.1", "192.0.2.0/24"), ("rail-b", "0000:80:00.1", "198.51.100.0/24"))


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
        source = custom.create_namespaced_custom_object(
            "k8s.cni.cncf.io",
            "v1",
            NAMESPACE,
            "network-attachment-definitions",
            {
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": f"{cni_name}-net"},
                "spec": {"config": json.dumps(config)},
            },
        )
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


def _timed_add(node: cni_node.CniNode, mode: str, uid: str, *, guarded: bool) -> float:
    with netns.sandbox("bench") as sandbox:
        att = node.attachment(
            sandbox, namespace=NAMESPACE, name="trainer", uid=uid, container_id=uuid.uuid4().hex
        )
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
    """Return ``{mode: best(guard + Multus) / best(Multus alone)}`` measured now, interleaved.

    Units: a dimensionless ratio of the lowest ADD wall time of each variant (the least disturbed
    run; the same rule as the other benchmarks), over ``iterations`` interleaved pairs.
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
                _, uid = _managed_pod(node, api)
            ratios = {}
            for mode in cni_node.MODES:
                _timed_add(node, mode, uid, guarded=True)  # warm-up: caches, informers, first connections
                _timed_add(node, mode, uid, guarded=False)
                guarded, alone = [], []
                for _ in range(iterations):
                    guarded.append(_timed_add(node, mode, uid, guarded=True))
                    alone.append(_timed_add(node, mode, uid, guarded=False))
                ratios[mode] = min(guarded) / min(alone)
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
        for mode, ratio in results.items():
            verdict = "meets" if ratio <= GOAL_RATIO else "MISSES"
            print(
                f"ADD with 2 managed interfaces, {mode}: guard+Multus / Multus alone: {ratio:.2f}x "
                f"({verdict} goal <= {GOAL_RATIO}x)"
            )


if __name__ == "__main__":
    main()
