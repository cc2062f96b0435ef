"""Device health on real igb VFs: the PF's link down makes its VFs Unhealthy through the host reader.

The reader is the plugin's own (``host.vf_health_reader`` over ``/sys`` and netlink in the guest's
namespace, as the plugin reads a node's host namespace); the link is taken down with iproute2,
independently of the plugin's code.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.realvf.guest.realvfs import RealPf, wait_until

from sriov_dra.core import device_health as dh
from sriov_dra.driver import device_health_monitor
from sriov_dra.host import discovery, netlink, vf_health_reader
from sriov_dra.host import sysfs as sysfs_mod


def _ip_link_set(pf: str, state: str) -> None:
    subprocess.run(["ip", "link", "set", pf, state], check=True, capture_output=True, timeout=30)


def test_igb_pf_link_down_makes_its_vfs_unhealthy_and_up_healthy_again(real_pfs: list[RealPf]) -> None:
    sysfs = sysfs_mod.Sysfs(Path("/"))
    inventory = discovery.by_name(discovery.discover(sysfs))
    targets = device_health_monitor.watch_targets("guest", inventory, inventory, [])
    pf, other = real_pfs
    mine = [t for t in targets if t.pf_pci_address == pf.bdf]
    theirs = [t for t in targets if t.pf_pci_address == other.bdf]
    assert mine and theirs
    reader = vf_health_reader.VfHealthReader(sysfs)

    def verdicts(of: list[dh.HealthTarget]) -> dict[str, dh.Verdict]:
        readings = reader.read(of)
        return {t.device: dh.decide(t, readings[t.device]) for t in of}

    was_up = netlink.carrier_states()[pf.ifname].admin_up
    _ip_link_set(pf.ifname, "up")
    try:
        wait_until(
            f"{pf.ifname} up with carrier: its VFs Healthy",
            lambda: {v.health for v in verdicts(mine).values()} == {dh.Health.HEALTHY},
        )
        before = verdicts(theirs)
        _ip_link_set(pf.ifname, "down")
        down = verdicts(mine)
        assert {v.health for v in down.values()} == {dh.Health.UNHEALTHY}, down
        assert {v.reason for v in down.values()} == {f"PF {pf.ifname} is down (operstate down)"}
        assert {n: v.health for n, v in verdicts(theirs).items()} == {n: v.health for n, v in before.items()}
        _ip_link_set(pf.ifname, "up")
        wait_until(
            f"{pf.ifname} up again: its VFs Healthy",
            lambda: {v.health for v in verdicts(mine).values()} == {dh.Health.HEALTHY},
        )
    finally:
        _ip_link_set(pf.ifname, "up" if was_up else "down")
