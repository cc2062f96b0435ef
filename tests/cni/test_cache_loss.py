"""Cache loss (docs/design.md#cni-teardown): what DEL does when Multus's delegate cache (``cniDir``) is gone.

Multus v4.3.0 saves the effective delegates to ``<cniDir>/<container ID>`` before ADD and DEL
normally replays them. When that file is missing, Multus has exactly two paths (both observed here
with the real binaries, thin and thick, behind the guard):

* the Pod still exists: Multus rebuilds the delegates from the live Pod annotation and the selected
  NADs. For a managed Pod those are the frozen shadows (kept by the protection finalizer), so DEL
  runs every delegate with the ADD-time bytes and releases everything;
* the Pod is gone: Multus answers success without running any delegate, primary included (thick
  logs ``failed to get the cached delegates file: ... cannot properly delete``; thin says nothing).
  The interfaces stay in the sandbox and every IPAM reservation of that sandbox (primary, host-local rail,
  whereabouts rail) stays reserved and the kubelet's repeated DEL cannot change that: the leak is
  inherent to upstream once the cache is lost. Only a cleanup outside CNI (here: each IPAM
  plugin's DEL run by hand with the frozen shadow bytes and the old container ID and interface)
  releases it. This is why Multus's ``cniDir`` and sriov-cni's ``/var/lib/cni/sriov`` must be on
  persistent host storage (``docs/guard.md``; the preflight checks those mounts).

The lab ``sriov`` plugin's own state dir is not faulted here: it runs IPAM DEL before reading its
state, while sriov-cni returns success without IPAM DEL when its cache is missing, so a lab result
would not show sriov-cni's behaviour.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.cni.world import DELEGATE_DELS, RAIL_A, RAIL_B, World, eventually

from sriov_dra.host import netlink
from sriov_dra_lab import cni

MODES = ["thin", "thick"]
PRIMARY = "lab-primary"


def _lose(cache: Path) -> None:
    """The node lost its Multus cache (a non-persistent mount emptied, e.g. by a reboot)."""
    shutil.rmtree(cache)
    cache.mkdir(mode=0o700)


def _holders(world: World) -> dict[str, list[str]]:
    return {net: sorted(world.host_local_reservations(net).values()) for net in (PRIMARY, RAIL_A.cni_name)}


def _whereabouts_holders(world: World) -> list[str]:
    return sorted(str(a.get("id", "")) for a in world.ippool_allocations(RAIL_B).values())


@pytest.mark.parametrize("mode", MODES)
def test_cache_loss_with_the_pod_alive_del_rebuilds_from_frozen_shadows_and_releases_everything(
    world: World, mode: str
) -> None:
    pod = world.managed_pod("cache-lost")
    att, added = world.attach(mode, pod.name, uid=pod.uid)
    assert added.ok, added.stdout
    cache = world.multus_cache_dir(mode)
    assert (cache / att.container_id).exists()  # the delegate cache this test takes away
    assert att.container_id in _holders(world)[RAIL_A.cni_name]
    assert _whereabouts_holders(world) == [att.container_id]

    _lose(cache)
    deleted = world.delete(mode, att)

    assert deleted.ok, deleted.stdout + deleted.stderr
    dels = [c.plugin for c in world.node.recorded(att.container_id) if c.command == "DEL"]
    multus = "multus" if mode == "thin" else "multus-shim"
    assert dels == [multus, *DELEGATE_DELS]
    assert set(netlink.link_names(att.netns)) == {"lo"}
    assert {vf.ifname for vf in world.vfs} <= netlink.link_names(None)
    assert all(att.container_id not in held for held in _holders(world).values())
    assert world.ippool_allocations(RAIL_B) == {}


@pytest.mark.parametrize("mode", MODES)
def test_cache_loss_after_pod_deletion_del_succeeds_runs_no_delegate_and_leaks_every_reservation(
    world: World, mode: str
) -> None:
    pod = world.managed_pod("cache-lost-gone")
    att, added = world.attach(mode, pod.name, uid=pod.uid)
    assert added.ok, added.stdout
    client.CoreV1Api(world.api).delete_namespaced_pod(pod.name, world.namespace, grace_period_seconds=0)
    eventually("the Pod to be gone", lambda: not world.pod_exists(pod.name))
    if mode == "thick":
        time.sleep(1.0)  # let the daemon's Pod informer see the deletion too
    _lose(world.multus_cache_dir(mode))
    before = len(world.node.recorded(att.container_id))
    log = world.node.thick.workdir / "multus-daemon.log" if world.node.thick else None
    log_start = log.stat().st_size if log else 0

    try:
        for _ in range(2):  # the kubelet repeats DEL; nothing changes
            deleted = world.delete(mode, att)
            assert deleted.ok, deleted.stdout + deleted.stderr
        calls = world.node.recorded(att.container_id)[before:]
        multus = "multus" if mode == "thin" else "multus-shim"
        assert [(c.plugin, c.command) for c in calls] == [(multus, "DEL")] * 2  # no delegate ran
        assert {"eth0", "dra0", "dra1"} <= netlink.link_names(att.netns)
        held = _holders(world)
        assert att.container_id in held[PRIMARY] and att.container_id in held[RAIL_A.cni_name]
        assert _whereabouts_holders(world) == [att.container_id]
        if log is not None and mode == "thick":
            with log.open("rb") as f:
                f.seek(log_start)
                logged = f.read().decode(errors="replace")
            lost = f"failed to get the cached delegates file: open {world.multus_cache_dir(mode)}"
            expected = f"{lost}/{att.container_id}: no such file or directory, cannot properly delete"
            assert logged.count(expected) == 2, logged[-2000:]
    finally:
        _release_by_hand(world, pod.shadows, att)

    assert all(att.container_id not in held for held in _holders(world).values())
    assert world.ippool_allocations(RAIL_B) == {}


def _release_by_hand(world: World, shadows: list[dict[str, Any]], att: cni.Attachment) -> None:
    """The only cleanup left: each IPAM plugin's DEL with the frozen bytes and the old identity."""
    configs = [json.loads(s["spec"]["config"]) for s in shadows]
    configs.append(dict(world.node.primary_network()["plugins"][0], name=PRIMARY, cniVersion="1.0.0"))
    for conf, ifname in zip(configs, ("dra0", "dra1", "eth0"), strict=True):
        ipam = conf["ipam"]
        plugin = world.node.bin_dir / ipam["type"]
        stdin = {"cniVersion": conf["cniVersion"], "name": conf["name"], "type": ipam["type"], "ipam": ipam}
        released = cni.invoke(plugin, "DEL", dataclasses.replace(att, ifname=ifname), stdin)
        assert released.ok, released.stdout + released.stderr
