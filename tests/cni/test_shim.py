"""The installed ``multus-guard`` shim as the runtime runs it: daemon down, pass-through, VERSION.

ADD needs the guard daemon and fails clearly (code 11) without it; DEL, CHECK, GC and STATUS are
passed straight to Multus by the shim itself, so teardown works with the daemon down.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from tests.cni.world import RAIL_A, RAIL_B, World

from sriov_dra.guard import install, shim
from sriov_dra.host import netlink
from sriov_dra_lab import cni
from sriov_dra_lab.cni_node import CniNode


def _dead_socket_conf(node: CniNode, mode: str, tmp_path: Path) -> Path:
    """A copy of the mode's runtime conf dir whose guard config names a socket nobody listens on."""
    doc = json.loads((node.conf_dirs[mode] / install.CONFLIST_NAME).read_text())
    doc["plugins"][0]["guard"]["socket"] = str(tmp_path / "nobody.sock")
    conf_dir = tmp_path / f"net.d-{mode}"
    conf_dir.mkdir()
    (conf_dir / install.CONFLIST_NAME).write_text(json.dumps(doc))
    return conf_dir


def test_version_is_answered_by_the_shim(cni_node: CniNode, tmp_path: Path) -> None:
    att = cni.Attachment(container_id="", netns="", cni_args="")
    answer = cni.invoke(cni_node.bin_dir / "multus-guard", "VERSION", att, {"cniVersion": "1.0.0"})
    assert answer.ok and "1.1.0" in (answer.result or {})["supportedVersions"]


@pytest.mark.parametrize("mode", ["thin", "thick"])
def test_add_with_the_daemon_down_fails_clearly_and_runs_nothing(
    world: World, mode: str, tmp_path: Path
) -> None:
    pod = world.managed_pod("p")
    att = world.attachment(pod.name, uid=pod.uid)
    result = world.add(mode, att, conf_dir=_dead_socket_conf(world.node, mode, tmp_path))
    error = result.error or {}
    assert error["code"] == shim.CniErrorCode.TRY_AGAIN
    assert "guard daemon is not reachable" in error["msg"] and "nobody.sock" in error["msg"]
    assert f"Pod UID {pod.uid} has managed bindings" in error["details"]
    assert "and DEL, CHECK, GC and STATUS, do not need it" in error["details"]
    assert world.node.recorded(att.container_id) == []


@pytest.mark.parametrize("mode", ["thin", "thick"])
def test_del_check_gc_status_pass_through_with_the_daemon_down(
    world: World, mode: str, tmp_path: Path
) -> None:
    pod = world.managed_pod("p")
    att, added = world.attach(mode, pod.name, uid=pod.uid)
    assert added.ok, added.stdout
    dead = _dead_socket_conf(world.node, mode, tmp_path)
    multus_name = "multus" if mode == "thin" else "multus-shim"
    network = cni.load_network(dead / install.CONFLIST_NAME)

    for command in ("CHECK", "STATUS", "GC"):
        before = len(world.node.recorded(att.container_id))
        cni.run_network(network, command, att, bin_dirs=[world.node.bin_dir])
        calls = world.node.recorded(att.container_id)[before:]
        assert calls and (calls[0].plugin, calls[0].command) == (multus_name, command)

    deleted = world.delete(mode, att, conf_dir=dead)
    assert deleted.ok, deleted.stdout + deleted.stderr
    assert set(netlink.link_names(att.netns)) == {"lo"}
    assert world.host_local_files(RAIL_A) == [] and world.ippool_allocations(RAIL_B) == {}


def test_missing_runtime_pod_uid_reaches_thick_multus_from_the_live_pod(world: World) -> None:
    pod = world.managed_pod("p")
    att, result = world.attach("thick", pod.name, uid=None)
    assert "K8S_POD_UID" not in att.cni_args
    assert result.ok, result.stdout
    assert world.node.thick is not None
    log = (world.node.thick.workdir / "multus-daemon.log").read_text()
    assert f'ContainerID:"{att.container_id}"' in log and f"K8S_POD_UID={pod.uid}" in log
    assert world.delete("thick", att).ok


def test_guard_metrics_count_decisions(world: World) -> None:
    pod = world.managed_pod("p")
    att = world.attachment(pod.name, uid=pod.uid)
    assert world.add("thin", att).ok
    assert world.delete("thin", att).ok
    assert world.node.guard is not None
    with urllib.request.urlopen(f"{world.node.guard.metrics_url}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    assert 'sriov_dra_guard_decisions_total{kind="passed",reason="PassedVerified"}' in text
    assert 'sriov_dra_guard_add_duration_seconds_count{part="multus"}' in text
