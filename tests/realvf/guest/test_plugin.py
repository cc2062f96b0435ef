"""The plugin on real VFs: NodePrepare/NodeUnprepare over its real gRPC socket, the API server on the host.

The plugin process, the kubelet's client and the workloads are :mod:`tests.realvf.guest.kubeplugin`'s
(one plugin process per guest session). Each test creates its own namespace, template NAD,
ResourceClaim of one VF under each of the two PCIe roots, and Pod.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from tests.realvf import kubeapi
from tests.realvf.guest import kubeplugin, realvfs

from sriov_dra.core import binding_annotation, registry
from sriov_dra.kubeletapi import messages
from sriov_dra_lab.fakes import net_edit
from sriov_dra_rules import names


@pytest.fixture
def workload(
    api: client.ApiClient, plugin: kubeplugin.Plugin, tmp_path: Path
) -> Iterator[kubeplugin.Workload]:
    """A Pod with a claim of one VF under each of the two PCIe roots (see :func:`kubeplugin.workload`)."""
    yield from kubeplugin.workload(api, plugin, sorted(realvfs.ROOTS), tmp_path / "host-local")


def test_node_prepare_over_the_grpc_socket_creates_a_shadow_per_real_vf_and_the_pods_selections(
    api: client.ApiClient, plugin: kubeplugin.Plugin, workload: kubeplugin.Workload
) -> None:
    out = plugin.prepare(workload.ref)
    assert isinstance(out, messages.Prepared), out
    assert sorted(d.request_names[0] for d in out.devices) == ["nic-0", "nic-1"]
    assert {d.pool_name for d in out.devices} == {kubeapi.NODE_NAME}
    shadows = kubeplugin.shadows(api, workload.namespace)
    vfs = kubeplugin.shadow_vfs(shadows)
    assert len(shadows) == 2, shadows
    roots = sorted(realvfs.raw_vf(bdf).pcie_root for bdf in vfs.values())
    assert roots == sorted(realvfs.ROOTS), f"one real VF under each PCIe root: {vfs}"
    pod = client.CoreV1Api(api).read_namespaced_pod(workload.pod, workload.namespace)
    for obj in shadows:
        meta = obj["metadata"]
        assert [(o["kind"], o["uid"]) for o in meta["ownerReferences"]] == [("Pod", pod.metadata.uid)]
        assert meta["finalizers"] == [names.FINALIZER_ATTACHMENT_PROTECTION]
        binding = binding_annotation.decode_binding(meta["annotations"][names.BINDING_ANNOTATION])
        config = json.loads(obj["spec"]["config"])
        assert (binding.source.name, config["type"], config["deviceID"]) == (
            kubeapi.SOURCE_NAD,
            "sriov",
            binding.pci_address,
        )
    ann = kubeplugin.annotations(api, workload)
    selections = json.loads(ann[names.NETWORKS_ANNOTATION])
    assert sorted(s["interface"] for s in selections) == ["dra0", "dra1"]
    assert {s["name"] for s in selections} == set(vfs)
    reg = registry.decode_registry(ann[names.MANAGED_NETWORKS_ANNOTATION])
    assert {e.uid for e in reg.entries} == {o["metadata"]["uid"] for o in shadows}
    assert plugin.unprepare(workload.ref) is None


def test_a_retried_node_prepare_of_a_real_vf_whose_netdev_is_in_the_pods_netns_succeeds(
    api: client.ApiClient, plugin: kubeplugin.Plugin, workload: kubeplugin.Workload
) -> None:
    first = plugin.prepare(workload.ref)
    assert isinstance(first, messages.Prepared), first
    shadows = kubeplugin.shadows(api, workload.namespace)
    bdf = sorted(kubeplugin.shadow_vfs(shadows).values())[0]
    (name,) = realvfs.raw_vf(bdf).net or ("",)
    pod_ns = f"realvf-{uuid.uuid4().hex[:8]}"
    path = net_edit.create_netns(pod_ns)
    try:
        net_edit.move_link(name, target_netns=path, new_name="net1")  # what the CNI ADD does
        assert realvfs.raw_vf(bdf).net == (), "the kernel shows an empty net/ for a VF in another netns"
        again = plugin.prepare(workload.ref)  # the kubelet retries NodePrepare (e.g. after a restart)
        assert again == first
        assert [o["metadata"]["resourceVersion"] for o in kubeplugin.shadows(api, workload.namespace)] == [
            o["metadata"]["resourceVersion"] for o in shadows
        ]
        net_edit.move_link("net1", target_netns=None, new_name=name, netns_path=path)  # the CNI DEL
    finally:
        net_edit.remove_netns(pod_ns)
    realvfs.wait_until(f"{name} back in the host namespace", lambda: realvfs.raw_vf(bdf).net == (name,))
    assert plugin.unprepare(workload.ref) is None


def test_node_unprepare_restores_the_real_vfs_and_leaves_no_shadow_selection_checkpoint_or_cdi_file(
    api: client.ApiClient,
    plugin: kubeplugin.Plugin,
    workload: kubeplugin.Workload,
    all_vfs: list[realvfs.RawVf],
) -> None:
    before = {vf.bdf: (vf.driver, vf.net) for vf in all_vfs}
    assert isinstance(plugin.prepare(workload.ref), messages.Prepared)
    used = set(kubeplugin.shadow_vfs(kubeplugin.shadows(api, workload.namespace)).values())
    assert workload.ref.uid in plugin.claim_records()
    assert any(workload.ref.uid in p.read_text() for p in plugin.cdi_root.glob("*.json"))

    assert plugin.unprepare(workload.ref) is None
    assert {bdf: (realvfs.raw_vf(bdf).driver, realvfs.raw_vf(bdf).net) for bdf in used} == {
        bdf: before[bdf] for bdf in used
    }, "each VF back on its driver with its netdev under its name"
    kubeplugin.eventually("the shadows deleted", lambda: kubeplugin.shadows(api, workload.namespace) == [])
    ann = kubeplugin.annotations(api, workload)
    assert names.NETWORKS_ANNOTATION not in ann and names.MANAGED_NETWORKS_ANNOTATION not in ann, ann
    assert workload.ref.uid not in plugin.claim_records()
    assert not [p for p in plugin.cdi_root.glob("*.json") if workload.ref.uid in p.read_text()]
    assert plugin.unprepare(workload.ref) is None, "a repeated NodeUnprepare is a no-op"
