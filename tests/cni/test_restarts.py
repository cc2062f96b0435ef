"""Daemon restarts between ADD and DEL keep the host state and lose no attachment (docs/design.md#cni-teardown).

Two managed Pods (four lab VFs, two rails each) are attached one after the other with a restart
of one daemon after each ADD: the guard daemon (thin and thick), or the thick ``multus-daemon``.
The restarted process keeps its on-disk state (Multus's delegate cache in ``cniDir``, host-local's
data dir, the lab VF plugin's state dir, whereabouts' IPPools), so:

* the second ADD after the first restart works;
* each sandbox's delegate cache written before a restart is still there after it, and DEL replays
  it: every delegate's DEL runs, every interface leaves the sandbox, every VF is back on the host
  and no IPAM reservation of either Pod remains;
* a new ADD (a recreated sandbox of the first Pod) works after the restarts and its DEL leaves
  nothing either.
"""

from __future__ import annotations

import pytest
from tests.cni.world import DELEGATE_DELS, RAIL_A, RAIL_B, Rail, World

from sriov_dra.host import netlink
from sriov_dra_lab import cni

# The second Pod's VFs: other PCI addresses on the same rails (same source NADs, networks, ranges).
RAIL_A2 = Rail(RAIL_A.source, RAIL_A.cni_name, "0000:03:00.2", RAIL_A.subnet, RAIL_A.ipam)
RAIL_B2 = Rail(RAIL_B.source, RAIL_B.cni_name, "0000:80:00.2", RAIL_B.subnet, RAIL_B.ipam)


def _restart(world: World, daemon: str) -> None:
    if daemon == "guard":
        assert world.node.guard is not None
        before = world.node.guard.process.pid if world.node.guard.process else None
        world.node.restart_guard()
        assert world.node.guard.process is not None and world.node.guard.process.pid != before
    else:
        assert world.node.thick is not None
        before = world.node.thick.process.pid if world.node.thick.process else None
        world.node.restart_thick()
        assert world.node.thick.process is not None and world.node.thick.process.pid != before


def _delegate_dels(world: World, att: cni.Attachment) -> list[str]:
    """The plugins DEL ran for ``att`` after Multus itself (the recorded DEL calls but the first)."""
    return [c.plugin for c in world.node.recorded(att.container_id) if c.command == "DEL"][1:]


def _held_by(world: World, att: cni.Attachment) -> list[str]:
    held = [
        net
        for net in ("lab-primary", RAIL_A.cni_name)
        if att.container_id in world.host_local_reservations(net).values()
    ]
    pool = world.ippool_allocations(RAIL_B).values()
    return held + [RAIL_B.cni_name for a in pool if a.get("id") == att.container_id]


@pytest.mark.parametrize(
    ("mode", "daemon"),
    [("thin", "guard"), ("thick", "guard"), ("thick", "multus-daemon")],
    ids=["thin-guard-restart", "thick-guard-restart", "thick-multus-daemon-restart"],
)
def test_restarts_between_adds_and_dels_keep_caches_so_del_releases_everything_and_add_works(
    world: World, mode: str, daemon: str
) -> None:
    world.add_vfs([RAIL_A2.pci, RAIL_B2.pci])
    first = world.managed_pod("first")
    second = world.managed_pod("second", rails=(RAIL_A2, RAIL_B2))
    cache = world.multus_cache_dir(mode)

    att1, added1 = world.attach(mode, first.name, uid=first.uid)
    assert added1.ok, added1.stdout
    _restart(world, daemon)
    att2, added2 = world.attach(mode, second.name, uid=second.uid)
    assert added2.ok, added2.stdout
    _restart(world, daemon)

    for att in (att1, att2):
        assert (cache / att.container_id).exists()  # the delegate cache survived the restarts
        assert sorted(_held_by(world, att)) == sorted(["lab-primary", RAIL_A.cni_name, RAIL_B.cni_name])
        assert {"eth0", "dra0", "dra1"} <= netlink.link_names(att.netns)
        deleted = world.delete(mode, att)
        assert deleted.ok, deleted.stdout + deleted.stderr
        assert _delegate_dels(world, att) == DELEGATE_DELS
        assert not (cache / att.container_id).exists()
        assert set(netlink.link_names(att.netns)) == {"lo"}
        assert _held_by(world, att) == []
    assert {vf.ifname for vf in world.vfs} <= netlink.link_names(None)
    assert world.host_local_files(RAIL_A) == [] and world.ippool_allocations(RAIL_B) == {}

    again, readded = world.attach(mode, first.name, uid=first.uid)  # a recreated sandbox
    assert readded.ok, readded.stdout
    assert {"eth0", "dra0", "dra1"} <= netlink.link_names(again.netns)
    assert world.delete(mode, again).ok
    assert set(netlink.link_names(again.netns)) == {"lo"} and _held_by(world, again) == []
    assert world.host_local_files(RAIL_A) == [] and world.ippool_allocations(RAIL_B) == {}
