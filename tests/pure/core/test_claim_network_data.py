"""core.plugin.claim_network_data: network-status → claim status.devices[].networkData of managed VFs."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import metadata_document
from sriov_dra.core.plugin import claim_network_data, device_conditions
from sriov_dra_rules import errors

DRIVER = "sriovnetwork.k8snetworkplumbingwg.io"
GPU = "gpu.nvidia.com"
SHADOW_A = "ai-workloads/dra-sriov-0123456789abcdef0123456789abcdef"
SHADOW_B = "ai-workloads/dra-sriov-fedcba9876543210fedcba9876543210"
RAIL_A = ipaddress.ip_network("192.0.2.0/24")
RAIL_B = ipaddress.ip_network("198.51.100.0/24")
A = claim_network_data.Attachment("node-a", "0000-03-02-0", SHADOW_A, "dra0", (RAIL_A,))
B = claim_network_data.Attachment("node-a", "0000-81-02-0", SHADOW_B, "dra1", (RAIL_B,))


def status(*entries: dict[str, Any]) -> str:
    return json.dumps(list(entries))


def entry(name: str, interface: str, ips: list[str], mac: str = "", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "interface": interface, "ips": ips, "dns": {}, **extra}
    if mac:
        out["mac"] = mac
    return out


def network_data_for(
    text: str | None, attachments: Sequence[claim_network_data.Attachment]
) -> dict[claim_network_data.DeviceKey, claim_network_data.DeviceResult]:
    """The two steps the network-data writer runs for one claim: decode the entries that could be
    ``attachments``', then correlate them."""
    ours = {a.network for a in attachments}
    entries = claim_network_data.decode_network_status(text, pod="Pod", ours=ours)
    return claim_network_data.correlate(entries, attachments)


PRIMARY = {"name": "k8s-pod-network", "interface": "eth0", "ips": ["10.244.1.5"], "default": True, "dns": {}}
MULTUS = status(
    PRIMARY,
    entry(SHADOW_B, "dra1", ["198.51.100.7"], "02:00:00:00:00:0b", **{"device-info": {"type": "pci"}}),
    entry(SHADOW_A, "dra0", ["192.0.2.5"], "02:00:00:00:00:0a"),
)


# --- correlation ----------------------------------------------------------------------------------


def test_each_vf_gets_the_entry_of_its_shadow_and_interface_with_the_rail_prefix() -> None:
    got = network_data_for(MULTUS, [A, B])
    assert got[A.key].data == metadata_document.NetworkData("dra0", ("192.0.2.5/24",), "02:00:00:00:00:0a")
    assert got[B.key].data == metadata_document.NetworkData("dra1", ("198.51.100.7/24",), "02:00:00:00:00:0b")
    assert got[A.key].data is not None and got[A.key].data.to_json() == {
        "interfaceName": "dra0",
        "ips": ["192.0.2.5/24"],
        "hardwareAddress": "02:00:00:00:00:0a",
    }


@pytest.mark.parametrize(
    "text",
    [
        None,
        status(PRIMARY),
        status(PRIMARY, entry(SHADOW_A, "net1", ["192.0.2.5"])),
        status(PRIMARY, entry("ai-workloads/rail-a-net", "dra0", ["192.0.2.5"])),
        status(PRIMARY, entry(SHADOW_A.split("/")[1], "dra0", ["192.0.2.5"])),
    ],
    ids=[
        "annotation-absent",
        "primary-only",
        "same-shadow-other-interface",
        "same-interface-other-network",
        "shadow-name-without-namespace",
    ],
)
def test_a_vf_without_its_exact_entry_is_not_reported(text: str | None) -> None:
    assert network_data_for(text, [A])[A.key] == claim_network_data.DeviceResult()


def test_two_entries_for_one_vf_are_ambiguous_and_leave_it_as_it_is() -> None:
    text = status(entry(SHADOW_A, "dra0", ["192.0.2.5"]), entry(SHADOW_A, "dra0", ["192.0.2.6"]))
    got = network_data_for(text, [A])[A.key]
    assert got.data is None and got.problem is not None
    assert "entries [0, 1]" in got.problem.message


