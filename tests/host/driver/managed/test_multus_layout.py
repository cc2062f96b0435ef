"""Auto-attach prepare counts interface names over the node's Multus layout
(docs/design.md#interface-names).

A manual, unnamed selection is ``net1`` under Multus's defaults but ``net2`` on a node whose
Multus has one ``defaultNetworks`` entry; a VF whose VfConfig names its interface ``net2`` must
then be refused before any hardware or API write, with its error reason (docs/design.md#errors).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from tests.fakes import claims_api as fx
from tests.fakes import managed_node as mn

from sriov_dra.core import interface_naming
from sriov_dra.driver.managed import multus_layout
from sriov_dra.kubeletapi import messages
from sriov_dra_rules import names

MANUAL = {names.NETWORKS_ANNOTATION: "other-net"}


def _consumer(node: mn.ManagedNode) -> messages.ClaimRef:
    return node.add_consumer(
        [("nic-0", mn.DEV_A0)],
        configs=[fx.config(fx.vf_config(ifName="net2"), requests=["nic-0"])],
        annotations=dict(MANUAL),
    )


def _selected(node: mn.ManagedNode) -> list[tuple[str, str | None]]:
    """(name, interface or None) of every selection, in annotation order."""
    return [
        (s["name"], s.get("interface")) for s in json.loads(node.pod_annotations()[names.NETWORKS_ANNOTATION])
    ]


def _on_node(node: mn.ManagedNode, source: multus_layout.LayoutSource) -> None:
    node.node = dataclasses.replace(node.node, multus=source)
    node.restart()


def test_default_layout_lets_an_explicit_net2_follow_a_manual_net1(node: mn.ManagedNode) -> None:
    out = node.prepare(_consumer(node))
    assert isinstance(out, messages.Prepared)
    assert [i for _, i in _selected(node)] == [None, "net2"]
    assert node.phases() == {fx.CLAIM_UID: ["Ready"]}


@pytest.mark.parametrize(
    "source",
    [
        lambda _: multus_layout.LayoutSource(interface_naming.MultusLayout(default_networks=("x",))),
        lambda path: multus_layout.LayoutSource(interface_naming.DEFAULT_LAYOUT, path),
    ],
    ids=["default-networks-flag", "node-multus-config-file"],
)
def test_node_default_network_makes_the_manual_selection_net2_and_refuses_the_vf(
    node: mn.ManagedNode, tmp_path: Path, source: object
) -> None:
    config = tmp_path / "daemon-config.json"
    config.write_text(json.dumps({"defaultNetworks": ["x"]}))
    assert callable(source)
    _on_node(node, source(config))
    ref = _consumer(node)
    out = node.prepare(ref)
    assert isinstance(out, messages.ClaimError), out
    assert "DuplicateInterfaceName" in out.message and "'net2'" in out.message
    assert node.store.all_claims() == {} and node.kube.shadows() == []
    assert node.pod_annotations() == MANUAL
    assert node.drivers() == ["iavf"] * 4 and node.cdi_files() == []


def test_a_system_namespace_pod_gets_no_default_networks(node: mn.ManagedNode) -> None:
    _on_node(
        node,
        multus_layout.LayoutSource(
            interface_naming.MultusLayout(default_networks=("x",), system_namespaces=(mn.NS,))
        ),
    )
    out = node.prepare(_consumer(node))
    assert isinstance(out, messages.Prepared)
    assert [i for _, i in _selected(node)] == [None, "net2"]


def test_unreadable_node_multus_config_refuses_before_any_change(
    node: mn.ManagedNode, tmp_path: Path
) -> None:
    _on_node(node, multus_layout.LayoutSource(interface_naming.DEFAULT_LAYOUT, tmp_path / "absent.json"))
    out = node.prepare(_consumer(node))
    assert isinstance(out, messages.ClaimError)
    assert "HostReadFailed" in out.message and "--multus-config-file" in out.message
    assert node.store.all_claims() == {} and node.kube.shadows() == []
    assert node.drivers() == ["iavf"] * 4


@pytest.mark.parametrize(
    ("document", "field", "problem"),
    [
        ('{"plugins": [{"type": []}]}', "plugins[0].type", "must be a non-empty string"),
        ('{"defaultNetworks": ["a"], "defaultNetworks": ["a", "b"]}', "defaultNetworks", "duplicate key"),
        ('{"clusterNetwork": []}', "clusterNetwork", "must be a string, got a list"),
    ],
    ids=["list-plugin-type", "repeated-default-networks", "cluster-network-not-a-string"],
)
def test_malformed_node_multus_config_refuses_prepare_naming_the_file_and_field_before_any_change(
    node: mn.ManagedNode, tmp_path: Path, document: str, field: str, problem: str
) -> None:
    config = tmp_path / "00-multus.conflist"
    config.write_text(document)
    _on_node(node, multus_layout.LayoutSource(interface_naming.DEFAULT_LAYOUT, config))
    out = node.prepare(_consumer(node))
    assert isinstance(out, messages.ClaimError), out
    assert str(config) in out.message and "--multus-config-file" in out.message
    assert f"{field}: {problem}" in out.message
    assert node.store.all_claims() == {} and node.kube.shadows() == []
    assert node.pod_annotations() == MANUAL
    assert node.drivers() == ["iavf"] * 4 and node.cdi_files() == []
