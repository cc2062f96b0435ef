"""``sriov_numvfs`` on the real kernel through the collection's ``module_utils/numvfs.py`` rules.

The session fixture made 0 -> 4 on both PFs; these tests use the second PF (pci0000:40) and leave it
at 4 VFs on igbvf again.
"""

from __future__ import annotations

import errno

import pytest
from tests.realvf.guest.realvfs import (
    NUM_VFS,
    SESSION_WRITES,
    SYS_PCI,
    VF_DRIVER,
    RealPf,
    collection_module_utils,
    raw_vfs,
    read,
    vfs_ready,
    wait_until,
    write,
)

collection_module_utils()
from ansible_collections.sriovnet.dra.plugins.module_utils import numvfs, sysfs  # noqa: E402


def _numvfs(pf: RealPf) -> int:
    return int(read(SYS_PCI / pf.bdf / "sriov_numvfs"))


def test_numvfs_zero_to_four_wrote_the_count_once_and_the_kernel_made_igbvf_vfs(
    real_pfs: list[RealPf],
) -> None:
    for pf in real_pfs:
        assert SESSION_WRITES[pf.bdf][0] == f"{SYS_PCI / pf.bdf / 'sriov_numvfs'}=4"
        assert not any("sriov_numvfs" in w for w in SESSION_WRITES[pf.bdf][1:])
        vfs = raw_vfs(pf)
        assert [v.index for v in vfs] == list(range(NUM_VFS))
        assert all(v.driver == VF_DRIVER and v.device_id == "10ca" and v.net for v in vfs)


def test_numvfs_four_to_two_is_refused_without_a_drain_as_the_kernel_refuses_it_with_ebusy(
    real_pfs: list[RealPf],
) -> None:
    pf = real_pfs[1]
    with pytest.raises(numvfs.NumVfsError, match="drain_confirmed=true"):
        numvfs.plan(sysfs.Sysfs("/"), pf.bdf, 2, False)
    with pytest.raises(OSError) as raised:
        write(SYS_PCI / pf.bdf / "sriov_numvfs", "2")
    assert raised.value.errno == errno.EBUSY
    assert _numvfs(pf) == NUM_VFS


def test_numvfs_above_total_is_refused_before_any_write_and_the_kernel_says_erange(
    real_pfs: list[RealPf],
) -> None:
    pf = real_pfs[1]
    with pytest.raises(numvfs.NumVfsError, match=f"sriov_totalvfs is {pf.totalvfs}"):
        numvfs.plan(sysfs.Sysfs("/"), pf.bdf, pf.totalvfs + 1, True)
    with pytest.raises(OSError) as raised:
        write(SYS_PCI / pf.bdf / "sriov_numvfs", str(pf.totalvfs + 1))
    assert raised.value.errno == errno.ERANGE
    assert _numvfs(pf) == NUM_VFS


def test_numvfs_with_a_drain_goes_four_to_two_through_zero_and_back(real_pfs: list[RealPf]) -> None:
    pf = real_pfs[1]
    reader = sysfs.Sysfs("/")
    path = SYS_PCI / pf.bdf / "sriov_numvfs"
    try:
        writes = numvfs.converge(reader, numvfs.plan(reader, pf.bdf, 2, True), VF_DRIVER, 30)
        assert [w for w in writes if "sriov_numvfs" in w] == [f"{path}=0", f"{path}=2"]
        assert len(raw_vfs(pf)) == 2
    finally:
        writes = numvfs.converge(reader, numvfs.plan(reader, pf.bdf, NUM_VFS, True), VF_DRIVER, 30)
    assert [w for w in writes if "sriov_numvfs" in w] == [f"{path}=0", f"{path}={NUM_VFS}"]
    wait_until(f"{NUM_VFS} igbvf VFs with netdevs", lambda: vfs_ready(pf))


def test_numvfs_rerun_with_the_same_count_writes_nothing_and_the_kernel_accepts_the_same_count(
    real_pfs: list[RealPf],
) -> None:
    pf = real_pfs[1]
    reader = sysfs.Sysfs("/")
    change = numvfs.plan(reader, pf.bdf, NUM_VFS, False)
    assert change.count_changes is False
    assert numvfs.rebinds(reader, change, VF_DRIVER, False) == []
    assert numvfs.converge(reader, change, VF_DRIVER, 30) == []
    numvfs.verify(reader, change, VF_DRIVER, 5)
    write(SYS_PCI / pf.bdf / "sriov_numvfs", str(NUM_VFS))
    assert _numvfs(pf) == NUM_VFS
