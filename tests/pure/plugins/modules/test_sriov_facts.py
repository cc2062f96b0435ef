"""Tests for ``plugins/modules/sriov_facts.py``: facts from a fake tree, PF filter, check mode."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from ansible_collections.sriovnet.dra.plugins.modules import sriov_facts
from tests.pure.plugins import harness

from sriov_dra.host import discovery
from sriov_dra.host import sysfs as host_sysfs
from sriov_dra_lab.fakes import fake_pci, fake_sysfs


@pytest.fixture
def root(tmp_path: Path) -> Path:
    fake_sysfs.build(tmp_path, fake_pci.two_root_pfs(2))
    return tmp_path


def test_facts_list_both_pfs_and_their_vfs_with_roots_and_numa(root):
    result = harness.run_module(sriov_facts, {"host_root": str(root)})
    facts = result["ansible_facts"]["sriov"]
    assert result["changed"] is False
    assert [(pf["name"], pf["numvfs"], pf["pcie_root"], pf["numa_node"]) for pf in facts["pfs"]] == [
        ("enp3s0f0", 2, "pci0000:00", 0),
        ("enp129s0f0", 2, "pci0000:80", 1),
    ]
    assert [
        (vf["pci_address"], vf["pf_name"], vf["driver"], vf["netdev"], vf["pcie_root"]) for vf in facts["vfs"]
    ] == [
        ("0000:03:02.0", "enp3s0f0", "iavf", "enp3s0f0v0", "pci0000:00"),
        ("0000:03:02.1", "enp3s0f0", "iavf", "enp3s0f0v1", "pci0000:00"),
        ("0000:81:02.0", "enp129s0f0", "iavf", "enp129s0f0v0", "pci0000:80"),
        ("0000:81:02.1", "enp129s0f0", "iavf", "enp129s0f0v1", "pci0000:80"),
    ]


def test_pfs_filter_by_name_or_address(root):
    result = harness.run_module(
        sriov_facts, {"host_root": str(root), "pfs": ["0000:81:00.0"]}, check_mode=True
    )
    facts = result["ansible_facts"]["sriov"]
    assert [pf["name"] for pf in facts["pfs"]] == ["enp129s0f0"]
    assert {vf["pf_name"] for vf in facts["vfs"]} == {"enp129s0f0"}


def test_wrong_root_fails_with_the_path_and_the_fix(tmp_path):
    with pytest.raises(harness.ModuleFailed) as failed:
        harness.run_module(sriov_facts, {"host_root": str(tmp_path / "nothing")})
    assert failed.value.msg == (
        f"cannot list PCI devices in {tmp_path}/nothing/sys/bus/pci/devices: No such file or directory; check "
        "host_root (it must hold the host's sys/)"
    )


def _vmbus_no_numa(root: Path) -> None:
    fake_sysfs.build(root, [fake_pci.vmbus_pf(2, numa_node=-1)])


def _two_roots_first_without_numa(root: Path) -> None:
    first, second = fake_pci.two_root_pfs(2)
    fake_sysfs.build(root, [dataclasses.replace(first, numa_node=-1), second])


def test_facts_on_a_vmbus_guest_give_the_root_bus_for_pf_and_vfs_and_null_numa(tmp_path):
    _vmbus_no_numa(tmp_path)
    facts = harness.run_module(sriov_facts, {"host_root": str(tmp_path)})["ansible_facts"]["sriov"]
    assert [
        (f["pci_address"], f["pcie_root"], f["pcie_root_problem"], f["numa_node"]) for f in facts["pfs"]
    ] == [("0001:00:00.0", "pci0001:00", None, None)]
    assert [(f["pci_address"], f["pcie_root"], f["numa_node"]) for f in facts["vfs"]] == [
        ("0001:00:00.1", "pci0001:00", None),
        ("0001:00:00.2", "pci0001:00", None),
    ]


@pytest.mark.parametrize(
    "build",
    [_vmbus_no_numa, _two_roots_first_without_numa],
    ids=["vmbus-numa-minus-one", "two-roots-one-minus-one"],
)
def test_facts_equal_what_the_plugin_publishes_on_the_same_tree(tmp_path, build):
    build(tmp_path)
    facts = harness.run_module(sriov_facts, {"host_root": str(tmp_path)})["ansible_facts"]["sriov"]
    pf_numa = {pf["pci_address"]: pf["numa_node"] for pf in facts["pfs"]}
    from_facts = {vf["pci_address"]: (vf["pcie_root"], pf_numa[vf["pf_pci_address"]]) for vf in facts["vfs"]}
    published = {}
    for vf in discovery.discover(host_sysfs.Sysfs(tmp_path)):
        root = vf.attributes.get(discovery.PCIE_ROOT)
        numa = vf.attributes.get(discovery.NUMA_NODE)
        published[vf.pci_address] = (
            None if root is None else root.value,
            None if numa is None else numa.value,
        )
    assert from_facts == published
    assert -1 not in {numa for _, numa in published.values()}
