"""``sriov_dra.cli.inspect_rows``: one row per SR-IOV result, correlated through slices, shadows and the netns; each check fails when its fact is broken."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.fakes import inspect_world as iw
from tests.fakes.inspect_world import RAILS, SRIOV

from sriov_dra.cli import inspect_rows, inspect_table
from sriov_dra_rules import names


def test_pairs_correlate_end_to_end_from_network_status() -> None:
    rows = iw.rows(iw.world())
    assert [(r.request, r.interface, r.vf_pci, r.pcie_root, r.source, r.ips, r.subnet) for r in rows] == [
        ("nic-0", "dra0", "0000:03:00.2", "pci0000:00", "ai/rail-a-net", ("192.0.2.10",), "192.0.2.0/24"),
        (
            "nic-1",
            "dra1",
            "0000:81:00.2",
            "pci0000:80",
            "ai/rail-b-net",
            ("198.51.100.10",),
            "198.51.100.0/24",
        ),
    ]
    assert [r.gpus for r in rows] == [
        ("gpu-0: lab-node-1/gpu-0 @pci0000:00",),
        ("gpu-1: lab-node-1/gpu-1 @pci0000:80",),
    ]
    assert all(r.ok and r.ip_origin == "network-status" for r in rows)
    assert set(rows[0].checks) == {
        "pcieRootEqual",
        "deviceIdIsVf",
        "bindingIdentity",
        "networkNamePreserved",
        "ipInRailSubnet",
        "interfaceHasAddress",
    }


def test_addresses_come_from_the_pod_netns_when_given() -> None:
    rows = iw.rows(iw.world(), netns={"dra0": ["192.0.2.77/24"], "dra1": ["198.51.100.77/24"]})
    assert [(r.ips, r.ip_origin) for r in rows] == [
        (("192.0.2.77/24",), "netns"),
        (("198.51.100.77/24",), "netns"),
    ]


def _break_gpu_root(world: dict[str, Any]) -> None:
    world["resourceslices"][0]["spec"]["devices"][0]["attributes"][inspect_rows.PCIE_ROOT] = {
        "string": "pci0000:40"
    }


def _break_device_id(world: dict[str, Any]) -> None:
    nad = world["network-attachment-definitions"][2]
    nad["spec"]["config"] = nad["spec"]["config"].replace("0000:03:00.2", "0000:03:00.3")


def _break_template_name(world: dict[str, Any]) -> None:
    nad = world["network-attachment-definitions"][0]
    nad["spec"]["config"] = nad["spec"]["config"].replace("ai-rail-a-net", "renamed")


@pytest.mark.parametrize(
    ("breaker", "check"),
    [
        (_break_gpu_root, "pcieRootEqual"),
        (_break_device_id, "deviceIdIsVf"),
        (_break_template_name, "networkNamePreserved"),
    ],
    ids=["gpu-on-another-root", "shadow-device-id-not-the-vf", "template-renamed"],
)
def test_each_check_fails_when_its_fact_is_broken(breaker: Any, check: str) -> None:
    world = iw.world()
    breaker(world)
    first = iw.rows(world)[0]
    assert first.checks[check] is False and not first.ok
    assert f"nic-0: {check} failed" in inspect_table.render_table(iw.rows(world))


def test_address_outside_the_rail_subnet_fails() -> None:
    rows = iw.rows(iw.world(), netns={"dra0": ["10.0.0.5/24"], "dra1": ["198.51.100.77/24"]})
    assert rows[0].checks["ipInRailSubnet"] is False and rows[1].ok


def test_vf_without_shadow_is_reported() -> None:
    world = iw.world()
    world["network-attachment-definitions"] = world["network-attachment-definitions"][:3]
    rows = iw.rows(world)
    assert [r.shadow != "" for r in rows] == [True, False]
    assert "nic-1: no shadow NAD bound to VF 0000:81:00.2" in inspect_table.render_table(rows)


@pytest.mark.parametrize(
    ("ipam", "subnet"),
    [
        ({"type": "whereabouts", "range": "192.0.2.0/24"}, "192.0.2.0/24"),
        ({"type": "whereabouts", "range": "192.0.2.10-192.0.2.20/24"}, "192.0.2.0/24"),
        ({"type": "host-local", "subnet": "10.1.2.0/24"}, "10.1.2.0/24"),
        ({"type": "host-local", "ranges": [[{"subnet": "10.9.0.0/16"}]]}, "10.9.0.0/16"),
        ({"type": "static"}, ""),
    ],
    ids=["whereabouts-cidr", "whereabouts-start-end", "host-local-subnet", "host-local-ranges", "no-range"],
)
def test_rail_subnet_is_read_from_the_ipam_config(ipam: dict[str, Any], subnet: str) -> None:
    assert inspect_rows._subnet({"ipam": ipam}) == subnet


def _with_network_data(world: dict[str, Any]) -> dict[str, Any]:
    """The claim as the plugin leaves it once Multus reported: networkData on each VF entry, a GPU entry."""
    claim = world["resourceclaims"][0]
    entries: list[dict[str, Any]] = [{"driver": "gpu.nvidia.com", "pool": "lab-node-1", "device": "gpu-0"}]
    for i, (_pci, _root, _src, _subnet, cidr, ifname) in enumerate(RAILS.values()):
        device = _pci.replace(":", "-").replace(".", "-")
        entries.append(
            {
                "driver": SRIOV,
                "pool": "lab-node-1",
                "device": device,
                "networkData": {
                    "interfaceName": ifname,
                    "ips": [cidr],
                    "hardwareAddress": f"02:00:00:00:00:0{i}",
                },
            }
        )
    claim["status"]["devices"] = entries
    return world


def test_addresses_and_mac_come_from_the_claim_network_data_with_their_prefix() -> None:
    rows = iw.rows(_with_network_data(iw.world()))
    assert [(r.ips, r.ip_origin, r.mac, r.claim_ips) for r in rows] == [
        (("192.0.2.10/24",), "claim networkData", "02:00:00:00:00:00", ("192.0.2.10/24",)),
        (("198.51.100.10/24",), "claim networkData", "02:00:00:00:00:01", ("198.51.100.10/24",)),
    ]
    assert all(r.ok and r.checks["networkDataInterface"] for r in rows)
    table = inspect_table.render_table(rows)
    assert "02:00:00:00:00:00" in table and "(IPs from claim networkData)" in table
    assert "IPs without prefix" not in table


def test_without_network_data_the_addresses_and_mac_come_from_network_status() -> None:
    world = iw.world()
    status = json.loads(world["pods"][0]["metadata"]["annotations"][names.NETWORK_STATUS_ANNOTATION])
    status[0]["mac"] = "02:00:00:00:00:aa"
    world["pods"][0]["metadata"]["annotations"][names.NETWORK_STATUS_ANNOTATION] = json.dumps(status)
    rows = iw.rows(world)
    assert [(r.ip_origin, r.mac, r.claim_ips) for r in rows] == [
        ("network-status", "02:00:00:00:00:aa", ()),
        ("network-status", "", ()),
    ]
    assert "networkDataInterface" not in rows[0].checks


def test_claim_network_data_that_differs_from_the_pod_netns_fails_its_check() -> None:
    rows = iw.rows(
        _with_network_data(iw.world()), netns={"dra0": ["192.0.2.10/24"], "dra1": ["198.51.100.99/24"]}
    )
    assert [r.checks["networkDataMatchesNetns"] for r in rows] == [True, False]
    assert "nic-1: networkDataMatchesNetns failed" in inspect_table.render_table(rows)


def test_claim_network_data_naming_another_interface_fails_its_check() -> None:
    world = _with_network_data(iw.world())
    world["resourceclaims"][0]["status"]["devices"][1]["networkData"]["interfaceName"] = "dra9"
    first = iw.rows(world)[0]
    assert first.checks["networkDataInterface"] is False and not first.ok


# --- bugs the strict types showed (each crashed `sriov-dra inspect` with a traceback) -----------------


def test_source_nad_whose_config_is_not_a_json_object_makes_no_name_check_and_no_traceback() -> None:
    world = iw.world()
    world["network-attachment-definitions"][0]["spec"]["config"] = "[]"
    first = iw.rows(world)[0]
    assert "networkNamePreserved" not in first.checks and first.shadow


@pytest.mark.parametrize("config", ["{not json", "[1, 2]"], ids=["unparseable", "array"])
def test_shadow_whose_config_is_not_a_json_object_is_a_failed_row_not_a_traceback(config: str) -> None:
    world = iw.world()
    world["network-attachment-definitions"][2]["spec"]["config"] = config
    first = iw.rows(world)[0]
    assert first.shadow and first.subnet == "" and first.checks["deviceIdIsVf"] is False and not first.ok


@pytest.mark.parametrize(
    "ipam",
    [{"ranges": {"a": 1}}, {"ranges": [5]}, {"ranges": [{"subnet": "10.0.0.0/8"}]}],
    ids=["ranges-object", "ranges-of-numbers", "ranges-not-nested"],
)
def test_rail_subnet_of_malformed_host_local_ranges_is_empty_not_a_traceback(ipam: dict[str, Any]) -> None:
    assert inspect_rows._subnet({"ipam": ipam}) == ""


def _as_extended_resource_claim(world: dict[str, Any]) -> dict[str, Any]:
    pod = world["pods"][0]
    pod["spec"]["resourceClaims"] = []
    pod["status"] = {
        "resourceClaimStatuses": [],
        "extendedResourceClaimStatus": {
            "resourceClaimName": "pairs-devices",
            "requestMappings": [
                {"containerName": "app", "resourceName": "example.com/rail", "requestName": r} for r in RAILS
            ],
        },
    }
    return world


def test_an_extended_resource_claim_is_inspected_like_the_pods_other_claims() -> None:
    want = [(r.request, r.interface, r.ok) for r in iw.rows(iw.world())]
    assert [(r.request, r.interface, r.ok) for r in iw.rows(_as_extended_resource_claim(iw.world()))] == want


def test_a_claim_named_by_the_pods_status_but_not_controlled_by_it_is_not_inspected() -> None:
    world = _as_extended_resource_claim(iw.world())
    world["resourceclaims"][0]["metadata"]["ownerReferences"] = []
    assert iw.rows(world) == []
