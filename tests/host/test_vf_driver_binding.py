"""Tests for ``sriov_dra.host.vf_driver_binding``: VfConfig driver semantics, restore and rejections.

The fake tree has no kernel; ``fake_sysfs.FakeKernelPci`` (a fake) emulates the kernel's effect
of each write, and records the writes so the order can be asserted.
"""

from __future__ import annotations

import errno
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pytest

from sriov_dra.core import identities
from sriov_dra.host import vf_driver_binding
from sriov_dra_lab.fakes import fake_pci, fake_sysfs
from sriov_dra_rules import errors

PF = identities.PciAddress("0000:03:00.0")
VF = identities.PciAddress("0000:03:02.0")
OVERRIDE = "set_driver_override"


def _setup(
    root: Path, vf: fake_pci.FakeVf | None = None, drivers: tuple[str, ...] = ("vfio-pci",)
) -> tuple[fake_sysfs.FakeSysfs, fake_sysfs.FakeKernelPci, vf_driver_binding.DriverBinder]:
    pf = fake_pci.FakePf(bdf=PF, ifname="enp3s0f0", vfs=(vf or fake_pci.FakeVf(),))
    fake = fake_sysfs.build(root, [pf], drivers=drivers)
    kernel = fake.kernel()
    return fake, kernel, vf_driver_binding.DriverBinder(fake.sysfs, kernel=kernel)


class ApplyCase(NamedTuple):
    """One row of the apply table: the VF's driver before, the VfConfig ``driver``, the driver after,
    whether ``apply`` changed anything, and the kernel writes (operation, value) in order."""

    initial: str | None
    requested: str
    final: str | None
    changed: bool
    ops: list[tuple[str, str]]


APPLY_ROWS = [
    ("iavf", "", "iavf", False, []),
    ("iavf", "default", "iavf", False, []),
    ("vfio-pci", "default", "iavf", True, [("unbind", "vfio-pci"), ("probe", "")]),
    (None, "default", "iavf", True, [("probe", "")]),
    (
        "iavf",
        "vfio-pci",
        "vfio-pci",
        True,
        [(OVERRIDE, "vfio-pci"), ("unbind", "iavf"), ("bind", "vfio-pci"), (OVERRIDE, "")],
    ),
    (None, "vfio-pci", "vfio-pci", True, [(OVERRIDE, "vfio-pci"), ("bind", "vfio-pci"), (OVERRIDE, "")]),
    ("vfio-pci", "vfio-pci", "vfio-pci", False, []),
    (
        "vfio-pci",
        "iavf",
        "iavf",
        True,
        [(OVERRIDE, "iavf"), ("unbind", "vfio-pci"), ("bind", "iavf"), (OVERRIDE, "")],
    ),
    (None, "", None, False, []),
]
APPLY_IDS = [
    "keep-leaves-kernel-driver",
    "default-keeps-kernel-driver",
    "default-rebinds-vfio-vf-via-drivers-probe",
    "default-probes-unbound-vf",
    "named-driver-overrides-unbinds-binds-clears",
    "named-driver-binds-unbound-vf",
    "named-driver-already-bound-is-noop",
    "named-kernel-driver-from-vfio",
    "keep-leaves-unbound-vf",
]


@dataclass(frozen=True)
class Applied:
    """A fake VF set up with ``case.initial`` and ``case.requested`` applied to it, and what apply returned."""

    case: ApplyCase
    fake: fake_sysfs.FakeSysfs
    kernel: fake_sysfs.FakeKernelPci
    binder: vf_driver_binding.DriverBinder
    record: vf_driver_binding.BindRecord


@pytest.fixture(params=[ApplyCase(*row) for row in APPLY_ROWS], ids=APPLY_IDS)
def applied(tmp_path: Path, request: pytest.FixtureRequest) -> Applied:
    """Each row of the apply table, applied to a fresh fake VF."""
    case: ApplyCase = request.param
    fake, kernel, binder = _setup(tmp_path, fake_pci.FakeVf(driver=case.initial))
    return Applied(case, fake, kernel, binder, binder.apply(VF, case.requested))


def test_apply(applied: Applied) -> None:
    case, fake, kernel = applied.case, applied.fake, applied.kernel
    assert applied.record == vf_driver_binding.BindRecord(
        VF, case.requested, case.initial, case.final, case.changed
    )
    assert fake.sysfs.current_driver(VF) == case.final
    assert [(op, value) for op, bdf, value in kernel.calls] == case.ops
    assert {bdf for _, bdf, _ in kernel.calls} <= {VF}
    assert fake.sysfs.driver_override(VF) == ""


def test_restore_returns_original_driver_and_is_idempotent(applied: Applied) -> None:
    case, fake, kernel, binder = applied.case, applied.fake, applied.kernel, applied.binder
    assert (
        binder.restore(
            applied.record.pci_address,
            requested=applied.record.requested,
            original_driver=applied.record.original_driver,
        )
        is case.changed
    )
    assert fake.sysfs.current_driver(VF) == case.initial
    assert fake.sysfs.driver_override(VF) == ""
    calls = len(kernel.calls)
    assert binder.restore(VF, requested=case.requested, original_driver=case.initial) is False
    assert len(kernel.calls) == calls


