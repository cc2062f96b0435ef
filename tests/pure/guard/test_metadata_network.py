"""guard.metadata_network: each verified VF's networkData from the netns and network-status."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes import guard_fakes as gf

from sriov_dra.core import metadata_document as md
from sriov_dra.guard import metadata_network, shadow_checks
from sriov_dra_rules import names

CLAIM = "0b1e8d2c-3f4a-4b5c-8d6e-7f8091a2b3c4"
OTHER_CLAIM = "0b1e8d2c-3f4a-4b5c-8d6e-7f8091a2b3c5"
DRA0 = shadow_checks.ExpectedInterface("dra0", "ns/dra-sriov-a", "0000:03:00.1", CLAIM)
DRA1 = shadow_checks.ExpectedInterface("dra1", "ns/dra-sriov-b", "0000:80:00.1", OTHER_CLAIM)
ETH1 = shadow_checks.ExpectedInterface("eth1", "ns/plain")


def pod(status: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"annotations": {names.NETWORK_STATUS_ANNOTATION: json.dumps(status)}}}


def test_addresses_are_the_reported_ones_with_the_kernels_prefix_in_reported_order() -> None:
    links = [
        gf.FakeLink(
            "dra0", mac="02:00:00:00:00:0a", addresses=("fe80::1/64", "192.0.2.5/24", "2001:db8::5/64")
        ),
        gf.FakeLink("dra1", mac="02:00:00:00:00:0b", addresses=("198.51.100.7/25",)),
        gf.FakeLink("eth1", mac="02:00:00:00:00:0c", addresses=("203.0.113.1/24",)),
    ]
    status = [
        {"name": "", "interface": "eth0", "ips": ["10.0.0.4"]},
        {"name": "ns/dra-sriov-a", "interface": "dra0", "ips": ["2001:db8::5", "192.0.2.5", "192.0.2.99"]},
        {"name": "ns/dra-sriov-b", "interface": "dra1", "ips": ["198.51.100.7"]},
        {"name": "ns/plain", "interface": "eth1", "ips": ["203.0.113.1"]},
    ]
    got = metadata_network.network_data([DRA0, DRA1, ETH1], links, pod(status))
    assert got == {
        CLAIM: {
            "0000:03:00.1": md.NetworkData("dra0", ("2001:db8::5/64", "192.0.2.5/24"), "02:00:00:00:00:0a")
        },
        OTHER_CLAIM: {"0000:80:00.1": md.NetworkData("dra1", ("198.51.100.7/25",), "02:00:00:00:00:0b")},
    }


def test_a_vf_without_reported_addresses_gets_its_interface_and_mac_only() -> None:
    links = [gf.FakeLink("dra0", mac="02:00:00:00:00:0a", addresses=("fe80::1/64",))]
    status = [{"name": "ns/dra-sriov-a", "interface": "dra0"}]
    got = metadata_network.network_data([DRA0], links, pod(status))
    assert got == {CLAIM: {"0000:03:00.1": md.NetworkData("dra0", (), "02:00:00:00:00:0a")}}


def test_an_interface_missing_from_the_netns_or_an_unreadable_status_gives_no_guess() -> None:
    assert metadata_network.network_data([DRA0], [gf.FakeLink("eth0")], pod([])) == {}
    links = [gf.FakeLink("dra0", addresses=("192.0.2.5/24",))]
    unreadable = {"metadata": {"annotations": {names.NETWORK_STATUS_ANNOTATION: "{"}}}
    got = metadata_network.network_data([DRA0], links, unreadable)
    assert got == {CLAIM: {"0000:03:00.1": md.NetworkData("dra0", (), "")}}
