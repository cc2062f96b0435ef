"""Tests for ``plugins/modules/sriov_facts.py``: facts from a fake tree, PF filter, check mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.sriovnet.dra.plugins.modules import sriov_facts
from tests.unit.plugins import harness

from sriov_dra.host import fakesysfs


@pytest.fixture
def root(tmp_path: Path) -> Path:
    fakesysfs.build(tmp_path, fakesysfs.two_root_pfs(2))
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
