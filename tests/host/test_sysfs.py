"""Tests for ``sriov_dra.host.sysfs``: reading PFs, VFs and their facts from a fake tree."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from sriov_dra.core import identities
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra_lab.fakes import fake_pci, fake_sysfs
from sriov_dra_rules import errors

PF0 = identities.PciAddress("0000:03:00.0")
VF0 = identities.PciAddress("0000:03:02.0")
VF1 = identities.PciAddress("0000:03:02.1")


def _tree(root: Path, *pfs: fake_pci.FakePf) -> fake_sysfs.FakeSysfs:
    return fake_sysfs.build(
        root, pfs or (fake_pci.FakePf(bdf=PF0, ifname="enp3s0f0", vfs=fake_pci.make_vfs(2)),)
    )


def test_pci_devices_lists_every_function_sorted(tmp_path: Path) -> None:
    fake = _tree(tmp_path)
    assert fake.sysfs.pci_devices() == ["0000:00:01.0", PF0, VF0, VF1]


def test_missing_pci_bus_raises_actionable_read_error(tmp_path: Path) -> None:
    with pytest.raises(sysfs_mod.SysfsReadError) as info:
        sysfs_mod.Sysfs(tmp_path).pci_devices()
    assert info.value.reason is errors.Reason.HOST_READ_FAILED
    assert str(tmp_path / "sys" / "bus" / "pci" / "devices") in str(info.value)
    assert "mount the host /sys" in str(info.value)


@pytest.mark.parametrize(
    ("bdf", "expected"),
    [(PF0, True), (VF0, False), ("0000:00:01.0", False)],
    ids=["pf-with-totalvfs-is-pf", "vf-with-physfn-is-not-pf", "bridge-without-totalvfs-is-not-pf"],
)
def test_is_sriov_pf(tmp_path: Path, bdf: str, expected: bool) -> None:
    assert _tree(tmp_path).sysfs.is_sriov_pf(bdf) is expected


def test_non_network_class_with_totalvfs_is_not_pf(tmp_path: Path) -> None:
    fake = _tree(tmp_path)
    nvme = fake.add_function(
        "0000:05:00.0",
        tmp_path / "sys/devices/pci0000:00",
        vendor="144d",
        device="a824",
        class_code=0x010802,
        numa_node=0,
    )
    (nvme / "sriov_totalvfs").write_text("32\n")
    assert fake.sysfs.is_sriov_pf("0000:05:00.0") is False


def test_pfs_skips_pf_without_netdev(tmp_path: Path) -> None:
    fake = _tree(
        tmp_path,
        fake_pci.FakePf(bdf=PF0, ifname="enp3s0f0", vfs=fake_pci.make_vfs(1)),
        fake_pci.FakePf(
            bdf="0000:81:00.0", ifname="enp129s0f0", pcie_root="pci0000:80", bridges=(), driver="vfio-pci"
        ),
    )
    assert [pf.bdf for pf in fake.sysfs.pfs()] == [PF0]


def test_pf_info_reads_every_fact(tmp_path: Path) -> None:
    fake = _tree(
        tmp_path,
        fake_pci.FakePf(
            bdf=PF0,
            ifname="ib0",
            vendor="15b3",
            device="101d",
            numa_node=1,
            link_type=32,
            totalvfs=16,
            eswitch_mode="switchdev",
            driver="mlx5_core",
            vfs=fake_pci.make_vfs(3),
        ),
    )
    assert fake.sysfs.pf_info(PF0) == sysfs_mod.PfInfo(
        bdf=PF0,
        ifname="ib0",
        vendor="15b3",
        device_id="101d",
        numa_node=1,
        link_type=sysfs_mod.LinkType.INFINIBAND,
        driver="mlx5_core",
        totalvfs=16,
        numvfs=3,
    )


@pytest.mark.parametrize(
    ("vf", "driver", "netdev", "override"),
    [
        (fake_pci.FakeVf(), "iavf", "enp3s0f0v0", ""),
        (fake_pci.FakeVf(driver=None), None, None, ""),
        (fake_pci.FakeVf(driver="vfio-pci"), "vfio-pci", None, ""),
        (fake_pci.FakeVf(netdev="lab-vf0"), "iavf", "lab-vf0", ""),
        (fake_pci.FakeVf(driver=None, driver_override="vfio-pci"), None, None, "vfio-pci"),
    ],
    ids=[
        "kernel-driver-has-netdev",
        "unbound-has-no-driver-and-no-netdev",
        "vfio-bound-has-no-netdev",
        "veth-name-backs-netdev",
        "driver-override-is-read",
    ],
)
def test_vf_facts(
    tmp_path: Path, vf: fake_pci.FakeVf, driver: str | None, netdev: str | None, override: str
) -> None:
    fake = _tree(tmp_path, fake_pci.FakePf(bdf=PF0, ifname="enp3s0f0", numa_node=0, vfs=(vf,)))
    pf = fake.sysfs.pf_info(PF0)
    assert pf is not None
    assert fake.sysfs.vfs(pf) == [
        sysfs_mod.VfInfo(
            bdf=VF0,
            index=0,
            vendor="8086",
            device_id="1889",
            pf_name="enp3s0f0",
            pf_bdf=PF0,
            driver=driver,
            netdev=netdev,
            numa_node=0,
            link_type=sysfs_mod.LinkType.ETHERNET,
            driver_override=override,
            rdma_devices=(),
        )
    ]


@pytest.mark.parametrize(
    ("content", "expected", "reason"),
    [
        ("1\n", 1, None),
        ("-1\n", None, "the kernel reports no NUMA affinity (-1)"),
        (None, None, "numa_node is missing or unreadable"),
        ("garbage\n", None, "numa_node holds 'garbage', not a decimal node number"),
        ("-7\n", None, "numa_node is -7, not a node number"),
    ],
    ids=[
        "node-one",
        "kernel-no-affinity-is-no-node",
        "missing-file-is-no-node",
        "garbage-is-no-node",
        "negative-is-no-node",
    ],
)
def test_numa_node_rule_never_gives_minus_one(
    tmp_path: Path, content: str | None, expected: int | None, reason: str | None
) -> None:
    fake = _tree(tmp_path)
    path = fake.sysfs.pci_device_dir(PF0) / "numa_node"
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    assert fake.sysfs.numa_node(PF0) == expected
    pf = fake.sysfs.pf_info(PF0)
    assert pf is not None and (pf.numa_node, pf.numa_node_reason) == (expected, reason)


@pytest.mark.parametrize(
    ("content", "expected"),
    [("0x8086\n", "8086"), ("0X15B3\n", "15b3"), ("1889", "1889"), ("", None), (None, None)],
    ids=["strips-0x", "lowercases", "bare-hex-kept", "empty-is-none", "missing-is-none"],
)
def test_vendor_id_format(tmp_path: Path, content: str | None, expected: str | None) -> None:
    fake = _tree(tmp_path)
    path = fake.sysfs.pci_device_dir(VF0) / "vendor"
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    assert fake.sysfs.vendor(VF0) == expected


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("1\n", "ethernet"),
        ("32\n", "infiniband"),
        ("772\n", "unknown"),
        ("x\n", "unknown"),
        (None, "unknown"),
    ],
    ids=[
        "arphrd-ether",
        "arphrd-infiniband",
        "loopback-is-unknown",
        "garbage-is-unknown",
        "missing-is-unknown",
    ],
)
def test_link_type(tmp_path: Path, content: str | None, expected: str) -> None:
    fake = _tree(tmp_path)
    path = tmp_path / "sys/class/net/enp3s0f0/type"
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    assert fake.sysfs.link_type("enp3s0f0") == expected


@pytest.mark.parametrize(
    ("content", "expected"),
    [("(null)\n", ""), ("\n", ""), ("vfio-pci\n", "vfio-pci"), (None, None)],
    ids=["kernel-cleared-is-empty", "blank-is-empty", "set-override-is-read", "absent-file-is-none"],
)
def test_driver_override(tmp_path: Path, content: str | None, expected: str | None) -> None:
    fake = _tree(tmp_path)
    path = fake.sysfs.pci_device_dir(VF0) / "driver_override"
    if content is None:
        path.unlink()
    else:
        path.write_text(content)
    assert fake.sysfs.driver_override(VF0) == expected


@pytest.mark.parametrize(
    ("content", "expected"),
    [("switchdev\n", "switchdev"), ("legacy", "legacy"), ("odd", "odd"), ("\n", None), (None, None)],
    ids=["fake-switchdev", "fake-legacy", "other-text-passed-on", "empty-is-none", "no-file-is-none"],
)
def test_fake_tree_answers_eswitch_mode_through_the_devlink_seam(
    tmp_path: Path, content: str | None, expected: str | None
) -> None:
    fake = _tree(tmp_path)
    if content is not None:
        (fake.sysfs.pci_device_dir(PF0) / fake_sysfs.ESWITCH_MODE_FILE).write_text(content)
    assert fake_sysfs.FakeEswitchModes(tmp_path)(PF0) == expected


def test_product_sysfs_reader_does_not_know_the_fake_eswitch_file() -> None:
    source = Path(sysfs_mod.__file__).read_text(encoding="utf-8")
    assert fake_sysfs.ESWITCH_MODE_FILE not in source
    assert not hasattr(sysfs_mod.Sysfs, "eswitch_mode")


def test_virtfns_sorted_numerically_and_junk_ignored(tmp_path: Path) -> None:
    fake = _tree(tmp_path, fake_pci.FakePf(bdf=PF0, ifname="enp3s0f0", vfs=fake_pci.make_vfs(12)))
    pf_dir = fake.sysfs.pci_device_dir(PF0)
    os.symlink("../0000:03:02.0", pf_dir / "virtfnX")
    os.symlink("../0000:03:02.0", pf_dir / "virtfn012")
    links = fake.sysfs.virtfns(PF0)
    assert [link.index for link in links] == list(range(12))
    assert links[10].bdf == "0000:03:03.2"


def test_virtfns_of_missing_pf_raises(tmp_path: Path) -> None:
    with pytest.raises(sysfs_mod.SysfsReadError, match=re.escape("0000:09:00.0")):
        _tree(tmp_path).sysfs.virtfns("0000:09:00.0")


def test_switchdev_pf_netdev_is_the_uplink(tmp_path: Path) -> None:
    fake = _tree(tmp_path, fake_pci.FakePf(bdf=PF0, ifname="ens1f0np0", phys_port_name="p0"))
    for rep, port in (("eth0", "pf0vf0"), ("eth1", "pf0vf1")):
        where = fake.sysfs.pci_device_dir(PF0) / "net" / rep
        where.mkdir()
        (where / "phys_port_name").write_text(port + "\n")
    assert fake.sysfs.pf_netdev(PF0) == "ens1f0np0"


def test_pf_netdev_falls_back_to_first_name(tmp_path: Path) -> None:
    fake = _tree(tmp_path, fake_pci.FakePf(bdf=PF0, ifname="zeth"))
    (fake.sysfs.pci_device_dir(PF0) / "net" / "aeth").mkdir()
    assert fake.sysfs.pf_netdev(PF0) == "aeth"


def test_physfn_rdma_and_iommu_group(tmp_path: Path) -> None:
    vf = fake_pci.FakeVf(rdma_devices=("mlx5_2",))
    fake = _tree(tmp_path, fake_pci.FakePf(bdf=PF0, ifname="enp3s0f0", vfs=(vf,)))
    assert fake.sysfs.physfn(VF0) == PF0
    assert fake.sysfs.physfn(PF0) is None
    assert fake.sysfs.rdma_devices(VF0) == ["mlx5_2"]
    assert fake.sysfs.rdma_devices(PF0) == []
    assert fake.sysfs.iommu_group(VF0) is not None
