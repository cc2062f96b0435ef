"""Tests for ``plugins/modules/preflight.py``: each node check passes on a good node and fails with its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.sriovnet.dra.plugins.modules import preflight
from tests.ansible import node_fixture
from tests.pure.plugins import harness

GUARD = "00-multus-guard.conflist"
CNI_OK = '#!/bin/sh\ncat >/dev/null\necho \'{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}\'\n'
CNI_BROKEN = "#!/bin/sh\necho 'segfault' >&2\nexit 139\n"
BINARIES = ["multus-shim", "multus-guard", "sriov", "host-local", "whereabouts"]


def _exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def node(tmp_path: Path) -> dict[str, str]:
    """A node that passes every check: binaries, guard first, pinned primary, the plugin's checkpoint, persistent
    caches."""
    conf, bin_dir = tmp_path / "net.d", tmp_path / "bin"
    conf.mkdir()
    bin_dir.mkdir()
    for name in BINARIES:
        _exe(bin_dir / name, CNI_OK)
    primary = conf / "10-flannel.conflist"
    primary.write_text(json.dumps({"cniVersion": "1.0.0", "name": "cbr0", "plugins": [{"type": "flannel"}]}))
    plugin_checkpoint = node_fixture.write_plugin_checkpoint(tmp_path / "plugin")
    guard = {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "plugins": [
            {
                "type": "multus-guard",
                "multus": {"mode": "thick", "primaryConfig": str(primary)},
                "guard": {"pluginCheckpoint": str(plugin_checkpoint)},
            }
        ],
    }
    (conf / GUARD).write_text(json.dumps(guard))
    (conf / "multus.d").mkdir()
    daemon = conf / "multus.d" / "daemon-config.json"
    daemon.write_text(json.dumps({"multusConfigFile": "auto", "multusMasterCNI": "10-flannel.conflist"}))
    caches = [tmp_path / "var" / "lib" / "cni" / "multus", tmp_path / "var" / "lib" / "cni" / "sriov"]
    for cache in caches:
        cache.mkdir(parents=True)
    mounts = tmp_path / "mounts"
    mounts.write_text(f"/dev/sda1 / ext4 rw 0 0\ntmpfs {tmp_path}/run tmpfs rw 0 0\n")
    return {
        "cni_conf_dir": str(conf),
        "cni_bin_dir": str(bin_dir),
        "multus_daemon_config": str(daemon),
        "cache_dirs": [str(c) for c in caches],
        "mounts_file": str(mounts),
        "legacy_device_plugin_config": str(tmp_path / "etc" / "pcidp" / "config.json"),
        "plugin_checkpoint": str(plugin_checkpoint),
    }


def _checks(params: dict[str, object]) -> dict[str, dict[str, str]]:
    result = harness.run_module(preflight, params, check_mode=True)
    assert result["changed"] is False
    return {c["name"]: c for c in result["checks"]}


def test_good_node_passes_every_check_in_a_fixed_order(node):
    result = harness.run_module(preflight, node)
    assert [c["name"] for c in result["checks"]] == node_fixture.NODE_CHECKS
    assert result["failed_checks"] == []
    assert all(c["fix"] == "" for c in result["checks"])
    assert {c["status"] for c in result["checks"]} == {"pass", "skip"}


def test_add_check_without_bridge_is_skipped_with_the_reason(node):
    check = _checks(node)["cni-add"]
    assert check == {
        "name": "cni-add",
        "status": "skip",
        "detail": f"skipped: bridge not in {node['cni_bin_dir']}; install the containernetworking plugins there "
        "to run a test ADD",
        "fix": "",
    }


def test_add_check_can_be_disabled(node):
    check = _checks({**node, "add_check": False})["cni-add"]
    assert (check["status"], check["detail"]) == ("skip", "skipped: disabled (add_check / --no-add-check)")


def test_missing_binary_fails_with_install_fix(node):
    (Path(node["cni_bin_dir"]) / "whereabouts").unlink()
    check = _checks(node)["cni-binaries"]
    assert check["status"] == "fail"
    assert check["detail"] == f"missing or not executable in {node['cni_bin_dir']}: whereabouts"
    assert check["fix"].startswith(f"install whereabouts into {node['cni_bin_dir']}")


def test_binary_that_cannot_answer_version_fails_the_exec_check(node):
    _exe(Path(node["cni_bin_dir"]) / "sriov", CNI_BROKEN)
    check = _checks(node)["cni-exec"]
    assert (check["status"], check["detail"]) == ("fail", "CNI_COMMAND=VERSION failed for: sriov")
    assert check["fix"].startswith(f"reinstall sriov in {node['cni_bin_dir']}")


def test_thin_mode_requires_the_multus_binary_instead_of_the_shim(node):
    check = _checks({**node, "multus_mode": "thin"})["cni-binaries"]
    assert (check["status"], check["detail"]) == (
        "fail",
        f"missing or not executable in {node['cni_bin_dir']}: multus",
    )


def test_another_file_sorting_first_fails_guard_first(node):
    (Path(node["cni_conf_dir"]) / "00-calico.conflist").write_text("{}")
    check = _checks(node)["guard-first"]
    assert check["status"] == "fail"
    assert check["detail"] == f"first CNI config in {node['cni_conf_dir']} is 00-calico.conflist"
    assert "run the sriovnet.dra.guard role" in check["fix"]


def test_unpinned_thick_primary_fails_guard_config(node):
    Path(node["multus_daemon_config"]).write_text(json.dumps({"multusConfigFile": "auto"}))
    check = _checks(node)["guard-config"]
    assert check["status"] == "fail"
    assert "multusMasterCNI is not set" in check["detail"]
    assert "sriovnet.dra.multus" in check["fix"]


def test_cache_on_tmpfs_fails_with_persistent_mount_fix(node, tmp_path):
    Path(node["mounts_file"]).write_text(
        f"/dev/sda1 / ext4 rw 0 0\ntmpfs {tmp_path}/var/lib/cni tmpfs rw 0 0\n"
    )
    check = _checks(node)["cache-mounts"]
    assert check["status"] == "fail"
    assert check["detail"] == (
        f"{node['cache_dirs'][0]} is on tmpfs ({tmp_path}/var/lib/cni), lost on reboot; "
        f"{node['cache_dirs'][1]} is on tmpfs ({tmp_path}/var/lib/cni), lost on reboot"
    )
    assert "persistent storage" in check["fix"]


def test_legacy_device_plugin_config_fails(node):
    legacy = Path(node["legacy_device_plugin_config"])
    legacy.parent.mkdir(parents=True)
    legacy.write_text("{}")
    check = _checks(node)["legacy-device-plugin"]
    assert check["status"] == "fail"
    assert check["fix"] == (
        f"remove the sriov-network-device-plugin DaemonSet and {legacy}; one provider must own each VF"
    )


def _guard_checkpoint(node: dict[str, object], configured: str) -> None:
    """Rewrite the guard's ``guard.pluginCheckpoint`` to ``configured``."""
    path = Path(str(node["cni_conf_dir"])) / GUARD
    doc = json.loads(path.read_text())
    doc["plugins"][0]["guard"]["pluginCheckpoint"] = configured
    path.write_text(json.dumps(doc))


