"""``sriov-dra inspect``: one row per SR-IOV result, correlated through slices, shadows and the netns.

Built on a fake object reader holding the objects of the spec §14.2 example after prepare (a claim
with two GPU and two VF results, their ResourceSlices, two shadows with binding annotations, the
source templates, the Pod with Multus's network-status). Each check of a row is proven to fail
when its fact is broken.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from sriov_dra.cli import inspect
from sriov_dra.core import bindings
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import objects
from sriov_dra_rules import names

POD_UID = "11111111-2222-3333-4444-555555555555"
CLAIM_UID = "c1a1c1a1-0000-4000-8000-000000000001"
SRIOV = names.DRIVER_NAME
RAILS = {
    "nic-0": ("0000:03:00.2", "pci0000:00", "rail-a-net", "192.0.2.0/24", "192.0.2.10/24", "dra0"),
    "nic-1": ("0000:81:00.2", "pci0000:80", "rail-b-net", "198.51.100.0/24", "198.51.100.10/24", "dra1"),
}


def _template(name: str, subnet: str) -> dict[str, Any]:
    config = {
        "cniVersion": "1.0.0",
        "name": f"ai-{name}",
        "type": "sriov",
        "ipam": {"type": "whereabouts", "range": subnet},
    }
    return {
        "metadata": {
            "name": name,
            "namespace": "ai",
            "uid": f"5a5a5a5a-0000-4000-8000-00000000000{len(name) % 10}",
        },
        "spec": {"config": json.dumps(config)},
    }


def _shadow(request: str) -> dict[str, Any]:
    pci, _root, source, subnet, _ip, ifname = RAILS[request]
    config = json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": f"ai-{source}",
            "type": "sriov",
            "deviceID": pci,
            "ipam": {"type": "whereabouts", "range": subnet},
        }
    )
    binding = bindings.Binding(
        attachment_id="a" * 63 + ("0" if request == "nic-0" else "1"),
        pod_uid=POD_UID,
        claim_uid=CLAIM_UID,
        node_name="lab-node-1",
        node_uid="0b7c6f2e-5a1d-4c3e-9f10-2a3b4c5d6e7f",
        source=bindings.SourceRef("ai", source, "5a5a5a5a-0000-4000-8000-00000000000a", "1"),
        pci_address=pci,
        interface=ifname,
        config_sha256=bindings.config_sha256(config),
    )
    return {
        "metadata": {
            "name": f"dra-sriov-{request[-1] * 32}",
            "namespace": "ai",
            "labels": {names.LABEL_POD_UID: POD_UID},
            "annotations": {names.BINDING_ANNOTATION: bindings.encode_binding(binding)},
        },
        "spec": {"config": config},
    }


def _world() -> dict[str, Any]:
    results = [
        {"request": "gpu-0", "driver": "gpu.nvidia.com", "pool": "lab-node-1", "device": "gpu-0"},
        {"request": "nic-0", "driver": SRIOV, "pool": "lab-node-1", "device": "0000-03-00-2"},
        {"request": "gpu-1", "driver": "gpu.nvidia.com", "pool": "lab-node-1", "device": "gpu-1"},
        {"request": "nic-1", "driver": SRIOV, "pool": "lab-node-1", "device": "0000-81-00-2"},
    ]
    claim = {
        "metadata": {"name": "pairs-devices", "namespace": "ai", "uid": CLAIM_UID},
        "spec": {
            "devices": {
                "constraints": [
                    {"requests": ["gpu-0", "nic-0"], "matchAttribute": inspect.PCIE_ROOT},
                    {"requests": ["gpu-1", "nic-1"], "matchAttribute": inspect.PCIE_ROOT},
                ]
            }
        },
        "status": {"allocation": {"devices": {"results": results}}},
    }
    gpu_slice = {
        "spec": {
            "driver": "gpu.nvidia.com",
            "pool": {"name": "lab-node-1"},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"type": {"string": "gpu"}, inspect.PCIE_ROOT: {"string": root}},
                }
                for i, root in enumerate(("pci0000:00", "pci0000:80"))
            ],
        }
    }
    vf_slice = {
        "spec": {
            "driver": SRIOV,
            "pool": {"name": "lab-node-1"},
            "devices": [
                {
                    "name": pci.replace(":", "-").replace(".", "-"),
                    "attributes": {inspect.DEVICE_ID: {"string": pci}, inspect.PCIE_ROOT: {"string": root}},
                }
                for pci, root, *_ in RAILS.values()
            ],
        }
    }
    status = [
        {"name": "ai/" + _shadow(r)["metadata"]["name"], "interface": v[5], "ips": [v[4].split("/")[0]]}
        for r, v in RAILS.items()
    ]
    pod = {
        "metadata": {
            "name": "pairs",
            "namespace": "ai",
            "uid": POD_UID,
            "annotations": {names.NETWORK_STATUS_ANNOTATION: json.dumps(status)},
        },
        "spec": {
            "nodeName": "lab-node-1",
            "resourceClaims": [{"name": "devices", "resourceClaimTemplateName": "t"}],
        },
        "status": {"resourceClaimStatuses": [{"name": "devices", "resourceClaimName": "pairs-devices"}]},
    }
    return {
        "pods": [pod],
        "resourceclaims": [claim],
        "resourceslices": [gpu_slice, vf_slice],
        "network-attachment-definitions": [
            _template("rail-a-net", "192.0.2.0/24"),
            _template("rail-b-net", "198.51.100.0/24"),
            _shadow("nic-0"),
            _shadow("nic-1"),
        ],
    }


class FakeObjects:
    """The reads ``inspect_pod`` makes, answered from a dict of lists by resource plural."""

    def __init__(self, world: dict[str, Any]) -> None:
        self.world = world

    def _find(self, res: objects.Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
        for item in self.world.get(res.plural, []):
            meta = item["metadata"]
            if meta["name"] == name and meta.get("namespace") == namespace:
                return copy.deepcopy(item)
        return None

    def get(self, res: objects.Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        found = self._find(res, name, namespace)
        if found is None:
            raise kube_errors.NotFound(f"{res} {namespace}/{name} not found", status=404)
        return found

    def get_or_none(
        self, res: objects.Resource, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        return self._find(res, name, namespace)

    def list(
        self, res: objects.Resource, namespace: str | None = None, *, label_selector: str | None = None
    ) -> objects.Listing:
        items = [
            copy.deepcopy(i)
            for i in self.world.get(res.plural, [])
            if namespace is None or i.get("metadata", {}).get("namespace") == namespace
        ]
        if label_selector:
            key, _, value = label_selector.partition("=")
            items = [i for i in items if (i["metadata"].get("labels") or {}).get(key) == value]
        return objects.Listing(items, "1")


def _rows(world: dict[str, Any], netns: dict[str, list[str]] | None = None) -> list[inspect.Row]:
    reader = (lambda _path: netns) if netns is not None else None
    return inspect.inspect_pod(
        FakeObjects(world),
        "ai",
        "pairs",  # type: ignore[arg-type]
        netns="/var/run/netns/x" if reader else None,
        read_netns=reader,
    )


def test_pairs_correlate_end_to_end_from_network_status() -> None:
    rows = _rows(_world())
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
    rows = _rows(_world(), netns={"dra0": ["192.0.2.77/24"], "dra1": ["198.51.100.77/24"]})
    assert [(r.ips, r.ip_origin) for r in rows] == [
        (("192.0.2.77/24",), "netns"),
        (("198.51.100.77/24",), "netns"),
    ]


def _break_gpu_root(world: dict[str, Any]) -> None:
    world["resourceslices"][0]["spec"]["devices"][0]["attributes"][inspect.PCIE_ROOT] = {
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
    world = _world()
    breaker(world)
    first = _rows(world)[0]
    assert first.checks[check] is False and not first.ok
    assert f"nic-0: {check} failed" in inspect.render_table(_rows(world))


def test_address_outside_the_rail_subnet_fails() -> None:
    rows = _rows(_world(), netns={"dra0": ["10.0.0.5/24"], "dra1": ["198.51.100.77/24"]})
    assert rows[0].checks["ipInRailSubnet"] is False and rows[1].ok


def test_vf_without_shadow_is_reported() -> None:
    world = _world()
    world["network-attachment-definitions"] = world["network-attachment-definitions"][:3]
    rows = _rows(world)
    assert [r.shadow != "" for r in rows] == [True, False]
    assert "nic-1: no shadow NAD bound to VF 0000:81:00.2" in inspect.render_table(rows)


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
    assert inspect._subnet({"ipam": ipam}) == subnet


def test_json_output_carries_every_row_and_its_verdict() -> None:
    out = json.loads(inspect.render_json(_rows(_world())))
    assert [(r["request"], r["ok"]) for r in out] == [("nic-0", True), ("nic-1", True)]


def test_addresses_without_prefix_get_a_footnote_naming_netns() -> None:
    footnote = "IPs without prefix: Multus's network-status carries none; --netns <the Pod's network"
    from_status = inspect.render_table(_rows(_world()))
    assert "192.0.2.10 " in from_status and footnote in from_status
    from_netns = inspect.render_table(
        _rows(_world(), netns={"dra0": ["192.0.2.77/24"], "dra1": ["198.51.100.77/24"]})
    )
    assert "(IPs from netns)" in from_netns and footnote not in from_netns


def test_unreadable_netns_is_one_line_naming_the_path_and_the_reason() -> None:
    with pytest.raises(inspect.NetnsUnreadable) as caught:
        inspect.read_netns("/nonexistent/sriov-dra-netns")
    assert str(caught.value).startswith("cannot read network namespace /nonexistent/sriov-dra-netns: ")
    assert "No such file or directory" in caught.value.reason and "\n" not in str(caught.value)


def test_inspect_command_exits_2_with_one_line_when_the_netns_cannot_be_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    from types import SimpleNamespace

    from sriov_dra.kube import client as kube_client

    monkeypatch.setattr(kube_client, "from_kubeconfig", lambda path: SimpleNamespace(close=lambda: None))
    monkeypatch.setattr(objects, "Objects", lambda api, field_manager: None)

    def unreadable(*_a: Any, **_k: Any) -> Any:
        raise inspect.NetnsUnreadable("/bad", "nsenter: cannot open /bad: Permission denied")

    monkeypatch.setattr(inspect, "inspect_pod", unreadable)
    args = SimpleNamespace(
        kubeconfig=str(tmp_path / "kc"), namespace="ai", pod="p", netns="/bad", output="table"
    )
    assert inspect.run(args) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "sriov-dra inspect: cannot read network namespace /bad: nsenter: cannot open /bad: Permission denied\n"
    )


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
    rows = _rows(_with_network_data(_world()))
    assert [(r.ips, r.ip_origin, r.mac, r.claim_ips) for r in rows] == [
        (("192.0.2.10/24",), "claim networkData", "02:00:00:00:00:00", ("192.0.2.10/24",)),
        (("198.51.100.10/24",), "claim networkData", "02:00:00:00:00:01", ("198.51.100.10/24",)),
    ]
    assert all(r.ok and r.checks["networkDataInterface"] for r in rows)
    table = inspect.render_table(rows)
    assert "02:00:00:00:00:00" in table and "(IPs from claim networkData)" in table
    assert "IPs without prefix" not in table


def test_without_network_data_the_addresses_and_mac_come_from_network_status() -> None:
    world = _world()
    status = json.loads(world["pods"][0]["metadata"]["annotations"][names.NETWORK_STATUS_ANNOTATION])
    status[0]["mac"] = "02:00:00:00:00:aa"
    world["pods"][0]["metadata"]["annotations"][names.NETWORK_STATUS_ANNOTATION] = json.dumps(status)
    rows = _rows(world)
    assert [(r.ip_origin, r.mac, r.claim_ips) for r in rows] == [
        ("network-status", "02:00:00:00:00:aa", ()),
        ("network-status", "", ()),
    ]
    assert "networkDataInterface" not in rows[0].checks


def test_claim_network_data_that_differs_from_the_pod_netns_fails_its_check() -> None:
    rows = _rows(
        _with_network_data(_world()), netns={"dra0": ["192.0.2.10/24"], "dra1": ["198.51.100.99/24"]}
    )
    assert [r.checks["networkDataMatchesNetns"] for r in rows] == [True, False]
    assert "nic-1: networkDataMatchesNetns failed" in inspect.render_table(rows)


def test_claim_network_data_naming_another_interface_fails_its_check() -> None:
    world = _with_network_data(_world())
    world["resourceclaims"][0]["status"]["devices"][1]["networkData"]["interfaceName"] = "dra9"
    first = _rows(world)[0]
    assert first.checks["networkDataInterface"] is False and not first.ok


# --- bugs the strict types showed (each crashed `sriov-dra inspect` with a traceback) -----------------


def test_source_nad_whose_config_is_not_a_json_object_makes_no_name_check_and_no_traceback() -> None:
    world = _world()
    world["network-attachment-definitions"][0]["spec"]["config"] = "[]"
    first = _rows(world)[0]
    assert "networkNamePreserved" not in first.checks and first.shadow


@pytest.mark.parametrize("config", ["{not json", "[1, 2]"], ids=["unparseable", "array"])
def test_shadow_whose_config_is_not_a_json_object_is_a_failed_row_not_a_traceback(config: str) -> None:
    world = _world()
    world["network-attachment-definitions"][2]["spec"]["config"] = config
    first = _rows(world)[0]
    assert first.shadow and first.subnet == "" and first.checks["deviceIdIsVf"] is False and not first.ok


@pytest.mark.parametrize(
    "ipam",
    [{"ranges": {"a": 1}}, {"ranges": [5]}, {"ranges": [{"subnet": "10.0.0.0/8"}]}],
    ids=["ranges-object", "ranges-of-numbers", "ranges-not-nested"],
)
def test_rail_subnet_of_malformed_host_local_ranges_is_empty_not_a_traceback(ipam: dict[str, Any]) -> None:
    assert inspect._subnet({"ipam": ipam}) == ""
