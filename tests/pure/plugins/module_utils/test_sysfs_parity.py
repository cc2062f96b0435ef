"""The collection's sysfs reader and the plugin's give the same answers on the same fake trees.

Both ``plugins/module_utils/sysfs.py`` (plain dicts for the modules) and ``sriov_dra.host.sysfs``
(typed records for discovery) are thin adapters over the one copy of the rules in
``sriov_dra_rules`` (``sysfs_read``, ``topology``). Each tree below is built once with
``sriov_dra_lab.fakes.fake_sysfs`` and read by both; every fact the collection reports must equal the
plugin's (PFs, uplink choice, IDs, NUMA, link type, eswitch, counts, VFs, drivers, netdevs,
RDMA devices and the ``pcieRoot`` value, a VF's being its PF's, or its absence with the same
reason), including a Hyper-V/VMBus layout and ``numa_node`` ``-1``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from ansible_collections.sriovnet.dra.plugins.module_utils import sysfs as coll_sysfs

from sriov_dra.host import pcie_root
from sriov_dra.host import sysfs as host_sysfs
from sriov_dra_lab.fakes import fake_devlink, fake_pci, fake_sysfs


def _two_roots(root: Path) -> None:
    fake_sysfs.build(root, fake_pci.two_root_pfs(3))


def _switchdev_with_representors(root: Path) -> None:
    pf = fake_pci.FakePf(
        bdf="0000:3b:00.0",
        ifname="ens2f0np0",
        vendor="15b3",
        device="101d",
        vf_device="101e",
        driver="mlx5_core",
        eswitch_mode="switchdev",
        phys_port_name="p0",
        vfs=fake_pci.make_vfs(2, driver="mlx5_core", default_driver="mlx5_core"),
    )
    fake = fake_sysfs.build(root, (pf,))
    # A representor netdev next to the uplink: the uplink is the one whose phys_port_name is p<N>.
    rep = fake.device_dir(pf.bdf) / "net" / "aaa_pf0vf0"
    rep.mkdir(parents=True)
    (rep / "type").write_text("1\n")
    (rep / "phys_port_name").write_text("pf0vf0\n")


def _infiniband_no_numa_unbound_vfs(root: Path) -> None:
    vfs = (
        fake_pci.FakeVf(driver=None, default_driver="mlx5_core", rdma_devices=("mlx5_4",)),
        fake_pci.FakeVf(driver="vfio-pci", default_driver="mlx5_core", driver_override="vfio-pci"),
    )
    pf = fake_pci.FakePf(
        bdf="0000:af:00.1",
        ifname="ibp175s0f1",
        pcie_root="pci0000:ae",
        bridges=("0000:ae:00.0", "0000:ae:02.0"),
        vendor="15b3",
        driver="mlx5_core",
        numa_node=None,
        link_type=host_sysfs.ARPHRD_INFINIBAND,
        vfs=vfs,
    )
    fake_sysfs.build(root, (pf,))


def _broken_pcie_root_links(root: Path) -> None:
    first, second = fake_pci.two_root_pfs(2)
    fake = fake_sysfs.build(root, (first, dataclasses.replace(second, numa_node=-1)))
    # PF 1's bus link names a path outside sys/devices/pci*; PF 0's names a path without a root bus.
    bus = root / "sys" / "bus" / "pci" / "devices"
    for bdf, parent in (
        ("0000:81:00.0", root / "elsewhere"),
        ("0000:03:00.0", root / "sys/devices/platform"),
    ):
        parent.mkdir(parents=True)
        (parent / bdf).symlink_to(fake.device_dir(bdf))
        (bus / bdf).unlink()
        os.symlink(os.path.relpath(parent / bdf, bus), bus / bdf)


def _vmbus_guest_without_numa_affinity(root: Path) -> None:
    fake_sysfs.build(root, (fake_pci.vmbus_pf(2, numa_node=-1),))


def _non_network_and_no_netdev_pfs(root: Path) -> None:
    fake = fake_sysfs.build(root, fake_pci.two_root_pfs(1))
    storage = fake.add_function(
        "0000:5e:00.0", fake.sysfs.path("devices", "pci0000:00"), vendor="144d", device="a808",
        class_code=0x010802, numa_node=0,
    )  # fmt: skip
    (storage / "sriov_totalvfs").write_text("8\n")
    no_netdev = fake.add_function(
        "0000:5f:00.0", fake.sysfs.path("devices", "pci0000:00"), vendor="8086", device="1592",
        class_code=0x020000, numa_node=0,
    )  # fmt: skip
    (no_netdev / "sriov_totalvfs").write_text("8\n")


TREES = [
    _two_roots,
    _switchdev_with_representors,
    _infiniband_no_numa_unbound_vfs,
    _broken_pcie_root_links,
    _vmbus_guest_without_numa_affinity,
    _non_network_and_no_netdev_pfs,
]
TREE_IDS = [
    "two-pfs-under-two-roots",
    "switchdev-uplink-chosen-among-representors",
    "infiniband-no-numa-file-unbound-and-vfio-vfs",
    "pcie-root-outside-devices-and-without-root-bus-omitted",
    "vmbus-guest-with-numa-minus-one",
    "non-network-and-netdev-less-functions-are-not-pfs",
]


def _plugin_view(root: Path) -> dict[str, object]:
    reader = host_sysfs.Sysfs(root)
    pfs, vfs = [], []
    for pf in reader.pfs():
        root_result = pcie_root.resolve(reader, pf.bdf)
        pfs.append(
            {
                "pci_address": pf.bdf,
                "name": pf.ifname,
                "vendor": pf.vendor,
                "device_id": pf.device_id,
                "driver": pf.driver,
                "numa_node": pf.numa_node,
                "link_type": pf.link_type.value,
                # the plugin asks its eswitch source (the fake tree's stand-in for devlink here) and
                # publishes legacy without an answer; the collection asks the fake devlink command
                "eswitch_mode": fake_sysfs.FakeEswitchModes(root)(pf.bdf) or "legacy",
                "totalvfs": pf.totalvfs,
                "numvfs": pf.numvfs,
                "pcie_root": root_result.root,
                "pcie_root_problem": root_result.problem,
            }
        )
        for vf in reader.vfs(pf):
            vfs.append(
                {
                    "pci_address": vf.bdf,
                    "vf_id": vf.index,
                    "pf_name": vf.pf_name,
                    "pf_pci_address": vf.pf_bdf,
                    "vendor": vf.vendor,
                    "device_id": vf.device_id,
                    "driver": vf.driver,
                    "driver_override": vf.driver_override,
                    "netdev": vf.netdev,
                    "numa_node": vf.numa_node,
                    "link_type": vf.link_type.value,
                    "rdma_devices": list(vf.rdma_devices),
                    "pcie_root": root_result.root,
                    "pcie_root_problem": root_result.problem,
                }
            )
    return {"pfs": pfs, "vfs": vfs}


def _collection_view(root: Path) -> dict[str, object]:
    reader = coll_sysfs.Sysfs(str(root))
    pfs = reader.pfs()
    vfs = [reader.vf_facts(pf, i, bdf) for pf in pfs for i, bdf in reader.virtfns(pf["pci_address"])]
    for pf in pfs:
        del pf[
            "eswitch_mode_reason"
        ]  # the plugin logs its reasons; tests/pure/plugins/module_utils/test_devlink.py
    return {"pfs": pfs, "vfs": vfs}


@pytest.mark.parametrize("build", TREES, ids=TREE_IDS)
def test_collection_reader_equals_plugin_reader(
    tmp_path: Path, build, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(tmp_path)
    bin_dir = fake_devlink.install(tmp_path / "fake-devlink-bin", tmp_path).parent
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    plugin = _plugin_view(tmp_path)
    assert plugin["pfs"], "every tree has at least one PF"
    assert _collection_view(tmp_path) == plugin


@pytest.mark.parametrize(
    "bdf",
    [
        "0000:03:00.0",
        "0000:81:02.1",
        "0000:03:02.0",
        "0000:00:01.0",
        "0000:99:00.0",
        "0000:03:00.A",
        "03:00.0",
        "",
    ],
    ids=[
        "pf-under-root-00",
        "vf-under-root-80",
        "vf-sibling-of-pf",
        "bridge-is-its-own-root-child",
        "missing-device",
        "uppercase-hex-rejected",
        "short-bdf-rejected",
        "empty-rejected",
    ],
)
def test_pcie_root_equals_the_plugins_for_any_address(tmp_path: Path, bdf: str) -> None:
    _two_roots(tmp_path)
    plugin = pcie_root.resolve(host_sysfs.Sysfs(tmp_path), bdf)
    assert coll_sysfs.Sysfs(str(tmp_path)).pcie_root(bdf) == (plugin.root, plugin.problem)


def test_pcie_root_values_are_the_two_roots_and_never_empty(tmp_path: Path) -> None:
    _two_roots(tmp_path)
    roots = {vf["pci_address"]: vf["pcie_root"] for vf in _collection_view(tmp_path)["vfs"]}
    assert set(roots.values()) == {"pci0000:00", "pci0000:80"}


def test_broken_links_tree_really_exercises_the_omitted_pcie_root(tmp_path: Path) -> None:
    _broken_pcie_root_links(tmp_path)
    view = _collection_view(tmp_path)
    problems = {pf["pci_address"]: pf["pcie_root_problem"] for pf in view["pfs"]}
    assert "which is not under" in (problems["0000:81:00.0"] or "")
    assert "has no PCI root bus component" in (problems["0000:03:00.0"] or "")
    assert {vf["pcie_root"] for vf in view["vfs"]} == {None}
    assert {vf["pcie_root_problem"] for vf in view["vfs"]} == set(problems.values())


def test_vmbus_tree_really_exercises_the_root_bus_and_no_numa_node(tmp_path: Path) -> None:
    _vmbus_guest_without_numa_affinity(tmp_path)
    view = _collection_view(tmp_path)
    assert [(f["pci_address"], f["pcie_root"], f["numa_node"]) for f in view["pfs"] + view["vfs"]] == [
        ("0001:00:00.0", "pci0001:00", None),
        ("0001:00:00.1", "pci0001:00", None),
        ("0001:00:00.2", "pci0001:00", None),
    ]
