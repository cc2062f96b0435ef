"""The completion criteria (docs/design.md#completion) on the gpu-nic-pairs example, applied unchanged.

The lab's nodes are the two-root fixture of the gpu-nic-pairs example: two full (synthetic) GPUs on
``pci0000:00`` and ``pci0000:80`` and one rail PF under each root, so the GPU/NIC example must
use both rails. Asserted: two distinct GPUs and two distinct VFs allocated, each pair on an equal
pcieRoot; exactly two shadows (GPU results make none) owned by the Pod with the protection
finalizer and no resourceName key; each VF's address in its own rail's subnet on ``dra0``/``dra1``,
and in the claim's ``status.devices[].networkData`` with its MAC; each request's device metadata
file, read inside the container (``kubectl exec cat``), lists its VF with the claim's
``networkData`` and the VF's published attributes, pairs the VF with the GPU of its constraint on
an equal pcieRoot, and the container's ``NCCL_IB_HCA``/``NCCL_SOCKET_IFNAME`` name exactly the
allocated VFs' RDMA devices and interfaces;
no networks annotation or resourceName in the workload YAML and only generated selections on the
Pod; source NADs unchanged; zero ResourceClaim/ResourceSlice requests by Multus in the API
server's audit log; nothing left after deletion.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest
from tests.e2e.helpers import PAIRS, wait_clean

from sriov_dra.cli import inspect, inspect_rows, inspect_table
from sriov_dra.core import metadata_document
from sriov_dra.kube import objects
from sriov_dra_lab import demo, pod_metadata, workloads
from sriov_dra_rules import names

RAILS = {"rail-a-net": "192.0.2.0/24", "rail-b-net": "198.51.100.0/24"}
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"


@pytest.fixture
def pairs(lab: Any, rails: Any) -> Any:
    """The gpu-nic-pairs file applied unchanged; its Pod, NADs and namespace objects removed afterwards."""
    docs = workloads.load(PAIRS)
    workloads.apply_docs(lab.api, docs)
    yield docs
    workloads.delete_docs(lab.api, [d for d in docs if d["kind"] in ("Pod", "NetworkAttachmentDefinition")])


def _slice_attrs(client: objects.Objects, result: dict[str, Any]) -> dict[str, Any]:
    """The published attributes of an allocated device, as its ResourceSlice holds them."""
    for item in client.list(inspect_rows.SLICE).items:
        spec = item["spec"]
        if spec["driver"] == result["driver"] and spec["pool"]["name"] == result["pool"]:
            for device in spec.get("devices") or []:
                if device["name"] == result["device"]:
                    return dict(device.get("attributes") or {})
    return {}


def _slice_attr(client: objects.Objects, result: dict[str, Any], key: str) -> Any:
    value = _slice_attrs(client, result).get(key)
    return next(iter(value.values())) if value else None


def _metadata_and_nccl_env(lab: Any, client: objects.Objects, pod: dict[str, Any]) -> None:
    """The device metadata files and the NCCL variables as the container sees them."""
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    [claim] = workloads.claims_of(lab.api, pod)
    results = {r["request"]: r for r in claim["status"]["allocation"]["devices"]["results"]}
    claim_data = {
        (d["pool"], d["device"]): d.get("networkData")
        for d in claim["status"]["devices"]
        if d["driver"] == names.DRIVER_NAME
    }
    paths = pod_metadata.container_paths(claim)
    assert sorted(paths) == ["nic-0", "nic-1"], paths
    rdma, interfaces = [], []
    for nic, gpu in (("nic-0", "gpu-0"), ("nic-1", "gpu-1")):
        text = pod_metadata.exec_cat(str(lab.cp.kubeconfig), namespace, name, paths[nic])
        assert text, f"{paths[nic]} is readable inside the container"
        doc = metadata_document.decode(text.encode(), source=paths[nic])
        assert doc["metadata"]["uid"] == claim["metadata"]["uid"]  # type: ignore[index]
        [request] = doc["requests"]  # type: ignore[misc]
        assert request["name"] == nic
        [device] = request["devices"]
        vf, paired = results[nic], results[gpu]
        assert (device["driver"], device["pool"], device["name"]) == (vf["driver"], vf["pool"], vf["device"])
        assert device["networkData"] == claim_data[(vf["pool"], vf["device"])], "the claim's networkData"
        published = _slice_attrs(client, vf)
        assert published and {k: device["attributes"].get(k) for k in published} == published, (
            "the VF's published attributes"
        )
        attrs = device["attributes"]
        assert attrs[f"{names.DRIVER_NAME}/pairedGpu"] == {
            "string": f"{paired['driver']}/{paired['pool']}/{paired['device']}"
        }, f"{nic} is paired with {gpu}"
        assert attrs[f"{names.DRIVER_NAME}/pairedBy"] == {"string": PCIE_ROOT}
        assert _slice_attr(client, paired, PCIE_ROOT) == attrs[PCIE_ROOT]["string"], (
            "the GPU on the VF's root"
        )
        rdma.append(attrs[f"{names.DRIVER_NAME}/rdmaDevice"]["string"])
        interfaces.append(device["networkData"]["interfaceName"])
    env_text = pod_metadata.exec_env(str(lab.cp.kubeconfig), namespace, name)
    env = dict(line.split("=", 1) for line in env_text.splitlines() if "=" in line)
    assert env.get("NCCL_IB_HCA") == "=" + ",".join(rdma), "exactly the allocated VFs' RDMA devices"
    assert env.get("NCCL_SOCKET_IFNAME") == "=" + ",".join(interfaces) == "=dra0,dra1"


def test_gpu_nic_pairs_meet_the_completion_criteria(lab: Any, pairs: list[dict[str, Any]]) -> None:
    client = objects.Objects(lab.api, field_manager="e2e")
    workload_text = json.dumps(
        [d for d in pairs if d["kind"] in ("DeviceClass", "ResourceClaimTemplate", "Pod")]
    )
    assert names.NETWORKS_ANNOTATION not in workload_text and "resourceName" not in workload_text
    sources = {n: client.get(objects.NAD, n, "ai-workloads") for n in RAILS}
    audit_before = demo.multus_dra_reads(lab.cp.audit_log)

    pod = workloads.wait_running(lab.api, "ai-workloads", "gpu-sriov-pairs-demo", timeout_s=180)
    node = lab.node(pod["spec"]["nodeName"])
    [claim] = workloads.claims_of(lab.api, pod)
    results = {r["request"]: r for r in claim["status"]["allocation"]["devices"]["results"]}
    assert sorted(results) == ["gpu-0", "gpu-1", "nic-0", "nic-1"]
    gpus = {(results[g]["pool"], results[g]["device"]) for g in ("gpu-0", "gpu-1")}
    vfs = {(results[n]["pool"], results[n]["device"]) for n in ("nic-0", "nic-1")}
    assert len(gpus) == 2 and len(vfs) == 2, "two distinct full GPUs and two distinct VFs"
    assert {results[g]["driver"] for g in ("gpu-0", "gpu-1")} == {"gpu.nvidia.com"}
    for gpu, nic in (("gpu-0", "nic-0"), ("gpu-1", "nic-1")):
        root = _slice_attr(client, results[gpu], PCIE_ROOT)
        assert root and root == _slice_attr(client, results[nic], PCIE_ROOT), f"{gpu}/{nic} share a pcieRoot"

    shadows = client.list(
        objects.NAD, "ai-workloads", label_selector=f"{names.LABEL_POD_UID}={pod['metadata']['uid']}"
    )
    assert len(shadows.items) == 2, "one shadow per VF, none for GPU results"
    for shadow in shadows.items:
        meta = shadow["metadata"]
        [owner] = meta["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["blockOwnerDeletion"]) == (
            "Pod",
            pod["metadata"]["uid"],
            False,
        )
        assert names.FINALIZER_ATTACHMENT_PROTECTION in meta["finalizers"]
        assert names.RESOURCE_NAME_ANNOTATION not in (meta.get("annotations") or {})

    selections = json.loads(pod["metadata"]["annotations"][names.NETWORKS_ANNOTATION])
    assert sorted(s["name"] for s in selections) == sorted(s["metadata"]["name"] for s in shadows.items)
    assert all(set(s) == {"name", "namespace", "interface"} for s in selections)

    netns = lab.pod_netns(pod)
    assert netns is not None, f"the Pod has no ready sandbox on {node.name}"
    rows = inspect_rows.inspect_pod(
        client, "ai-workloads", "gpu-sriov-pairs-demo", netns=netns, read_netns=inspect.read_netns
    )
    assert [r.interface for r in rows] == ["dra0", "dra1"] and all(r.ok for r in rows), (
        inspect_table.render_table(rows)
    )
    seen = set()
    for row in rows:
        subnet = RAILS[row.source.split("/")[1]]
        [address] = row.ips
        assert ipaddress.ip_interface(address).ip in ipaddress.ip_network(subnet), (
            f"{row.request} on its own rail"
        )
        seen.add(subnet)
    assert seen == set(RAILS.values()), "the two-root fixture uses both rails"

    def network_data() -> dict[str, Any] | None:
        [live] = workloads.claims_of(lab.api, pod)
        found = {
            d["networkData"]["interfaceName"]: d["networkData"]
            for d in live["status"].get("devices") or []
            if d["driver"] == names.DRIVER_NAME and "networkData" in d
        }
        return found if len(found) == 2 else None

    data = workloads.eventually("claim networkData of both VFs", network_data, timeout_s=45)
    assert {i: d["ips"] for i, d in data.items()} == {r.interface: list(r.ips) for r in rows}, (
        "the Pod's addresses"
    )
    assert all(d.get("hardwareAddress") for d in data.values()), "each VF's MAC"
    _metadata_and_nccl_env(lab, client, pod)

    assert {n: client.get(objects.NAD, n, "ai-workloads") for n in RAILS} == sources, "source NADs unchanged"
    assert demo.multus_requests(lab.cp.audit_log) > 0, "Multus ran and was audited"
    assert demo.multus_dra_reads(lab.cp.audit_log) == audit_before == 0, "Multus made no DRA lookups"

    workloads.delete_docs(lab.api, [d for d in pairs if d["kind"] == "Pod"])
    found = wait_clean(lab)
    assert found.empty, found.describe()
    assert {n: client.get(objects.NAD, n, "ai-workloads") for n in RAILS} == sources, "still unchanged"
