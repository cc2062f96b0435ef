"""Tests for ``sriov_dra.host.discovery``: device list, names and upstream attribute set."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import attributes, device_facts, identities
from sriov_dra.host import discovery
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra_lab.fakes import fake_pci, fake_sysfs
from sriov_dra_rules import names

D = "sriovnetwork.k8snetworkplumbingwg.io"


def _lab(root: Path, vfs: int = 2) -> fake_sysfs.FakeSysfs:
    return fake_sysfs.build(root, fake_pci.two_root_pfs(vfs))


def _one(root: Path, **pf: object) -> discovery.DiscoveredVf:
    spec = {"bdf": "0000:03:00.0", "ifname": "enp3s0f0", "vfs": fake_pci.make_vfs(1), **pf}
    found = discovery.discover(fake_sysfs.build(root, [fake_pci.FakePf(**spec)]).sysfs)  # type: ignore[arg-type]
    assert len(found) == 1
    return found[0]


EXPECTED_VF2_OF_PF1 = {
    f"{D}/vendor": ("string", "8086"),
    f"{D}/deviceID": ("string", "1889"),
    f"{D}/pfDeviceID": ("string", "1592"),
    f"{D}/pciAddress": ("string", "0000:81:02.1"),
    "k8s.cni.cncf.io/deviceID": ("string", "0000:81:02.1"),
    f"{D}/PFName": ("string", "enp129s0f0"),
    f"{D}/EswitchMode": ("string", "legacy"),
    f"{D}/vfID": ("int", 1),
    "resource.kubernetes.io/pcieRoot": ("string", "pci0000:80"),
    f"{D}/pfPciAddress": ("string", "0000:81:00.0"),
    "resource.kubernetes.io/pciBusID": ("string", "0000:81:02.1"),
    f"{D}/linkType": ("string", "ethernet"),
    f"{D}/rdmaCapable": ("bool", False),
    "dra.net/numaNode": ("int", 1),
    "resource.kubernetes.io/numaNode": ("int", 1),
}


def test_attribute_names_types_and_values_are_upstreams(tmp_path: Path) -> None:
    vf = discovery.by_name(discovery.discover(_lab(tmp_path).sysfs))["0000-81-02-1"]
    got = {k: (v.type.value, v.value) for k, v in vf.attributes.items()}
    assert got == EXPECTED_VF2_OF_PF1
    assert type(vf.attributes[f"{D}/vfID"].value) is int
    assert type(vf.attributes[f"{D}/rdmaCapable"].value) is bool


def test_published_keys_are_exactly_the_reserved_discovery_keys(tmp_path: Path) -> None:
    assert discovery.DISCOVERY_ATTRIBUTES == attributes.RESERVED_ATTRIBUTES
    for vf in discovery.discover(_lab(tmp_path).sysfs):
        assert set(vf.attributes) == attributes.RESERVED_ATTRIBUTES


def test_every_published_value_passes_core_validation(tmp_path: Path) -> None:
    for vf in discovery.discover(_lab(tmp_path, vfs=4).sysfs):
        checked = attributes.validate_attribute_map(
            {k: v.to_json() for k, v in vf.attributes.items()}, "attributes", reserved=frozenset()
        )
        assert (checked.problems, dict(checked.values)) == ((), dict(vf.attributes))


def test_two_roots_sorted_device_list(tmp_path: Path) -> None:
    found = discovery.discover(_lab(tmp_path).sysfs)
    assert [(v.name, v.pcie_root, v.pf_name, v.vf_id) for v in found] == [
        ("0000-03-02-0", "pci0000:00", "enp3s0f0", 0),
        ("0000-03-02-1", "pci0000:00", "enp3s0f0", 1),
        ("0000-81-02-0", "pci0000:80", "enp129s0f0", 0),
        ("0000-81-02-1", "pci0000:80", "enp129s0f0", 1),
    ]


@pytest.mark.parametrize(
    ("bdf", "name"),
    [("0000:03:02.0", "0000-03-02-0"), ("0000:3b:0a.7", "0000-3b-0a-7"), ("0001:c1:1f.3", "0001-c1-1f-3")],
    ids=["colons-and-dot-become-dashes", "hex-letters-kept", "non-zero-domain"],
)
def test_device_name(bdf: str, name: str) -> None:
    assert discovery.device_name(bdf) == name


_BDFS = st.builds(
    lambda d, b, dev, fn: f"{d:04x}:{b:02x}:{dev:02x}.{fn}",
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFF),
    st.integers(0, 0x1F),
    st.integers(0, 7),
)


@given(a=_BDFS, b=_BDFS)
def test_device_name_is_dns_label_and_injective(a: str, b: str) -> None:
    assert names.is_dns1123_label(discovery.device_name(a))
    assert (discovery.device_name(a) == discovery.device_name(b)) == (a == b)


@pytest.mark.parametrize(
    ("numa_file", "expected"),
    [("0\n", 0), ("1\n", 1), ("-1\n", None), (None, None), ("bad\n", None)],
    ids=[
        "node-zero-published",
        "node-one-published",
        "no-affinity-omits-the-attribute",
        "missing-file-omits-the-attribute",
        "unreadable-omits-the-attribute",
    ],
)
def test_numa_node_published_only_when_the_kernel_reports_a_node(
    tmp_path: Path, numa_file: str | None, expected: int | None
) -> None:
    fake = fake_sysfs.build(
        tmp_path, [fake_pci.FakePf(bdf="0000:03:00.0", ifname="p0", vfs=fake_pci.make_vfs(1))]
    )
    path = fake.sysfs.pci_device_dir("0000:03:00.0") / "numa_node"
    if numa_file is None:
        path.unlink()
    else:
        path.write_text(numa_file)
    (vf,) = discovery.discover(fake.sysfs)
    assert vf.numa_node == expected
    published = vf.attributes.get("dra.net/numaNode")
    assert published == (None if expected is None else attributes.int_value(expected))
    assert vf.attributes.get("resource.kubernetes.io/numaNode") == published


def test_numa_node_is_the_pfs_as_upstream(tmp_path: Path) -> None:
    fake = fake_sysfs.build(
        tmp_path,
        [fake_pci.FakePf(bdf="0000:03:00.0", ifname="p0", numa_node=1, vfs=fake_pci.make_vfs(1))],
    )
    (fake.sysfs.pci_device_dir("0000:03:02.0") / "numa_node").write_text("0\n")
    assert discovery.discover(fake.sysfs)[0].attributes["dra.net/numaNode"] == attributes.int_value(1)


def test_unresolvable_pf_pcie_root_is_omitted_on_its_vfs_and_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = _lab(tmp_path)
    link = fake.sysfs.pci_device_dir("0000:03:00.0")
    # The PF's files stay readable, but its bus link names a path with no root bus in it.
    platform = tmp_path / "sys/devices/platform/0000:03:00.0"
    platform.parent.mkdir(parents=True)
    platform.symlink_to(fake.device_dir("0000:03:00.0"))
    link.unlink()
    os.symlink("../../../devices/platform/0000:03:00.0", link)
    with caplog.at_level(logging.WARNING, logger=discovery.__name__):
        found = discovery.by_name(discovery.discover(fake.sysfs))
    for name in ("0000-03-02-0", "0000-03-02-1"):
        assert found[name].pcie_root is None
        assert discovery.PCIE_ROOT not in found[name].attributes
        assert len(found[name].attributes) == 14  # the 15 discovery keys less pcieRoot
    assert found["0000-81-02-0"].attributes[discovery.PCIE_ROOT] == attributes.string_value("pci0000:80")
    records = [r for r in caplog.records if r.getMessage() == "pcieRoot omitted"]
    assert [(getattr(r, "pci", None), getattr(r, "pf", None)) for r in records] == [
        ("0000:03:00.0", "enp3s0f0")
    ]
    assert "has no PCI root bus component" in str(getattr(records[0], "reason", ""))


def test_a_vf_reports_its_pfs_root_even_when_its_own_link_is_odd(tmp_path: Path) -> None:
    fake = _lab(tmp_path)
    link = fake.sysfs.pci_device_dir("0000:03:02.1")
    link.unlink()
    os.symlink("../../../devices/virtual/0000:03:02.1", link)
    found = discovery.by_name(discovery.discover(fake.sysfs))
    assert found["0000-03-02-1"].attributes[discovery.PCIE_ROOT] == attributes.string_value("pci0000:00")


@pytest.mark.parametrize(
    ("source_answer", "expected"),
    [
        ("switchdev", "switchdev"),
        ("legacy", "legacy"),
        ("", "legacy"),
        (None, "legacy"),
        ("switchdev_inactive", "legacy"),
    ],
    ids=[
        "devlink-switchdev",
        "devlink-legacy",
        "empty-devlink-answer-is-legacy",
        "devlink-silent-is-legacy",
        "unknown-devlink-mode-is-legacy",
    ],
)
def test_eswitch_mode_sources(tmp_path: Path, source_answer: str | None, expected: str) -> None:
    fake = fake_sysfs.build(
        tmp_path,
        [
            fake_pci.FakePf(
                bdf="0000:03:00.0", ifname="p0", eswitch_mode="switchdev", vfs=fake_pci.make_vfs(1)
            )
        ],
    )
    asked: list[str] = []

    def devlink(pf_bdf: identities.PciAddress) -> str | None:
        asked.append(pf_bdf)
        return source_answer

    (vf,) = discovery.discover(fake.sysfs, eswitch_modes=devlink)
    assert (vf.eswitch_mode, vf.attributes[discovery.ESWITCH_MODE]) == (
        expected,
        attributes.string_value(expected),
    )
    assert asked == ["0000:03:00.0"]


@pytest.mark.parametrize(
    ("source", "expected"), [(False, "legacy"), (True, "switchdev")], ids=["no-source", "fake-source"]
)
def test_fake_tree_eswitch_mode_reaches_discovery_only_through_its_source(
    tmp_path: Path, source: bool, expected: str
) -> None:
    fake = fake_sysfs.build(
        tmp_path,
        [
            fake_pci.FakePf(
                bdf="0000:03:00.0", ifname="p0", eswitch_mode="switchdev", vfs=fake_pci.make_vfs(1)
            )
        ],
    )
    modes = fake_sysfs.FakeEswitchModes(tmp_path) if source else None
    (vf,) = discovery.discover(fake.sysfs, eswitch_modes=modes)
    assert vf.eswitch_mode == expected


@pytest.mark.parametrize(
    ("vf_spec", "driver", "netdev"),
    [
        (fake_pci.FakeVf(driver="vfio-pci"), "vfio-pci", None),
        (fake_pci.FakeVf(driver=None), None, None),
        (fake_pci.FakeVf(), "iavf", "p0v0"),
    ],
    ids=["vfio-bound-vf-still-discovered", "unbound-vf-still-discovered", "netdevice-vf-discovered"],
)
def test_vfs_discovered_whatever_their_driver(
    tmp_path: Path, vf_spec: fake_pci.FakeVf, driver: str | None, netdev: str | None
) -> None:
    vf = _one(tmp_path, ifname="p0", vfs=(vf_spec,))
    assert (vf.driver, vf.netdev, vf.name) == (driver, netdev, "0000-03-02-0")


def test_pf_without_netdev_and_non_sriov_functions_contribute_nothing(tmp_path: Path) -> None:
    fake = fake_sysfs.build(
        tmp_path,
        [
            fake_pci.FakePf(bdf="0000:03:00.0", ifname="p0", vfs=fake_pci.make_vfs(1)),
            fake_pci.FakePf(
                bdf="0000:81:00.0",
                ifname="p1",
                pcie_root="pci0000:80",
                driver="vfio-pci",
                vfs=fake_pci.make_vfs(2),
            ),
            fake_pci.FakePf(bdf="0000:05:00.0", ifname="p2", bridges=("0000:00:02.0",), vfs=()),
        ],
    )
    assert [v.name for v in discovery.discover(fake.sysfs)] == ["0000-03-02-0"]


def test_vendor_is_pf_vendor_and_ids_split_vf_and_pf(tmp_path: Path) -> None:
    fake = fake_sysfs.build(
        tmp_path,
        [
            fake_pci.FakePf(
                bdf="0000:03:00.0",
                ifname="p0",
                vendor="15b3",
                device="101d",
                vf_device="101e",
                vfs=fake_pci.make_vfs(1),
            )
        ],
    )
    (fake.sysfs.pci_device_dir("0000:03:02.0") / "vendor").write_text("0x1234\n")
    (vf,) = discovery.discover(fake.sysfs)
    assert (vf.vendor, vf.device_id, vf.pf_device_id) == ("15b3", "101e", "101d")
    assert vf.attributes[discovery.VENDOR] == attributes.string_value("15b3")


@pytest.mark.parametrize(
    ("pf_changes", "key", "expected"),
    [
        ({"link_type": 32, "ifname": "ib0"}, discovery.LINK_TYPE, attributes.string_value("infiniband")),
        ({"link_type": 772}, discovery.LINK_TYPE, attributes.string_value("unknown")),
        (
            {"vfs": (fake_pci.FakeVf(rdma_devices=("mlx5_3",)),)},
            discovery.RDMA_CAPABLE,
            attributes.bool_value(True),
        ),
    ],
    ids=["infiniband-pf-link-type", "other-arphrd-is-unknown", "infiniband-dir-makes-rdma-capable"],
)
def test_pf_derived_attributes(
    tmp_path: Path, pf_changes: dict[str, object], key: str, expected: object
) -> None:
    assert _one(tmp_path, **pf_changes).attributes[key] == expected


def test_attributes_are_read_only(tmp_path: Path) -> None:
    vf = _one(tmp_path)
    with pytest.raises(TypeError):
        vf.attributes["x"] = attributes.string_value("y")  # type: ignore[index]
    assert hash(vf) == hash(_one(tmp_path / "again"))


def test_vf_link_with_bad_address_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake = _lab(tmp_path, vfs=1)
    os.symlink("../0000:03:02.0:junk", fake.sysfs.pci_device_dir("0000:03:00.0") / "virtfn5")
    with caplog.at_level(logging.WARNING, logger=discovery.__name__):
        found = discovery.discover(fake.sysfs)
    assert [v.name for v in found] == ["0000-03-02-0", "0000-81-02-0"]
    assert [r.getMessage() for r in caplog.records] == ["vf skipped: bad address"]


def test_no_pci_bus_fails_discovery(tmp_path: Path) -> None:
    with pytest.raises(sysfs_mod.SysfsReadError):
        discovery.discover(sysfs_mod.Sysfs(tmp_path))


def test_to_device_facts_carries_every_policy_fact(tmp_path: Path) -> None:
    vf = discovery.by_name(discovery.discover(_lab(tmp_path).sysfs))["0000-81-02-1"]
    assert vf.to_device_facts() == device_facts.DeviceFacts(
        pci_address="0000:81:02.1",
        vendor="8086",
        device_id="1889",
        pf_device_id="1592",
        pf_name="enp129s0f0",
        pf_pci_address="0000:81:00.0",
        vf_id=1,
        driver="iavf",
        numa_node=1,
        pcie_root="pci0000:80",
        link_type="ethernet",
        eswitch_mode="legacy",
        rdma_capable=False,
    )
    assert vf.to_device_facts().name == vf.name
    assert device_facts.discovered_attributes(vf.to_device_facts()) == dict(vf.attributes)
