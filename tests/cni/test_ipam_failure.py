"""An IPAM failure on the second rail fails the ADD, undoes the first, and a retry works.

The contract: docs/design.md#cni-teardown.

The Pod's rails are A (host-local /24, ``dra0``) and a tiny rail (host-local on a /30: one usable
address, ``dra1``) whose only address another Pod (the holder) already has. The ADD through the
guard and real Multus therefore fails in the tiny rail's IPAM after rail A was attached. Asserted:

* the ADD fails and the error the runtime sees is host-local's own (``no IP addresses available``)
  naming the tiny network;
* Multus's rollback already ran DEL for the attached delegates (rail A, the primary), so the
  sandbox has only ``lo``, both VFs are back on the host, no reservation of that sandbox remains
  on the primary or rail A, and the holder still has the tiny rail's address;
* the runtime's DEL of the failed sandbox succeeds and changes nothing else;
* after the holder is detached (the range is free), the kubelet-style retry in a new sandbox gets
  ``dra1`` with the freed address, and its DEL leaves no interface and no reservation.
"""

from __future__ import annotations

import pytest
from tests.cni.world import RAIL_A, Rail, World

from sriov_dra.host import netlink
from sriov_dra_lab import cni

# host-local's range set of a /30 is .253-.254 and its default gateway (.253) is never handed out,
# so .254 is the tiny rail's only address.
TINY = Rail("tiny-net", "tiny", "0000:81:00.1", "203.0.113.252/30", "host-local")
TINY_HOLDER = Rail(TINY.source, TINY.cni_name, "0000:81:00.2", TINY.subnet, TINY.ipam)
PRIMARY = "lab-primary"


def _reserved_by(world: World, att: cni.Attachment) -> list[str]:
    return [
        net
        for net in (PRIMARY, RAIL_A.cni_name, TINY.cni_name)
        if att.container_id in world.host_local_reservations(net).values()
    ]


@pytest.mark.parametrize("mode", ["thin", "thick"])
def test_ipam_exhaustion_fails_add_with_the_ipam_error_rolls_back_the_other_rail_and_retry_succeeds(
    world: World, mode: str
) -> None:
    world.add_vfs([TINY.pci, TINY_HOLDER.pci])
    holder_pod = world.managed_pod("holder", rails=(TINY_HOLDER,))
    pod = world.managed_pod("trainer", rails=(RAIL_A, TINY))
    holder, held = world.attach(mode, holder_pod.name, uid=holder_pod.uid)
    assert held.ok, held.stdout
    assert list(world.host_local_reservations(TINY.cni_name).values()) == [holder.container_id]

    failed = world.attachment(pod.name, uid=pod.uid)
    added = world.add(mode, failed)

    assert not added.ok, added.stdout
    error = added.error or {}
    text = f"{error.get('msg', '')} {error.get('details', '')}"
    assert 'error adding container to network "tiny"' in text, added.stdout
    assert "no IP addresses available in range set: 203.0.113.253-203.0.113.254" in text, added.stdout
    assert set(netlink.link_names(failed.netns)) == {"lo"}
    assert {vf.ifname for vf in world.vfs if vf.pci in (RAIL_A.pci, TINY.pci)} <= netlink.link_names(None)
    assert _reserved_by(world, failed) == []
    assert list(world.host_local_reservations(TINY.cni_name).values()) == [holder.container_id]
    ran = [(c.plugin, c.command) for c in world.node.recorded(failed.container_id)]
    assert ("host-local", "DEL") in ran and ran.count(("sriov", "DEL")) == 2  # Multus's rollback

    deleted = world.delete(mode, failed)  # the runtime tears the failed sandbox down
    assert deleted.ok, deleted.stdout + deleted.stderr
    assert _reserved_by(world, failed) == []
    assert list(world.host_local_reservations(TINY.cni_name).values()) == [holder.container_id]

    assert world.delete(mode, holder).ok  # the range is free again
    assert world.host_local_reservations(TINY.cni_name) == {}

    retry, retried = world.attach(mode, pod.name, uid=pod.uid)
    assert retried.ok, retried.stdout
    links = {link.name: link for link in netlink.links(retry.netns)}
    assert links["dra1"].addresses == ("203.0.113.254/30",)  # the freed address
    assert world.host_local_reservations(TINY.cni_name) == {"203.0.113.254": retry.container_id}

    deleted = world.delete(mode, retry)
    assert deleted.ok, deleted.stdout + deleted.stderr
    assert set(netlink.link_names(retry.netns)) == {"lo"}
    assert _reserved_by(world, retry) == [] and world.host_local_reservations(TINY.cni_name) == {}
    assert world.host_local_files(RAIL_A) == []
    assert {vf.ifname for vf in world.vfs} <= netlink.link_names(None)
