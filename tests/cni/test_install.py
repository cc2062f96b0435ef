"""The installation contract on a real node layout (docs/guard.md).

The runtime picks ``00-multus-guard.conflist``; Multus's primary is pinned, so neither mode picks
the guard's file; the runtime conf dir does not contain Multus's own ``00-multus.conf`` at all (the
thick daemon writes it elsewhere) and managed attachment still works; an unpinned thin layout is
reported by ``sriov-dra-guard install``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sriov_dra.guard import install
from sriov_dra_lab import cni, guard
from sriov_dra_lab.cni_node import PRIMARY_NAME, CniNode
from sriov_dra_rules import cni_install


@pytest.mark.parametrize("mode", ["thin", "thick"])
def test_runtime_picks_the_guard_and_multus_keeps_its_pinned_primary(cni_node: CniNode, mode: str) -> None:
    conf_dir = cni_node.conf_dirs[mode]
    assert cni.runtime_choice(conf_dir).name == install.CONFLIST_NAME
    assert not (conf_dir / "00-multus.conf").exists()
    assert (
        cni_install.installation_problems(
            conf_dir, mode=mode, multus_master_cni=PRIMARY_NAME, autoconfig_dir=conf_dir
        )
        == []
    )
    plugin = json.loads((conf_dir / install.CONFLIST_NAME).read_text())["plugins"][0]
    assert plugin["capabilities"] == {"mac": True}  # the primary's capabilities reach Multus
    assert plugin["multus"]["primaryConfig"] == str(conf_dir / PRIMARY_NAME)


def test_thick_daemon_writes_its_own_config_elsewhere_and_pins_the_primary(cni_node: CniNode) -> None:
    assert cni_node.thick is not None
    generated = json.loads((cni_node.thick.generated_conf_dir / "00-multus.conf").read_text())
    assert generated["type"] == "multus-shim"
    assert generated["clusterNetwork"].endswith(PRIMARY_NAME)
    daemon = json.loads(cni_node.thick.daemon_config.read_text())
    assert daemon["multusMasterCNI"] == PRIMARY_NAME


def test_unpinned_thin_layout_is_reported_by_install(cni_node: CniNode, tmp_path: Path) -> None:
    conf_dir = tmp_path / "net.d"
    conf_dir.mkdir()
    primary = conf_dir / PRIMARY_NAME
    primary.write_text(json.dumps(cni_node.primary_network()))
    with pytest.raises(guard.InstallFailed) as info:
        guard.install(
            bin_dir=tmp_path / "bin",
            conf_dir=conf_dir,
            mode="thin",
            primary_config=primary,
            socket_path=cni_node.guard_socket,
            check=[f"--autoconfig-dir={conf_dir}"],
        )
    assert "auto-discovery" in str(info.value) and "multusMasterCNI" in str(info.value)
