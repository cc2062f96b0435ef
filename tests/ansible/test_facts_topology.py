"""Ansible tier: ``sriov_facts`` run by Ansible itself gives the plugin's topology on the same trees.

The module is run as ``ansible localhost -m sriovnet.dra.sriov_facts``, so AnsiballZ packs it with
its module_utils, the shared rules package ``sriov_dra_rules`` (relative imports) included. On a
Hyper-V/VMBus tree and on a tree whose PF has ``numa_node`` ``-1``, the facts equal what the
plugin's discovery publishes: the PF's root bus for the PF and every VF, and no NUMA node
(null in the facts, no ``dra.net/numaNode`` attribute) where the kernel reports ``-1``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.ansible.conftest import run

from sriov_dra.host import discovery
from sriov_dra.host import sysfs as host_sysfs
from sriov_dra_lab.fakes import fake_devlink, fake_pci, fake_sysfs


def _facts(root: Path, env: dict[str, str]) -> dict[str, Any]:
    proc = run(
        ["ansible", "localhost", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}",
         "-m", "sriovnet.dra.sriov_facts", "-a", f"host_root={root}", "-o"],
        env,
    )  # fmt: skip
    _, _, payload = proc.stdout.partition(" => ")
    result: dict[str, Any] = json.loads(payload)
    return result["ansible_facts"]["sriov"]


def _vmbus_no_numa(root: Path) -> None:
    fake_sysfs.build(root, [fake_pci.vmbus_pf(2, numa_node=-1)])


def _first_pf_no_numa(root: Path) -> None:
    first, second = fake_pci.two_root_pfs(1)
    fake_sysfs.build(root, [dataclasses.replace(first, numa_node=-1), second])


@pytest.mark.parametrize(
    ("build", "pfs"),
    [
        (_vmbus_no_numa, [("0001:00:00.0", "pci0001:00", None)]),
        (_first_pf_no_numa, [("0000:03:00.0", "pci0000:00", None), ("0000:81:00.0", "pci0000:80", 1)]),
    ],
    ids=["vmbus-guest-numa-minus-one", "two-roots-first-numa-minus-one"],
)
def test_ansible_run_facts_give_the_published_root_and_no_minus_one_node(
    tmp_path: Path,
    ansible_env: dict[str, str],
    build: Callable[[Path], None],
    pfs: list[tuple[str, str, int | None]],
) -> None:
    build(tmp_path)
    facts = _facts(tmp_path, ansible_env)
    assert [(pf["pci_address"], pf["pcie_root"], pf["numa_node"]) for pf in facts["pfs"]] == pfs
    numa = {pf["pci_address"]: pf["numa_node"] for pf in facts["pfs"]}
    from_facts = {vf["pci_address"]: (vf["pcie_root"], numa[vf["pf_pci_address"]]) for vf in facts["vfs"]}
    published = {
        vf.pci_address: (
            vf.attributes[discovery.PCIE_ROOT].value,
            vf.attributes[discovery.NUMA_NODE].value if discovery.NUMA_NODE in vf.attributes else None,
        )
        for vf in discovery.discover(host_sysfs.Sysfs(tmp_path))
    }
    assert from_facts == published


def test_ansible_run_facts_ask_devlink_for_the_eswitch_mode_as_the_plugin_publishes_it(
    tmp_path: Path, ansible_env: dict[str, str]
) -> None:
    root = tmp_path / "root"
    switchdev = fake_pci.FakePf(
        bdf="0000:3b:00.0", ifname="ens2f0np0", eswitch_mode="switchdev", vfs=fake_pci.make_vfs(1)
    )
    plain = fake_pci.FakePf(
        bdf="0000:5e:00.0", ifname="ens3f0", pcie_root="pci0000:5d", bridges=("0000:5d:00.0",),
        vfs=fake_pci.make_vfs(1),
    )  # fmt: skip
    fake_sysfs.build(root, (switchdev, plain))
    # The fake devlink first on PATH: the module runs its real command path against the fake tree.
    bin_dir = fake_devlink.install(tmp_path / "bin", root).parent
    env = {**ansible_env, "PATH": f"{bin_dir}{os.pathsep}{ansible_env.get('PATH', os.environ['PATH'])}"}
    facts = _facts(root, env)
    modes = {pf["pci_address"]: pf["eswitch_mode"] for pf in facts["pfs"]}
    assert {pf["pci_address"]: (pf["eswitch_mode"], pf["eswitch_mode_reason"]) for pf in facts["pfs"]} == {
        "0000:3b:00.0": ("switchdev", None),
        "0000:5e:00.0": ("legacy", "devlink: Operation not supported (no eswitch on this PF): legacy"),
    }
    published = {
        vf.pf_pci_address: vf.eswitch_mode.value
        for vf in discovery.discover(host_sysfs.Sysfs(root), eswitch_modes=fake_sysfs.FakeEswitchModes(root))
    }
    assert published == modes
