"""Tests for ``sriov_dra_lab.fakes.fake_sysfs``: tree layout and the fake kernel's emulated rules."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from sriov_dra.host import discovery
from sriov_dra_lab.fakes import fake_pci, fake_sysfs


def _lab(root: Path, vfs: int = 2, **kwargs: object) -> fake_sysfs.FakeSysfs:
    return fake_sysfs.build(root, fake_pci.two_root_pfs(vfs, **kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("sys/bus/pci/devices/0000:03:00.0", "../../../devices/pci0000:00/0000:00:01.0/0000:03:00.0"),
        ("sys/bus/pci/devices/0000:81:02.1", "../../../devices/pci0000:80/0000:80:01.0/0000:81:02.1"),
        ("sys/class/net/enp3s0f0", "../../devices/pci0000:00/0000:00:01.0/0000:03:00.0/net/enp3s0f0"),
        ("sys/class/net/enp129s0f0v1", "../../devices/pci0000:80/0000:80:01.0/0000:81:02.1/net/enp129s0f0v1"),
        ("sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0/virtfn1", "../0000:03:02.1"),
        ("sys/devices/pci0000:00/0000:00:01.0/0000:03:02.1/physfn", "../0000:03:00.0"),
        ("sys/devices/pci0000:00/0000:00:01.0/0000:03:02.0/driver", "../../../../bus/pci/drivers/iavf"),
        ("sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0/driver", "../../../../bus/pci/drivers/ice"),
        ("sys/bus/pci/drivers/iavf/0000:03:02.0", "../../../../devices/pci0000:00/0000:00:01.0/0000:03:02.0"),
    ],
    ids=[
        "bus-link-of-pf-into-root-00",
        "bus-link-of-vf-into-root-80",
        "class-net-link-of-pf",
        "class-net-link-of-vf",
        "virtfn-link-to-sibling-vf",
        "physfn-link-to-sibling-pf",
        "vf-driver-link",
        "pf-driver-link",
        "driver-dir-link-back-to-device",
    ],
)
def test_relative_symlinks_like_the_kernel(tmp_path: Path, link: str, target: str) -> None:
    _lab(tmp_path)
    assert os.readlink(tmp_path / link) == target
    assert (tmp_path / link).exists()


VMBUS_DIR = "sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/5d2a1f4e-0001-4d2c-9a1b-6c3e8f7a9b01"


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("sys/bus/pci/devices/0001:00:00.0", f"../../../{VMBUS_DIR[4:]}/pci0001:00/0001:00:00.0"),
        ("sys/bus/pci/devices/0001:00:00.2", f"../../../{VMBUS_DIR[4:]}/pci0001:00/0001:00:00.2"),
        (f"{VMBUS_DIR}/pci0001:00/0001:00:00.0/virtfn1", "../0001:00:00.2"),
        ("sys/class/net/enP1s0f0", f"../../{VMBUS_DIR[4:]}/pci0001:00/0001:00:00.0/net/enP1s0f0"),
    ],
    ids=[
        "bus-link-of-pf-under-vmbus",
        "bus-link-of-vf-under-vmbus",
        "virtfn-sibling-under-vmbus",
        "class-net-link",
    ],
)
def test_vmbus_pf_is_laid_out_like_a_hyperv_guest(tmp_path: Path, link: str, target: str) -> None:
    fake_sysfs.build(tmp_path, [fake_pci.vmbus_pf(2)])
    assert os.readlink(tmp_path / link) == target
    assert (tmp_path / link).exists()


@pytest.mark.parametrize(
    ("numa_node", "content"),
    [(-1, "-1\n"), (3, "3\n"), (None, None)],
    ids=["kernel-no-affinity-written-as-minus-one", "node-written", "no-file-when-none"],
)
def test_numa_node_file_as_the_kernel_writes_it(
    tmp_path: Path, numa_node: int | None, content: str | None
) -> None:
    fake_sysfs.build(tmp_path, [fake_pci.vmbus_pf(1, numa_node=numa_node)])
    for bdf in ("0001:00:00.0", "0001:00:00.1"):
        path = tmp_path / "sys/bus/pci/devices" / bdf / "numa_node"
        assert (path.read_text() if path.exists() else None) == content


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("0000:03:00.0/vendor", "0x8086\n"),
        ("0000:03:00.0/device", "0x1592\n"),
        ("0000:03:02.0/device", "0x1889\n"),
        ("0000:03:00.0/class", "0x020000\n"),
        ("0000:00:01.0/class", "0x060400\n"),
        ("0000:03:00.0/sriov_totalvfs", "128\n"),
        ("0000:03:00.0/sriov_numvfs", "2\n"),
        ("0000:81:02.0/numa_node", "1\n"),
        ("0000:03:02.0/driver_override", "(null)\n"),
        ("0000:03:02.0/net/enp3s0f0v0/type", "1\n"),
    ],
    ids=[
        "vendor-0x",
        "pf-device",
        "vf-device",
        "network-class",
        "bridge-class",
        "totalvfs",
        "numvfs",
        "numa-of-second-root",
        "override-cleared-view",
        "netdev-type",
    ],
)
def test_attribute_files(tmp_path: Path, path: str, content: str) -> None:
    _lab(tmp_path)
    assert (tmp_path / "sys/bus/pci/devices" / path).read_text() == content


def test_veth_names_back_vf_netdevs(tmp_path: Path) -> None:
    fake = _lab(tmp_path, netdevs=(["lab-a0", "lab-a1"], ["lab-b0", "lab-b1"]))
    assert fake.sysfs.netdevs("0000:81:02.1") == ["lab-b1"]
    assert (tmp_path / "sys/class/net/lab-a0").resolve() == (
        tmp_path / "sys/devices/pci0000:00/0000:00:01.0/0000:03:02.0/net/lab-a0"
    )


def test_metadata_lets_another_process_drive_the_fake_kernel(tmp_path: Path) -> None:
    _lab(tmp_path)
    reloaded = fake_sysfs.FakeSysfs(tmp_path)
    kernel = reloaded.kernel()
    kernel.unbind("0000:03:02.0", "iavf")
    assert reloaded.sysfs.current_driver("0000:03:02.0") is None
    kernel.probe("0000:03:02.0")
    assert reloaded.sysfs.current_driver("0000:03:02.0") == "iavf"
    assert reloaded.sysfs.netdevs("0000:03:02.0") == ["enp3s0f0v0"]
    assert (tmp_path / fake_sysfs.METADATA_FILE).exists()


@pytest.mark.parametrize(
    ("steps", "err"),
    [
        ([("unbind", "vfio-pci")], errno.ENODEV),
        ([("bind", "vfio-pci")], errno.EBUSY),
        ([("unbind", "iavf"), ("bind", "vfio-pci")], errno.ENODEV),
        ([("unbind", "iavf"), ("bind", "mlx5_core")], errno.ENOENT),
    ],
    ids=[
        "unbind-from-other-driver-is-enodev",
        "bind-while-bound-is-ebusy",
        "bind-without-override-match-is-enodev",
        "bind-to-unregistered-driver-is-enoent",
    ],
)
def test_fake_kernel_refuses_like_linux(tmp_path: Path, steps: list[tuple[str, str]], err: int) -> None:
    kernel = _lab(tmp_path).kernel()
    *ok, (last_op, last_driver) = steps
    for op, driver in ok:
        getattr(kernel, op)("0000:03:02.0", driver)
    with pytest.raises(OSError) as info:
        getattr(kernel, last_op)("0000:03:02.0", last_driver)
    assert info.value.errno == err


def test_fake_kernel_probe_honours_override_and_removes_netdev(tmp_path: Path) -> None:
    fake = _lab(tmp_path)
    kernel = fake.kernel()
    kernel.set_driver_override("0000:03:02.0", "vfio-pci")
    kernel.unbind("0000:03:02.0", "iavf")
    assert not (tmp_path / "sys/class/net/enp3s0f0v0").exists()
    kernel.probe("0000:03:02.0")
    assert fake.sysfs.current_driver("0000:03:02.0") == "vfio-pci"
    assert fake.sysfs.netdevs("0000:03:02.0") == []
    kernel.set_driver_override("0000:03:02.0", "")
    assert (fake.sysfs.pci_device_dir("0000:03:02.0") / "driver_override").read_text() == "(null)\n"
    assert kernel.calls == [
        ("set_driver_override", "0000:03:02.0", "vfio-pci"),
        ("unbind", "0000:03:02.0", "iavf"),
        ("probe", "0000:03:02.0", ""),
        ("set_driver_override", "0000:03:02.0", ""),
    ]


def test_fail_next_fails_once_before_writing(tmp_path: Path) -> None:
    fake = _lab(tmp_path)
    kernel = fake.kernel()
    kernel.fail_next("unbind", "0000:03:02.0", errno.EIO)
    with pytest.raises(OSError) as info:
        kernel.unbind("0000:03:02.0", "iavf")
    assert info.value.errno == errno.EIO
    assert fake.sysfs.current_driver("0000:03:02.0") == "iavf"
    kernel.unbind("0000:03:02.0", "iavf")
    assert fake.sysfs.current_driver("0000:03:02.0") is None


def test_two_pfs_of_128_vfs_build_and_discover(tmp_path: Path) -> None:
    fake = fake_sysfs.build(tmp_path, fake_pci.two_root_pfs(128))
    found = discovery.discover(fake.sysfs)
    assert len(found) == 256
    assert {v.pcie_root for v in found} == {"pci0000:00", "pci0000:80"}
    assert found[-1].pci_address == "0000:81:11.7"
    assert len({v.netdev for v in found}) == 256