def test_restore_brings_back_netdev(tmp_path: Path) -> None:
    fake, _, binder = _setup(tmp_path)
    record = binder.apply(VF, "vfio-pci")
    assert fake.sysfs.netdevs(VF) == []
    binder.restore(record.pci_address, requested=record.requested, original_driver=record.original_driver)
    assert fake.sysfs.netdevs(VF) == ["enp3s0f0v0"]
    assert (fake.root / "sys/class/net/enp3s0f0v0").is_symlink()


def test_restore_of_originally_unbound_vf_unbinds(tmp_path: Path) -> None:
    fake, kernel, binder = _setup(tmp_path, fake_pci.FakeVf(driver=None))
    record = binder.apply(VF, "default")
    assert record.driver == "iavf"
    kernel.calls.clear()
    assert (
        binder.restore(record.pci_address, requested=record.requested, original_driver=record.original_driver)
        is True
    )
    assert fake.sysfs.current_driver(VF) is None
    assert [(op, value) for op, _, value in kernel.calls] == [("unbind", "iavf")]


@pytest.mark.parametrize(
    ("vf", "requested", "needle"),
    [
        (fake_pci.FakeVf(driver=None), "", "is not bound to any driver"),
        (fake_pci.FakeVf(driver="vfio-pci"), "", "is bound to vfio-pci, a userspace (DPDK) driver"),
        (fake_pci.FakeVf(driver="uio_pci_generic"), "", "is bound to uio_pci_generic"),
        (fake_pci.FakeVf(), "vfio-pci", "VfConfig driver 'vfio-pci' is a userspace (DPDK) driver"),
        (fake_pci.FakeVf(driver=None), "igb_uio", "VfConfig driver 'igb_uio'"),
    ],
    ids=[
        "unbound-vf-rejected-when-driver-omitted",
        "vfio-vf-rejected-when-driver-omitted",
        "uio-vf-rejected-when-driver-omitted",
        "vfio-request-rejected-before-any-write",
        "dpdk-request-on-unbound-vf-rejected",
    ],
)
def test_netdevice_required_rejections(
    tmp_path: Path, vf: fake_pci.FakeVf, requested: str, needle: str
) -> None:
    fake, kernel, binder = _setup(tmp_path, vf, drivers=("vfio-pci", "uio_pci_generic"))
    before = fake.sysfs.current_driver(VF)
    with pytest.raises(vf_driver_binding.UnsupportedVfDriver) as info:
        binder.apply(VF, requested, require_netdevice=True)
    message = str(info.value)
    assert needle in message
    assert VF in message
    assert '"default"' in message
    assert info.value.reason is errors.Reason.UNSUPPORTED_VF_DRIVER
    assert isinstance(info.value, errors.InvalidSpec)
    assert kernel.calls == []
    assert fake.sysfs.current_driver(VF) == before


def test_kernel_driver_without_netdev_is_rejected(tmp_path: Path) -> None:
    fake, _, binder = _setup(tmp_path)
    # A driver that made no netdev leaves no net/ at all (an empty net/ is a netdev elsewhere).
    shutil.rmtree(fake.sysfs.pci_device_dir(VF) / "net")
    with pytest.raises(
        vf_driver_binding.UnsupportedVfDriver, match="iavf, which created no network interface"
    ):
        binder.apply(VF, "", require_netdevice=True)


@pytest.mark.parametrize(
    ("initial", "requested"),
    [("vfio-pci", "default"), (None, "default"), ("iavf", ""), ("iavf", "default")],
    ids=[
        "default-rebinds-vfio-to-netdevice",
        "default-binds-unbound",
        "keep-kernel-vf",
        "default-keeps-kernel-vf",
    ],
)
def test_netdevice_required_accepts(tmp_path: Path, initial: str | None, requested: str) -> None:
    _, _, binder = _setup(tmp_path, fake_pci.FakeVf(driver=initial))
    record = binder.apply(VF, requested, require_netdevice=True)
    assert record.driver == "iavf"
    assert binder.check_netdevice(VF) == "enp3s0f0v0"


def test_netdevice_check_failure_after_change_rolls_back(tmp_path: Path) -> None:
    fake, _, binder = _setup(tmp_path, fake_pci.FakeVf(driver="vfio-pci", default_driver="idpf", netdev=""))
    with pytest.raises(
        vf_driver_binding.UnsupportedVfDriver, match="idpf, which created no network interface"
    ):
        binder.apply(VF, "default", require_netdevice=True)
    assert fake.sysfs.current_driver(VF) == "vfio-pci"


def test_unregistered_driver_is_refused_before_any_write(tmp_path: Path) -> None:
    fake, kernel, binder = _setup(tmp_path, drivers=())
    with pytest.raises(vf_driver_binding.DriverBindError) as info:
        binder.apply(VF, "vfio-pci")
    assert "modprobe vfio_pci" in str(info.value)
    assert info.value.reason is errors.Reason.VF_BIND_FAILED
    assert kernel.calls == []
    assert fake.sysfs.current_driver(VF) == "iavf"