@pytest.mark.parametrize(
    ("subnets", "ips", "want", "unprefixed"),
    [
        ((RAIL_A,), ["192.0.2.5"], ("192.0.2.5/24",), ()),
        ((RAIL_A,), ["192.0.2.5/26"], ("192.0.2.5/26",), ()),
        ((ipaddress.ip_network("192.0.0.0/16"), RAIL_A), ["192.0.2.5"], ("192.0.2.5/24",), ()),
        ((RAIL_A,), ["203.0.113.9"], (), ("203.0.113.9",)),
        ((), ["192.0.2.5"], (), ("192.0.2.5",)),
        ((ipaddress.ip_network("2001:db8::/64"),), ["2001:DB8:0:0::5"], ("2001:db8::5/64",), ()),
        ((RAIL_A,), ["192.0.2.5", "192.0.2.5/24"], ("192.0.2.5/24",), ()),
        ((RAIL_A,), ["192.0.2.5/255.255.255.0"], ("192.0.2.5/24",), ()),
    ],
    ids=[
        "plain-ip-in-rail-subnet",
        "cidr-kept-as-reported",
        "longest-containing-subnet",
        "outside-every-subnet-left-out",
        "no-ipam-subnet-left-out",
        "ipv6-canonical",
        "duplicate-dropped",
        "netmask-form-canonical",
    ],
)
def test_addresses_get_their_prefix_from_the_shadow_ipam_or_are_left_out(
    subnets: tuple[claim_network_data.Network, ...],
    ips: list[str],
    want: tuple[str, ...],
    unprefixed: tuple[str, ...],
) -> None:
    att = claim_network_data.Attachment("node-a", "d0", SHADOW_A, "dra0", subnets)
    got = network_data_for(status(entry(SHADOW_A, "dra0", ips)), [att])[att.key]
    assert got.problem is None and got.data is not None
    assert (got.data.ips, got.unprefixed) == (want, unprefixed)


@pytest.mark.parametrize(
    ("ips", "mac", "where"),
    [
        (["192.0.2.300"], "", ".ips[0]"),
        (["fe80::1%eth0"], "", ".ips[0]"),
        (["::ffff:192.0.2.5/120"], "", ".ips[0]"),
        ([f"192.0.2.{i}" for i in range(1, 18)], "", ".ips"),
        (["192.0.2.5"], "0" * 129, ".mac"),
    ],
    ids=["not-an-ip", "ipv6-zone", "ipv4-mapped", "seventeen-addresses", "mac-over-128-bytes"],
)
def test_an_entry_the_api_would_refuse_is_a_problem_for_that_vf_only(
    ips: list[str], mac: str, where: str
) -> None:
    text = status(entry(SHADOW_A, "dra0", ips, mac), entry(SHADOW_B, "dra1", ["198.51.100.7"]))
    got = network_data_for(text, [A, B])
    assert got[A.key].data is None and got[A.key].problem is not None
    assert got[A.key].problem.path == f"{claim_network_data.ANNOTATION_PATH}[0]{where}"
    assert got[B.key].data is not None and got[B.key].data.ips == ("198.51.100.7/24",)


def test_sixteen_addresses_are_within_the_limit() -> None:
    ips = [f"192.0.2.{i}" for i in range(1, 17)]
    got = network_data_for(status(entry(SHADOW_A, "dra0", ips)), [A])[A.key]
    assert got.data is not None and len(got.data.ips) == 16


def test_one_device_attached_twice_is_a_contract_violation() -> None:
    with pytest.raises(errors.ContractViolation):
        claim_network_data.correlate((), [A, A])


# --- the annotation reader --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("[{", claim_network_data.ANNOTATION_PATH),
        ('[{"name": "a", "name": "b"}]', claim_network_data.ANNOTATION_PATH + "[0]"),
        ('{"name": "a"}', claim_network_data.ANNOTATION_PATH),
        ('["x"]', claim_network_data.ANNOTATION_PATH + "[0]"),
        ('[{"interface": "dra0"}]', claim_network_data.ANNOTATION_PATH + "[0].name"),
        ('[{"name": "a/b", "ips": "192.0.2.5"}]', claim_network_data.ANNOTATION_PATH + "[0].ips"),
        ('[{"name": "a/b", "ips": [5]}]', claim_network_data.ANNOTATION_PATH + "[0].ips[0]"),
        ('[{"name": "a/b", "mac": 1}]', claim_network_data.ANNOTATION_PATH + "[0].mac"),
        ('[{"name": "a/b", "interface": ["dra0"]}]', claim_network_data.ANNOTATION_PATH + "[0].interface"),
        ("[NaN]", claim_network_data.ANNOTATION_PATH),
    ],
    ids=[
        "not-json",
        "duplicate-key",
        "root-not-a-list",
        "entry-not-an-object",
        "name-missing",
        "ips-not-a-list",
        "ip-not-a-string",
        "mac-not-a-string",
        "interface-not-a-string",
        "nan",
    ],
)
def test_an_unreadable_annotation_is_invalid_network_status_naming_the_field(text: str, path: str) -> None:
    with pytest.raises(errors.InvalidSpec, match=r"^InvalidNetworkStatus: Pod ns/p: annotation") as info:
        claim_network_data.decode_network_status(text, pod="Pod ns/p")
    assert [e for e in info.value.errors if e.path.startswith(path)], info.value.errors