def test_guard_reading_the_plugins_checkpoint_passes_naming_it(node):
    check = _checks(node)["guard-checkpoint"]
    detail = (
        f"{node['cni_conf_dir']}/{GUARD}: guard.pluginCheckpoint {node['plugin_checkpoint']} is the plugin's "
        "checkpoint (checkpoint.slots, 0 managed bindings)"
    )
    assert (check["status"], check["detail"], check["fix"]) == ("pass", detail, "")


def test_guard_checkpoint_path_the_plugin_does_not_write_fails_naming_both_paths_and_the_bypass(
    node, tmp_path
):
    wrong = tmp_path / "elsewhere" / "checkpoint.json"
    node_fixture.write_plugin_checkpoint(
        wrong.parent
    )  # even a real checkpoint: not the one the plugin writes
    _guard_checkpoint(node, str(wrong))
    check = _checks(node)["guard-checkpoint"]
    assert check["status"] == "fail"
    assert check["detail"] == (
        f"{node['cni_conf_dir']}/{GUARD}: guard.pluginCheckpoint is {wrong}, but the plugin writes its checkpoint at "
        f"{node['plugin_checkpoint']}; the shim would find no managed binding there and send every Pod, managed ones "
        "too, to Multus alone"
    )
    assert check["fix"].startswith(f"set guard_plugin_checkpoint to {node['plugin_checkpoint']} ")


def test_guard_checkpoint_the_plugin_never_created_fails_saying_no_plugin_runs_there(node):
    state = Path(str(node["plugin_checkpoint"])).parent
    for name in ("checkpoint.json", "checkpoint.slots"):
        (state / name).unlink()
    check = _checks(node)["guard-checkpoint"]
    assert check["status"] == "fail"
    assert f"guard.pluginCheckpoint {node['plugin_checkpoint']} does not exist" in check["detail"]
    assert check["fix"].startswith("start the plugin on this node (sriovnet.dra.plugin role)")


@pytest.mark.parametrize(
    "text", ["{}", '{"version": 7, "data": {}}', "not json"], ids=["empty", "version", "text"]
)
def test_guard_checkpoint_that_is_not_a_plugin_checkpoint_fails(node, text):
    state = Path(str(node["plugin_checkpoint"])).parent
    (state / "checkpoint.slots").unlink()
    (state / "checkpoint.json").write_text(text)
    check = _checks(node)["guard-checkpoint"]
    assert check["status"] == "fail"
    assert "is not a checkpoint the plugin wrote (" in check["detail"]
    assert check["fix"].startswith("point guard_plugin_checkpoint at the plugin's checkpoint.json")


def test_guard_checkpoint_is_skipped_when_the_guard_config_cannot_be_read(node):
    (Path(str(node["cni_conf_dir"])) / GUARD).write_text("{")
    check = _checks(node)["guard-checkpoint"]
    assert check["status"] == "skip"
    assert check["detail"].endswith("; see guard-config")
