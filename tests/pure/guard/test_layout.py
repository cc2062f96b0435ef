"""Tests for sriov_dra.guard.layout: the Multus delegate layout read from the guard's Multus config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sriov_dra.guard import decisions, layout, shim


def _conf(tmp_path: Path, mode: str = "thin", **multus: Any) -> shim.GuardConf:
    primary = tmp_path / "10-primary.conflist"
    primary.write_text("{}")
    obj = {
        "cniVersion": "1.0.0",
        "name": "n",
        "multus": {"mode": mode, "primaryConfig": str(primary), **multus},
    }
    return shim.parse_conf(json.dumps(obj).encode())


def test_defaults_match_multus() -> None:
    conf = shim.GuardConf(cni_version="1.0.0", name="n", mode="thin", primary_config="/nonexistent/p.conf")
    out = layout.multus_layout(conf, primary_ifname="eth0")
    assert (out.default_networks, out.system_namespaces, out.auxiliary_chain) == ((), ("kube-system",), False)


def test_keys_come_from_multus_config(tmp_path: Path) -> None:
    conf = _conf(
        tmp_path, config={"defaultNetworks": ["a", "b"], "systemNamespaces": ["kube-system", "infra"]}
    )
    out = layout.multus_layout(conf, primary_ifname="eth9")
    assert out.primary_ifname == "eth9"
    assert out.default_networks == ("a", "b") and out.system_namespaces == ("kube-system", "infra")


def test_thick_daemon_config_wins_over_guard_keys(tmp_path: Path) -> None:
    daemon = tmp_path / "daemon-config.json"
    daemon.write_text(json.dumps({"defaultNetworks": ["d"], "systemNamespaces": []}))
    conf = _conf(tmp_path, "thick", daemonConfigFile=str(daemon), config={"defaultNetworks": ["g"]})
    out = layout.multus_layout(conf, primary_ifname="eth0")
    assert out.default_networks == ("d",) and out.system_namespaces == ()


def test_auxiliary_chain_counts_only_when_its_directory_holds_plugins(tmp_path: Path) -> None:
    conf = _conf(tmp_path, config={"auxiliaryCNIChainName": "aux"})
    assert not layout.multus_layout(conf, primary_ifname="eth0").auxiliary_chain
    (tmp_path / "aux").mkdir()
    (tmp_path / "aux" / "README").write_text("no plugin here")
    assert not layout.multus_layout(conf, primary_ifname="eth0").auxiliary_chain
    (tmp_path / "aux" / "10-x.conf").write_text("{}")
    assert layout.multus_layout(conf, primary_ifname="eth0").auxiliary_chain


@pytest.mark.parametrize(
    "setup",
    ["unreadable-daemon-config", "daemon-config-not-object", "default-networks-not-strings"],
)
def test_unusable_layout_settings_are_refused(tmp_path: Path, setup: str) -> None:
    daemon = tmp_path / "daemon-config.json"
    extra: dict[str, Any] = {}
    if setup == "daemon-config-not-object":
        daemon.write_text("[]")
    elif setup == "default-networks-not-strings":
        daemon.write_text(json.dumps({"defaultNetworks": [1]}))
    conf = _conf(tmp_path, "thick", daemonConfigFile=str(daemon), **extra)
    with pytest.raises(decisions.Rejected) as info:
        layout.multus_layout(conf, primary_ifname="eth0")
    assert info.value.reason is decisions.Reason.INVALID_CNI_REQUEST


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ('{"plugins": [{"type": []}]}', "plugins[0].type"),
        ('{"defaultNetworks": ["a"], "defaultNetworks": ["b"]}', "defaultNetworks"),
        ('{"clusterNetwork": []}', "clusterNetwork"),
        ('{"systemNamespaces": "kube-system,infra"}', "systemNamespaces"),
    ],
    ids=["list-plugin-type", "repeated-key", "cluster-network-not-a-string", "comma-separated-list-key"],
)
def test_malformed_daemon_config_is_an_invalid_cni_request_naming_the_file_and_the_field(
    tmp_path: Path, document: str, field: str
) -> None:
    daemon = tmp_path / "daemon-config.json"
    daemon.write_text(document)
    conf = _conf(tmp_path, "thick", daemonConfigFile=str(daemon))
    with pytest.raises(decisions.Rejected) as info:
        layout.multus_layout(conf, primary_ifname="eth0")
    assert info.value.reason is decisions.Reason.INVALID_CNI_REQUEST
    assert str(daemon) in str(info.value) and f"{field}: " in str(info.value)


def test_guard_multus_config_key_of_the_wrong_type_is_an_invalid_cni_request(tmp_path: Path) -> None:
    conf = _conf(tmp_path, config={"systemNamespaces": "kube-system, infra", "namespaceIsolation": "yes"})
    with pytest.raises(decisions.Rejected) as info:
        layout.multus_layout(conf, primary_ifname="eth0")
    assert info.value.reason is decisions.Reason.INVALID_CNI_REQUEST
    assert "multus.config of the guard" in str(info.value)
    assert "systemNamespaces: " in str(info.value) and "namespaceIsolation: " in str(info.value)


def test_in_a_container_the_daemon_config_and_aux_chain_are_read_at_the_nodes_paths_under_its_root(
    tmp_path: Path,
) -> None:
    # The guard DaemonSet mounts the node's / at host_root; the config names node paths.
    root = tmp_path / "host"
    conf_dir = root / "etc" / "cni" / "net.d"
    (conf_dir / "multus.d").mkdir(parents=True)
    (conf_dir / "multus.d" / "daemon-config.json").write_text(json.dumps({"defaultNetworks": ["d"]}))
    (conf_dir / "aux").mkdir()
    (conf_dir / "aux" / "10-x.conf").write_text("{}")
    obj = {
        "cniVersion": "1.0.0",
        "name": "n",
        "multus": {
            "mode": "thick",
            "primaryConfig": "/etc/cni/net.d/10-primary.conflist",
            "daemonConfigFile": "/etc/cni/net.d/multus.d/daemon-config.json",
            "config": {"auxiliaryCNIChainName": "aux"},
        },
    }
    conf = shim.parse_conf(json.dumps(obj).encode())
    out = layout.multus_layout(conf, primary_ifname="eth0", host_root=str(root))
    assert out.default_networks == ("d",) and out.auxiliary_chain
    (conf_dir / "multus.d" / "daemon-config.json").unlink()
    with pytest.raises(decisions.Rejected) as info:
        layout.multus_layout(conf, primary_ifname="eth0", host_root=str(root))
    assert "cannot read Multus daemon config /etc/cni/net.d/multus.d/daemon-config.json" in str(info.value)
