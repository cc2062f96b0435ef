"""An ADD that failed before the VF plugin cached anything must not make DEL fail.

sriov-cni #212: VF setup failed during ADD before sriov-cni saved its cache; every later DEL
failed reading that cache and the VF was never reset. Our parts under test are the guard's DEL
path (the shim hands DEL to Multus with the same synthesized config, no shadow read) and the lab
``sriov`` plugin that stands in for sriov-cni: a DEL with no record of an ADD is success. The
plugin's side of it (unprepare restores the VF's driver whether or not CNI DEL ever ran) is
``tests/host/driver/test_prepare_handler.py::test_named_driver_is_bound_exposed_in_cdi_and_restored_on_unprepare``,
which unprepares with no CNI call at all.

Here rail B's VF vanishes from the host before the ADD, so its VF setup fails after rail A (host-local)
was attached; the ADD fails, and the runtime's DEL then succeeds and leaves no address reserved,
no interface in the sandbox and rail A's VF back on the host.
"""

from __future__ import annotations

import pytest
from tests.cni.world import RAIL_A, RAIL_B, World

from sriov_dra.host import netlink
from sriov_dra_lab.fakes import net_edit


@pytest.mark.parametrize("mode", ["thin", "thick"])
def test_del_after_an_add_that_failed_in_vf_setup_succeeds_and_leaks_nothing(world: World, mode: str) -> None:
    pod = world.managed_pod("vf-setup-fails")
    rail_b_vf = next(vf for vf in world.vfs if vf.pci == RAIL_B.pci)
    net_edit.delete_link(rail_b_vf.ifname)  # the VF's setup will fail: its netdevice is gone

    att = world.attachment(pod.name, uid=pod.uid)
    added = world.add(mode, att)
    assert not added.ok, added.stdout
    assert rail_b_vf.ifname in str((added.error or {}).get("msg", "")) + str(
        (added.error or {}).get("details", "")
    ), added.stdout

    deleted = world.delete(mode, att)
    assert deleted.ok, deleted.stdout + deleted.stderr
    assert set(netlink.link_names(att.netns)) == {"lo"}
    rail_a_vf = next(vf for vf in world.vfs if vf.pci == RAIL_A.pci)
    assert rail_a_vf.ifname in netlink.link_names(None)  # rail A's VF is back on the host
    assert world.host_local_files(RAIL_A) == [] and world.ippool_allocations(RAIL_B) == {}

    again = world.delete(mode, att)  # the runtime may repeat DEL; still nothing to undo
    assert again.ok, again.stdout + again.stderr
