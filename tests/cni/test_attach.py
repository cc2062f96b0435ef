"""Attach and detach through the guard and real Multus v4.3.0, thin and thick.

A managed Pod with two shadows (rail A: host-local, rail B: whereabouts) gets ``dra0``/``dra1`` with
addresses from each rail's range; DEL after the Pod, the shadows and the source NADs are deleted
still runs Multus's cached DEL and releases every IPAM reservation; a Terminating shadow does not
block DEL.
"""

from __future__ import annotations

import ipaddress
import json

import pytest
from kubernetes import client
from tests.cni.world import RAIL_A, RAIL_B, World, eventually

from sriov_dra.host import netlink
from sriov_dra_rules import names

MODES = ["thin", "thick"]


def _links(sandbox: str) -> dict[str, netlink.LinkInfo]:
    return {link.name: link for link in netlink.links(sandbox)}


def _in(subnet: str, cidrs: tuple[str, ...]) -> bool:
    return any(ipaddress.ip_interface(c).ip in ipaddress.ip_network(subnet) for c in cidrs)


@pytest.mark.parametrize("mode", MODES)
def test_managed_shadows_attach_as_dra_interfaces_with_rail_addresses(world: World, mode: str) -> None:
    pod = world.managed_pod("trainer")
    att, result = world.attach(mode, pod.name, uid=pod.uid, runtime_config={"mac": "02:00:00:0a:0b:0c"})
    assert result.ok, result.stdout + result.stderr

    links = _links(att.netns)
    assert _in(RAIL_A.subnet, links["dra0"].addresses) and links["dra0"].up
    assert _in(RAIL_B.subnet, links["dra1"].addresses) and links["dra1"].up
    assert (
        links["eth0"].mac == "02:00:00:0a:0b:0c"
    )  # runtimeConfig reached the primary through guard and Multus
    # Multus's own result (the primary's) is relayed unchanged.
    assert [i["name"] for i in (result.result or {})["interfaces"]] == ["eth0"]

    status = {e["name"]: e for e in world.status_entries(pod.name)}
    for plan, ifname in zip(pod.planned, ("dra0", "dra1"), strict=True):
        assert status[f"{world.namespace}/{plan.name}"]["interface"] == ifname
    assert [c.plugin for c in world.node.recorded(att.container_id) if c.command == "ADD"] == [
        "multus" if mode == "thin" else "multus-shim",
        "macvlan",
        "host-local",
        "tuning",
        "sriov",
        "host-local",
        "sriov",
        "whereabouts",
    ]

    deleted = world.delete(mode, att)
    assert deleted.ok, deleted.stdout + deleted.stderr
    assert set(_links(att.netns)) == {"lo"}
    assert {vf.ifname for vf in world.vfs} <= netlink.link_names(None)  # the lab VFs are back on the host
    assert world.host_local_files(RAIL_A) == [] and world.ippool_allocations(RAIL_B) == {}


@pytest.mark.parametrize("mode", MODES)
def test_del_after_pod_shadow_and_source_are_deleted_releases_ipam(world: World, mode: str) -> None:
    pod = world.managed_pod("worker")
    att, added = world.attach(mode, pod.name, uid=pod.uid)
    assert added.ok, added.stdout
    assert len(world.host_local_files(RAIL_A)) == 1 and len(world.ippool_allocations(RAIL_B)) == 1

    for rail in (RAIL_A, RAIL_B):
        world.delete_nad(world.namespace, rail.source)
    for shadow in pod.shadows:
        world.delete_nad(world.namespace, shadow["metadata"]["name"])
    client.CoreV1Api(world.api).delete_namespaced_pod(pod.name, world.namespace, grace_period_seconds=0)
    eventually("the Pod to be gone", lambda: not _pod_exists(world, pod.name))
    for shadow in pod.shadows:  # Terminating: the protection finalizer holds it
        live = world.get_nad(world.namespace, shadow["metadata"]["name"])
        assert live is not None and live["metadata"].get("deletionTimestamp")

    deleted = world.delete(mode, att)
    assert deleted.ok, deleted.stdout + deleted.stderr
    assert world.host_local_files(RAIL_A) == [] and world.ippool_allocations(RAIL_B) == {}
    assert set(_links(att.netns)) == {"lo"}
    dels = [c.plugin for c in world.node.recorded(att.container_id) if c.command == "DEL"]
    assert "host-local" in dels and "whereabouts" in dels and dels.count("sriov") == 2


@pytest.mark.parametrize("mode", MODES)
def test_pod_without_managed_entries_passes_through_unchanged(world: World, mode: str) -> None:
    manual = {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "plain-net"},
        "spec": {
            "config": json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": "plain",
                    "type": "macvlan",
                    "master": world.node.uplink.ifname if world.node.uplink else "",
                    "ipam": {"type": "static", "addresses": [{"address": "203.0.113.5/24"}]},
                }
            )
        },
    }
    world.create_nad(manual)
    pod = world.pod("plain", annotations={names.NETWORKS_ANNOTATION: "plain-net"})
    att = world.attachment("plain", uid=pod["metadata"]["uid"])
    assert world.add(mode, att).ok
    links = _links(att.netns)
    assert "203.0.113.5/24" in links["net1"].addresses
    assert world.delete(mode, att).ok


def _pod_exists(world: World, name: str) -> bool:
    try:
        world.read_pod(name)
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
