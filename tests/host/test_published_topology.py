"""Host tier: the topology attributes a node publishes, from a fake tree to the ResourceSlice JSON.

Each tree goes through the plugin's path: ``discovery.discover`` on the fake sysfs, policy
evaluation with a policy that advertises every device (``configs: [{}]``), then
``slices.published_devices`` and ``slices.desired_slices``, which the publisher writes as is.
Trees: a Hyper-V/VMBus guest (the PF's root bus under ACPI and VMBus directories), and PFs
whose ``numa_node`` is ``-1``.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest

from sriov_dra.core import policies
from sriov_dra.core.plugin import slices
from sriov_dra.host import discovery
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra_lab.fakes import fake_pci, fake_sysfs
from sriov_dra_rules import names

NODE = "worker-1"
NODE_UID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
ADVERTISE_ALL = {"metadata": {"name": "all", "namespace": "dra-driver-sriov"}, "spec": {"configs": [{}]}}
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
NUMA_NODE = "dra.net/numaNode"


def published(sysfs: sysfs_mod.Sysfs) -> dict[str, dict[str, Any]]:
    """Device name → the attributes JSON of that device in the node's ResourceSlices."""
    facts = [vf.to_device_facts() for vf in discovery.discover(sysfs)]
    evaluation = policies.evaluate_policies(facts, [ADVERTISE_ALL], [], node_labels={}, managed=False)
    devices = slices.published_devices(facts, evaluation)
    pool = slices.desired_slices(
        devices, driver=names.DRIVER_NAME, node=NODE, node_uid=NODE_UID, generation=1
    )
    return {d["name"]: d["attributes"] for s in pool for d in s["spec"]["devices"]}


def test_vmbus_guest_publishes_the_root_bus_below_vmbus_on_every_vf(tmp_path: Path) -> None:
    fake = fake_sysfs.build(tmp_path, [fake_pci.vmbus_pf(3)])
    got = published(fake.sysfs)
    assert sorted(got) == ["0001-00-00-1", "0001-00-00-2", "0001-00-00-3"]
    for attrs in got.values():
        assert (attrs[PCIE_ROOT], attrs[NUMA_NODE]) == ({"string": "pci0001:00"}, {"int": 0})
        assert attrs["resource.kubernetes.io/numaNode"] == {"int": 0}


def test_vmbus_guest_logs_no_omission(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake = fake_sysfs.build(tmp_path, [fake_pci.vmbus_pf(1)])
    with caplog.at_level(logging.INFO, logger=discovery.__name__):
        published(fake.sysfs)
    assert [r.getMessage() for r in caplog.records if "omitted" in r.getMessage()] == []


def test_numa_minus_one_is_never_published_and_the_reason_is_logged_once_per_pf(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = fake_pci.two_root_pfs(2)
    fake = fake_sysfs.build(tmp_path, [dataclasses.replace(first, numa_node=-1), second])
    with caplog.at_level(logging.INFO, logger=discovery.__name__):
        got = published(fake.sysfs)
    for key in (NUMA_NODE, "resource.kubernetes.io/numaNode"):
        assert {name: attrs.get(key) for name, attrs in got.items()} == {
            "0000-03-02-0": None,
            "0000-03-02-1": None,
            "0000-81-02-0": {"int": 1},
            "0000-81-02-1": {"int": 1},
        }
    assert {name: attrs[PCIE_ROOT]["string"] for name, attrs in got.items()} == {
        "0000-03-02-0": "pci0000:00",
        "0000-03-02-1": "pci0000:00",
        "0000-81-02-0": "pci0000:80",
        "0000-81-02-1": "pci0000:80",
    }
    records = [r for r in caplog.records if r.getMessage() == "numaNode omitted"]
    assert [(getattr(r, "pci", None), getattr(r, "reason", None)) for r in records] == [
        ("0000:03:00.0", "the kernel reports no NUMA affinity (-1)")
    ]


def test_vmbus_guest_without_numa_affinity_keeps_pcie_root_and_drops_numa_node(tmp_path: Path) -> None:
    fake = fake_sysfs.build(tmp_path, [fake_pci.vmbus_pf(2, numa_node=-1)])
    got = published(fake.sysfs)
    assert sorted(got) == ["0001-00-00-1", "0001-00-00-2"]
    for attrs in got.values():
        assert attrs[PCIE_ROOT] == {"string": "pci0001:00"}
        assert NUMA_NODE not in attrs
        assert "resource.kubernetes.io/numaNode" not in attrs
        assert -1 not in [value for typed in attrs.values() for value in typed.values()]