def test_unknown_fields_and_other_entries_are_ignored() -> None:
    got = claim_network_data.decode_network_status(MULTUS)
    assert [(e.index, e.name, e.interface) for e in got] == [
        (0, "k8s-pod-network", "eth0"),
        (1, SHADOW_B, "dra1"),
        (2, SHADOW_A, "dra0"),
    ]


# --- IPAM subnets ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ipam", "want"),
    [
        ({"type": "whereabouts", "range": "192.0.2.0/24"}, ["192.0.2.0/24"]),
        ({"type": "whereabouts", "range": "192.0.2.10-192.0.2.20/24"}, ["192.0.2.0/24"]),
        (
            {"type": "whereabouts", "ipRanges": [{"range": "192.0.2.0/25"}, {"range": "2001:db8::/64"}]},
            ["192.0.2.0/25", "2001:db8::/64"],
        ),
        ({"type": "host-local", "subnet": "192.0.2.0/24"}, ["192.0.2.0/24"]),
        (
            {"type": "host-local", "ranges": [[{"subnet": "192.0.2.0/24"}], [{"subnet": "2001:db8::/64"}]]},
            ["192.0.2.0/24", "2001:db8::/64"],
        ),
        ({"type": "static", "addresses": [{"address": "192.0.2.9/28"}]}, ["192.0.2.0/28"]),
        ({"type": "dhcp"}, []),
        ({"type": "whereabouts", "range": "not-a-subnet"}, []),
    ],
    ids=[
        "whereabouts-cidr",
        "whereabouts-start-end",
        "whereabouts-ip-ranges",
        "host-local-subnet",
        "host-local-ranges",
        "static",
        "dhcp",
        "garbage-skipped",
    ],
)
def test_ipam_subnets_of_a_single_plugin_config(ipam: dict[str, Any], want: list[str]) -> None:
    config = json.dumps({"cniVersion": "1.0.0", "name": "rail-a", "type": "sriov", "ipam": ipam})
    assert [str(n) for n in claim_network_data.ipam_subnets(config)] == want


def test_ipam_subnets_of_a_conflist_read_every_plugin() -> None:
    config = json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "rail-a",
            "plugins": [
                {"type": "sriov", "ipam": {"type": "host-local", "subnet": "192.0.2.0/24"}},
                {"type": "tuning"},
            ],
        }
    )
    assert [str(n) for n in claim_network_data.ipam_subnets(config)] == ["192.0.2.0/24"]


@pytest.mark.parametrize(
    "config", ["", "[]", "{", '{"ipam": "x"}'], ids=["empty", "list", "broken", "ipam-not-object"]
)
def test_ipam_subnets_of_an_unreadable_config_are_none(config: str) -> None:
    assert claim_network_data.ipam_subnets(config) == ()


# --- the claim status merge -----------------------------------------------------------------------

OURS_A = {"driver": DRIVER, "pool": "node-a", "device": A.device, "data": {"kind": "VfConfig"}}
OURS_B = {"driver": DRIVER, "pool": "node-a", "device": B.device, "data": {"kind": "VfConfig"}}
GPU_0 = {
    "driver": GPU,
    "pool": "node-a",
    "device": "gpu-0",
    "data": {"uuid": "GPU-1"},
    "conditions": [{"type": "Ready", "status": "True"}],
    "networkData": {"interfaceName": "gpu0"},
}
ND_A = {"interfaceName": "dra0", "ips": ["192.0.2.5/24"], "hardwareAddress": "02:00:00:00:00:0a"}
ND_B = {"interfaceName": "dra1", "ips": ["198.51.100.7/24"], "hardwareAddress": "02:00:00:00:00:0b"}


