"""Tests for sriov_dra.core.ipam_ranges: the pools host-local v1.9.1 and whereabouts refuse, found before a NAD is written."""

from __future__ import annotations

import ipaddress
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes.sriov_networks import simple

from sriov_dra.core import ipam_ranges
from sriov_dra.core.operator import network_config
from sriov_dra_rules import errors

P = "spec.ipam"


def problems(ipam: dict[str, object]) -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in ipam_ranges.range_problems(ipam, P)]


@pytest.mark.parametrize(
    "ipam",
    [
        {"type": "host-local", "subnet": "10.56.217.0/24"},
        {
            "type": "host-local",
            "subnet": "10.56.217.0/24",
            "rangeStart": "10.56.217.171",
            "rangeEnd": "10.56.217.181",
            "gateway": "10.56.217.1",
        },
        {"type": "host-local", "ranges": [[{"subnet": "10.1.0.0/16"}], [{"subnet": "fd00:1::/64"}]]},
        {"type": "host-local", "ranges": [[{"subnet": "10.1.1.0/24"}, {"subnet": "10.1.2.0/24"}]]},
        {"type": "host-local", "subnet": "10.0.0.0/30"},
        {"type": "host-local"},
    ],
)
def test_ranges_host_local_accepts_give_no_problem(ipam: dict[str, object]) -> None:
    assert problems(ipam) == []


def test_a_prefix_longer_than_the_address_is_refused_with_the_field() -> None:
    [(path, message)] = problems({"subnet": "10.0.0.0/33"})
    assert path == "spec.ipam.subnet"
    assert "'10.0.0.0/33'" in message and "prefix 33" in message and "32 bits" in message


@pytest.mark.parametrize("subnet", ["10.0.0.0/31", "10.0.0.1/32", "fd00::/127"])
def test_a_subnet_without_host_addresses_is_too_small_to_allocate_from(subnet: str) -> None:
    [(path, message)] = problems({"subnet": subnet})
    assert path == "spec.ipam.subnet" and "too small for host-local to allocate from" in message


def test_host_bits_set_names_the_network_address_to_write() -> None:
    [(_, message)] = problems({"subnet": "10.56.217.5/24"})
    assert "host bits set" in message and "write 10.56.217.0/24" in message


@pytest.mark.parametrize(
    "subnet", ["10.0.0.0", "010.0.0.0/24", "10.0.0.0/024", "fe80::%eth0/64", " 10.0.0.0/24", "a/b"]
)
def test_text_net_parse_cidr_refuses_is_not_a_subnet(subnet: str) -> None:
    [(path, message)] = problems({"subnet": subnet})
    assert path == "spec.ipam.subnet" and "not address/prefix" in message


def test_range_start_outside_the_subnet_is_refused() -> None:
    [(path, message)] = problems({"subnet": "10.0.0.0/24", "rangeStart": "10.0.1.10"})
    assert path == "spec.ipam.rangeStart" and "not in the subnet 10.0.0.0/24" in message


def test_range_start_after_range_end_is_refused() -> None:
    [(path, message)] = problems(
        {"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.50", "rangeEnd": "10.0.0.40"}
    )
    assert path == "spec.ipam.rangeStart" and "after rangeEnd 10.0.0.40" in message


def test_a_gateway_that_is_not_an_address_is_refused() -> None:
    [(path, _)] = problems({"subnet": "10.0.0.0/24", "gateway": "10.0.0.256"})
    assert path == "spec.ipam.gateway"


def test_nested_range_paths_name_set_and_member() -> None:
    [(path, _)] = problems(
        {"ranges": [[{"subnet": "10.0.0.0/24"}, {"subnet": "10.0.1.0/24", "rangeEnd": "10.0.2.1"}]]}
    )
    assert path == "spec.ipam.ranges[0][1].rangeEnd"


def test_an_empty_range_set_is_refused() -> None:
    [(path, message)] = problems({"ranges": [[]]})
    assert path == "spec.ipam.ranges[0]" and "an empty list" in message


def test_mixed_families_in_one_set_are_refused() -> None:
    [(path, message)] = problems({"ranges": [[{"subnet": "10.0.0.0/24"}, {"subnet": "fd00::/64"}]]})
    assert path == "spec.ipam.ranges[0][1]" and "mixes IPv4 and IPv6" in message


def test_overlapping_ranges_inside_a_set_and_across_sets_are_refused() -> None:
    inside = problems({"ranges": [[{"subnet": "10.0.0.0/16"}, {"subnet": "10.0.1.0/24"}]]})
    assert [p for p, _ in inside] == ["spec.ipam.ranges[0][1]"]
    across = problems({"subnet": "10.0.0.0/24", "ranges": [[{"subnet": "10.0.0.0/25"}]]})
    assert [p for p, _ in across] == ["spec.ipam.ranges[0][0]"]
    assert "another range set" in across[0][1]


def test_disjoint_ranges_of_one_subnet_do_not_overlap() -> None:
    ipam = {
        "ranges": [
            [{"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.10", "rangeEnd": "10.0.0.19"}],
            [{"subnet": "10.0.0.0/24", "rangeStart": "10.0.0.20", "rangeEnd": "10.0.0.29"}],
        ]
    }
    assert problems(ipam) == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["subnet", "rangeStart", "rangeEnd", "gateway", "ranges", "x"]), inner, max_size=5
        )
    ),
    max_leaves=20,
)


@given(
    st.dictionaries(
        st.sampled_from(["subnet", "rangeStart", "rangeEnd", "gateway", "ranges", "type"]),
        json_values,
        max_size=6,
    )
)
def test_range_problems_is_total_over_any_json_object(ipam: dict[str, object]) -> None:
    found = ipam_ranges.range_problems(ipam, P)
    assert all(isinstance(e, errors.FieldError) and e.path.startswith(P) for e in found)


@given(st.integers(0, 2**24 - 1), st.integers(8, 30))
def test_every_canonical_ipv4_subnet_with_hosts_is_accepted(seed: int, prefix: int) -> None:
    network = ipaddress.ip_network(f"{ipaddress.IPv4Address(seed << 8)}/{prefix}", strict=False)
    assert problems({"subnet": str(network)}) == []


def test_a_sriovnetwork_with_a_bad_host_local_subnet_is_refused_as_invalid_network_spec() -> None:
    net = simple(ipam=json.dumps({"type": "host-local", "subnet": "10.0.0.0/33"}))
    with pytest.raises(errors.InvalidSpec) as info:
        network_config.render_config(net)
    assert info.value.reason is errors.Reason.INVALID_NETWORK_SPEC
    assert [e.path for e in info.value.errors] == ["spec.ipam.subnet"]


def test_other_ipam_types_are_not_checked_as_host_local() -> None:
    net = simple(ipam=json.dumps({"type": "dhcp", "subnet": "10.0.0.0/33"}))
    assert '"subnet": "10.0.0.0/33"' in network_config.render_config(net)
