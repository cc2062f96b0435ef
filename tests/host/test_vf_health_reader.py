"""VF health read from the node (``host.vf_health_reader``): a fake sysfs tree whose PF netdev is a real veth in a netns.

The PF's link state is the kernel's netlink answer for a real interface (admin state, carrier),
read the same way the plugin reads a real PF in the host namespace; only the PCI side is a fake
tree. Root-only (the namespace and the veth are real).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from sriov_dra.core import device_health as dh
from sriov_dra.driver import device_health_monitor
from sriov_dra.host import discovery, netlink, vf_health_reader
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra_lab.fakes import fake_pci, fake_sysfs, net_edit

PF_BDF = "0000:03:00.0"


def setup(
    tmp_path: Path, netns: str
) -> tuple[fake_sysfs.FakeSysfs, vf_health_reader.VfHealthReader, dh.HealthTarget, str]:
    """A fake PF with one iavf VF whose netdev is veth ``<pf>`` (peer ``<pf>p``, both up) in ``netns``."""
    pf_name = f"hp{uuid.uuid4().hex[:6]}"
    fake = fake_sysfs.build(tmp_path, [fake_pci.FakePf(bdf=PF_BDF, ifname=pf_name, vfs=(fake_pci.FakeVf(),))])
    net_edit.create_veth_pair(pf_name, f"{pf_name}p", netns_path=netns)
    net_edit.set_up(pf_name, netns_path=netns)
    net_edit.set_up(f"{pf_name}p", netns_path=netns)
    sysfs = sysfs_mod.Sysfs(tmp_path)
    inventory = discovery.by_name(discovery.discover(sysfs))
    (target,) = device_health_monitor.watch_targets("node-1", inventory, inventory, [])
    reader = vf_health_reader.VfHealthReader(sysfs, links=lambda: netlink.carrier_states(netns))
    return fake, reader, target, pf_name


def health(reader: vf_health_reader.VfHealthReader, target: dh.HealthTarget) -> dh.Verdict:
    return dh.decide(target, reader.read([target])[target.device])


def test_pf_link_down_makes_its_vf_unhealthy_and_up_healthy_again(tmp_path: Path, scratch_netns: str) -> None:
    _, reader, target, pf = setup(tmp_path, scratch_netns)
    assert health(reader, target) == dh.Verdict(
        dh.Health.HEALTHY, f"VF {target.pci_address} bound to iavf; PF {pf} up with carrier"
    )
    net_edit.set_up(pf, netns_path=scratch_netns, up=False)
    assert health(reader, target) == dh.Verdict(
        dh.Health.UNHEALTHY, f"PF {pf} is down (operstate down)", dh.Cause.PF_DOWN
    )
    net_edit.set_up(pf, netns_path=scratch_netns)
    assert health(reader, target).health is dh.Health.HEALTHY


def test_pf_without_carrier_makes_its_vf_unhealthy(tmp_path: Path, scratch_netns: str) -> None:
    _, reader, target, pf = setup(tmp_path, scratch_netns)
    net_edit.set_up(f"{pf}p", netns_path=scratch_netns, up=False)  # the far end: the kernel drops carrier
    verdict = health(reader, target)
    assert verdict.health is dh.Health.UNHEALTHY
    assert verdict.reason.startswith(f"PF {pf} has no carrier (operstate ")
    assert verdict.cause is dh.Cause.PF_NO_CARRIER


def test_vf_unbound_from_its_driver_is_unhealthy(tmp_path: Path, scratch_netns: str) -> None:
    fake, reader, target, _ = setup(tmp_path, scratch_netns)
    fake.detach_driver(target.pci_address)
    assert health(reader, target) == dh.Verdict(
        dh.Health.UNHEALTHY, f"VF {target.pci_address} is unbound, expected iavf", dh.Cause.VF_WRONG_DRIVER
    )


def test_vf_removed_from_sysfs_is_unhealthy(tmp_path: Path, scratch_netns: str) -> None:
    _, reader, target, _ = setup(tmp_path, scratch_netns)
    (tmp_path / "sys" / "bus" / "pci" / "devices" / target.pci_address).unlink()
    assert health(reader, target) == dh.Verdict(
        dh.Health.UNHEALTHY, f"VF {target.pci_address} is gone from sysfs", dh.Cause.VF_GONE
    )


def test_links_that_cannot_be_listed_make_the_vf_unknown(tmp_path: Path, scratch_netns: str) -> None:
    _, _, target, pf = setup(tmp_path, scratch_netns)
    gone = f"/var/run/netns/absent-{uuid.uuid4().hex[:8]}"
    reader = vf_health_reader.VfHealthReader(
        sysfs_mod.Sysfs(tmp_path), links=lambda: netlink.carrier_states(gone)
    )
    verdict = health(reader, target)
    assert verdict.health is dh.Health.UNKNOWN
    assert verdict.reason.startswith(f"PF {pf}: cannot list the links of the plugin's network namespace")


def test_pf_interface_outside_the_plugins_namespace_is_unknown(tmp_path: Path, scratch_netns: str) -> None:
    # The plugin reads its own namespace, which lacks the veth: a plugin without hostNetwork.
    _, _, target, pf = setup(tmp_path, scratch_netns)
    reader = vf_health_reader.VfHealthReader(sysfs_mod.Sysfs(tmp_path))
    assert health(reader, target) == dh.Verdict(
        dh.Health.UNKNOWN,
        f"PF {pf} is not in the plugin's network namespace (run the plugin with hostNetwork)",
    )


def test_unreadable_driver_entry_makes_the_vf_unknown(tmp_path: Path, scratch_netns: str) -> None:
    fake, reader, target, _ = setup(tmp_path, scratch_netns)
    link = fake.device_dir(target.pci_address) / "driver"
    link.unlink()
    os.mkdir(link)  # readlink() fails with EINVAL: the node did not answer which driver is bound
    verdict = health(reader, target)
    assert verdict.health is dh.Health.UNKNOWN
    assert verdict.reason.startswith(f"VF {target.pci_address}: cannot read ")
    assert verdict.reason.endswith("/driver: Invalid argument (errno 22)")
