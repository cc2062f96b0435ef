"""Tests for ``plugins/modules/cni_config.py``: the guard's installation contract and atomic install."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
from ansible_collections.sriovnet.dra.plugins.modules import cni_config
from tests.pure.plugins import harness

GUARD = "00-multus-guard.conflist"


def _guard(primary: str, mode: str = "thick", **caps: bool) -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "plugins": [
            {
                "type": "multus-guard",
                "capabilities": dict(caps),
                "guard": {"socket": "/run/sriov-dra/multus-guard.sock"},
                "multus": {"mode": mode, "primaryConfig": primary},
            }
        ],
    }


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    conf = tmp_path / "net.d"
    conf.mkdir()
    primary = conf / "10-flannel.conflist"
    primary.write_text(
        json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "cbr0",
                "plugins": [{"type": "flannel"}, {"type": "portmap", "capabilities": {"portMappings": True}}],
            }
        )
    )
    (conf / "multus.d").mkdir()
    return conf, primary


def _run(conf: Path, config: object = None, **extra: object) -> dict[str, object]:
    check = bool(extra.pop("check_mode", False))
    diff = bool(extra.pop("diff", False))
    params = {"conf_dir": str(conf), "config": config, **extra}
    return harness.run_module(cni_config, params, check_mode=check, diff=diff)


def test_four_way_check_apply_check_apply(dirs):
    conf, primary = dirs
    config = _guard(str(primary), portMappings=True)
    assert _run(conf, config, check_mode=True)["changed"] is True
    assert not (conf / GUARD).exists()
    applied = _run(conf, config)
    assert applied["changed"] is True
    assert applied["conf_files"] == [GUARD, "10-flannel.conflist"]
    assert json.loads((conf / GUARD).read_text()) == config
    assert oct(os.stat(conf / GUARD).st_mode & 0o777) == "0o644"
    assert _run(conf, config, check_mode=True)["changed"] is False
    assert _run(conf, config)["changed"] is False


def test_changed_content_is_replaced_atomically_without_leftovers(dirs):
    conf, primary = dirs
    _run(conf, _guard(str(primary), portMappings=True))
    changed = _guard(str(primary), portMappings=True, bandwidth=True)
    result = _run(conf, changed, diff=True)
    assert result["changed"] is True
    assert '"bandwidth": true' in result["diff"]["after"] and '"bandwidth"' not in result["diff"]["before"]
    assert sorted(p.name for p in conf.iterdir()) == [GUARD, "10-flannel.conflist", "multus.d"]


def test_mode_change_alone_is_a_change(dirs):
    conf, primary = dirs
    config = _guard(str(primary), portMappings=True)
    _run(conf, config)
    assert _run(conf, config, mode="0600")["changed"] is True
    assert os.stat(conf / GUARD).st_mode & 0o777 == 0o600


def test_absent_removes_then_is_unchanged(dirs):
    conf, primary = dirs
    _run(conf, _guard(str(primary), portMappings=True))
    assert _run(conf, state="absent", check_mode=True)["changed"] is True
    assert (conf / GUARD).exists()
    assert _run(conf, state="absent")["changed"] is True
    assert _run(conf, state="absent")["changed"] is False


def _mutated(primary: Path, path: tuple[object, ...], value: object) -> dict[str, object]:
    config = _guard(str(primary), portMappings=True)
    target: object = config
    for key in path[:-1]:
        target = target[key]  # type: ignore[index]
    if value is None:
        del target[path[-1]]  # type: ignore[union-attr]
    else:
        target[path[-1]] = value  # type: ignore[index]
    return config


REFUSALS = [
    (
        lambda conf, primary: _mutated(primary, ("plugins", 0, "type"), "multus"),
        "guard config 00-multus-guard.conflist: plugins[0].type must be multus-guard, got 'multus'",
    ),
    (
        lambda conf, primary: _mutated(primary, ("plugins", 0, "multus", "mode"), "fat"),
        'guard config 00-multus-guard.conflist: plugins[0].multus.mode must be "thick" or "thin", got \'fat\'',
    ),
    (
        lambda conf, primary: _mutated(primary, ("plugins", 0, "multus", "primaryConfig"), str(conf / GUARD)),
        "guard config 00-multus-guard.conflist: multus.primaryConfig points at the guard's own file (recursion); "
        "point it at the cluster network's config",
    ),
    (
        lambda conf, primary: _mutated(
            primary, ("plugins", 0, "multus", "primaryConfig"), str(conf / "00-multus.conf")
        ),
        "guard config 00-multus-guard.conflist: multus.primaryConfig {conf}/00-multus.conf is a Multus-generated "
        "file (recursion); point it at the cluster network's config",
    ),
    (
        lambda conf, primary: _mutated(primary, ("plugins", 0, "capabilities"), {}),
        "guard config 00-multus-guard.conflist: capabilities ['portMappings'] of the primary {primary} are not "
        "enabled in plugins[0].capabilities, so the runtime would not pass them (portMappings, bandwidth ...); add them",
    ),
    (
        lambda conf, primary: _mutated(primary, ("type",), "multus-guard"),
        "guard config 00-multus-guard.conflist: a conflist must not have a root type key; put it in plugins[0]",
    ),
    (
        lambda conf, primary: {**_guard(str(primary)), "plugins": []},
        "guard config 00-multus-guard.conflist: plugins must hold exactly one object of type multus-guard; "
        "Multus runs the delegates",
    ),
    (
        lambda conf, primary: _mutated(
            primary, ("plugins", 0, "multus", "primaryConfig"), "10-flannel.conflist"
        ),
        "guard config 00-multus-guard.conflist: plugins[0].multus.primaryConfig must be the absolute path of the "
        "pinned primary network's config file, got '10-flannel.conflist'",
    ),
]


@pytest.mark.parametrize(
    ("make", "message"),
    REFUSALS,
    ids=[
        "plugin-type-must-be-multus-guard",
        "multus-mode-thick-or-thin",
        "primary-is-the-guard-file-recursion",
        "primary-is-multus-generated-recursion",
        "primary-capabilities-must-be-passed",
        "conflist-without-root-type",
        "exactly-one-plugin",
        "primary-must-be-absolute",
    ],
)
def test_unsafe_guard_config_is_refused_before_writing(dirs, make, message):
    conf, primary = dirs
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(conf, make(conf, primary))
    assert failed.value.msg == message.format(conf=conf, primary=primary)
    assert not (conf / GUARD).exists()


def test_primary_that_is_multus_itself_is_recursion(dirs):
    conf, _ = dirs
    other = conf / "20-multus-copy.conf"
    other.write_text(json.dumps({"cniVersion": "1.0.0", "name": "m", "type": "multus-shim"}))
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(conf, _guard(str(other)))
    assert failed.value.msg == (
        f"guard config 00-multus-guard.conflist: primary {other} has plugin type multus-shim (recursion); the "
        "primary must be the cluster network (for example flannel or calico)"
    )


def test_guard_file_must_sort_first(dirs):
    conf, primary = dirs
    (conf / "00-aaa.conf").write_text("{}")
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(conf, _guard(str(primary), portMappings=True))
    assert failed.value.msg == (
        f"guard config 00-multus-guard.conflist sorts after 00-aaa.conf in {conf}, and the container runtime uses "
        "the lexically first file; rename the guard file (00-multus-guard.conflist sorts first) or move those "
        "files away"
    )


def test_guard_sorts_before_multus_own_file(dirs):
    conf, primary = dirs
    (conf / "00-multus.conf").write_text("{}")
    result = _run(conf, _guard(str(primary), portMappings=True))
    assert result["conf_files"][:2] == [GUARD, "00-multus.conf"]


@pytest.mark.parametrize(
    ("daemon", "message"),
    [
        (
            {"multusConfigFile": "auto"},
            "Multus daemon config {path}: multusConfigFile is auto but multusMasterCNI is not set, so thick Multus "
            "picks the first config file in its autoconfig dir as its primary; set multusMasterCNI to the primary "
            "network's file name",
        ),
        (
            {"multusConfigFile": "auto", "multusMasterCNI": GUARD},
            "Multus daemon config {path}: multusMasterCNI 00-multus-guard.conflist is the guard's or Multus's own "
            "file (recursion); set it to the primary network's file name",
        ),
    ],
    ids=["thick-auto-without-pinned-master-refused", "thick-master-pinned-to-guard-refused"],
)
def test_thick_multus_must_pin_its_primary(dirs, daemon, message):
    conf, primary = dirs
    path = conf / "multus.d" / "daemon-config.json"
    path.write_text(json.dumps(daemon))
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(conf, _guard(str(primary), portMappings=True), multus_daemon_config=str(path))
    assert failed.value.msg == message.format(path=path)


def test_thick_multus_with_pinned_primary_passes(dirs):
    conf, primary = dirs
    path = conf / "multus.d" / "daemon-config.json"
    path.write_text(json.dumps({"multusConfigFile": "auto", "multusMasterCNI": "10-flannel.conflist"}))
    config = copy.deepcopy(_guard(str(primary), portMappings=True))
    assert _run(conf, config, multus_daemon_config=str(path))["changed"] is True


def test_config_is_required_when_present(dirs):
    conf, _ = dirs
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(conf, None)
    assert "config" in failed.value.msg


def test_primary_with_a_repeated_key_is_refused_naming_it(dirs):
    conf, primary = dirs
    primary.write_text('{"cniVersion":"1.0.0","name":"cbr0","plugins":[{"type":"flannel","type":"multus"}]}')
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(conf, _guard(str(primary)))
    assert failed.value.msg == (
        f'primary network config {primary} is not valid JSON: $.plugins[0].type: duplicate key "type" in one '
        'object with the values "flannel" and "multus" (readers disagree on which value wins); keep exactly one'
    )
    assert not (conf / GUARD).exists()


def test_multus_daemon_config_with_a_repeated_key_is_refused_naming_it(dirs):
    conf, primary = dirs
    path = conf / "multus.d" / "daemon-config.json"
    path.write_text(
        '{"multusConfigFile":"auto","multusMasterCNI":"10-flannel.conflist","multusMasterCNI":"00-multus-guard.conflist"}'
    )
    with pytest.raises(harness.ModuleFailed) as failed:
        _run(conf, _guard(str(primary), portMappings=True), multus_daemon_config=str(path))
    assert (
        f"Multus daemon config {path} is not valid JSON: $.multusMasterCNI: duplicate key" in failed.value.msg
    )
    assert not (conf / GUARD).exists()


def test_existing_guard_file_with_a_repeated_key_is_replaced(dirs):
    conf, primary = dirs
    config = _guard(str(primary), portMappings=True)
    text = '{"name":"other",' + json.dumps(config)[1:]  # "name" twice: a last-wins reader sees config
    (conf / GUARD).write_text(text)
    assert json.loads(text) == config
    assert _run(conf, config)["changed"] is True
    assert (conf / GUARD).read_text().count('"name"') == 1 and _run(conf, config)["changed"] is False


def test_fractional_numbers_in_an_unchanged_file_compare_equal(dirs):
    conf, primary = dirs
    config = _guard(str(primary), portMappings=True)
    config["plugins"][0]["multus"]["config"] = {"ratio": 0.5}
    assert _run(conf, config)["changed"] is True
    assert _run(conf, config)["changed"] is False
