"""A lab node's fake PFs have real interfaces in the node's netns, so device health reads them as on a real node.

Root-only: the node machine (``sriov_dra_lab.topology.NodeMachine``) creates a real network
namespace with veths and a mount namespace.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from sriov_dra.core import device_health as dh
from sriov_dra.driver import device_health_monitor
from sriov_dra.host import discovery, netlink, vf_health_reader
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra_lab import topology


def test_every_vf_of_a_lab_node_reads_healthy_and_its_pf_down_unhealthy(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to create the lab node's namespaces")
    layout = topology.NodeLayout.for_node(tmp_path, f"h{uuid.uuid4().hex[:4]}", "pf-links", 1)
    machine = topology.NodeMachine(layout, vfs_per_pf=1)
    machine.create()
    try:
        sysfs = sysfs_mod.Sysfs(layout.sysfs_root)
        inventory = discovery.by_name(discovery.discover(sysfs))
        targets = device_health_monitor.watch_targets(layout.name, inventory, inventory, [])
        reader = vf_health_reader.VfHealthReader(
            sysfs, links=lambda: netlink.carrier_states(layout.netns_path)
        )

        def health() -> dict[str, dh.Health]:
            readings = reader.read(targets)
            return {t.pf_name: dh.decide(t, readings[t.device]).health for t in targets}

        assert health() == {pf: dh.Health.HEALTHY for pf, *_ in topology.RAILS}
        done = machine.run_in_node(["ip", "link", "set", "ens1f0", "down"])
        assert done.returncode == 0, done.stderr
        assert health() == {"ens1f0": dh.Health.UNHEALTHY, "ens2f0": dh.Health.HEALTHY}
    finally:
        machine.destroy()
    assert not layout.run_root.parent.exists(), "the lab's /run/sdl-<id> directory is left behind"