NOW = "2026-12-06T07:00:00Z"
LATER = "2026-12-06T08:00:00Z"
UP_A = [device_conditions.network_ready("dra0", NOW)]
UP_B = [device_conditions.network_ready("dra1", NOW)]


def merged(existing: object, text: str | None = MULTUS, now: str = NOW) -> list[dict[str, object]] | None:
    return claim_network_data.merged_network_data(
        existing, network_data_for(text, [A, B]), driver_name=DRIVER, now=now
    )


def test_network_data_and_network_ready_are_set_on_both_vf_entries_and_the_gpu_entry_is_kept_as_read() -> (
    None
):
    assert merged([GPU_0, OURS_A, OURS_B]) == [
        GPU_0,
        {**OURS_A, "networkData": ND_A, "conditions": UP_A},
        {**OURS_B, "networkData": ND_B, "conditions": UP_B},
    ]
    assert UP_A[0]["status"] == "True" and UP_A[0]["reason"] == "NetworkAttached"


def test_nothing_is_written_when_network_data_is_already_there_even_later() -> None:
    there = [
        GPU_0,
        {**OURS_A, "networkData": ND_A, "conditions": UP_A},
        {**OURS_B, "networkData": ND_B, "conditions": UP_B},
    ]
    assert merged(there, now=LATER) is None


def test_network_data_goes_and_network_ready_turns_false_when_network_status_no_longer_reports_the_vf() -> (
    None
):
    ready = device_conditions.ready(NOW)
    out = merged(
        [{**OURS_A, "networkData": ND_A, "conditions": [ready, *UP_A]}, GPU_0], status(PRIMARY), LATER
    )
    down = device_conditions.network_ready(None, LATER)
    assert out == [{**OURS_A, "conditions": [ready, down]}, GPU_0]
    assert (down["status"], down["reason"]) == ("False", "NotAttached")


def test_a_problem_leaves_the_vf_entry_as_it_is() -> None:
    text = status(
        entry(SHADOW_A, "dra0", ["bad"]), entry(SHADOW_B, "dra1", ["198.51.100.7"], "02:00:00:00:00:0b")
    )
    old = {**OURS_A, "networkData": ND_A}
    assert merged([old, OURS_B], text) == [old, {**OURS_B, "networkData": ND_B, "conditions": UP_B}]


@pytest.mark.parametrize(
    "existing",
    [None, [], [GPU_0], [{**OURS_A, "shareID": "s-1"}], [OURS_A, "junk"], {"driver": DRIVER}],
    ids=[
        "absent",
        "empty",
        "no-entry-of-ours",
        "shared-entry-not-ours-to-fill",
        "unreadable-list",
        "not-a-list",
    ],
)
def test_no_entry_is_added_and_an_unreadable_list_is_not_rewritten(existing: object) -> None:
    assert merged(existing) is None


# --- properties ---------------------------------------------------------------------------------

_json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
_ip_text = st.one_of(
    st.ip_addresses().map(str),
    st.tuples(st.ip_addresses(v=4), st.integers(0, 32)).map(lambda t: f"{t[0]}/{t[1]}"),
    st.tuples(st.ip_addresses(v=6), st.integers(0, 128)).map(lambda t: f"{t[0]}/{t[1]}"),
    st.sampled_from(["192.0.2.5", "198.51.100.7", "::ffff:1.2.3.4", "fe80::1%eth0", "1.2.3", ""]),
    st.text(max_size=12),
)
_status_entry = st.fixed_dictionaries(
    {
        "name": st.sampled_from([SHADOW_A, SHADOW_B, "k8s-pod-network", ""]) | _json,
        "interface": st.sampled_from(["dra0", "dra1", "eth0"]) | _json,
        "ips": st.lists(_ip_text, max_size=20) | _json,
        "mac": st.text(max_size=140) | _json,
    },
    optional={"dns": _json, "device-info": _json},
)
_annotation = st.one_of(
    st.none(),
    st.text(max_size=40),
    _json.map(json.dumps),
    st.lists(_status_entry | _json, max_size=5).map(json.dumps),
)


def _go_canonical(cidr: str) -> bool:
    """apimachinery ``IsValidInterfaceAddress``: parses, and equals ``<ip>/<prefix length>``."""
    iface = ipaddress.ip_interface(cidr)
    return "/" in cidr and "%" not in cidr and cidr == f"{iface.ip}/{iface.network.prefixlen}"


