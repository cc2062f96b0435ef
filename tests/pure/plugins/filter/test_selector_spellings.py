"""Vendor and device IDs, PCI addresses and ``pfNames`` VF ranges are read by one rule on every path
that selects hardware (``sriov_dra_rules.device_selectors``): the collection's VF plan (through its
real filter), the operator's filter translation and the plugin's SriovResourcePolicy filters. A PF
the plan creates VFs on is the PF the operator and the plugin select; a spelling none can read is
refused with the same words everywhere (docs/design.md#policy-precedence). Externally managed PFs are
never written by the plan (docs/ansible.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sriovnet.dra.plugins.filter import sriov

from sriov_dra.core import device_facts
from sriov_dra.core.operator import node_policy
from sriov_dra_rules import resource_filters

PF = {"pci_address": "0000:03:00.0", "name": "ens1f0", "vendor": "15b3", "device_id": "101d", "numvfs": 4}
VF = device_facts.DeviceFacts(
    pci_address="0000:03:00.2",
    vendor="15b3",
    device_id="101e",
    pf_device_id="101d",
    pf_name="ens1f0",
    pf_pci_address="0000:03:00.0",
    vf_id=0,
)
NIC_IDS = node_policy.parse_nic_ids({"cx6": "15b3 101d 101e"})


def _policy(name: str = "p", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "op", "name": name}, "spec": {"numVfs": 8, **spec}}


def _plan(*policies: dict[str, Any], pfs: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    return sriov.FilterModule().filters()["sriov_vf_plan"](list(policies), {}, pfs or [PF])


# --- class: IDs and addresses spelled differently from sysfs ------------------------------------------

SPELLED = [
    ("uppercase-vendor", {"vendor": "15B3"}),
    ("0x-vendor", {"vendor": "0x15b3"}),
    ("uppercase-device", {"vendor": "15b3", "deviceID": "101D"}),
    ("root-device-without-domain", {"rootDevices": ["03:00.0"]}),
    ("uppercase-root-device", {"rootDevices": ["0000:03:00.0".upper()]}),
]


@pytest.mark.parametrize("nic", [c[1] for c in SPELLED], ids=[c[0] for c in SPELLED])
def test_an_id_or_address_spelled_otherwise_is_planned_and_selected_alike_on_every_path(
    nic: dict[str, Any],
) -> None:
    plan = _plan(_policy(nicSelector=nic))
    assert [e["pf"] for e in plan] == ["ens1f0"]
    translation = node_policy.translate_filter({"numVfs": 8, "nicSelector": nic}, NIC_IDS)
    assert translation.matcher is not None and translation.matcher.matches(VF), translation.problem
    translated = translation.filter or {}
    parsed = resource_filters.parse_filter(dict(translated), "f", managed=True)
    assert parsed.filter is not None and parsed.filter.matches(VF)


REFUSED = [
    ("vendor-three-digits", {"vendor": "15b"}, "spec.nicSelector.vendor", "'15b' is not a PCI ID"),
    ("vendor-with-name", {"vendor": "mellanox"}, "spec.nicSelector.vendor", "write the four hex digits"),
    ("device-five-digits", {"deviceID": "101dd"}, "spec.nicSelector.deviceID", "is not a PCI ID"),
    ("root-device-pci-prefix", {"rootDevices": ["pci:0000:03:00.0"]}, "spec.nicSelector.rootDevices[0]", "'pci:' prefix"),
    ("range-reversed", {"pfNames": ["ens1f0#3-1"]}, "spec.nicSelector.pfNames[0]", "ends (1) before it starts (3)"),
    ("range-past-numvfs", {"pfNames": ["ens1f0#0-8"]}, "spec.nicSelector.pfNames[0]", "does not exist with numVfs 8"),
    ("range-two-dashes", {"pfNames": ["ens1f0#0-1-2"]}, "spec.nicSelector.pfNames[0]", "exactly one '#' and one '-'"),
    ("range-not-numbers", {"pfNames": ["ens1f0#a-b"]}, "spec.nicSelector.pfNames[0]", "decimal numbers"),
    ("range-huge", {"pfNames": ["ens1f0#0-" + "9" * 4301]}, "spec.nicSelector.pfNames[0]", "decimal numbers"),
    ("range-two-sharps", {"pfNames": ["ens1f0#0-1#2-3"]}, "spec.nicSelector.pfNames[0]", "exactly one '#'"),
]  # fmt: skip


@pytest.mark.parametrize(("nic", "path", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_selector_no_path_can_read_is_refused_by_the_vf_plan_naming_policy_field_value_and_fix(
    nic: dict[str, Any], path: str, words: str
) -> None:
    with pytest.raises(AnsibleFilterError) as caught:
        _plan(_policy(nicSelector=nic))
    assert "policy op/p cannot be read" in str(caught.value)
    assert path in str(caught.value) and words in str(caught.value)


@pytest.mark.parametrize(("nic", "path", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_the_operator_withdraws_such_a_selector_with_the_same_words(
    nic: dict[str, Any], path: str, words: str
) -> None:
    translation = node_policy.translate_filter({"numVfs": 8, "nicSelector": nic}, NIC_IDS)
    assert translation.filter is None and translation.problem is not None
    assert path in translation.problem and words in translation.problem


PLUGIN_REFUSED = [
    ("vendors", ["15b"], "'15b' is not a PCI ID"),
    ("devices", ["mlx"], "is not a PCI ID"),
    ("pfPciAddresses", ["pci:0000:03:00.0"], "'pci:' prefix"),
    ("pciAddresses", ["0000:03:20.0"], "device number 0x20"),
    ("pfNames", ["ens1f0#3-1"], "ends (1) before it starts (3)"),
]


@pytest.mark.parametrize("managed", [True, False], ids=["auto-attach", "compatibility"])
@pytest.mark.parametrize(
    ("field", "values", "words"), PLUGIN_REFUSED, ids=[f"{c[0]}-{c[1][0]}" for c in PLUGIN_REFUSED]
)
def test_the_plugin_refuses_such_a_resource_filter_in_both_modes(
    field: str, values: list[str], words: str, managed: bool
) -> None:
    parsed = resource_filters.parse_filter({field: values}, "f", managed=managed)
    assert parsed.filter is None
    assert [e.path for e in parsed.structural] == [f"f.{field}[0]"]
    assert words in parsed.structural[0].message


def test_compatibility_mode_reports_a_well_formed_vf_range_instead_of_dropping_it_silently() -> None:
    parsed = resource_filters.parse_filter({"pfNames": ["ens1f0#0-3"]}, "f", managed=False)
    assert parsed.filter is not None and not parsed.filter.matches(VF)  # upstream: equals no PF name
    assert [e.path for e in parsed.unsupported] == ["f.pfNames"]
    assert "matches no PF" in parsed.unsupported[0].message


def test_vf_ranges_of_two_policies_that_overlap_on_one_pf_are_refused_by_the_plan() -> None:
    a = _policy("a", nicSelector={"pfNames": ["ens1f0#0-3"]})
    b = _policy("b", nicSelector={"pfNames": ["ens1f0#3-5"]})
    with pytest.raises(AnsibleFilterError, match=r"overlaps VFs 0-3 of policy op/a on PF ens1f0"):
        _plan(a, b)
    c = _policy("c", nicSelector={"pfNames": ["ens1f0#4-7"]})
    assert [e["policies"] for e in _plan(a, c)] == [["op/a", "op/c"]]


def test_a_device_id_missing_from_the_nic_table_says_which_table_and_how_to_extend_it() -> None:
    translation = node_policy.translate_filter(
        {"numVfs": 8, "nicSelector": {"vendor": "15b3", "deviceID": "1021"}}, ()
    )
    assert translation.problem is not None
    assert (
        "'15b3 1021 <vf device>' to the supported-nic-ids ConfigMap (--supported-nic-ids)"
        in translation.problem
    )


# --- class: externallyManaged PFs ----------------------------------------------------------------------


def test_an_externally_managed_pf_with_enough_vfs_is_never_in_the_plan() -> None:
    assert _plan(_policy(numVfs=4, externallyManaged=True, nicSelector={"pfNames": ["ens1f0"]})) == []


def test_an_externally_managed_pf_with_too_few_vfs_fails_naming_the_pf_and_both_counts() -> None:
    with pytest.raises(AnsibleFilterError) as caught:
        _plan(_policy(numVfs=8, externallyManaged=True, nicSelector={"pfNames": ["ens1f0"]}))
    message = str(caught.value)
    assert "PF ens1f0 is externally managed and has 4 VFs, but the policy needs 8" in message
    assert "never writes sriov_numvfs" in message


def test_policies_that_disagree_on_externally_managed_for_one_pf_are_refused() -> None:
    a = _policy("a", numVfs=4, externallyManaged=True, nicSelector={"pfNames": ["ens1f0"]})
    b = _policy("b", numVfs=4, nicSelector={"vendor": "15b3"})
    with pytest.raises(AnsibleFilterError, match="disagree on externallyManaged for PF ens1f0"):
        _plan(a, b)


def test_externally_managed_with_a_bridge_is_refused_as_upstream_refuses_it() -> None:
    policy = _policy(externallyManaged=True, bridge={"ovs": {}}, nicSelector={"pfNames": ["ens1f0"]})
    with pytest.raises(AnsibleFilterError, match="remove the bridge or externallyManaged"):
        _plan(policy)
