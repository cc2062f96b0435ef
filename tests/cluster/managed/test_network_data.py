"""Cluster tier: each managed VF's claim ``status.devices[].networkData``.

The gpu-nic-pairs workload is prepared through the plugin's real handler as its
ServiceAccount (shipped RBAC) against kube-apiserver v1.36.3; Multus is simulated by writing the
Pod's ``k8s.v1.cni.cncf.io/network-status`` exactly as Multus v4.3.0 writes it (``name``
``<namespace>/<shadow>``, ``interface``, plain ``ips`` without prefix, ``mac``, ``dns``), with the
addresses the shadows' whereabouts ranges would give. The GPU driver's entries are written by
the admin as the GPU driver would. Every test creates its own namespace, node and workload.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import ipaddress
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from sriov_dra.core import registry
from sriov_dra.driver import managed_wiring, prepare, unprepare
from sriov_dra.driver.managed import network_data_writer, repair
from sriov_dra.kube import apply
from sriov_dra.kube import claims as kube_claims
from sriov_dra.kubeletapi import messages
from sriov_dra_lab import session
from sriov_dra_rules import names

from .conftest import RBAC, ClusterPlugin, eventually, load_all
from .test_auto_attach import start_pair_workload

POD = "gpu-sriov-pairs-demo"
PRIMARY = {"name": "k8s-pod-network", "interface": "eth0", "ips": ["10.244.1.5"], "default": True, "dns": {}}


def start_workload(api: client.ApiClient, plugin: ClusterPlugin, namespace: str) -> messages.ClaimRef:
    return start_pair_workload(api, plugin, namespace, POD)


def read_claim(api: client.ApiClient, ref: messages.ClaimRef) -> dict[str, Any]:
    """The claim as the server's raw JSON (the generated models may not know networkData)."""
    return kube_claims.get_claim(api, ref.namespace, ref.name, timeout_s=10.0)


def devices(api: client.ApiClient, ref: messages.ClaimRef) -> list[dict[str, Any]]:
    return list((read_claim(api, ref).get("status") or {}).get("devices") or [])


def ours(api: client.ApiClient, ref: messages.ClaimRef) -> dict[str, dict[str, Any]]:
    """This driver's status entries by device name."""
    return {d["device"]: d for d in devices(api, ref) if d["driver"] == names.DRIVER_NAME}