@given(_annotation)
def test_property_any_annotation_gives_a_result_or_invalid_network_status(text: str | None) -> None:
    try:
        got = network_data_for(text, [A, B])
    except errors.InvalidSpec as exc:
        assert exc.reason is errors.Reason.INVALID_NETWORK_STATUS
        return
    assert set(got) == {A.key, B.key}
    for result in got.values():
        assert result.data is None or result.problem is None
        if result.data is not None:
            ips = result.data.ips
            assert len(ips) <= claim_network_data.MAX_IPS and len(set(ips)) == len(ips)
            assert all(_go_canonical(ip) for ip in ips)
            assert len(result.data.hardware_address.encode("utf-8", "surrogatepass")) <= 128
            assert result.data.interface_name in ("dra0", "dra1")


_existing_entry = st.fixed_dictionaries(
    {
        "driver": st.sampled_from([DRIVER, GPU]),
        "pool": st.just("node-a"),
        "device": st.sampled_from([A.device, B.device, "gpu-0"]),
    },
    optional={"data": _json, "networkData": _json, "shareID": st.sampled_from(["", "s-1"])},
)


@given(st.lists(_existing_entry, max_size=5), _annotation)
def test_property_merge_keeps_other_entries_and_a_second_merge_writes_nothing(
    existing: list[dict[str, Any]], text: str | None
) -> None:
    try:
        results = network_data_for(text, [A, B])
    except errors.InvalidSpec:
        return
    out = claim_network_data.merged_network_data(existing, results, driver_name=DRIVER, now=NOW)
    after = existing if out is None else out
    assert len(after) == len(existing)
    for old, new in zip(existing, after, strict=True):
        if old["driver"] != DRIVER or old.get("shareID"):
            assert new == old
        else:
            assert {k: v for k, v in new.items() if k not in ("networkData", "conditions")} == {
                k: v for k, v in old.items() if k not in ("networkData", "conditions")
            }
    assert claim_network_data.merged_network_data(after, results, driver_name=DRIVER, now=LATER) is None


# --- entries we do not own (multus-cni #648) ------------------------------------------------------------

_OURS = {"name": SHADOW_A, "interface": "dra0", "ips": ["192.0.2.10"], "mac": "02:00:00:00:00:0a"}
_FOREIGN = [
    {"name": "", "ips": ["10.118.207.24"], "default": True},
    {"ips": ["10.118.207.24"], "default": True},
    {"name": 7, "interface": "eth0"},
    "a string entry",
    {"name": "ns-a/other-net", "interface": "net1", "ips": "10.0.0.5"},
    {"name": "ns-a/other-net", "interface": ["net1"], "mac": 1},
]


@pytest.mark.parametrize(
    "foreign",
    _FOREIGN,
    ids=[
        "cluster-network-with-empty-name",
        "cluster-network-without-name",
        "numeric-name",
        "not-an-object",
        "other-nad-ips-not-a-list",
        "other-nad-wrong-types",
    ],
)
def test_an_entry_we_do_not_own_never_voids_our_network_data(foreign: object) -> None:
    text = json.dumps([foreign, _OURS])
    got = network_data_for(text, [A, B])
    data = got[A.key].data
    assert data is not None and data.ips == ("192.0.2.10/24",) and data.interface_name == "dra0"
    assert got[B.key] == claim_network_data.DeviceResult()


def test_an_unusable_entry_of_ours_is_still_refused_naming_it() -> None:
    text = json.dumps([{"name": "", "ips": ["10.118.207.24"]}, {**_OURS, "ips": "192.0.2.10"}])
    with pytest.raises(errors.InvalidSpec) as caught:
        network_data_for(text, [A, B])
    assert caught.value.reason is errors.Reason.INVALID_NETWORK_STATUS
    assert [e.path for e in caught.value.errors] == [f"{claim_network_data.ANNOTATION_PATH}[1].ips"]


def test_the_annotation_as_a_whole_stays_strict_json_even_in_an_entry_we_do_not_own() -> None:
    text = '[{"name":"","name":"x"},' + json.dumps(_OURS) + "]"
    with pytest.raises(errors.InvalidSpec) as caught:
        network_data_for(text, [A, B])
    assert caught.value.reason is errors.Reason.INVALID_NETWORK_STATUS


def test_before_the_first_attach_nothing_is_written_so_a_pod_before_add_costs_no_write() -> None:
    assert merged([OURS_A, GPU_0, OURS_B], status(PRIMARY)) is None
