"""Tests for sriov_dra.core.operator.node_policy: spec.dra validation, filter translation, pools, overlap."""

from __future__ import annotations

from typing import Any

import pytest
from tests.fakes import operator_objects as oo

from sriov_dra.core.operator import network_refs, node_policy
from sriov_dra_rules import errors, resource_filters

COMPAT = "openshift.io/sriov_vfs"
D = "sriovnetwork.k8snetworkplumbingwg.io"


def attrs(**extra: Any) -> dict[str, Any]:
    return {"attributes": dict(extra)}


def custom(n: int) -> dict[str, Any]:
    return {f"example.com/a{i}": {"int": i} for i in range(n)}


@pytest.mark.parametrize(
    ("dra", "network", "custom_keys"),
    [
        ({}, None, []),
        ({"attributes": None}, None, []),
        (
            {"attributes": {"example.com/zero": {"int": 0}, "example.com/off": {"bool": False}}},
            None,
            ["example.com/off", "example.com/zero"],
        ),
        ({"attributes": oo.reference("rail-a-net")}, ("sriov-network-operator", "rail-a-net"), []),
        (
            {
                "attributes": {
                    **oo.reference("n", "tenant"),
                    "example.com/rail": {"string": "a"},
                    "example.com/v": {"version": "1.2.3-rc.1+b"},
                }
            },
            ("tenant", "n"),
            ["example.com/rail", "example.com/v"],
        ),
        (
            {"attributes": custom(14) | oo.reference("n")},
            ("sriov-network-operator", "n"),
            [f"example.com/a{i}" for i in range(14)],
        ),
    ],
    ids=[
        "empty-block-generated-only",
        "null-attributes",
        "zero-and-false-are-present",
        "reference-pair-consumed",
        "reference-plus-custom",
        "budget-fits-with-reference",
    ],
)
def test_valid_blocks(dra: dict[str, Any], network: tuple[str, str] | None, custom_keys: list[str]) -> None:
    got = node_policy.validate_dra(dra, compat_value=COMPAT)
    assert got.problems == ()
    assert got.network == (network_refs.ObjectRef(*network) if network else None)
    assert sorted(got.custom) == sorted(custom_keys)
    assert not set(got.custom) & node_policy.NETWORK_KEYS


