"""Smoke tests proving the control plane parts are real.

The controller-manager's resourceclaim controller turns a ResourceClaimTemplate into a claim, the
real scheduler's DynamicResources plugin allocates devices from hand-written ResourceSlices
(including a ``matchAttribute`` on ``resource.kubernetes.io/pcieRoot``), and the garbage collector
deletes dependents of a deleted owner while finalizers hold objects back.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from tests import waiting

from sriov_dra_lab.nodes import SimulatedNode

T = TypeVar("T")
DRIVER = "smoke.sriov-dra.test"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"


def eventually(what: str, fn: Callable[[], T | None], timeout_s: float = 60.0) -> T:
    """Poll ``fn`` every 0.25 s until truthy; fail naming ``what`` after ``timeout_s``."""
    return waiting.eventually(what, fn, timeout_s=timeout_s, interval_s=0.25)


@pytest.fixture
def node(api: client.ApiClient) -> Iterator[SimulatedNode]:
    n = SimulatedNode(api, f"smoke-{uuid.uuid4().hex[:6]}", interval_s=5.0).start()
    try:
        yield n
    finally:
        n.stop(delete=True)


def device(name: str, kind: str, root: str) -> dict[str, Any]:
    return {"name": name, "attributes": {"kind": {"string": kind}, PCIE_ROOT: {"string": root}}}


def publish_slice(api: client.ApiClient, node: str, devices: list[dict[str, Any]]) -> str:
    name = f"{node}-{DRIVER}"
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }
    client.ResourceV1Api(api).create_resource_slice(body)
    return name


@pytest.fixture
def device_classes(api: client.ApiClient) -> Iterator[tuple[str, str]]:
    res = client.ResourceV1Api(api)
    suffix = uuid.uuid4().hex[:6]
    names = (f"smoke-gpu-{suffix}", f"smoke-nic-{suffix}")
    for cls_name, kind in zip(names, ("gpu", "nic"), strict=True):
        expr = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].kind == '{kind}'"
        res.create_device_class(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": cls_name},
                "spec": {"selectors": [{"cel": {"expression": expr}}]},
            }
        )
    try:
        yield names
    finally:
        for cls_name in names:
            res.delete_device_class(cls_name)


@pytest.fixture
def slices(api: client.ApiClient) -> Iterator[list[str]]:
    created: list[str] = []
    yield created
    for name in created:
        try:
            client.ResourceV1Api(api).delete_resource_slice(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def pod_with_template(api: client.ApiClient, ns: str, node_name: str, template: str) -> str:
    name = "consumer"
    client.CoreV1Api(api).create_namespaced_pod(
        ns,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node_name},
                "resourceClaims": [{"name": "devs", "resourceClaimTemplateName": template}],
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.invalid/none",
                        "resources": {"claims": [{"name": "devs"}]},
                    }
                ],
                "terminationGracePeriodSeconds": 0,
            },
        },
    )
    return name


def create_template(
    api: client.ApiClient,
    ns: str,
    requests: list[dict[str, Any]],
    constraints: list[dict[str, Any]] | None = None,
) -> str:
    spec: dict[str, Any] = {"requests": requests}
    if constraints:
        spec["constraints"] = constraints
    client.ResourceV1Api(api).create_namespaced_resource_claim_template(
        ns,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "pair"},
            "spec": {"spec": {"devices": spec}},
        },
    )
    return "pair"


def generated_claim(api: client.ApiClient, ns: str, pod: str) -> dict[str, Any] | None:
    p = client.CoreV1Api(api).read_namespaced_pod(pod, ns)
    statuses = (p.status.resource_claim_statuses or []) if p.status else []
    if not statuses or not statuses[0].resource_claim_name:
        return None
    claim = client.ResourceV1Api(api).read_namespaced_resource_claim(statuses[0].resource_claim_name, ns)
    result: dict[str, Any] = api.sanitize_for_serialization(claim)
    return result


def exact(cls: str, name: str) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, "count": 1}}


def test_template_claim_is_created_allocated_and_pod_bound(api, namespace, node, device_classes, slices):
    gpu_cls, _ = device_classes
    slices.append(publish_slice(api, node.name, [device("gpu-0", "gpu", "pci0000:00")]))
    node.labels["kubernetes.io/hostname"] = node.name
    client.CoreV1Api(api).patch_node(
        node.name, {"metadata": {"labels": {"kubernetes.io/hostname": node.name}}}
    )
    template = create_template(api, namespace, [exact(gpu_cls, "gpu")])
    pod = pod_with_template(api, namespace, node.name, template)

    claim = eventually(
        "the resourceclaim controller to create the claim", lambda: generated_claim(api, namespace, pod)
    )
    allocated = eventually(
        "the scheduler to allocate the claim",
        lambda: (c := generated_claim(api, namespace, pod)) and c["status"].get("allocation") and c,
    )
    results = allocated["status"]["allocation"]["devices"]["results"]
    assert [(r["driver"], r["pool"], r["device"]) for r in results] == [(DRIVER, node.name, "gpu-0")]
    assert allocated["status"]["reservedFor"][0]["name"] == pod
    assert claim["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    bound = eventually(
        "the scheduler to bind the Pod",
        lambda: client.CoreV1Api(api).read_namespaced_pod(pod, namespace).spec.node_name,
    )
    assert bound == node.name


def gpu_nic_pair_pod(api, namespace: str, node, device_classes) -> str:
    """Create a Pod on ``node`` whose claim template asks one GPU and one NIC with the same PCIe root.

    Labels the Node with its hostname first (the Pod's nodeSelector); returns the Pod's name.
    """
    gpu_cls, nic_cls = device_classes
    client.CoreV1Api(api).patch_node(
        node.name, {"metadata": {"labels": {"kubernetes.io/hostname": node.name}}}
    )
    template = create_template(
        api,
        namespace,
        [exact(gpu_cls, "gpu"), exact(nic_cls, "nic")],
        [{"requests": ["gpu", "nic"], "matchAttribute": PCIE_ROOT}],
    )
    return pod_with_template(api, namespace, node.name, template)


def test_pcie_root_match_attribute_allocates_a_pair_on_one_root(api, namespace, node, device_classes, slices):
    # GPUs on two roots, the only NIC on the second: the constraint forces gpu-1 (root 80).
    slices.append(
        publish_slice(
            api,
            node.name,
            [
                device("gpu-0", "gpu", "pci0000:00"),
                device("gpu-1", "gpu", "pci0000:80"),
                device("nic-1", "nic", "pci0000:80"),
            ],
        )
    )
    pod = gpu_nic_pair_pod(api, namespace, node, device_classes)
    allocated = eventually(
        "the scheduler to allocate the pair",
        lambda: (c := generated_claim(api, namespace, pod)) and c["status"].get("allocation") and c,
    )
    by_request = {r["request"]: r["device"] for r in allocated["status"]["allocation"]["devices"]["results"]}
    assert by_request == {"gpu": "gpu-1", "nic": "nic-1"}


def test_pcie_root_match_attribute_without_a_pair_leaves_pod_unschedulable(
    api, namespace, node, device_classes, slices
):
    slices.append(
        publish_slice(
            api, node.name, [device("gpu-0", "gpu", "pci0000:00"), device("nic-1", "nic", "pci0000:80")]
        )
    )
    pod = gpu_nic_pair_pod(api, namespace, node, device_classes)

    def unschedulable() -> str | None:
        p = client.CoreV1Api(api).read_namespaced_pod(pod, namespace)
        for cond in (p.status.conditions or []) if p.status else []:
            if cond.type == "PodScheduled" and cond.status == "False" and cond.reason == "Unschedulable":
                return cond.message or "unschedulable"
        return None

    message = eventually("the scheduler to report the Pod unschedulable", unschedulable)
    assert "claim" in message.lower() or "resource" in message.lower(), message
    claim = generated_claim(api, namespace, pod)
    assert claim is not None and not claim["status"].get("allocation")
    assert client.CoreV1Api(api).read_namespaced_pod(pod, namespace).spec.node_name is None


def test_garbage_collector_deletes_dependent_of_deleted_owner(api, namespace):
    core = client.CoreV1Api(api)
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    core.delete_namespaced_config_map("owner", namespace)
    core.create_namespaced_config_map(
        namespace,
        {
            "metadata": {
                "name": "dependent",
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "owner",
                        "uid": owner.metadata.uid,
                        "blockOwnerDeletion": False,
                    }
                ],
            }
        },
    )

    def gone() -> bool:
        try:
            core.read_namespaced_config_map("dependent", namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    eventually("the garbage collector to delete the dependent", gone)


def test_finalizer_holds_object_until_removed(api, namespace):
    core = client.CoreV1Api(api)
    fin = "smoke.sriov-dra.test/hold"
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "held", "finalizers": [fin]}})
    core.delete_namespaced_config_map("held", namespace)
    held = core.read_namespaced_config_map("held", namespace)
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.finalizers == [fin]
    time.sleep(1.0)  # deliberately give the GC a chance to (wrongly) remove it
    assert core.read_namespaced_config_map("held", namespace).metadata.finalizers == [fin]
    core.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}})

    def gone() -> bool:
        try:
            core.read_namespaced_config_map("held", namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    eventually("the object to disappear once its finalizer is removed", gone, timeout_s=20)
