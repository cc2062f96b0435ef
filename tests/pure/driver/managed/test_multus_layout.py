"""driver.managed.multus_layout: the node's Multus layout from the settings and the node's Multus config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sriov_dra.core import interface_naming
from sriov_dra.driver.managed import multus_layout, seams
from sriov_dra_rules import errors

FLAGS = interface_naming.MultusLayout(
    primary_ifname="eth0", default_networks=("flag-net",), auxiliary_chain=True
)


def test_nothing_configured_is_multus_defaults() -> None:
    assert multus_layout.DEFAULT_SOURCE.current() == interface_naming.MultusLayout()
    assert seams.NodeIdentity("node-a", "0a0a0a0a-0000-4000-8000-00000000000a").multus.current() == (  # type: ignore[arg-type]
        interface_naming.DEFAULT_LAYOUT
    )


def test_without_a_file_the_flags_are_the_layout() -> None:
    assert multus_layout.LayoutSource(FLAGS).current() == FLAGS


@pytest.mark.parametrize(
    ("name", "document", "expected"),
    [
        (
            "daemon-config.json",
            {"defaultNetworks": ["x"], "systemNamespaces": ["infra"]},
            interface_naming.MultusLayout("eth0", ("x",), ("infra",), True),
        ),
        (
            "00-multus.conflist",
            {"cniVersion": "1.0.0", "plugins": [{"type": "multus", "systemNamespaces": []}]},
            interface_naming.MultusLayout("eth0", ("flag-net",), (), True),
        ),
        ("00-multus.conf", {"type": "multus", "kubeconfig": "/k"}, FLAGS),
    ],
    ids=["thick-daemon-config-keys-win", "thin-conflist-multus-plugin", "file-without-the-keys-keeps-flags"],
)
def test_config_file_keys_overlay_the_flags(
    tmp_path: Path, name: str, document: dict[str, object], expected: interface_naming.MultusLayout
) -> None:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    assert multus_layout.LayoutSource(FLAGS, path).current() == expected


def test_the_file_is_read_again_on_every_use(tmp_path: Path) -> None:
    path = tmp_path / "daemon-config.json"
    path.write_text('{"defaultNetworks": ["x"]}')
    source = multus_layout.LayoutSource(interface_naming.DEFAULT_LAYOUT, path)
    assert source.current().default_networks == ("x",)
    path.write_text('{"defaultNetworks": ["x", "y"]}')
    assert source.current().default_networks == ("x", "y")


def test_missing_file_is_a_host_read_failure_naming_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(errors.InvalidSpec) as info:
        multus_layout.LayoutSource(FLAGS, path).current()
    assert info.value.reason is errors.Reason.HOST_READ_FAILED
    assert str(path) in str(info.value) and "--multus-config-file" in str(info.value)


@pytest.mark.parametrize(
    ("name", "text", "field"),
    [
        ("daemon-config.json", '{"defaultNetworks": [1]}', "$.defaultNetworks"),
        ("00-multus.conflist", '{"cniVersion": "1.0.0", "plugins": [{"type": []}]}', "$.plugins[0].type"),
    ],
    ids=["malformed-key", "list-plugin-type"],
)
def test_malformed_file_is_an_invalid_spec_naming_the_setting_and_the_field(
    tmp_path: Path, name: str, text: str, field: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(errors.InvalidSpec) as info:
        multus_layout.LayoutSource(FLAGS, path).current()
    assert info.value.reason is errors.Reason.INVALID_SPEC
    assert [e.path for e in info.value.errors] == [field]
    assert str(path) in str(info.value) and "--multus-config-file" in str(info.value)
