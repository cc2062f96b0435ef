"""Benchmark: discovery + first ResourceSlice publication for 2 PFs × 128 VFs, and idle-resync writes.

Two measurements on the lab's two-root fake sysfs (``fake_sysfs.two_root_pfs(128)``, 256 VFs) with
one all-devices SriovResourcePolicy (``configs: [{}]``), so every VF is advertised and the pool
splits into four slices of 64 (the cap of a slice whose devices may carry taints):

* **pure plan** (always): discovery, policy evaluation, published devices and
  ``slices.plan_writes`` from an empty pool, best of ``repeats``; then the idle plan against the
  slices it produced (must be empty: 0 writes);
* **against a real control plane** (when the pinned kube-apiserver/etcd binaries are built, see
  ``sriov_dra_lab.binaries``): a control plane is started with ``sriov_dra_lab.control_plane.running``,
  the CRDs, a namespace, the policy and a simulated Ready node are created, and the time from
  ``Publisher.start()`` (which runs discovery) to the first publication of all 256 devices is
  measured; then ``resyncs`` idle syncs are run and the API writes they performed are counted
  from the publisher's counter and cross-checked with the slices' resourceVersions (must be 0).

Without the binaries only the pure plan is measured, and the output says so. Absolute times depend
on the machine; starting the control plane itself (tens of seconds) is not part of any number.

Run as a script: ``.venv/bin/python bench/plugin.py``.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import yaml
from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.benchkit import timing
from tests.fakes import slice_view

from sriov_dra.core import policies
from sriov_dra.core.plugin import slices
from sriov_dra.driver import publisher
from sriov_dra.host import discovery
from sriov_dra.kube import apply, resource_slices
from sriov_dra_lab import binaries, control_plane
from sriov_dra_lab.fakes import fake_pci, fake_sysfs
from sriov_dra_lab.nodes import SimulatedNode
from sriov_dra_rules import names

VFS_PER_PF: Final = 128
NAMESPACE: Final = "dra-driver-sriov"
ALL_DEVICES: Final = {"metadata": {"name": "all"}, "spec": {"configs": [{}]}}
MANIFESTS: Final = Path(publisher.__file__).resolve().parents[1] / "manifests" / "crds"


@dataclass(frozen=True)
class PlanBench:
    """Pure plan. Units: seconds; ``idle_writes`` is a count."""

    devices: int
    slices: int
    discovery_s: float
    plan_s: float
    idle_writes: int


@dataclass(frozen=True)
class ClusterBench:
    """Against a control plane. Units: seconds; counts are API writes."""

    devices: int
    slices: int
    first_publication_s: float
    first_publication_writes: int
    resyncs: int
    idle_writes: int
    idle_resource_versions_changed: int


def bench_plan(root: Path, *, repeats: int = 5) -> PlanBench:
    """Discovery and the pure publication plan on the tree at ``root`` (see the module docstring)."""
    fake = fake_sysfs.build(root, fake_pci.two_root_pfs(VFS_PER_PF))
    found = discovery.discover(fake.sysfs)
    facts = [vf.to_device_facts() for vf in found]

    def plan() -> slices.SliceWrites:
        evaluation = policies.evaluate_policies(facts, [ALL_DEVICES], [], node_labels={}, managed=False)
        devices = slices.published_devices(facts, evaluation)
        return slices.plan_writes([], devices, driver=names.DRIVER_NAME, node="bench", node_uid="u")

    first = plan()
    server = [
        {**body, "metadata": {**body["metadata"], "uid": f"u{i}", "resourceVersion": str(i + 1)}}
        for i, body in enumerate(first.creates)
    ]
    evaluation = policies.evaluate_policies(facts, [ALL_DEVICES], [], node_labels={}, managed=False)
    idle = slices.plan_writes(
        server,
        slices.published_devices(facts, evaluation),
        driver=names.DRIVER_NAME,
        node="bench",
        node_uid="u",
    )
    return PlanBench(
        devices=len(slice_view.pool_devices(server)),
        slices=len(first.creates),
        discovery_s=timing.best_per_call(lambda: discovery.discover(fake.sysfs), repeats=repeats),
        plan_s=timing.best_per_call(plan, repeats=repeats),
        idle_writes=idle.count,
    )


def bench_cluster(root: Path, *, resyncs: int = 10) -> ClusterBench:
    """First publication and idle resyncs against a fresh control plane (see the module docstring).

    Raises: ``binaries.BinaryMissing`` when the control plane binaries are not built.
    """
    fake = fake_sysfs.build(root, fake_pci.two_root_pfs(VFS_PER_PF))
    with control_plane.running() as cp, cp.api() as api:
        crds = [yaml.safe_load(p.read_text()) for p in sorted(MANIFESTS.glob(f"{names.DOMAIN}_*.yaml"))]
        apply.apply_objects(api, crds)
        apply.wait_crds_established(api, [c["metadata"]["name"] for c in crds])
        client.CoreV1Api(api).create_namespace({"metadata": {"name": NAMESPACE}})
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            names.DOMAIN,
            "v1alpha1",
            NAMESPACE,
            "sriovresourcepolicies",
            {"apiVersion": f"{names.DOMAIN}/v1alpha1", "kind": "SriovResourcePolicy", **ALL_DEVICES},
        )
        node = SimulatedNode(api, f"bench-{uuid.uuid4().hex[:6]}").start()
        pub = publisher.Publisher(
            api=api,
            node_name=node.name,
            sysfs=fake.sysfs,
            policy_namespace=NAMESPACE,
            stop=threading.Event(),
            settle_s=0.0,
            resync_s=3600.0,
        )
        try:
            start = time.perf_counter()
            pub.start()
            if not pub.wait_published(120):
                raise TimeoutError("the publisher did not publish within 120 s")
            first_s = time.perf_counter() - start
            first_writes = pub.stats().writes
            before = resource_slices.list_slices(api, driver=names.DRIVER_NAME, node=node.name)
            for _ in range(resyncs):
                pub.sync()
            after = resource_slices.list_slices(api, driver=names.DRIVER_NAME, node=node.name)
            versions = {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in before}
            changed = sum(
                versions.get(s["metadata"]["name"]) != s["metadata"]["resourceVersion"] for s in after
            )
            return ClusterBench(
                devices=len(slice_view.pool_devices(after)),
                slices=len(after),
                first_publication_s=first_s,
                first_publication_writes=first_writes,
                resyncs=resyncs,
                idle_writes=pub.stats().writes - first_writes,
                idle_resource_versions_changed=changed,
            )
        finally:
            pub.close()
            node.stop()


def main() -> None:
    """Print the pure plan numbers, then the control-plane numbers (or why they were skipped)."""
    with tempfile.TemporaryDirectory(prefix="sriov-dra-bench-") as tmp:
        plan = bench_plan(Path(tmp) / "plan")
        print(
            f"pure plan, 2 PFs x {VFS_PER_PF} VFs: discovery {plan.discovery_s * 1e3:.1f} ms, "
            f"evaluate + layout + plan {plan.plan_s * 1e3:.1f} ms for {plan.devices} devices in "
            f"{plan.slices} slices; idle plan writes: {plan.idle_writes} (must be 0)"
        )
        try:
            cluster = bench_cluster(Path(tmp) / "cluster")
        except binaries.BinaryMissing as exc:
            print(f"control plane not measured (binaries missing: {exc}); measured the pure plan only")
            return
        print(
            f"real apiserver: start() to first publication of {cluster.devices} devices in "
            f"{cluster.slices} slices {cluster.first_publication_s * 1e3:.0f} ms "
            f"({cluster.first_publication_writes} writes); {cluster.resyncs} idle resyncs: "
            f"{cluster.idle_writes} API writes, {cluster.idle_resource_versions_changed} slices changed "
            "(both must be 0)"
        )


if __name__ == "__main__":
    main()
