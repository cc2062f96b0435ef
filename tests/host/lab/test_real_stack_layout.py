"""A real lab node's layout names what the real node creates, so the stack's steps reach the real kubelet's node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sriov_dra_lab import real_node, real_stack, session


def _real_node(layout: real_stack.RealNodeLayout) -> real_node.RealNode:
    bridge = real_node.NodeBridge(lab_id=layout.lab_id)
    cp: Any = object()  # names only: nothing is started
    return real_node.RealNode(
        control_plane=cp, bridge=bridge, name=layout.name, index=layout.index, root=layout.root
    )


def test_real_layout_names_the_real_nodes_network_and_mount_namespaces_and_cdi_dir(tmp_path: Path) -> None:
    layout = real_stack.RealNodeLayout.for_node(tmp_path, "ab12", "lab-node-2", 2)
    node = _real_node(layout)
    assert (layout.netns_name, layout.netns_path) == (node.netns_name, node.netns_path)
    assert layout.mountns_file == node.mountns_file
    assert layout.cdi_root == node.cdi_dir
    for mount in ("/etc/cni/net.d", "/opt/cni/bin", "/var/lib/cni"):
        assert layout.host_dir(mount) == node.node_dir(mount)


def test_real_node_gets_the_lab_socket_dir_fake_sysfs_and_cdi_dir_and_keeps_its_own_multus_run_dir(
    tmp_path: Path,
) -> None:
    layout = real_stack.RealNodeLayout.for_node(tmp_path, "ab12", "lab-node-1", 1)
    binds = dict((target, source) for source, target in real_stack.node_binds(layout))
    assert binds == {
        str(layout.run_root): layout.run_root,
        "/run/sriov-dra-lab/sysfs": layout.sysfs_root,
        "/run/cdi": layout.cdi_root,
    }


def test_gpu_cdi_spec_resolves_every_synthetic_gpu_the_plugin_names(tmp_path: Path) -> None:
    layout = real_stack.RealNodeLayout.for_node(tmp_path, "ab12", "lab-node-1", 1)
    spec = json.loads(real_stack.write_gpu_cdi(layout).read_text())
    names = {f"{spec['kind']}=" + d["name"] for d in spec["devices"]}

    def wanted(per_root: int) -> set[str]:
        devices = session.gpu_slice("lab-node-1", per_root)["spec"]["devices"]
        return {f"k8s.gpu.nvidia.com/gpu=synthetic-{d['name']}" for d in devices}

    assert names == wanted(session.MAX_GPUS_PER_ROOT)
    assert wanted(1) < names
    assert all(d["containerEdits"]["env"] for d in spec["devices"])
