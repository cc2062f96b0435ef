"""DEL without ``K8S_POD_UID`` after the Pod was deleted releases everything (docs/design.md#cni-teardown).

A runtime may send DEL without ``K8S_POD_UID`` in ``CNI_ARGS``. Thin Multus v4.3.0 then reads the
Pod by name, finds it gone and replays its delegate cache. The thick daemon first tries to learn
the missing UID with a Pod GET (``podUID``), fails the whole request when the Pod is gone, and
``multus-shim`` answers DEL with success: no delegate's DEL runs, the sandbox's interfaces, IPAM
reservations and VF leak, and every repeated DEL does the same (multus-cni #1168). Shown here with
stock ``multus-shim`` alone, then through the guard, whose shim appends an empty ``K8S_POD_UID``
to such a thick DEL: the daemon skips its GET and Multus's DEL releases every reservation from
its cache, the VF back on the node, in thin and thick mode alike.
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from kubernetes import client
from tests.cni.world import DELEGATE_DELS, RAIL_A, RAIL_B, World, eventually

from sriov_dra.host import netlink
from sriov_dra_lab import cni

MODES = ["thin", "thick"]
PRIMARY = "lab-primary"


def _held(world: World, container_id: str) -> list[str]:
    """What ``container_id`` still holds: host-local networks, whereabouts rail B, its Multus cache."""
    held = [
        n for n in (PRIMARY, RAIL_A.cni_name) if container_id in world.host_local_reservations(n).values()
    ]
    if any(a.get("id") == container_id for a in world.ippool_allocations(RAIL_B).values()):
        held.append(RAIL_B.cni_name)
    return held


def _gone(world: World, mode: str, pod: str) -> None:
    client.CoreV1Api(world.api).delete_namespaced_pod(pod, world.namespace, grace_period_seconds=0)
    eventually("the Pod to be gone", lambda: not world.pod_exists(pod))
    if mode == "thick":
        time.sleep(1.0)  # let the daemon's Pod informer see the deletion too


def _without_uid(att: cni.Attachment, world: World, pod: str) -> cni.Attachment:
    """The same sandbox as the runtime names it in a DEL that carries no ``K8S_POD_UID``."""
    args = cni.k8s_args(world.namespace, pod, None, att.container_id)
    assert "K8S_POD_UID" not in args
    return dataclasses.replace(att, cni_args=args)


def test_stock_thick_multus_skips_every_delegate_del_without_pod_uid_once_the_pod_is_gone(
    world: World,
) -> None:
    pod, att = world.attached("thick", "stock-no-uid")
    _gone(world, "thick", pod.name)
    bare = _without_uid(att, world, pod.name)
    before = len(world.node.recorded(att.container_id))
    try:
        for _ in range(2):  # the kubelet repeats DEL; nothing changes
            deleted = world.node.run_multus_alone("thick", "DEL", bare)
            assert deleted.ok, deleted.stdout + deleted.stderr  # multus-shim swallows the daemon's error
        calls = world.node.recorded(att.container_id)[before:]
        assert [(c.plugin, c.command) for c in calls] == [("multus-shim", "DEL")] * 2  # no delegate ran
        assert {"eth0", "dra0", "dra1"} <= netlink.link_names(att.netns)
        assert _held(world, att.container_id) == [PRIMARY, RAIL_A.cni_name, RAIL_B.cni_name]
        assert (world.multus_cache_dir("thick") / att.container_id).exists()
    finally:
        assert world.delete("thick", bare).ok  # the guard's DEL releases what stock Multus left
    assert _held(world, att.container_id) == []


@pytest.mark.parametrize("mode", MODES)
def test_guard_del_without_pod_uid_after_pod_deletion_releases_every_reservation_and_the_vf(
    world: World, mode: str
) -> None:
    pod, att = world.attached(mode, "guard-no-uid")
    assert _held(world, att.container_id) == [PRIMARY, RAIL_A.cni_name, RAIL_B.cni_name]
    _gone(world, mode, pod.name)
    before = len(world.node.recorded(att.container_id))

    deleted = world.delete(mode, _without_uid(att, world, pod.name))

    assert deleted.ok, deleted.stdout + deleted.stderr
    dels = [c.plugin for c in world.node.recorded(att.container_id)[before:] if c.command == "DEL"]
    multus = "multus" if mode == "thin" else "multus-shim"
    assert dels == [multus, *DELEGATE_DELS]
    assert set(netlink.link_names(att.netns)) == {"lo"}
    assert {vf.ifname for vf in world.vfs} <= netlink.link_names(None)
    assert _held(world, att.container_id) == []
    assert not (world.multus_cache_dir(mode) / att.container_id).exists()


def test_guard_thick_del_without_pod_uid_of_a_live_pod_still_releases_everything(world: World) -> None:
    """The empty UID changes nothing while the Pod exists: Multus reads it by name, as thin Multus does."""
    pod, att = world.attached("thick", "live-no-uid")
    before = len(world.node.recorded(att.container_id))

    deleted = world.delete("thick", _without_uid(att, world, pod.name))

    assert deleted.ok, deleted.stdout + deleted.stderr
    dels = [c.plugin for c in world.node.recorded(att.container_id)[before:] if c.command == "DEL"]
    assert dels == ["multus-shim", *DELEGATE_DELS]
    assert _held(world, att.container_id) == []
