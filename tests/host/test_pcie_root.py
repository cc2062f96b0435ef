"""Tests for ``sriov_dra.host.pcie_root`` on fake trees: the nearest root bus of the resolved path."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.host import pcie_root
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra_lab.fakes import fake_pci, fake_sysfs


def _two_roots(root: Path) -> fake_sysfs.FakeSysfs:
    return fake_sysfs.build(root, fake_pci.two_root_pfs(3))


@pytest.mark.parametrize(
    ("bdf", "expected"),
    [
        ("0000:03:00.0", "pci0000:00"),
        ("0000:81:00.0", "pci0000:80"),
        ("0000:00:01.0", "pci0000:00"),
        ("0000:80:01.0", "pci0000:80"),
    ],
    ids=["pf-under-root-00", "pf-under-root-80", "root-port-00-itself", "root-port-80-itself"],
)
def test_two_roots(tmp_path: Path, bdf: str, expected: str) -> None:
    assert pcie_root.pcie_root(_two_roots(tmp_path).sysfs, bdf) == expected


def test_every_vf_reports_its_pf_root(tmp_path: Path) -> None:
    fake = _two_roots(tmp_path)
    for pf in fake.sysfs.pfs():
        pf_root = pcie_root.pcie_root(fake.sysfs, pf.bdf)
        vf_roots = {pcie_root.pcie_root(fake.sysfs, link.bdf) for link in fake.sysfs.virtfns(pf.bdf)}
        assert vf_roots == {pf_root}
    assert {pcie_root.pcie_root(fake.sysfs, p.bdf) for p in fake.sysfs.pfs()} == {"pci0000:00", "pci0000:80"}


def test_nested_bridges_report_the_root_complex(tmp_path: Path) -> None:
    pf = fake_pci.FakePf(
        bdf="0000:87:00.0",
        ifname="enp135s0f0",
        pcie_root="pci0000:80",
        bridges=("0000:80:03.0", "0000:85:00.0", "0000:86:08.0"),
        vfs=fake_pci.make_vfs(2),
    )
    fake = fake_sysfs.build(tmp_path, [pf])
    link = os.readlink(fake.sysfs.pci_device_dir("0000:87:02.1"))
    assert link.endswith("pci0000:80/0000:80:03.0/0000:85:00.0/0000:86:08.0/0000:87:02.1")
    assert pcie_root.pcie_root(fake.sysfs, "0000:87:02.1") == "pci0000:80"
    assert pcie_root.pcie_root(fake.sysfs, "0000:85:00.0") == "pci0000:80"


def test_non_zero_domain_root(tmp_path: Path) -> None:
    pf = fake_pci.FakePf(
        bdf="0001:c1:00.0", ifname="enP1p193s0", pcie_root="pci0001:c0", bridges=("0001:c0:01.0",)
    )
    assert pcie_root.pcie_root(fake_sysfs.build(tmp_path, [pf]).sysfs, "0001:c1:00.0") == "pci0001:c0"


def test_vmbus_host_bridge_gives_the_root_bus_below_vmbus(tmp_path: Path) -> None:
    fake = fake_sysfs.build(tmp_path, [fake_pci.vmbus_pf(2)])
    link = os.readlink(fake.sysfs.pci_device_dir("0001:00:00.0"))
    assert "/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/" in link
    assert link.endswith("/pci0001:00/0001:00:00.0")
    roots = {
        bdf: pcie_root.pcie_root(fake.sysfs, bdf) for bdf in ("0001:00:00.0", "0001:00:00.1", "0001:00:00.2")
    }
    assert roots == dict.fromkeys(roots, "pci0001:00")


def test_pxb_pcie_expander_is_its_own_root(tmp_path: Path) -> None:
    pf = fake_pci.FakePf(
        bdf="0000:21:00.0", ifname="enp33s0", pcie_root="pci0000:20", bridges=("0000:20:00.0",)
    )
    assert pcie_root.pcie_root(fake_sysfs.build(tmp_path, [pf]).sysfs, "0000:21:00.0") == "pci0000:20"


def test_missing_symlink_gives_none_with_reason(tmp_path: Path) -> None:
    fake = _two_roots(tmp_path)
    fake.sysfs.pci_device_dir("0000:03:02.0").unlink()
    result = pcie_root.resolve(fake.sysfs, "0000:03:02.0")
    assert result.root is None
    assert result.problem is not None and "cannot read the symlink" in result.problem


def _relink(sysfs: sysfs_mod.Sysfs, bdf: str, target: str) -> None:
    link = sysfs.pci_device_dir(bdf)
    link.unlink()
    os.symlink(target, link)


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("../../../devices/platform/soc/0000:03:02.0", "has no PCI root bus component"),
        ("../../../devices/virtual/0000:03:02.0", "has no PCI root bus component"),
        ("../../../devices/pci_odd/0000:03:02.0", "has no PCI root bus component"),
        ("../../../../elsewhere/pci0000:00/0000:03:02.0", "which is not under"),
        ("../../../devices/pci0000:00/0000:00:01.0/0000:03:02.7", "does not end with"),
        ("../../../devices/pci0000:00", "does not end with"),
    ],
    ids=[
        "platform-device-path",
        "virtual-device-path",
        "pci-prefixed-name-that-is-no-root-bus",
        "target-outside-sys-devices",
        "target-names-another-function",
        "target-is-the-root-itself",
    ],
)
def test_non_pci_targets_give_none(tmp_path: Path, target: str, problem: str) -> None:
    fake = _two_roots(tmp_path)
    _relink(fake.sysfs, "0000:03:02.0", target)
    result = pcie_root.resolve(fake.sysfs, "0000:03:02.0")
    assert (result.root, problem in (result.problem or "")) == (None, True)
    assert result.problem is not None and str(fake.sysfs.pci_device_dir("0000:03:02.0")) in result.problem


def test_absolute_target_inside_root_is_accepted(tmp_path: Path) -> None:
    fake = _two_roots(tmp_path)
    absolute = tmp_path / "sys/devices/pci0000:80/0000:80:01.0/0000:81:02.0"
    _relink(fake.sysfs, "0000:81:02.0", str(absolute))
    assert pcie_root.pcie_root(fake.sysfs, "0000:81:02.0") == "pci0000:80"


@pytest.mark.parametrize(
    "bdf",
    ["", "03:02.0", "0000:03:02.A", "0000:03:02", "0000:03:02.0 ", "pci:0000:03:02.0", "10000:03:02.0"],
    ids=[
        "empty",
        "short-bdf",
        "uppercase-function",
        "no-function",
        "trailing-space",
        "pci-prefix",
        "five-digit-domain",
    ],
)
def test_bdf_not_in_helper_format_gives_none(tmp_path: Path, bdf: str) -> None:
    result = pcie_root.resolve(_two_roots(tmp_path).sysfs, bdf)
    assert result.root is None
    assert result.problem is not None and "not a lowercase extended BDF" in result.problem


_HEX = "0123456789abcdef"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One directory for every hypothesis example; each example works in a fresh subdirectory."""
    yield tmp_path_factory.mktemp("pcieroot-property")


