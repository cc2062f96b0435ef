"""A VF in use by a Pod on a fake tree that shows what the real kernel shows.

Measured on real igbvf VFs (tests/realvf): a VF whose netdev was moved into a Pod's netns has an
empty ``net/`` in the host's sysfs, a driver that created no netdev leaves no ``net/`` at all, and
a netns deleted before CNI DEL hands the VF back under the Pod's interface name (``net1``).
``fake_sysfs.FakeSysfs.move_netdev_out`` and ``return_netdev`` reproduce that here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sriov_dra.core import identities
from sriov_dra.host import discovery, vf_driver_binding
from sriov_dra_lab.fakes import fake_pci, fake_sysfs

PF = identities.PciAddress("0000:03:00.0")


def _tree(root: Path) -> tuple[fake_sysfs.FakeSysfs, identities.PciAddress]:
    pf = fake_pci.FakePf(bdf=PF, ifname="enp3s0f0", vfs=fake_pci.make_vfs(2))
    fake = fake_sysfs.build(root, [pf])
    return fake, fake_pci.vf_address(PF, 1)


def test_a_netdev_moved_into_a_pod_netns_leaves_an_empty_net_directory_on_the_host(tmp_path: Path) -> None:
    fake, vf = _tree(tmp_path)
    assert fake.move_netdev_out(vf) == "enp3s0f0v1"
    net = fake.sysfs.pci_device_dir(vf) / "net"
    assert net.is_dir() and list(net.iterdir()) == []
    assert not fake.sysfs.path("class", "net", "enp3s0f0v1").exists()


def test_unbinding_removes_the_net_directory_with_the_last_netdev(tmp_path: Path) -> None:
    fake, vf = _tree(tmp_path)
    fake.move_netdev_out(vf)
    fake.detach_driver(vf)
    assert not (fake.sysfs.pci_device_dir(vf) / "net").exists()


def test_rerunning_the_host_stage_accepts_a_vf_whose_netdev_is_in_a_pod_netns(tmp_path: Path) -> None:
    fake, vf = _tree(tmp_path)
    fake.move_netdev_out(vf)
    kernel = fake.kernel()
    binder = vf_driver_binding.DriverBinder(fake.sysfs, kernel=kernel)
    for requested in (vf_driver_binding.KEEP, vf_driver_binding.DEFAULT):
        record = binder.apply(vf, requested, require_netdevice=True)
        assert (record.changed, record.driver) == (False, "iavf")
    assert binder.check_netdevice(vf) is None
    assert kernel.calls == []


def test_a_vf_unbound_after_its_netdev_left_is_still_refused(tmp_path: Path) -> None:
    fake, vf = _tree(tmp_path)
    fake.move_netdev_out(vf)
    fake.detach_driver(vf)
    binder = vf_driver_binding.DriverBinder(fake.sysfs, kernel=fake.kernel())
    with pytest.raises(vf_driver_binding.UnsupportedVfDriver, match="not bound to any driver"):
        binder.check_netdevice(vf)


def _same_device(a: discovery.DiscoveredVf, b: discovery.DiscoveredVf) -> bool:
    keep = ("name", "pci_address", "vf_id", "pf_name", "pcie_root", "numa_node", "driver")
    return all(getattr(a, k) == getattr(b, k) for k in keep) and dict(a.attributes) == dict(b.attributes)


def test_a_vf_inside_a_pod_netns_is_discovered_as_the_same_device_without_a_netdev(tmp_path: Path) -> None:
    fake, vf = _tree(tmp_path)
    before = discovery.by_name(discovery.discover(fake.sysfs))
    fake.move_netdev_out(vf)
    now = discovery.by_name(discovery.discover(fake.sysfs))
    name = discovery.device_name(vf)
    assert _same_device(now[name], before[name])
    assert (before[name].netdev, now[name].netdev) == ("enp3s0f0v1", None)


def test_a_vf_returned_as_net1_by_a_deleted_pod_netns_is_discovered_as_the_same_device(
    tmp_path: Path,
) -> None:
    fake, vf = _tree(tmp_path)
    before = discovery.by_name(discovery.discover(fake.sysfs))
    fake.move_netdev_out(vf)
    fake.return_netdev(vf, "net1")
    now = discovery.by_name(discovery.discover(fake.sysfs))
    name = discovery.device_name(vf)
    assert _same_device(now[name], before[name])
    assert now[name].netdev == "net1"
    assert vf_driver_binding.DriverBinder(fake.sysfs, kernel=fake.kernel()).check_netdevice(vf) == "net1"
