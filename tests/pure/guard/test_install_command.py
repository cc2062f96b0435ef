"""``sriov-dra-guard install``: strict JSON, refused arguments named with the flag, the value and the fix
(exit 2, nothing written), and a help text for every flag."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from sriov_dra.guard import install, main

PRIMARY = {"cniVersion": "1.0.0", "name": "cbr0", "plugins": [{"type": "flannel"}]}


def run(tmp_path: Path, primary_text: str, *extra: str) -> int:
    primary = tmp_path / "net.d" / "10-flannel.conflist"
    primary.parent.mkdir(exist_ok=True)
    primary.write_text(primary_text)
    argv = ["install", "--bin-dir", str(tmp_path / "bin"), "--conf-dir", str(tmp_path / "net.d")]
    argv += ["--mode", "thin", "--primary-config", str(primary), *extra]
    return main.main(argv)


def test_repeated_multus_key_exits_2_naming_it_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(tmp_path, json.dumps(PRIMARY), "--multus", '{"logLevel":"debug","logLevel":"error"}')
    err = capsys.readouterr().err
    assert code == 2
    assert "--multus is not strict JSON: --multus.logLevel: duplicate key" in err
    assert _nothing_written(tmp_path)


def _nothing_written(tmp_path: Path) -> bool:
    return not (tmp_path / "bin").exists() and not (tmp_path / "net.d" / install.CONFLIST_NAME).exists()


FIX = (
    "pass --primary-config the absolute path of the cluster network's CNI config file (the primary the "
    "runtime used before the guard, e.g. /etc/cni/net.d/10-flannel.conflist)"
)


def test_primary_with_a_repeated_key_exits_2_naming_the_flag_file_key_and_both_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(tmp_path, '{"cniVersion":"1.0.0","name":"cbr0","type":"flannel","type":"multus"}')
    err = capsys.readouterr().err
    primary = tmp_path / "net.d" / "10-flannel.conflist"
    assert code == 2
    assert err == (
        f"sriov-dra-guard install: --primary-config {primary}: primary network config {primary} is not valid "
        'JSON: $.type: duplicate key "type" in one object with the values "flannel" and "multus" (readers '
        f"disagree on which value wins); keep exactly one; {FIX}\n"
    )
    assert _nothing_written(tmp_path)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (
            "/nonexistent",
            "/nonexistent: cannot read primary network config /nonexistent: No such file or directory",
        ),
        ("10-flannel.conflist", "10-flannel.conflist is a relative path"),
    ],
    ids=["missing-file-not-a-bare-errno", "relative-path"],
)
def test_an_unusable_primary_path_names_the_flag_the_path_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str, said: str
) -> None:
    argv = ["install", "--bin-dir", str(tmp_path / "bin"), "--conf-dir", str(tmp_path / "net.d")]
    assert main.main([*argv, "--mode", "thick", "--primary-config", given]) == 2
    assert capsys.readouterr().err == f"sriov-dra-guard install: --primary-config {said}; {FIX}\n"
    assert _nothing_written(tmp_path)


def test_a_multus_generated_primary_is_refused_before_any_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    primary = tmp_path / "net.d" / "00-multus.conf"
    primary.parent.mkdir()
    primary.write_text(json.dumps(PRIMARY))
    argv = ["install", "--bin-dir", str(tmp_path / "bin"), "--conf-dir", str(tmp_path / "net.d")]
    assert main.main([*argv, "--mode", "thick", "--primary-config", str(primary)]) == 2
    assert capsys.readouterr().err == (
        f"sriov-dra-guard install: --primary-config {primary}: guard config {install.CONFLIST_NAME}: "
        f"multus.primaryConfig {primary} is a Multus-generated file (recursion); point it at the cluster "
        f"network's config; {FIX}\n"
    )
    assert _nothing_written(tmp_path)


@pytest.mark.parametrize(
    ("given", "kind"), [("[]", "a list"), ('"x"', "a string"), ("null", "null"), ("3", "a number")]
)
def test_multus_that_is_not_an_object_says_what_it_got_and_that_an_object_is_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str, kind: str
) -> None:
    assert run(tmp_path, json.dumps(PRIMARY), "--multus", given) == 2
    assert capsys.readouterr().err == (
        f"sriov-dra-guard install: --multus must be a JSON object of further multus.* keys, got {kind}; "
        'pass e.g. \'{"daemonSocketDir": "/run/multus/"}\' or leave it out\n'
    )
    assert _nothing_written(tmp_path)


def test_multus_keys_the_guard_sets_itself_are_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, json.dumps(PRIMARY), "--multus", '{"config": {"delegates": []}}') == 2
    assert capsys.readouterr().err == (
        "sriov-dra-guard install: the guard config these flags give is refused: guard config "
        f"{install.CONFLIST_NAME}: plugins[0].multus.config must not set ['delegates']; the guard sets these "
        "keys itself; correct --socket or --multus\n"
    )
    assert _nothing_written(tmp_path)


def test_every_install_flag_has_a_help_text() -> None:
    sub = next(a for a in main.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flags = {a.option_strings[-1]: a.help for a in sub.choices["install"]._actions}
    assert set(flags) == {
        "--help", "--bin-dir", "--conf-dir", "--mode", "--primary-config", "--socket", "--interpreter",
        "--multus", "--multus-master-cni", "--autoconfig-dir", "--plugin-checkpoint",
        "--verify-ordinary-selections",
    }  # fmt: skip
    assert [f for f, text in flags.items() if not text or len(text) < 20] == []


def test_valid_multus_keys_reach_the_conflist_as_before(tmp_path: Path) -> None:
    multus = '{"logLevel":"debug","config":{"readinessindicatorfile":"/r","x":1.50}}'
    assert run(tmp_path, json.dumps(PRIMARY), "--multus", multus) == 0
    doc = json.loads((tmp_path / "net.d" / install.CONFLIST_NAME).read_text())
    assert doc["plugins"][0]["multus"] == {
        "mode": "thin",
        "primaryConfig": str(tmp_path / "net.d" / "10-flannel.conflist"),
        **json.loads(multus),
    }


def test_uninstall_removes_the_conflist_the_shim_and_every_rules_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, json.dumps(PRIMARY)) == 0
    bin_dir, conf_dir = tmp_path / "bin", tmp_path / "net.d"
    (bin_dir / "multus-guard.d" / "0123456789abcdef").mkdir()  # an older version left by hand
    (bin_dir / "host-local").write_text("not ours")
    capsys.readouterr()
    argv = ["uninstall", "--bin-dir", str(bin_dir), "--conf-dir", str(conf_dir)]
    assert main.main(argv) == 0
    assert capsys.readouterr().out.startswith(
        f"removed {conf_dir / install.CONFLIST_NAME}, {bin_dir / 'multus-guard'}, "
    )
    assert sorted(p.name for p in bin_dir.iterdir()) == ["host-local"]
    assert sorted(p.name for p in conf_dir.iterdir()) == ["10-flannel.conflist"]
    assert main.main(argv) == 0
    assert capsys.readouterr().out == "nothing to remove\n"
