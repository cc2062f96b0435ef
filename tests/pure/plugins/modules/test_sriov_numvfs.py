"""Tests for ``plugins/modules/sriov_numvfs.py``: a non-zero count changes through 0
(openshift/sriov-network-operator #131), errno classes, check mode, drivers.

A fake SR-IOV kernel (``tests/ansible/fake_sriov_kernel.py``) stands in for the kernel behind
the module's ``writer`` seam: it creates and removes VFs, refuses non-zero to non-zero with EBUSY,
and fails scripted writes with a chosen errno.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from ansible_collections.sriovnet.dra.plugins.module_utils import numvfs
from ansible_collections.sriovnet.dra.plugins.modules import sriov_numvfs
from tests.ansible import fake_sriov_kernel
from tests.pure.plugins import harness

from sriov_dra_lab.fakes import fake_pci, fake_sysfs

PF0, PF0_BDF = "enp3s0f0", "0000:03:00.0"  # 0 VFs, sriov_totalvfs 64
PF1, PF1_BDF = "enp129s0f0", "0000:81:00.0"  # 63 VFs, sriov_totalvfs 64


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> fake_sriov_kernel.FakeSriovKernel:
    first, second = fake_pci.two_root_pfs(0)
    fake_sysfs.build(
        tmp_path,
        (
            fake_pci.FakePf(**{**vars(first), "totalvfs": 64}),
            fake_pci.FakePf(**{**vars(second), "totalvfs": 64, "vfs": fake_pci.make_vfs(63)}),
        ),
    )
    fake = fake_sriov_kernel.FakeSriovKernel(tmp_path)
    monkeypatch.setattr(numvfs, "write_attribute", fake.write)
    return fake


def _numvfs_path(root: Path, bdf: str) -> str:
    return f"{root}/sys/bus/pci/devices/{bdf}/sriov_numvfs"


def _run(
    kernel: fake_sriov_kernel.FakeSriovKernel, pf: str, count: int, **extra: object
) -> dict[str, object]:
    check = bool(extra.pop("check_mode", False))
    diff = bool(extra.pop("diff", False))
    params = {"pf": pf, "num_vfs": count, "host_root": str(kernel.root), "timeout": 1, **extra}
    return harness.run_module(sriov_numvfs, params, check_mode=check, diff=diff)


def _links(kernel: fake_sriov_kernel.FakeSriovKernel, bdf: str) -> int:
    return len(kernel.fake.sysfs.virtfns(bdf))


# --- count changes through 0 (EBUSY) --------------------------------------------------------------------------


def test_equal_count_writes_nothing_and_reports_unchanged(kernel):
    result = _run(kernel, PF1, 63)
    assert result["changed"] is False
    assert kernel.calls == []
    assert (result["previous_num_vfs"], result["num_vfs"], result["writes"]) == (63, 63, [])


def test_nonzero_to_other_nonzero_is_refused_before_writing_without_drain(kernel):
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(kernel, PF1, 4)
    assert failed.value.msg == (
        "PF enp129s0f0 (0000:81:00.0) has 63 VFs and 4 are requested; the kernel refuses to change a non-zero "
        "VF count directly (EBUSY) and removing VFs breaks the Pods that use them, so nothing was written. "
        "Drain the node (role sriovnet.dra.drain), then rerun with drain_confirmed=true: the module writes 0, "
        "then 4."
    )
    assert kernel.calls == []
    assert _links(kernel, PF1_BDF) == 63


def test_removing_all_vfs_also_needs_drain_confirmed(kernel):
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(kernel, PF1, 0)
    assert failed.value.msg.endswith("rerun with drain_confirmed=true: the module writes 0.")
    assert kernel.calls == []


def test_with_drain_confirmed_writes_zero_then_the_new_count(kernel, tmp_path):
    result = _run(kernel, PF1, 4, drain_confirmed=True)
    path = _numvfs_path(tmp_path, PF1_BDF)
    assert result["changed"] is True
    assert kernel.calls == [(path, "0"), (path, "4")]
    assert result["writes"] == [f"{path}=0", f"{path}=4"]
    assert _links(kernel, PF1_BDF) == 4
    assert [vf["vf_id"] for vf in result["vfs"]] == [0, 1, 2, 3]


def test_above_totalvfs_fails_before_writing(kernel):
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(kernel, PF0, 65)
    assert failed.value.msg == (
        "PF enp3s0f0 (0000:03:00.0): 65 VFs requested but sriov_totalvfs is 64; nothing was written. "
        "Request at most 64 VFs, or raise the firmware VF limit and reboot."
    )
    assert kernel.calls == []


def test_ebusy_after_reset_to_zero_fails_with_pf_and_both_counts_and_no_retry(kernel, tmp_path):
    path = _numvfs_path(tmp_path, PF1_BDF)
    kernel.fail_next(path, errno.EBUSY, value="4")
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(kernel, PF1, 4, drain_confirmed=True)
    assert failed.value.msg == (
        f"PF enp129s0f0 (0000:81:00.0): writing 4 to {path} failed with EBUSY (Device or resource busy) "
        "while changing 63 -> 4 VFs: the driver or firmware still holds VFs (VFs in use, or a reset in "
        "progress). Not retried: check dmesg, free the VFs (drain the node, stop DPDK users), then rerun. "
        "The PF is now at 0 VFs: 0 was written and verified first, so the 63 VFs it had are gone until a "
        "rerun succeeds."
    )
    assert failed.value.result["errno"] == "EBUSY"
    assert failed.value.result["writes"] == [f"{path}=0"]
    assert kernel.calls == [(path, "0"), (path, "4")]  # exactly one attempt at 4: no blind retry loop


def test_failed_new_count_after_writing_zero_says_the_pf_is_now_at_zero_vfs(kernel, tmp_path):
    path = _numvfs_path(tmp_path, PF1_BDF)
    kernel.fail_next(path, errno.ENOSPC, value="64")
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(kernel, PF1, 64, drain_confirmed=True)
    assert failed.value.msg.endswith(
        "Lower num_vfs, raise the firmware limit, or boot with pci=realloc. The PF is now at 0 VFs: 0 was "
        "written and verified first, so the 63 VFs it had are gone until a rerun succeeds."
    )
    assert (kernel.fake.sysfs.sriov_numvfs(PF1_BDF), _links(kernel, PF1_BDF)) == (0, 0)


def test_second_run_after_a_change_is_a_no_op(kernel):
    assert _run(kernel, PF1, 4, drain_confirmed=True)["changed"] is True
    calls = len(kernel.calls)
    assert _run(kernel, PF1, 4, drain_confirmed=True)["changed"] is False
    assert len(kernel.calls) == calls


# --- errno classes of the numvfs write --------------------------------------------------------

ERRNO_CASES = [
    (
        errno.ENOSPC,
        "ENOSPC (No space left on device)",
        "the device cannot provide that many VFs (firmware VF limit, MSI-X vectors or PCI bus numbers). "
        "Lower num_vfs, raise the firmware limit, or boot with pci=realloc.",
    ),
    (
        errno.ERANGE,
        "ERANGE (Numerical result out of range)",
        "the kernel rejects the count as above sriov_totalvfs. Lower num_vfs to at most sriov_totalvfs.",
    ),
    (
        errno.ENOENT,
        "ENOENT (No such file or directory)",
        "the PF driver does not support setting VFs through sysfs (no sriov_configure), or the PF disappeared. "
        "Load a PF driver with SR-IOV support and check lspci -D.",
    ),
    (
        errno.ENOMEM,
        "ENOMEM (Cannot allocate memory)",
        "there is not enough PCI MMIO space for the VF BARs. Enable SR-IOV in the BIOS and boot with pci=realloc.",
    ),
    (
        errno.EBUSY,
        "EBUSY (Device or resource busy)",
        "the driver or firmware still holds VFs (VFs in use, or a reset in progress). Not retried: check dmesg, "
        "free the VFs (drain the node, stop DPDK users), then rerun.",
    ),
    (errno.EIO, "EIO (Input/output error)", "check dmesg for the driver's reason."),
]


@pytest.mark.parametrize(
    ("err", "named", "hint"),
    ERRNO_CASES,
    ids=[
        "enospc-names-firmware-limit-and-pci-realloc",
        "erange-names-totalvfs",
        "enoent-names-missing-sriov-configure",
        "enomem-names-mmio-and-pci-realloc",
        "ebusy-names-vfs-in-use-and-no-retry",
        "other-errno-by-name-with-dmesg",
    ],
)
def test_failed_write_keeps_the_first_errno_and_says_the_fix(kernel, tmp_path, err, named, hint):
    path = _numvfs_path(tmp_path, PF0_BDF)
    kernel.fail_next(path, err)
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(kernel, PF0, 8)
    assert failed.value.msg == (
        f"PF enp3s0f0 (0000:03:00.0): writing 8 to {path} failed with {named} while changing 0 -> 8 VFs: {hint}"
    )
    assert failed.value.result["errno"] == named.split()[0]
    assert failed.value.result["writes"] == []
    assert _links(kernel, PF0_BDF) == 0


def test_write_the_kernel_accepts_without_vfs_appearing_fails_verification(kernel, monkeypatch):
    monkeypatch.setattr(numvfs, "write_attribute", lambda path, text: None)  # accepted, nothing happens
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(kernel, PF0, 8, timeout=0)
    assert failed.value.msg == (
        "PF enp3s0f0 (0000:03:00.0): wrote 8 to sriov_numvfs but after 0s sysfs shows sriov_numvfs=0 and 0 "
        "virtfn links; the PF driver did not create or remove the VFs. Check dmesg and the driver's SR-IOV "
        "support, then rerun."
    )


# --- check mode, diff, idempotence (four-way) -------------------------------------------------


def test_four_way_check_apply_check_apply(kernel):
    first_check = _run(kernel, PF0, 8, check_mode=True)
    assert (first_check["changed"], kernel.calls, _links(kernel, PF0_BDF)) == (True, [], 0)
    applied = _run(kernel, PF0, 8)
    assert applied["changed"] is True and _links(kernel, PF0_BDF) == 8
    calls = list(kernel.calls)
    second_check = _run(kernel, PF0, 8, check_mode=True)
    second_apply = _run(kernel, PF0, 8)
    assert (second_check["changed"], second_apply["changed"], kernel.calls) == (False, False, calls)


def test_check_mode_still_refuses_an_unconfirmed_change(kernel):
    with pytest.raises(harness.ModuleFailed):
        _run(kernel, PF1, 4, check_mode=True)
    assert kernel.calls == []


def test_diff_shows_count_before_and_after(kernel):
    result = _run(kernel, PF0, 2, diff=True, check_mode=True)
    assert result["diff"]["before"] == {"num_vfs": 0, "vf_drivers": {}}
    assert result["diff"]["after"] == {"num_vfs": 2, "vf_drivers": "(new VFs)"}


def test_pf_given_by_pci_address_is_the_same_pf(kernel):
    assert _run(kernel, PF1_BDF, 63)["pci_address"] == PF1_BDF


# --- PF lookup errors --------------------------------------------------------------------------


def test_unknown_pf_name_says_where_it_looked(kernel, tmp_path):
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(kernel, "ens9", 1)
    assert failed.value.msg == (
        f"PF ens9 not found: {tmp_path}/sys/class/net/ens9/device is missing; use the PF's netdev name (ip link) "
        "or its PCI address (lspci -D), and check host_root"
    )


def test_a_vf_given_as_pf_is_refused(kernel):
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(kernel, "0000:81:02.0", 1)
    assert failed.value.msg == "0000:81:02.0 (0000:81:02.0) is a VF, not a PF; name its PF instead"


# --- VF driver binding ------------------------------------------------------------------------


def test_rebinding_existing_vfs_needs_drain_confirmed(kernel):
    _run(kernel, PF0, 2)
    calls = len(kernel.calls)
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(kernel, PF0, 2, vf_driver="vfio-pci")
    assert failed.value.msg == (
        "PF enp3s0f0 (0000:03:00.0): VFs 0000:03:02.0 (iavf), 0000:03:02.1 (iavf) must be rebound to vfio-pci, "
        "which breaks the Pods that use them, so nothing was written. Drain the node (role sriovnet.dra.drain), "
        "then rerun with drain_confirmed=true."
    )
    assert len(kernel.calls) == calls


def test_vf_driver_binds_every_vf_then_is_idempotent(kernel):
    _run(kernel, PF0, 2)
    result = _run(kernel, PF0, 2, vf_driver="vfio-pci", diff=True, drain_confirmed=True)
    assert result["changed"] is True
    assert [vf["driver"] for vf in result["vfs"]] == ["vfio-pci", "vfio-pci"]
    assert result["diff"]["before"]["vf_drivers"] == {"0000:03:02.0": "iavf", "0000:03:02.1": "iavf"}
    assert kernel.fake.sysfs.driver_override("0000:03:02.0") == ""
    again = _run(kernel, PF0, 2, vf_driver="vfio-pci")  # nothing to rebind: no drain needed
    assert (again["changed"], again["writes"]) == (False, [])


def test_vf_driver_that_is_not_loaded_fails_before_writing(kernel, tmp_path):
    _run(kernel, PF0, 1)
    calls = len(kernel.calls)
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(kernel, PF0, 1, vf_driver="mlx5-vf", drain_confirmed=True)
    assert failed.value.msg == (
        f"PF enp3s0f0 (0000:03:00.0): VF driver mlx5-vf is not registered ({tmp_path}/sys/bus/pci/drivers/mlx5-vf "
        "is missing); load it first, e.g. modprobe mlx5_vf"
    )
    assert len(kernel.calls) == calls