def write_gpu_entries(api: client.ApiClient, ref: messages.ClaimRef) -> list[dict[str, Any]]:
    """Add a status entry per GPU result as its driver would (data, Ready condition, networkData)."""
    claim = read_claim(api, ref)
    gpus = [
        r for r in claim["status"]["allocation"]["devices"]["results"] if r["driver"] == session.GPU_DRIVER
    ]
    entries = [
        {
            "driver": session.GPU_DRIVER,
            "pool": r["pool"],
            "device": r["device"],
            "data": {"uuid": f"GPU-{r['device']}"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Configured",
                    "message": "GPU ready",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "networkData": {"interfaceName": f"nv-{r['device']}", "hardwareAddress": "0a:0b:0c:0d:0e:0f"},
        }
        for r in gpus
    ]
    assert len(entries) == 2
    kept = list((claim["status"] or {}).get("devices") or [])  # a merge patch replaces the whole list
    client.ResourceV1Api(api).patch_namespaced_resource_claim_status(
        ref.name, ref.namespace, {"status": {"devices": kept + entries}}
    )
    return entries


def expected_addresses(api: client.ApiClient, namespace: str) -> dict[str, tuple[str, str, str]]:
    """``interface → (network-status name, plain IP, MAC)`` for the Pod's managed networks."""
    pod = client.CoreV1Api(api).read_namespaced_pod(POD, namespace)
    reg = registry.decode_registry(pod.metadata.annotations[names.MANAGED_NETWORKS_ANNOTATION])
    custom = client.CustomObjectsApi(api)
    out = {}
    for index, entry in enumerate(reg.entries):
        nad = custom.get_namespaced_custom_object(
            "k8s.cni.cncf.io", "v1", entry.namespace, "network-attachment-definitions", entry.name
        )
        subnet = ipaddress.ip_network(json.loads(nad["spec"]["config"])["ipam"]["range"])
        out[entry.interface] = (
            f"{entry.namespace}/{entry.name}",
            str(subnet[10 + index]),
            f"02:00:00:00:01:0{index}",
        )
    return out


def multus_reports(
    api: client.ApiClient, namespace: str, *, drop: str = ""
) -> dict[str, tuple[str, str, str]]:
    """Write the Pod's network-status as Multus does after ADD (``drop``: leave that interface out)."""
    reported = expected_addresses(api, namespace)
    status = [PRIMARY] + [
        {"name": name, "interface": ifname, "ips": [ip], "mac": mac, "dns": {}}
        for ifname, (name, ip, mac) in sorted(reported.items())
        if ifname != drop
    ]
    client.CoreV1Api(api).patch_namespaced_pod(
        POD, namespace, {"metadata": {"annotations": {names.NETWORK_STATUS_ANNOTATION: json.dumps(status)}}}
    )
    return reported


def wanted_network_data(reported: dict[str, tuple[str, str, str]], prefix: int = 24) -> list[dict[str, Any]]:
    return sorted(
        (
            {"interfaceName": i, "ips": [f"{ip}/{prefix}"], "hardwareAddress": mac}
            for i, (_, ip, mac) in reported.items()
        ),
        key=lambda d: d["interfaceName"],
    )


def conditions(entry: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """type → (status, reason) of one status entry, as the API server stored them."""
    return {c["type"]: (c["status"], c["reason"]) for c in entry.get("conditions") or []}


def network_data(api: client.ApiClient, ref: messages.ClaimRef) -> list[dict[str, Any]]:
    return sorted(
        (d["networkData"] for d in ours(api, ref).values() if "networkData" in d),
        key=lambda d: d["interfaceName"],
    )


def worker(plugin: ClusterPlugin) -> repair.RepairWorker:
    """A repair worker (not started) with the production networkData writer."""
    return repair.RepairWorker(
        attach=plugin.attach,
        host_release=lambda r: unprepare.release_host(plugin.ctx, r),
        host_prepare=lambda r: prepare.ensure_host(plugin.ctx, r),
        clear_status=lambda r: unprepare.clear_status(plugin.ctx, r),
        network_data=network_data_writer.NetworkDataWriter(claims=plugin.ctx.claims),
    )


def live_pod(plugin: ClusterPlugin, namespace: str) -> dict[str, Any]:
    return plugin.attach.pods.get(namespace, POD)


@pytest.fixture
def running(plugin: ClusterPlugin) -> Iterator[repair.RepairWorker]:
    """The production worker with its Pod watch, as the plugin starts it; passes an hour apart, so a
    write after its first pass comes from the watch."""
    started = managed_wiring.start_worker(
        plugin.attach,
        plugin.ctx,
        settings=repair.RepairSettings(interval_s=3600.0),
        first_pass_timeout_s=60.0,
        watch_api=plugin.api,
    )
    try:
        yield started
    finally:
        started.stop()


def prepared(api: client.ApiClient, plugin: ClusterPlugin, namespace: str) -> messages.ClaimRef:
    ref = start_workload(api, plugin, namespace)
    out = plugin.prepare(ref)
    assert isinstance(out, messages.Prepared), out
    assert len(ours(api, ref)) == 2
    return ref


# --- tests ------------------------------------------------------------------------------------------


def test_after_network_status_appears_both_vfs_carry_interface_cidr_ips_and_mac(
    api, plugin, namespace, running
):
    ref = prepared(api, plugin, namespace)
    assert network_data(api, ref) == []  # Multus has not reported yet
    before = ours(api, ref)
    assert len(before) == 2
    assert all(conditions(e) == {"Ready": ("True", "Prepared")} for e in before.values())
    reported = multus_reports(api, namespace)
    want = wanted_network_data(reported)
    assert [d["interfaceName"] for d in want] == ["dra0", "dra1"]
    eventually("networkData of both VFs", lambda: network_data(api, ref) == want)
    assert running.passes == 1 and running.network_data_runs >= 1  # the Pod watch made it, not a pass
    assert running.watch.alive and running.watch.handler_errors == 0
    # each entry is the VF its shadow was bound to: the interface's address is in that VF's rail
    by_device = ours(api, ref)
    for device, entry in by_device.items():
        record = plugin.store.snapshot_claim(ref.uid)
        binding = next(d.managed for d in record.devices if d.device == device)
        assert entry["networkData"]["interfaceName"] == binding.interface
        subnet = json.loads(binding.rendered_config)["ipam"]["range"]
        assert ipaddress.ip_interface(entry["networkData"]["ips"][0]).network == ipaddress.ip_network(subnet)
        assert conditions(entry) == {
            "Ready": ("True", "Prepared"),
            "NetworkReady": ("True", "NetworkAttached"),
        }
    assert plugin.unprepare(ref) is None
    assert ours(api, ref) == {}  # released: the entries and their conditions are gone


def test_the_gpu_drivers_entries_are_left_exactly_as_it_wrote_them(api, plugin, namespace):
    ref = start_workload(api, plugin, namespace)
    gpu = write_gpu_entries(api, ref)
    assert isinstance(plugin.prepare(ref), messages.Prepared)
    reported = multus_reports(api, namespace)
    w = worker(plugin)
    w.run_once()
    assert network_data(api, ref) == wanted_network_data(reported)
    assert [d for d in devices(api, ref) if d["driver"] == session.GPU_DRIVER] == gpu
    assert plugin.unprepare(ref) is None
    assert devices(api, ref) == gpu


def test_no_claim_write_when_nothing_changed(api, plugin, namespace, running):
    ref = prepared(api, plugin, namespace)
    reported = multus_reports(api, namespace)
    eventually("networkData of both VFs", lambda: network_data(api, ref) == wanted_network_data(reported))
    version = read_claim(api, ref)["metadata"]["resourceVersion"]
    runs = running.network_data_runs
    # full passes, a repeated prepare (kubelet restart) and Pod events without a network-status change
    w = worker(plugin)
    for _ in range(2):
        report = w.run_once()
        assert report.ensured_pods and not report.failed
    assert isinstance(plugin.prepare(ref), messages.Prepared)
    client.CoreV1Api(api).patch_namespaced_pod(POD, namespace, {"metadata": {"labels": {"touched": "yes"}}})
    eventually(
        "the Pod watch saw the label change",
        lambda: (
            (running.watch.get(POD, namespace) or {}).get("metadata", {}).get("labels", {}).get("touched")
        ),
    )
    assert running.network_data_runs == runs
    assert read_claim(api, ref)["metadata"]["resourceVersion"] == version
    assert network_data(api, ref) == wanted_network_data(reported)


def conflicts_seen(caplog: pytest.LogCaptureFixture) -> int:
    """How many 409 answers the claim client re-read after (its INFO line per conflict)."""
    return sum(r.getMessage() == "claim status conflict: re-reading" for r in caplog.records)


def test_a_conflicting_concurrent_status_writer_is_merged_after_a_409(api, plugin, namespace, caplog):
    caplog.set_level(logging.INFO, logger="sriov_dra.kube.claims")
    ref = prepared(api, plugin, namespace)
    reported = multus_reports(api, namespace)
    stale = read_claim(api, ref)
    gpu = write_gpu_entries(api, ref)  # another writer changes the claim after our read
    writer = network_data_writer.NetworkDataWriter(claims=plugin.ctx.claims)
    record = plugin.store.snapshot_claim(ref.uid)
    report = writer.write(live_pod(plugin, namespace), [record], current={ref.uid: stale})
    assert report.written == [ref.uid], report
    assert conflicts_seen(caplog) == 1
    after = devices(api, ref)
    assert [d for d in after if d["driver"] == session.GPU_DRIVER] == gpu  # the other writer's change kept
    assert network_data(api, ref) == wanted_network_data(reported)


def test_a_claim_replaced_under_the_same_name_is_not_written(api, plugin, namespace, caplog):
    caplog.set_level(logging.INFO, logger="sriov_dra.kube.claims")
    ref = prepared(api, plugin, namespace)
    multus_reports(api, namespace)
    # the object read carries another UID (the claim was deleted and re-created meanwhile): the
    # server refuses the PUT on the UID precondition, and the re-read finds no claim of that UID
    replaced = copy.deepcopy(read_claim(api, ref))
    other = "0f0f0f0f-0000-4000-8000-000000000000"
    replaced["metadata"]["uid"] = other
    impostor = dataclasses.replace(plugin.store.snapshot_claim(ref.uid), claim_uid=other)
    version = read_claim(api, ref)["metadata"]["resourceVersion"]
    writer = network_data_writer.NetworkDataWriter(claims=plugin.ctx.claims)
    report = writer.write(live_pod(plugin, namespace), [impostor], current={other: replaced})
    assert report.unchanged == [other] and not report.written and not report.failed, report
    assert conflicts_seen(caplog) == 1  # the server refused the PUT (409, UID precondition)
    assert read_claim(api, ref)["metadata"]["resourceVersion"] == version
    assert network_data(api, ref) == []


def test_network_data_follows_network_status_and_is_cleared_at_release(api, plugin, namespace, running):
    ref = prepared(api, plugin, namespace)
    gpu = write_gpu_entries(api, ref)
    reported = multus_reports(api, namespace)
    eventually("networkData of both VFs", lambda: network_data(api, ref) == wanted_network_data(reported))
    multus_reports(api, namespace, drop="dra1")  # dra1 no longer reported: its networkData goes
    eventually(
        "only dra0 keeps networkData",
        lambda: [d["interfaceName"] for d in network_data(api, ref)] == ["dra0"],
    )
    assert plugin.unprepare(ref) is None
    assert devices(api, ref) == gpu  # our entries, and their networkData, are gone; the GPU's stay


def can_write_claim_status(plugin_api: client.ApiClient, namespace: str) -> bool:
    """SelfSubjectAccessReview as the plugin: may it update ``resourceclaims/status`` in ``namespace``?"""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "group": "resource.k8s.io",
                "resource": "resourceclaims",
                "subresource": "status",
                "verb": "update",
                "namespace": namespace,
            }
        },
    }
    return bool(
        client.AuthorizationV1Api(plugin_api).create_self_subject_access_review(review).status.allowed
    )