@pytest.mark.parametrize(
    ("dra", "needle"),
    [
        (attrs(**{oo.NAME_KEY: {"string": "n"}}), 'sriovNetworkNamespace"]: is required because'),
        (attrs(**{oo.NS_KEY: {"string": "ns"}}), 'sriovNetworkName"]: is required because'),
        (attrs(**{oo.NAME_KEY: {"int": 1}, oo.NS_KEY: {"string": "ns"}}), "must be a string attribute"),
        (attrs(**{oo.NAME_KEY: {"string": "n"}, oo.NS_KEY: {"string": "Bad_NS"}}), "not a valid namespace"),
        (
            attrs(**{oo.NAME_KEY: {"string": "UPPER"}, oo.NS_KEY: {"string": "ns"}}),
            "not a valid SriovNetwork name",
        ),
        (attrs(**{"example.com/long": {"string": "x" * 65}}), "65 bytes, max 64"),
        (attrs(**{oo.NAME_KEY: {"string": "n" * 65}, oo.NS_KEY: {"string": "ns"}}), "65 bytes, max 64"),
        (attrs(**{"example.com/v": {"version": "1.2"}}), "not a semver"),
        (attrs(**{"plain": {"string": "x"}}), "needs a domain prefix"),
        (attrs(**{"example.com/" + "i" * 33: {"int": 1}}), "33 characters, max 32"),
        (attrs(**{"d" * 64 + "/x": {"int": 1}}), "max 63"),
        (attrs(**{f"{D}/pciAddress": {"string": "0000:00:01.0"}}), "published by device discovery"),
        (
            attrs(**{"resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"}}),
            "published by device discovery",
        ),
        (attrs(**{"k8s.cni.cncf.io/resourceName": {"string": "x/y"}}), "generates it from spec.resourceName"),
        (attrs(**{f"{D}/netAttachDefName": {"string": "n"}}), "generated output"),
        (attrs(**{f"{D}/netAttachDefNamespace": {"string": "ns"}}), "generated output"),
        (attrs(**{"example.com/l": {"strings": ["a"]}}), "list attribute values are not supported"),
        (attrs(**{"example.com/two": {"int": 1, "bool": True}}), "exactly one of"),
        (attrs(**{"example.com/none": {}}), "exactly one of"),
        ({"attributes": {}, "extra": 1}, "unknown field"),
        ({"attributes": custom(33)}, "33 attributes, max 32"),
        ({"attributes": custom(15) | oo.reference("n")}, "make 33 per device"),
        ("not-an-object", "must be an object"),
    ],
    ids=[
        "partial-pair-name-only",
        "partial-pair-namespace-only",
        "reference-not-string",
        "reference-namespace-invalid",
        "reference-name-invalid",
        "string-over-64-not-truncated",
        "reference-name-over-64",
        "version-not-semver",
        "unqualified-key",
        "identifier-over-32",
        "domain-over-63",
        "reserved-pci-address",
        "reserved-pcie-root",
        "resource-name-input-refused",
        "driver-nad-name-refused",
        "driver-nad-namespace-refused",
        "list-value-refused",
        "two-members",
        "no-member",
        "unknown-dra-field",
        "more-than-32-inputs",
        "per-device-budget",
        "block-not-object",
    ],
)
def test_invalid_blocks_name_the_field_and_the_fix(dra: Any, needle: str) -> None:
    got = node_policy.validate_dra(dra, compat_value=COMPAT)
    text = "; ".join(str(p) for p in got.problems)
    assert needle in text
    assert all(p.path.startswith("spec.dra") for p in got.problems)


def test_long_compat_resource_name_is_refused_on_spec_resource_name() -> None:
    got = node_policy.validate_dra({}, compat_value="openshift.io/" + "r" * 52)
    assert [p.path for p in got.problems] == ["spec.resourceName"]


def spec_with(nic: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"nicSelector": nic, "numVfs": 8, "deviceType": "netdevice", **extra}


NICS = (node_policy.NicId("8086", "158b", "154c"), node_policy.NicId("15b3", "101d", "101e"))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            spec_with({"vendor": "15b3", "pfNames": ["ens2f0", "ens1f0", "ens1f0"]}, linkType="eth"),
            {"vendors": ["15b3"], "pfNames": ["ens1f0", "ens2f0"], "linkType": "eth"},
        ),
        (
            spec_with({"rootDevices": ["0000:3b:00.0"]}, linkType="IB"),
            {"pfPciAddresses": ["0000:3b:00.0"], "linkType": "ib"},
        ),
        (spec_with({"vendor": "8086", "deviceID": "158b"}), {"vendors": ["8086"], "devices": ["154c"]}),
        (spec_with({"deviceID": "101d"}), {"devices": ["101e"]}),
        (
            spec_with({"vendor": "8086", "deviceID": "158b"}, numVfs=0),
            {"vendors": ["8086"], "devices": ["158b"]},
        ),
        (spec_with({"pfNames": ["ens1f0"]}, deviceType="vfio-pci", linkType="eth"), {"pfNames": ["ens1f0"]}),
    ],
    ids=[
        "vendor-pfnames-link",
        "root-devices-become-pf-pci-addresses",
        "pf-device-id-becomes-vf-id",
        "device-id-without-vendor",
        "no-vfs-keeps-pf-id",
        "vfio-adds-no-drivers-or-link",
    ],
)
def test_filter_translation(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    got = node_policy.translate_filter(spec, NICS)
    assert got.problem is None
    assert got.filter == dict(sorted(expected.items()))
    assert got.matcher is not None


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        (spec_with({"netFilter": "openstack/NetworkID:x"}), "netFilter"),
        (spec_with({"pfNames": ["ens1f0#0-3"]}), "VF ranges"),
        (spec_with({"vendor": "8086", "deviceID": "ffff"}), "no VF device ID"),
        (spec_with({"vendor": "15b3", "deviceID": "158b"}), "no VF device ID"),
        (spec_with({}), "empty filter"),
        (spec_with({"pfNames": []}, deviceType="vfio-pci", linkType="eth"), "empty filter"),
    ],
    ids=[
        "net-filter",
        "vf-range",
        "unknown-pf-device",
        "device-of-another-vendor",
        "empty-selector-is-not-match-all",
        "only-untranslated-fields",
    ],
)
def test_untranslatable_selectors_never_become_match_all(spec: dict[str, Any], needle: str) -> None:
    got = node_policy.translate_filter(spec, NICS)
    assert got.filter is None and got.matcher is None
    assert got.problem is not None and needle in got.problem


