"""Tests of sriov_dra.core.plugin.ipam_reservations: what a frozen config reserves and which whereabouts entries are one Pod interface's."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import json_patch_apply

from sriov_dra.core.plugin import ipam_reservations as ipam
from sriov_dra.core.plugin import json_patch
from sriov_dra_rules import errors

PODREF = "ai-workloads/gpu-sriov-pairs-demo"


def config(ipam_block: dict[str, Any] | None, *, conflist: bool = False, name: str = "rail-a") -> str:
    sriov: dict[str, Any] = {"type": "sriov", "deviceID": "0000:03:00.2"}
    if ipam_block is not None:
        sriov["ipam"] = ipam_block
    if conflist:
        return json.dumps({"cniVersion": "1.0.0", "name": name, "plugins": [sriov, {"type": "tuning"}]})
    return json.dumps({"cniVersion": "1.0.0", "name": name, **sriov})


@pytest.mark.parametrize("conflist", [False, True], ids=["single-plugin", "conflist"])
def test_whereabouts_ranges_are_the_networks_whereabouts_names_its_pools_by(conflist: bool) -> None:
    found = ipam.reservation_of(
        config(
            {
                "type": "whereabouts",
                "range": "192.0.2.225-192.0.2.230/28",
                "ipRanges": [{"range": "fd00:1::5/64"}, {"range": "198.51.100.7/24"}],
                "network_name": "rail-a",
            },
            conflist=conflist,
        )
    )
    assert found == ipam.Reservation(
        ipam.Kind.WHEREABOUTS,
        ranges=(
            ipaddress.ip_network("192.0.2.224/28"),
            ipaddress.ip_network("fd00:1::/64"),
            ipaddress.ip_network("198.51.100.0/24"),
        ),
        network_name="rail-a",
    )


@pytest.mark.parametrize(
    ("ipam_block", "expected"),
    [
        (
            {"type": "host-local", "subnet": "10.1.0.0/24"},
            ipam.Reservation(ipam.Kind.HOST_LOCAL, where="/var/lib/cni/networks/rail-a"),
        ),
        (
            {"type": "host-local", "dataDir": "/run/ipam", "ranges": [[{"subnet": "10.1.0.0/24"}]]},
            ipam.Reservation(ipam.Kind.HOST_LOCAL, where="/run/ipam/rail-a"),
        ),
        (
            {"type": "static", "addresses": [{"address": "10.1.0.5/24"}]},
            ipam.Reservation(ipam.Kind.NONE, where="static"),
        ),
        (None, ipam.Reservation(ipam.Kind.NONE)),
        ({}, ipam.Reservation(ipam.Kind.NONE)),
        ({"type": "dhcp"}, ipam.Reservation(ipam.Kind.OTHER, where="dhcp")),
    ],
    ids=["host-local-default-dir", "host-local-data-dir", "static", "no-ipam", "empty-ipam", "dhcp"],
)
def test_other_ipam_types_say_where_their_reservations_are(
    ipam_block: dict[str, Any] | None, expected: ipam.Reservation
) -> None:
    assert ipam.reservation_of(config(ipam_block)) == expected


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (config({"type": "whereabouts", "range": "not-a-cidr"}), "spec.config.ipam.range"),
        (config({"type": "whereabouts", "ipRanges": [{"range": 5}]}), "spec.config.ipam.ipRanges[0].range"),
        ('{"type": "sriov", "type": "sriov"}', "spec.config"),
        ('{"cniVersion": "1.0.0", "type": "bridge"}', "spec.config"),
    ],
    ids=["bad-range", "range-not-a-string", "duplicate-key", "no-sriov-entry"],
)
def test_an_unreadable_frozen_config_is_refused_naming_the_field(text: str, path: str) -> None:
    with pytest.raises(errors.InvalidSpec) as info:
        ipam.reservation_of(text)
    assert path in str(info.value)


def pool(range_text: str, allocations: dict[str, dict[str, str]], rv: str = "42") -> dict[str, Any]:
    return {
        "metadata": {"name": "rail-a-192.0.2.0-24", "namespace": "kube-system", "resourceVersion": rv},
        "spec": {"range": range_text, "allocations": allocations},
    }


RAIL_A = ipam.Reservation(
    ipam.Kind.WHEREABOUTS, ranges=(ipaddress.ip_network("192.0.2.0/24"),), network_name="rail-a"
)


def test_a_pool_release_takes_exactly_the_pod_interfaces_allocations_under_a_resource_version_test() -> None:
    allocations = {
        "3": {"id": "c1", "podref": PODREF, "ifname": "dra0"},
        "12": {"id": "c1", "podref": PODREF, "ifname": "dra0"},
        "4": {"id": "c1", "podref": PODREF, "ifname": "dra1"},
        "5": {"id": "c2", "podref": "ai-workloads/other", "ifname": "dra0"},
    }
    release = ipam.pool_release(pool("192.0.2.0/24", allocations), RAIL_A, podref=PODREF, ifname="dra0")
    assert release.addresses == (ipaddress.ip_address("192.0.2.3"), ipaddress.ip_address("192.0.2.12"))
    assert release.ops == (
        json_patch.test_op("/metadata/resourceVersion", "42"),
        json_patch.remove_op("/spec/allocations/3"),
        json_patch.remove_op("/spec/allocations/12"),
    )
    doc = pool("192.0.2.0/24", allocations)
    doc["metadata"]["resourceVersion"] = "42"
    after = json_patch_apply.apply_patch(doc, release.ops)
    assert sorted(after["spec"]["allocations"]) == ["4", "5"]


@pytest.mark.parametrize(
    "doc",
    [
        pool("198.51.100.0/24", {"3": {"id": "c", "podref": PODREF, "ifname": "dra0"}}),
        pool("garbage", {"3": {"id": "c", "podref": PODREF, "ifname": "dra0"}}),
        pool("192.0.2.0/24", {"x3": {"id": "c", "podref": PODREF, "ifname": "dra0"}}),
        pool("192.0.2.0/24", {"3": {"id": "c", "podref": PODREF}}),
        {"metadata": {}, "spec": "nope"},
    ],
    ids=["other-range", "unreadable-range", "non-numeric-key", "no-ifname", "malformed-pool"],
)
def test_a_pool_release_never_guesses(doc: dict[str, Any]) -> None:
    assert ipam.pool_release(doc, RAIL_A, podref=PODREF, ifname="dra0") == ipam.PoolRelease((), ())


def test_offsets_count_from_the_pools_first_address() -> None:
    release = ipam.pool_release(
        pool("192.0.2.16/24", {"2": {"id": "c", "podref": PODREF, "ifname": "dra0"}}),
        RAIL_A,
        podref=PODREF,
        ifname="dra0",
    )
    assert release.addresses == (ipaddress.ip_address("192.0.2.18"),)


def whereabouts_name(address: ipaddress.IPv4Address | ipaddress.IPv6Address, network_name: str) -> str:
    """An OverlappingRangeIPReservation name as whereabouts writes it (its NormalizeIP)."""
    text = str(address)
    if text.endswith(":"):
        text += "0"
    text = text.replace(":", "-")
    return f"{network_name}-{text}" if network_name else text


@given(
    address=st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)),
    network_name=st.one_of(st.just(""), st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True)),
)
def test_reserved_address_reads_back_every_name_whereabouts_writes(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, network_name: str
) -> None:
    assert ipam.reserved_address(whereabouts_name(address, network_name), network_name) == address


@given(name=st.text(max_size=60))
def test_reserved_address_is_total(name: str) -> None:
    found = ipam.reserved_address(name, "rail-a")
    assert found is None or isinstance(found, ipaddress.IPv4Address | ipaddress.IPv6Address)


def orip(name: str, podref: str = PODREF, ifname: str = "dra0") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {"podref": podref, "ifname": ifname, "containerid": "c"},
    }


@pytest.mark.parametrize(
    ("obj", "matches"),
    [
        (orip("rail-a-192.0.2.3"), True),
        (orip("192.0.2.3"), True),
        (orip("rail-a-198.51.100.3"), False),
        (orip("rail-a-192.0.2.3", podref="ai-workloads/other"), False),
        (orip("rail-a-192.0.2.3", ifname="dra1"), False),
        (orip("rail-a-not-an-address"), False),
        ({"metadata": {"name": 5}, "spec": {"podref": PODREF, "ifname": "dra0"}}, False),
    ],
    ids=["named", "unnamed", "other-range", "other-pod", "other-interface", "unreadable-name", "malformed"],
)
def test_a_reservation_matches_only_the_pod_interface_in_the_configs_ranges(
    obj: dict[str, Any], matches: bool
) -> None:
    assert ipam.reservation_matches(obj, RAIL_A, podref=PODREF, ifname="dra0") is matches
