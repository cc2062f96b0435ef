"""The lab node's fake hardware plan: two rails on two PCIe roots, VF names and addresses."""

from __future__ import annotations

from sriov_dra_lab import topology


def test_each_rail_has_its_vfs_under_its_own_root() -> None:
    vfs = topology.plan_vfs(2)
    assert [(v.pf, v.index, v.pci, v.pcie_root, v.ifname, v.peer) for v in vfs] == [
        ("ens1f0", 0, "0000:03:00.2", "pci0000:00", "ens1f0v0", "ens1f0v0p"),
        ("ens1f0", 1, "0000:03:00.3", "pci0000:00", "ens1f0v1", "ens1f0v1p"),
        ("ens2f0", 0, "0000:81:00.2", "pci0000:80", "ens2f0v0", "ens2f0v0p"),
        ("ens2f0", 1, "0000:81:00.3", "pci0000:80", "ens2f0v1", "ens2f0v1p"),
    ]
    assert all(len(v.ifname) <= 15 and len(v.peer) <= 15 for v in topology.plan_vfs(16))


def test_fake_pfs_match_the_gpu_nic_pairs_example_and_name_vfs_like_the_veths() -> None:
    pfs = topology.fake_pfs(3)
    assert [(p.ifname, p.vendor, p.pcie_root, p.numa_node) for p in pfs] == [
        ("ens1f0", "15b3", "pci0000:00", 0),
        ("ens2f0", "15b3", "pci0000:80", 1),
    ]
    assert [vf.netdev for vf in pfs[1].vfs] == ["ens2f0v0", "ens2f0v1", "ens2f0v2"]


def test_node_paths_keep_sockets_short_wherever_the_workdir_is(tmp_path: object) -> None:
    from pathlib import Path

    deep = Path("/very") / ("deep-" * 20) / "workdir"
    layout = topology.NodeLayout.for_node(deep, "ab12", "lab-node-1", 1)
    socket = layout.plugins_dir / "sriovnetwork.k8snetworkplumbingwg.io" / "dra.sock"
    assert len(str(socket)) < 108 and len(str(layout.guard_socket)) < 108
    assert layout.netns_name == "sdlab12-lab-node-1"
    assert layout.host_dir("/etc/cni/net.d") == deep / "nodes" / "lab-node-1" / "fs" / "etc" / "cni" / "net.d"
    assert layout.mountns_file == deep / "ns" / "lab-node-1"


def test_node_logs_live_with_every_other_lab_log_under_the_workdir_logs() -> None:
    from pathlib import Path

    layout = topology.NodeLayout.for_node(Path("/w/.lab"), "ab12", "lab-node-2", 2)
    assert layout.logs == Path("/w/.lab/logs/lab-node-2")