def f(**kw: Any) -> resource_filters.ResourceFilter:
    return resource_filters.ResourceFilter(
        **{k: frozenset(v) if isinstance(v, list) else v for k, v in kw.items()}
    )


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        (f(vendors=["15b3"], pf_names=["ens1f0"]), f(vendors=["15b3"], pf_names=["ens2f0"]), False),
        (f(vendors=["15b3"]), f(vendors=["15b3"], pf_names=["ens2f0"]), True),
        (f(pf_names=["ens1f0"]), f(pf_pci_addresses=["0000:3b:00.0"]), True),
        (f(vendors=["8086"]), f(vendors=["15b3"]), False),
        (f(vendors=["8086"], link_type="ethernet"), f(vendors=["8086"], link_type="infiniband"), False),
    ],
    ids=[
        "disjoint-pfs",
        "vendor-only-covers",
        "names-vs-addresses-unknown",
        "different-vendors",
        "different-link-types",
    ],
)
def test_structural_overlap(
    a: resource_filters.ResourceFilter, b: resource_filters.ResourceFilter, overlap: bool
) -> None:
    assert a.may_match_a_device_of(b) is overlap
    assert b.may_match_a_device_of(a) is overlap


def test_parse_policy_defaults_and_selection() -> None:
    p = node_policy.parse_policy(
        oo.node_policy("p", uid=oo.UID_A, priority=None), prefix="openshift.io", nic_ids=()
    )
    assert p.priority == node_policy.DEFAULT_PRIORITY and not p.has_dra and p.dra is None
    assert p.selects({**oo.DUAL_RAIL, "other": "x"})
    assert not p.selects({"networking.example.com/dual-rail": "false"})


def test_parse_nic_ids_reads_the_configmap_format() -> None:
    got = node_policy.parse_nic_ids({"Intel_i40e_XXV710": "8086 158a 154c", "Mellanox": "0x15B3 101d 101e"})
    assert got == (node_policy.NicId("15b3", "101d", "101e"), node_policy.NicId("8086", "158a", "154c"))
    with pytest.raises(errors.InvalidSpec, match=r"data\.bad"):
        node_policy.parse_nic_ids({"bad": "8086 158a"})


def test_resource_name_with_a_lone_surrogate_is_a_dra_problem_not_a_crash() -> None:
    """Found by the totality property: ``spec.resourceName: "\\ud800"`` raised ``UnicodeEncodeError``."""
    obj = oo.node_policy(
        "p", uid=oo.UID_A, resource_name="vfs\ud800", dra={"attributes": oo.reference("rail-a-net")}
    )
    policy = node_policy.parse_policy(obj, prefix="openshift.io", nic_ids=())
    assert policy.dra is not None
    assert [p.path for p in policy.dra.problems] == ["spec.resourceName"]
    assert "surrogate" in policy.dra.problems[0].message