@contextlib.contextmanager
def claim_status_refused(api: client.ApiClient, plugin: ClusterPlugin, namespace: str) -> Iterator[None]:
    """The plugin's ClusterRole without its claim status grants for the ``with`` block (then restored)."""
    role = next(
        o
        for o in load_all(RBAC)
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "sriov-dra-plugin"
    )
    reduced = yaml.safe_load(yaml.safe_dump(role))
    status_rules = (["resourceclaims/status"], ["resourceclaims/driver"])
    reduced["rules"] = [r for r in reduced["rules"] if r["resources"] not in status_rules]
    client.RbacAuthorizationV1Api(api).replace_cluster_role(role["metadata"]["name"], reduced)
    try:
        eventually(
            "the reduced role to take effect", lambda: not can_write_claim_status(plugin.api, namespace)
        )
        yield
    finally:
        apply.apply_objects(api, [role], force=True)
        eventually("the shipped role back", lambda: can_write_claim_status(plugin.api, namespace))


def test_a_prepare_never_fails_when_the_claim_status_write_fails(api, plugin, namespace):
    ref = start_workload(api, plugin, namespace)
    with claim_status_refused(api, plugin, namespace):
        out = plugin.prepare(ref)
        assert isinstance(out, messages.Prepared), out  # the status write was refused (Forbidden)
        assert ours(api, ref) == {}
        bindings = plugin.store.snapshot_claim(ref.uid).managed_bindings()
        assert [b.phase.value for b in bindings] == ["Ready", "Ready"]
    assert isinstance(plugin.prepare(ref), messages.Prepared)
    assert len(ours(api, ref)) == 2
    assert plugin.unprepare(ref) is None


