"""The guard daemon runs Multus chrooted into the node's root when it runs in a container (host tier).

The guard DaemonSet mounts the node's ``/`` at ``/host`` and starts the daemon with
``--host-root=/host``: Multus (and every delegate it starts) must see the node's CNI directories,
IPAM state and Multus cache, exactly as the runtime's own calls (the shim's DEL) see them, or an
ADD's reservations land in the container's filesystem and the node's DEL never finds them. These
tests build a small node root (a static busybox as ``/bin/sh``, a Multus stand-in script that
records what it saw) and run :class:`~sriov_dra.guard.multus.MultusRunner` against it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from sriov_dra.guard import multus, shim

PRIMARY = {"cniVersion": "1.0.0", "name": "node-primary", "plugins": [{"type": "bridge", "bridge": "cni0"}]}
PRIMARY_PATH = "/etc/cni/net.d/10-node-primary-only-in-the-root.conflist"
RESULT = {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0"}]}
# LABELLED STAND-IN for the Multus binary: records its root, command and stdin, prints a result.
MULTUS_SCRIPT = f"""#!/bin/sh
cat /etc/node-marker > /seen/marker
echo "$CNI_COMMAND" > /seen/command
cat > /seen/stdin
echo '{json.dumps(RESULT)}'
"""


@pytest.fixture
def node_root(tmp_path: Path) -> Path:
    """A node root with ``/bin/sh`` (static busybox), ``/opt/cni/bin/multus`` and the primary config."""
    busybox = shutil.which("busybox")
    if os.geteuid() != 0 or busybox is None:
        pytest.skip("needs root (chroot) and a static busybox (make deps installs busybox-static)")
    root = tmp_path / "node"
    (root / "bin").mkdir(parents=True)
    shutil.copy(busybox, root / "bin" / "busybox")
    for applet in ("sh", "cat", "echo"):
        (root / "bin" / applet).symlink_to("busybox")
    bin_dir = root / "opt" / "cni" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "multus").write_text(MULTUS_SCRIPT)
    (bin_dir / "multus").chmod(0o755)
    conf_dir = root / PRIMARY_PATH.lstrip("/")
    conf_dir.parent.mkdir(parents=True)
    conf_dir.write_text(json.dumps(PRIMARY))
    (root / "etc" / "node-marker").write_text("the node's root\n")
    (root / "seen").mkdir()
    return root


def _conf(primary: str = PRIMARY_PATH, **multus_keys: str) -> shim.GuardConf:
    text = {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "type": "multus-guard",
        "multus": {"mode": "thin", "primaryConfig": primary, **multus_keys},
    }
    return shim.parse_conf(json.dumps(text).encode())


ENV = {
    "CNI_PATH": "/opt/cni/bin",
    "CNI_CONTAINERID": "c1",
    "CNI_NETNS": "/var/run/netns/x",
    "CNI_IFNAME": "eth0",
}


def test_multus_runs_chrooted_into_the_node_root_with_the_primary_read_at_the_nodes_path(
    node_root: Path,
) -> None:
    assert not Path(PRIMARY_PATH).exists()  # the primary exists only in the node root
    done = multus.MultusRunner(str(node_root)).run(_conf(), ENV, command="ADD", timeout_s=30)
    assert done.ok, done.stderr
    assert json.loads(done.stdout) == RESULT  # relayed byte for byte
    assert (node_root / "seen" / "marker").read_text() == "the node's root\n"  # it ran inside the root
    assert (node_root / "seen" / "command").read_text() == "ADD\n"
    stdin = json.loads((node_root / "seen" / "stdin").read_text())
    assert stdin["type"] == "multus" and stdin["delegates"] == [PRIMARY]


def test_teardown_with_an_unreadable_primary_falls_back_to_the_nodes_path_not_the_containers(
    node_root: Path,
) -> None:
    missing = "/etc/cni/net.d/99-gone.conflist"
    done = multus.MultusRunner(str(node_root)).run(_conf(missing), ENV, command="DEL", timeout_s=30)
    assert done.ok, done.stderr
    stdin = json.loads((node_root / "seen" / "stdin").read_text())
    assert stdin["clusterNetwork"] == missing  # Multus resolves it in the node's root
    assert "delegates" not in stdin


def test_multus_missing_from_the_node_root_is_unavailable_naming_the_directories_searched(
    node_root: Path,
) -> None:
    (node_root / "opt" / "cni" / "bin" / "multus").unlink()
    with pytest.raises(multus.MultusUnavailable) as caught:
        multus.MultusRunner(str(node_root)).run(_conf(), ENV, command="ADD", timeout_s=30)
    message = str(caught.value)
    assert "multus not found in CNI_PATH ['/opt/cni/bin']" in message
    assert f"under the node's root {node_root}" in message


def test_multus_linked_by_an_absolute_symlink_is_found_where_the_node_resolves_the_link(
    node_root: Path,
) -> None:
    # As on nodes whose /opt/cni/bin links into a package's directory: the target is a node path.
    (node_root / "usr" / "lib" / "cni").mkdir(parents=True)
    os.rename(node_root / "opt" / "cni" / "bin" / "multus", node_root / "usr" / "lib" / "cni" / "multus")
    (node_root / "opt" / "cni" / "bin" / "multus").symlink_to("/usr/lib/cni/multus")
    assert not Path("/usr/lib/cni/multus").exists()  # only the node root has it
    done = multus.MultusRunner(str(node_root)).run(_conf(), ENV, command="ADD", timeout_s=30)
    assert done.ok, done.stderr
    assert (node_root / "seen" / "command").read_text() == "ADD\n"


def test_resolve_in_root_never_leaves_the_root_and_stops_at_a_symlink_loop(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "a").mkdir(parents=True)
    (root / "a" / "up").symlink_to("../../../../etc")
    assert multus.resolve_in_root(str(root), "/a/up/passwd") == f"{root}/etc/passwd"
    (root / "a" / "abs").symlink_to("/a")
    assert multus.resolve_in_root(str(root), "/a/abs/./abs/x") == f"{root}/a/x"
    (root / "loop").symlink_to("/loop")
    assert multus.resolve_in_root(str(root), "/loop/x") is None
    assert multus.resolve_in_root(str(root), "/missing/y") == f"{root}/missing/y"


def test_an_explicit_multus_binary_is_a_path_in_the_node_root(node_root: Path) -> None:
    os.rename(node_root / "opt" / "cni" / "bin" / "multus", node_root / "bin" / "my-multus")
    conf = _conf(binary="/bin/my-multus")
    done = multus.MultusRunner(str(node_root)).run(conf, ENV, command="ADD", timeout_s=30)
    assert done.ok, done.stderr
    assert (node_root / "seen" / "command").read_text() == "ADD\n"


def test_node_path_resolves_the_nodes_symlinks_under_the_root_and_leaves_paths_without_one(
    tmp_path: Path,
) -> None:
    root = tmp_path / "host"
    (root / "run" / "netns").mkdir(parents=True)
    (root / "var").mkdir()
    (root / "var" / "run").symlink_to("/run")  # as on Debian: the container's /run is another one
    assert multus.node_path(str(root), "/var/run/netns/cni-1") == f"{root}/run/netns/cni-1"
    assert multus.node_path(None, "/run/netns/cni-1") == "/run/netns/cni-1"
    assert multus.node_path("/host", "") == ""  # no netns given stays no netns
