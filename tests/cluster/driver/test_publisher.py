"""Cluster tier: the publisher on a fake-sysfs node publishes ResourceSlices to a real apiserver.

Against kube-apiserver/scheduler v1.36.3: opt-in publication from
SriovResourcePolicy + DeviceAttributes, republication with a bumped generation on a policy or
attribute change and on a node-label change, recreation of a deleted slice, republication when an
advertised membership without attributes is withdrawn (upstream's clearPolicyAttributes defect),
zero writes on idle resyncs, a 130-device pool split into three slices of at most 64 that the real
scheduler allocates from, device taints that the scheduler honours (timeAdded kept, removal in
place) and an actionable error for a missing policy namespace.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from kubernetes import client
from tests import waiting
from tests.fakes import slice_view

from sriov_dra.core.plugin import device_taints, slices
from sriov_dra.driver import policy_controller
from sriov_dra.kube import resource_slices
from sriov_dra_lab.fakes import fake_pci
from sriov_dra_rules import names

T = TypeVar("T")
D = names.DOMAIN
DRIVER = names.DRIVER_NAME


def eventually(what: str, fn: Callable[[], T | None], timeout_s: float = 30.0) -> T:
    """Poll ``fn`` every 0.1 s until truthy; fail naming ``what`` after ``timeout_s``."""
    return waiting.eventually(what, fn, timeout_s=timeout_s, interval_s=0.1)


def create(
    api: client.ApiClient, namespace: str, plural: str, name: str, spec: dict[str, Any], **meta: Any
) -> None:
    kind = "SriovResourcePolicy" if plural == "sriovresourcepolicies" else "DeviceAttributes"
    body = {
        "apiVersion": f"{D}/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, **meta},
        "spec": spec,
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(D, "v1alpha1", namespace, plural, body)


def pool(api: client.ApiClient, node: str) -> list[dict[str, Any]]:
    return resource_slices.list_slices(api, driver=DRIVER, node=node)


def published(
    api: client.ApiClient, node: str, count: int, generation: int | None = None
) -> Callable[[], Any]:
    """A probe: the pool when it publishes ``count`` devices (at ``generation``), else None."""

    def probe() -> list[dict[str, Any]] | None:
        current = pool(api, node)
        gens = {s["spec"]["pool"]["generation"] for s in current}
        if len(gens) != 1 or (generation is not None and gens != {generation}):
            return None
        return current if len(slice_view.pool_devices(current)) == count else None

    return probe


ALL_DEVICES = {"configs": [{}]}


def test_a_vmbus_node_without_numa_affinity_publishes_its_root_bus_and_no_numa_node(
    api, namespace, node, start_publisher
):
    """On the real apiserver: a Hyper-V/VMBus PF whose numa_node is -1."""
    start_publisher(pfs=[fake_pci.vmbus_pf(2, numa_node=-1)])
    create(api, namespace, "sriovresourcepolicies", "all", ALL_DEVICES)
    devices = slice_view.pool_devices(eventually("2 devices", published(api, node.name, 2)))
    assert sorted(devices) == ["0001-00-00-1", "0001-00-00-2"]
    for device in devices.values():
        attrs = device["attributes"]
        assert attrs["resource.kubernetes.io/pcieRoot"] == {"string": "pci0001:00"}
        assert "dra.net/numaNode" not in attrs
        assert "resource.kubernetes.io/numaNode" not in attrs
        assert attrs[f"{D}/pfPciAddress"] == {"string": "0001:00:00.0"}


def test_wait_evaluated_holds_the_policies_eligible_devices_before_the_worker_evaluates(
    api, namespace, node, start_publisher
):
    """A plugin answers no claim from the empty snapshot of a controller whose first lists still run:
    startup waits for them and evaluates once itself (here the worker would wait 30 s to settle)."""
    create(api, namespace, "sriovresourcepolicies", "all", ALL_DEVICES)
    pub = start_publisher(settle_s=30.0)
    assert pub.wait_evaluated(30)
    snapshot = pub.snapshot()
    assert len(snapshot.published) == 8 and snapshot.is_eligible("0000-03-02-0")


def test_publishes_node_slices_only_after_a_policy_opts_devices_in(api, namespace, node, start_publisher):
    pub = start_publisher()
    assert pub.wait_published(30)
    (empty,) = pool(api, node.name)
    assert empty["spec"]["pool"] == {"name": node.name, "generation": 1, "resourceSliceCount": 1}
    assert not empty["spec"].get("devices"), "nothing is advertised without a matching policy"

    create(api, namespace, "sriovresourcepolicies", "all", ALL_DEVICES)
    (full,) = eventually("8 devices at generation 2", published(api, node.name, 8, 2))
    assert full["metadata"]["name"] == slices.slice_name(DRIVER, node.name, 0)
    assert full["spec"]["nodeName"] == node.name and full["spec"]["driver"] == DRIVER
    owner = full["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", node.name, node.uid)
    dev = slice_view.pool_devices([full])["0000-03-02-0"]
    assert dev["attributes"][f"{D}/pciAddress"] == {"string": "0000:03:02.0"}
    assert dev["attributes"]["k8s.cni.cncf.io/deviceID"] == {"string": "0000:03:02.0"}
    assert dev["attributes"]["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:00"}
    assert dev["attributes"][f"{D}/vfID"] == {"int": 0}
    numa = dev["attributes"]["dra.net/numaNode"]
    assert dev["attributes"]["resource.kubernetes.io/numaNode"] == numa and "int" in numa
    assert pub.snapshot().is_eligible("0000-03-02-0") and len(pub.snapshot().inventory) == 8


def test_attribute_change_republishes_with_a_bumped_generation(api, namespace, node, start_publisher):
    create(
        api,
        namespace,
        "deviceattributes",
        "rail-a",
        {"attributes": {"k8s.cni.cncf.io/resourceName": {"string": "example.com/rail_a"}}},
        labels={"rail": "a"},
    )
    rail_a = {
        "resourceFilters": [{"pfNames": ["enp3s0f0"]}],
        "deviceAttributesSelector": {"matchLabels": {"rail": "a"}},
    }
    create(api, namespace, "sriovresourcepolicies", "rail-a", {"configs": [rail_a]})
    pub = start_publisher()
    (first,) = eventually("rail A devices", published(api, node.name, 4))
    generation = first["spec"]["pool"]["generation"]
    attrs = slice_view.pool_devices([first])["0000-03-02-0"]["attributes"]
    assert attrs["k8s.cni.cncf.io/resourceName"] == {"string": "example.com/rail_a"}

    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        D,
        "v1alpha1",
        namespace,
        "deviceattributes",
        "rail-a",
        {"spec": {"attributes": {"k8s.cni.cncf.io/resourceName": {"string": "example.com/rail_b"}}}},
    )

    def renamed() -> dict[str, Any] | None:
        current = pool(api, node.name)
        devs = slice_view.pool_devices(current)
        name = devs.get("0000-03-02-0", {}).get("attributes", {}).get("k8s.cni.cncf.io/resourceName")
        return current[0] if name == {"string": "example.com/rail_b"} else None

    second = eventually("the new attribute value", renamed)
    assert second["spec"]["pool"]["generation"] == generation + 1
    assert (
        pub.snapshot().attributes_of("0000-03-02-0")["k8s.cni.cncf.io/resourceName"].value
        == "example.com/rail_b"
    )


def test_withdrawn_membership_without_attributes_is_republished(api, namespace, node, start_publisher):
    """Upstream clearPolicyAttributes defect: the withdrawn devices had no policy attribute keys."""
    create(api, namespace, "sriovresourcepolicies", "all", ALL_DEVICES)
    pub = start_publisher()
    (before,) = eventually("all devices", published(api, node.name, 8))
    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        D, "v1alpha1", namespace, "sriovresourcepolicies", "all"
    )
    generation = before["spec"]["pool"]["generation"] + 1
    eventually("the withdrawn devices to leave the slice", published(api, node.name, 0, generation))
    assert pub.snapshot().eligible == frozenset()


def test_node_label_change_republishes(api, namespace, node, start_publisher):
    selector = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "example.com/rail", "operator": "Exists"}]}]
    }
    create(api, namespace, "sriovresourcepolicies", "labelled", {"nodeSelector": selector, "configs": [{}]})
    pub = start_publisher()
    assert pub.wait_published(30)
    assert not slice_view.pool_devices(pool(api, node.name))
    client.CoreV1Api(api).patch_node(node.name, {"metadata": {"labels": {"example.com/rail": "a"}}})
    eventually("devices after the node label appeared", published(api, node.name, 8))


def test_deleted_slice_is_recreated(api, namespace, node, start_publisher):
    create(api, namespace, "sriovresourcepolicies", "all", ALL_DEVICES)
    start_publisher()
    (before,) = eventually("all devices", published(api, node.name, 8))
    client.ResourceV1Api(api).delete_resource_slice(before["metadata"]["name"])
    generation = before["spec"]["pool"]["generation"] + 1
    (after,) = eventually("the slice to be recreated", published(api, node.name, 8, generation))
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    assert after["metadata"]["name"] == before["metadata"]["name"]


def test_idle_resyncs_write_nothing(api, namespace, node, start_publisher):
    create(api, namespace, "sriovresourcepolicies", "all", ALL_DEVICES)
    pub = start_publisher(vfs_per_pf=65, resync_s=0.2)
    eventually("all devices", published(api, node.name, 130))
    settled = pub.stats().syncs + 3
    eventually("the worker to run three more syncs", lambda: pub.stats().syncs >= settled)
    versions = {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in pool(api, node.name)}
    writes = pub.stats().writes
    syncs = pub.stats().syncs
    for _ in range(3):
        assert pub.sync().empty
    eventually("three periodic resyncs", lambda: pub.stats().syncs >= syncs + 3)
    assert pub.stats().writes == writes
    assert {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in pool(api, node.name)} == versions
    assert pub.stats().failures == 0 and pub.stats().handler_errors == 0


def test_130_devices_split_into_three_slices_and_the_scheduler_allocates_from_them(
    api, namespace, node, start_publisher
):
    create(api, namespace, "sriovresourcepolicies", "all", ALL_DEVICES)
    start_publisher(vfs_per_pf=65)
    current = eventually("130 devices", published(api, node.name, 130))
    assert [len(s["spec"].get("devices") or []) for s in current] == [64, 64, 2]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in current} == {3}
    tail = [d["name"] for d in current[2]["spec"]["devices"]]
    head = current[0]["spec"]["devices"][0]["name"]
    wanted = [*tail, head]
    addresses = [
        slice_view.pool_devices(current)[n]["attributes"][f"{D}/pciAddress"]["string"] for n in wanted
    ]
    expr = f"device.attributes['{D}'].pciAddress in {addresses!r}".replace("'", '"')
    res = client.ResourceV1Api(api)
    res.create_namespaced_resource_claim(
        namespace,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "vfs"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "vf",
                            "exactly": {
                                "deviceClassName": D,
                                "count": 3,
                                "selectors": [{"cel": {"expression": expr}}],
                            },
                        }
                    ]
                }
            },
        },
    )
    client.CoreV1Api(api).create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "consumer"},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node.name},
                "resourceClaims": [{"name": "vf", "resourceClaimName": "vfs"}],
                "containers": [
                    {"name": "c", "image": "registry.invalid/none", "resources": {"claims": [{"name": "vf"}]}}
                ],
                "terminationGracePeriodSeconds": 0,
            },
        },
    )

    def allocation() -> list[dict[str, Any]] | None:
        claim = api.sanitize_for_serialization(res.read_namespaced_resource_claim("vfs", namespace))
        alloc = (claim.get("status") or {}).get("allocation")
        return alloc["devices"]["results"] if alloc else None

    results = eventually("the scheduler to allocate three VFs", allocation, timeout_s=60)
    assert sorted((r["driver"], r["pool"], r["device"]) for r in results) == sorted(
        (DRIVER, node.name, n) for n in wanted
    )


def test_shrinking_pool_deletes_the_surplus_slice(api, namespace, node, start_publisher):
    create(api, namespace, "sriovresourcepolicies", "all", ALL_DEVICES)
    start_publisher(vfs_per_pf=40)
    two = eventually("80 devices", published(api, node.name, 80))
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        D,
        "v1alpha1",
        namespace,
        "sriovresourcepolicies",
        "all",
        {"spec": {"configs": [{"resourceFilters": [{"pfNames": ["enp3s0f0"]}]}]}},
    )
    (one,) = eventually("one PF's 40 devices", published(api, node.name, 40))
    assert one["metadata"]["name"] == two[0]["metadata"]["name"]
    assert one["spec"]["pool"] == {
        "name": node.name,
        "generation": two[0]["spec"]["pool"]["generation"] + 1,
        "resourceSliceCount": 1,
    }


def test_missing_policy_namespace_is_an_actionable_error(api, installed, node, start_publisher):
    missing = f"absent-{uuid.uuid4().hex[:6]}"
    with pytest.raises(policy_controller.PolicyNamespaceMissing) as caught:
        start_publisher(policy_namespace=missing)
    message = str(caught.value)
    assert missing in message and "create" in message and "NAMESPACE" in message
    assert not pool(api, node.name), "nothing is published when the policy namespace is missing"


def claim_one_vf(api: client.ApiClient, namespace: str, node: str, name: str) -> Callable[[], Any]:
    """Create a claim for one VF and a Pod on ``node`` using it; a probe of the allocated device."""
    res = client.ResourceV1Api(api)
    res.create_namespaced_resource_claim(
        namespace,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "vf", "exactly": {"deviceClassName": D}}]}},
        },
    )
    client.CoreV1Api(api).create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "resourceClaims": [{"name": "vf", "resourceClaimName": name}],
                "containers": [
                    {"name": "c", "image": "registry.invalid/none", "resources": {"claims": [{"name": "vf"}]}}
                ],
                "terminationGracePeriodSeconds": 0,
            },
        },
    )

    def device() -> str | None:
        claim = api.sanitize_for_serialization(res.read_namespaced_resource_claim(name, namespace))
        alloc = (claim.get("status") or {}).get("allocation")
        return str(alloc["devices"]["results"][0]["device"]) if alloc else None

    return device


def test_tainted_vfs_are_skipped_by_the_scheduler_and_their_taint_keeps_its_time(
    api, namespace, node, start_publisher
):
    create(api, namespace, "sriovresourcepolicies", "all", ALL_DEVICES)
    taints: dict[str, device_taints.DeviceTaint] = {}
    pub = start_publisher(taints=lambda: dict(taints))
    (first,) = eventually("all devices", published(api, node.name, 8))
    names_ = [d["name"] for d in first["spec"]["devices"]]
    down = device_taints.DeviceTaint(
        device_taints.taint_key(DRIVER), "PfDown", device_taints.Effect.NO_SCHEDULE
    )
    taints.update(dict.fromkeys(names_[:7], down))
    pub.request_sync()

    def tainted() -> dict[str, Any] | None:
        (s,) = pool(api, node.name)
        marked = {d["name"]: d["taints"] for d in s["spec"]["devices"] if d.get("taints")}
        return marked if len(marked) == 7 else None

    marked = eventually("seven tainted devices", tainted)
    stamp = marked[names_[0]][0]
    assert {k: stamp[k] for k in ("key", "value", "effect")} == down.to_json()
    assert stamp.get("timeAdded"), "the API server stamps timeAdded"
    (tainted_slice,) = pool(api, node.name)
    assert tainted_slice["spec"]["pool"]["generation"] == first["spec"]["pool"]["generation"]
    assert pub.sync().empty, "the server's timeAdded is kept: a resync writes nothing"
    assert pub.stats().taints_dropped is False

    allocated = eventually(
        "the scheduler to allocate the untainted VF", claim_one_vf(api, namespace, node.name, "vf1"), 60
    )
    assert allocated == names_[7]

    taints.clear()
    pub.request_sync()
    eventually(
        "the taints to be removed",
        lambda: not any(d.get("taints") for d in pool(api, node.name)[0]["spec"]["devices"]) or None,
    )
