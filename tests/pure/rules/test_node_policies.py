"""SriovNetworkNodePolicy node and NIC selection (``sriov_dra_rules.node_policies``), the one rule
the operator's DRA plan (``core.operator.node_policy``) and the collection's ``sriov_vf_plan`` filter share."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra_rules import node_policies

PF = {"pci_address": "0000:03:00.0", "name": "ens1f0", "vendor": "8086", "device_id": "1592"}


def test_every_node_selector_pair_must_equal_the_node_label() -> None:
    labels = {"sriov": "true", "rail": "a"}
    assert node_policies.node_selected({"sriov": "true", "rail": "a"}, labels)
    assert not node_policies.node_selected({"sriov": "true", "rail": "b"}, labels)
    assert not node_policies.node_selected({"missing": ""}, labels)


@pytest.mark.parametrize("selector", [None, {}], ids=["absent", "empty"])
def test_an_absent_or_empty_node_selector_selects_every_node(selector: object) -> None:
    assert node_policies.node_selected(selector, {})


@pytest.mark.parametrize("selector", [{"sriov": True}, {"n": 1}, ["sriov"], "sriov=true"])
def test_a_node_selector_value_or_shape_that_is_not_a_string_map_selects_no_node(selector: object) -> None:
    assert not node_policies.node_selected(selector, {"sriov": "true", "n": "1", "True": "True"})


@pytest.mark.parametrize(
    ("spec", "priority"),
    [
        ({}, 99),
        ({"priority": 10}, 10),
        ({"priority": True}, 99),
        ({"priority": "1"}, 99),
        ({"priority": 0}, 0),
    ],
)
def test_priority_defaults_to_upstreams_99_unless_an_integer(spec: dict[str, object], priority: int) -> None:
    assert node_policies.priority_of(spec) == priority


def test_nic_selector_reads_strings_only_and_keeps_pf_ranges() -> None:
    nic = node_policies.read_nic_selector(
        {"nicSelector": {"vendor": 8086, "deviceID": "1592", "pfNames": ["ens1f0#0-3", "", 7, "ens2f0"]}}
    )
    assert nic == node_policies.NicSelector(device_id="1592", pf_names=("ens1f0#0-3", "ens2f0"))
    assert nic.whole_pf_names == ("ens1f0", "ens2f0")
    assert nic.ranged_pf_names == ("ens1f0#0-3",)


@pytest.mark.parametrize(
    ("nic", "selected"),
    [
        ({}, True),
        ({"vendor": "8086"}, True),
        ({"vendor": "8086", "deviceID": "1592"}, True),
        ({"vendor": "8086", "deviceID": "158B"}, False),
        ({"vendor": "15B3"}, False),
        ({"pfNames": ["ens1f0#2-5"]}, True),
        ({"pfNames": ["ens2f0"]}, False),
        ({"rootDevices": ["0000:03:00.0"]}, True),
        ({"rootDevices": ["0000:81:00.0"], "pfNames": ["ens1f0"]}, False),
    ],
    ids=[
        "empty-selects-every-pf",
        "vendor",
        "vendor-and-device",
        "device-must-match-too",
        "other-vendor",
        "pf-range-selects-its-pf",
        "other-pf-name",
        "root-device",
        "every-given-field-must-match",
    ],
)
def test_nic_selector_selects_a_pf_when_every_given_field_matches(
    nic: dict[str, object], selected: bool
) -> None:
    assert node_policies.read_nic_selector({"nicSelector": nic}).selects_pf(PF) is selected


def test_hex_ids_compare_case_insensitively() -> None:
    nic = node_policies.read_nic_selector({"nicSelector": {"vendor": "15B3", "deviceID": "101D"}})
    assert nic.selects_pf({"vendor": "15b3", "device_id": "101d", "name": "x", "pci_address": "y"})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(st.sampled_from(["nicSelector", "priority", "other"]), json_values))
def test_reading_any_spec_never_raises_and_yields_only_non_empty_strings(spec: dict[str, object]) -> None:
    nic = node_policies.read_nic_selector(spec)
    assert all(isinstance(v, str) and v for v in (*nic.pf_names, *nic.root_devices))
    assert isinstance(nic.vendor, str) and isinstance(nic.device_id, str)
    assert isinstance(node_policies.priority_of(spec), int)
    nic.selects_pf(PF)