def test_a_refused_network_data_write_fails_no_repair_pass_and_no_prepare(api, plugin, namespace):
    ref = prepared(api, plugin, namespace)
    reported = multus_reports(api, namespace)
    record = plugin.store.snapshot_claim(ref.uid)
    with claim_status_refused(api, plugin, namespace):
        report = network_data_writer.NetworkDataWriter(claims=plugin.ctx.claims).write(
            live_pod(plugin, namespace), [record]
        )
        assert report.failed == {ref.uid: "ApiForbidden"}, report
        passed = worker(plugin).run_once()
        assert passed.ensured_pods == [record.pod_uid] and not passed.failed
        assert isinstance(plugin.prepare(ref), messages.Prepared)
        assert network_data(api, ref) == []
    worker(plugin).run_once()
    assert network_data(api, ref) == wanted_network_data(reported)
    assert plugin.unprepare(ref) is None


def test_the_pod_watch_lists_only_this_nodes_pods(api, plugin, namespace, running):
    ref = prepared(api, plugin, namespace)
    other = client.CoreV1Api(api).create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "elsewhere"},
            "spec": {
                "nodeName": "no-such-node",
                "containers": [{"name": "c", "image": "registry.invalid/x"}],
            },
        },
    )
    assert other.metadata.name == "elsewhere"
    eventually("the watch has the workload Pod", lambda: running.watch.get(POD, namespace) is not None)
    assert running.watch.target.field_selector == f"spec.nodeName={plugin.node.name}"
    assert {o["spec"]["nodeName"] for o in running.watch.items()} == {plugin.node.name}
    assert running.watch.get("elsewhere", namespace) is None
    assert plugin.unprepare(ref) is None
