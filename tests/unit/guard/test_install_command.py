"""``sriov-dra-guard install`` reads its JSON strictly: a repeated key stops it before any write."""

from __future__ import annotations

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
    assert not (tmp_path / "bin").exists() and not (tmp_path / "net.d" / install.CONFLIST_NAME).exists()


def test_primary_with_a_repeated_key_fails_naming_the_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(tmp_path, '{"cniVersion":"1.0.0","name":"cbr0","type":"flannel","type":"multus"}')
    err = capsys.readouterr().err
    assert code == 1
    assert (
        f"primary config {tmp_path / 'net.d' / '10-flannel.conflist'} is not valid JSON: $.type: duplicate key"
        in err
    )
    assert not (tmp_path / "net.d" / install.CONFLIST_NAME).exists()


def test_valid_multus_keys_reach_the_conflist_as_before(tmp_path: Path) -> None:
    multus = '{"logLevel":"debug","config":{"readinessindicatorfile":"/r","x":1.50}}'
    assert run(tmp_path, json.dumps(PRIMARY), "--multus", multus) == 0
    doc = json.loads((tmp_path / "net.d" / install.CONFLIST_NAME).read_text())
    assert doc["plugins"][0]["multus"] == {
        "mode": "thin",
        "primaryConfig": str(tmp_path / "net.d" / "10-flannel.conflist"),
        **json.loads(multus),
    }
