"""Tests for sriov_dra.guard.install: the shim file and the runtime-facing conflist.

The ordering and pinning rules are the shared contract's (tests/unit/rules/test_cniinstall.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sriov_dra.guard import install, shim
from sriov_dra_rules import cniinstall

PRIMARY = {
    "cniVersion": "0.4.0",
    "name": "cbr0",
    "plugins": [
        {"type": "flannel", "capabilities": {"portMappings": False}},
        {"type": "portmap", "capabilities": {"portMappings": True}},
        {"type": "bandwidth", "capabilities": {"bandwidth": True}},
    ],
}


def _primary(tmp_path: Path, doc: dict[str, object] = PRIMARY, name: str = "10-flannel.conflist") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_guard_file_sorts_before_multus_own_and_every_primary() -> None:
    assert sorted(["10-flannel.conflist", "00-multus.conf", "00-multus.conflist", install.CONFLIST_NAME])[
        0
    ] == (install.CONFLIST_NAME)


def test_conflist_carries_primary_capabilities_and_version(tmp_path: Path) -> None:
    text = install.guard_conflist(
        primary_config=_primary(tmp_path), mode="thick", multus={"daemonSocketDir": "/run/multus/"}
    )
    doc = json.loads(text)
    assert doc["cniVersion"] == "0.4.0" and doc["name"] == "multus-cni-network"
    [plugin] = doc["plugins"]
    assert plugin["type"] == "multus-guard"
    assert plugin["capabilities"] == {"bandwidth": True, "portMappings": True}
    assert plugin["multus"] == {
        "mode": "thick",
        "primaryConfig": str(tmp_path / "10-flannel.conflist"),
        "daemonSocketDir": "/run/multus/",
    }


def test_conflist_is_what_the_shim_accepts(tmp_path: Path) -> None:
    doc = json.loads(install.guard_conflist(primary_config=_primary(tmp_path), mode="thin"))
    plugin = doc["plugins"][0]
    conf = shim.parse_conf(
        json.dumps({"cniVersion": doc["cniVersion"], "name": doc["name"], **plugin}).encode()
    )
    assert conf.mode == "thin" and conf.primary_config.endswith("10-flannel.conflist")


def test_conflist_refuses_an_invalid_multus_key(tmp_path: Path) -> None:
    with pytest.raises(cniinstall.ContractError, match=r"multus.config must not set \['type'\]"):
        install.guard_conflist(
            primary_config=_primary(tmp_path), mode="thin", multus={"config": {"type": "x"}}
        )


def test_single_plugin_primary_capabilities(tmp_path: Path) -> None:
    primary = _primary(
        tmp_path, {"cniVersion": "1.0.0", "type": "bridge", "capabilities": {"ips": True}}, "10-b.conf"
    )
    assert json.loads(install.guard_conflist(primary_config=primary, mode="thin"))["plugins"][0][
        "capabilities"
    ] == {"ips": True}


def test_shim_file_is_the_module_behind_a_python_line(tmp_path: Path) -> None:
    path = install.write_shim(tmp_path, interpreter="/usr/bin/python3")
    data = path.read_bytes()
    assert data.startswith(b"#!/usr/bin/python3 -IS\n")
    assert data.split(b"\n", 1)[1] == Path(shim.__file__).read_bytes()
    assert os.access(path, os.X_OK) and path.name == "multus-guard"