@pytest.mark.parametrize(
    ("op", "requested", "initial"),
    [
        ("bind", "vfio-pci", "iavf"),
        ("unbind", "vfio-pci", "iavf"),
        (OVERRIDE, "vfio-pci", "iavf"),
        ("probe", "default", "vfio-pci"),
    ],
    ids=[
        "bind-failure-restores-original",
        "unbind-failure-leaves-original",
        "override-failure-leaves-original",
        "probe-failure-restores-original",
    ],
)
def test_write_failure_raises_and_restores(tmp_path: Path, op: str, requested: str, initial: str) -> None:
    fake, kernel, binder = _setup(tmp_path, fake_pci.FakeVf(driver=initial))
    kernel.fail_next(op, VF, errno.EIO)
    with pytest.raises(vf_driver_binding.DriverBindError) as info:
        binder.apply(VF, requested)
    assert f"VF {VF}: {'probe' if op == 'probe' else op} failed" in str(info.value)
    assert "dmesg" in str(info.value)
    assert fake.sysfs.current_driver(VF) == initial
    assert fake.sysfs.driver_override(VF) == ""


def test_failed_apply_restores_a_preexisting_override(tmp_path: Path) -> None:
    fake, kernel, binder = _setup(tmp_path, fake_pci.FakeVf(driver_override="iavf"))
    kernel.fail_next("bind", VF)
    with pytest.raises(vf_driver_binding.DriverBindError):
        binder.apply(VF, "vfio-pci")
    assert (fake.sysfs.current_driver(VF), fake.sysfs.driver_override(VF)) == ("iavf", "iavf")


def test_default_probe_finding_no_driver_raises_and_restores(tmp_path: Path) -> None:
    fake, _, binder = _setup(tmp_path, fake_pci.FakeVf(driver="vfio-pci", default_driver="notloaded"))
    (fake.sysfs.driver_dir("notloaded") / "bind").unlink()
    (fake.sysfs.driver_dir("notloaded") / "unbind").unlink()
    for attr in ("new_id", "remove_id"):
        (fake.sysfs.driver_dir("notloaded") / attr).unlink()
    fake.sysfs.driver_dir("notloaded").rmdir()
    with pytest.raises(vf_driver_binding.DriverBindError, match="left it on no driver"):
        binder.apply(VF, "default")
    assert fake.sysfs.current_driver(VF) == "vfio-pci"


@pytest.mark.parametrize(
    "requested",
    ["vfio pci", "../vfio-pci", "a/b", ".", "..", "x\0"],
    ids=["whitespace", "path-traversal", "slash", "dot", "dotdot", "nul"],
)
def test_malformed_driver_name_is_invalid_vf_config(tmp_path: Path, requested: str) -> None:
    _, kernel, binder = _setup(tmp_path)
    with pytest.raises(errors.InvalidSpec) as info:
        binder.apply(VF, requested)
    assert info.value.reason is errors.Reason.INVALID_VF_CONFIG
    assert VF in str(info.value)
    assert kernel.calls == []


@pytest.mark.parametrize(
    ("call", "path", "content"),
    [
        (
            lambda k: k.set_driver_override(VF, "vfio-pci"),
            f"sys/bus/pci/devices/{VF}/driver_override",
            "vfio-pci",
        ),
        (lambda k: k.set_driver_override(VF, ""), f"sys/bus/pci/devices/{VF}/driver_override", "\n"),
        (lambda k: k.unbind(VF, "iavf"), "sys/bus/pci/drivers/iavf/unbind", VF),
        (lambda k: k.bind(VF, "vfio-pci"), "sys/bus/pci/drivers/vfio-pci/bind", VF),
        (lambda k: k.probe(VF), "sys/bus/pci/drivers_probe", VF),
    ],
    ids=[
        "override-writes-name",
        "override-clear-writes-newline",
        "unbind-writes-bdf-to-driver",
        "bind-writes-bdf-to-driver",
        "probe-writes-bdf-to-drivers-probe",
    ],
)
def test_real_kernel_pci_writes_the_kernel_files(
    tmp_path: Path, call: object, path: str, content: str
) -> None:
    fake, _, _ = _setup(tmp_path)
    real = vf_driver_binding.SysfsKernelPci(fake.sysfs)
    call(real)  # type: ignore[operator]
    assert (tmp_path / path).read_text() == content


def test_real_kernel_pci_never_creates_missing_files(tmp_path: Path) -> None:
    fake, _, _ = _setup(tmp_path)
    with pytest.raises(FileNotFoundError):
        vf_driver_binding.SysfsKernelPci(fake.sysfs).bind(VF, "igb_uio")
    assert not fake.sysfs.driver_dir("igb_uio").exists()


def test_missing_driver_override_file_is_reported(tmp_path: Path) -> None:
    fake, kernel, binder = _setup(tmp_path)
    (fake.sysfs.pci_device_dir(VF) / "driver_override").unlink()
    with pytest.raises(vf_driver_binding.DriverBindError, match="no driver_override file"):
        binder.apply(VF, "vfio-pci")
    assert kernel.calls == []