@given(
    domain=st.text(_HEX, min_size=4, max_size=4),
    bus=st.text(_HEX, min_size=2, max_size=2),
    depth=st.integers(min_value=0, max_value=4),
    dev=st.integers(min_value=0, max_value=0x1F),
    fn=st.integers(min_value=0, max_value=7),
)
def test_root_is_first_element_for_any_hierarchy(
    scratch: Path, domain: str, bus: str, depth: int, dev: int, fn: int
) -> None:
    bdf = f"{domain}:{bus}:{dev:02x}.{fn}"
    sysfs = sysfs_mod.Sysfs(Path(tempfile.mkdtemp(dir=scratch)))
    chain = [f"pci{domain}:{bus}"] + [f"{domain}:{bus}:{i:02x}.0" for i in range(depth)] + [bdf]
    device = sysfs.path("devices", *chain)
    device.mkdir(parents=True)
    link = sysfs.pci_device_dir(bdf)
    link.parent.mkdir(parents=True)
    os.symlink(os.path.relpath(device, link.parent), link)
    result = pcie_root.resolve(sysfs, bdf)
    assert result.root == f"pci{domain}:{bus}"
    assert result.problem is None


@given(bdf=st.text(alphabet=_HEX + ":.xX ", max_size=14))
def test_never_returns_empty_string(scratch: Path, bdf: str) -> None:
    result = pcie_root.resolve(sysfs_mod.Sysfs(scratch / "empty-root"), bdf)
    assert result.root != ""
    assert (result.root is None) != (result.problem is None)
