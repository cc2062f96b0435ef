"""Driver binding on real VFs through ``sriov_dra.host.vf_driver_binding``: igbvf <-> vfio-pci with the vIOMMU,
``default`` through ``drivers_probe``, the managed-mode netdevice check on a VF in use, and the
restore of the checkpointed original driver after a crash between unbind and bind.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from tests.realvf.guest.realvfs import SYS_PCI, VF_DRIVER, RawVf, raw_vf, wait_until, write

from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra.host import vf_driver_binding
from sriov_dra_lab.fakes import net_edit


def _binder() -> vf_driver_binding.DriverBinder:
    reader = sysfs_mod.Sysfs(Path("/"))
    return vf_driver_binding.DriverBinder(reader, kernel=vf_driver_binding.SysfsKernelPci(reader))


def _vfio_group(bdf: str) -> Path:
    return Path("/dev/vfio") / os.path.basename(os.readlink(SYS_PCI / bdf / "iommu_group"))


def test_a_real_vf_binds_to_vfio_pci_through_the_viommu_and_restores_to_igbvf(all_vfs: list[RawVf]) -> None:
    vf = all_vfs[1]
    binder = _binder()
    record = binder.apply(vf.bdf, "vfio-pci")
    try:
        assert (record.changed, record.original_driver, record.driver) == (True, VF_DRIVER, "vfio-pci")
        now = raw_vf(vf.bdf)
        assert now.driver == "vfio-pci"
        assert now.net is None, "a function without netdevs has no net/ directory at all"
        assert _vfio_group(vf.bdf).exists()
        assert (SYS_PCI / vf.bdf / "driver_override").read_text().strip() == "(null)"
    finally:
        assert (
            binder.restore(
                record.pci_address, requested=record.requested, original_driver=record.original_driver
            )
            is True
        )
    wait_until("an igbvf netdev back", lambda: bool(raw_vf(vf.bdf).net))
    assert raw_vf(vf.bdf).driver == VF_DRIVER


def test_default_rebinds_a_vfio_vf_to_igbvf_through_drivers_probe(all_vfs: list[RawVf]) -> None:
    vf = all_vfs[2]
    binder = _binder()
    binder.apply(vf.bdf, "vfio-pci")
    record = binder.apply(vf.bdf, vf_driver_binding.DEFAULT, require_netdevice=True)
    assert (record.changed, record.original_driver, record.driver) == (True, "vfio-pci", VF_DRIVER)
    assert (SYS_PCI / vf.bdf / "driver_override").read_text().strip() == "(null)"
    wait_until("an igbvf netdev back", lambda: bool(raw_vf(vf.bdf).net))


def test_rerunning_the_host_stage_accepts_a_vf_whose_netdev_is_in_a_pod_netns(all_vfs: list[RawVf]) -> None:
    vf = all_vfs[3]
    (name,) = vf.net or ("",)
    binder = _binder()
    pod = f"realvf-{uuid.uuid4().hex[:8]}"
    path = net_edit.create_netns(pod)
    try:
        net_edit.move_link(name, target_netns=path, new_name="net1")
        assert raw_vf(vf.bdf).net == ()
        for requested in (vf_driver_binding.KEEP, vf_driver_binding.DEFAULT):
            record = binder.apply(vf.bdf, requested, require_netdevice=True)
            assert (record.changed, record.driver) == (False, VF_DRIVER)
        assert binder.check_netdevice(vf.bdf) is None
        net_edit.move_link("net1", target_netns=None, new_name=name, netns_path=path)
    finally:
        net_edit.remove_netns(pod)
    wait_until(f"{name} back in the host namespace", lambda: raw_vf(vf.bdf).net == (name,))


def test_managed_mode_still_refuses_a_real_vf_on_vfio_pci(all_vfs: list[RawVf]) -> None:
    vf = all_vfs[4]
    binder = _binder()
    record = binder.apply(vf.bdf, "vfio-pci")
    try:
        with pytest.raises(vf_driver_binding.UnsupportedVfDriver, match="userspace"):
            binder.apply(vf.bdf, vf_driver_binding.KEEP, require_netdevice=True)
    finally:
        binder.restore(record.pci_address, requested=record.requested, original_driver=record.original_driver)
    wait_until("an igbvf netdev back", lambda: bool(raw_vf(vf.bdf).net))


def test_restore_after_a_crash_between_unbind_and_bind_puts_the_recorded_igbvf_back(
    all_vfs: list[RawVf],
) -> None:
    # The plugin died after unbinding igbvf and writing vfio-pci's override, before the bind:
    # the VF is unbound with a stale override. Restoring from the checkpointed original driver
    # must bind igbvf again and clear the override.
    vf = all_vfs[5]
    write(SYS_PCI / vf.bdf / "driver_override", "vfio-pci")
    write(Path("/sys/bus/pci/drivers") / VF_DRIVER / "unbind", vf.bdf)
    assert raw_vf(vf.bdf).driver is None
    assert _binder().restore(vf.bdf, requested="vfio-pci", original_driver=VF_DRIVER) is True
    assert raw_vf(vf.bdf).driver == VF_DRIVER
    assert (SYS_PCI / vf.bdf / "driver_override").read_text().strip() == "(null)"
    wait_until("an igbvf netdev back", lambda: bool(raw_vf(vf.bdf).net))
