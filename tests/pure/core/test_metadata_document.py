"""core.metadata_document: the file's document as both its writers (plugin and guard) edit it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import metadata_document as md
from sriov_dra_rules import errors

DRIVER = "sriovnetwork.k8snetworkplumbingwg.io"
UID = "0b1e8d2c-3f4a-4b5c-8d6e-7f8091a2b3c4"
PCI_A, PCI_B = "0000:03:00.1", "0000:80:00.1"
NET_A = md.NetworkData("dra0", ("192.0.2.5/24",), "02:00:00:00:00:0a")
NET_B = md.NetworkData("dra1", ("198.51.100.7/24", "2001:db8::7/64"), "02:00:00:00:00:0b")


def device(name: str, pci: str | None, key: str = "resource.kubernetes.io/pciBusID") -> dict[str, Any]:
    attrs = {f"{DRIVER}/interfaceName": {"string": "dra0"}}
    if pci is not None:
        attrs[key] = {"string": pci}
    return {"driver": DRIVER, "pool": "node-a", "name": name, "attributes": attrs}


def doc(*devices: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": md.API_VERSION,
        "kind": md.KIND,
        "metadata": {"name": "c", "namespace": "ns-a", "uid": UID, "generation": generation},
        "requests": [{"name": "nic", "devices": list(devices)}],
    }


def test_decode_reads_what_encode_wrote() -> None:
    d = doc(device("vf-0", PCI_A))
    assert md.decode(md.encode(d), source="f") == d
    assert md.claim_uid(d) == UID


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b"{", "$"),
        (b'{"a": 1, "a": 2}', "$.a"),
        (b"[]", "$"),
        (json.dumps({**doc(), "apiVersion": "v2"}).encode(), "apiVersion"),
        (json.dumps({**doc(), "metadata": {"generation": 1}}).encode(), "metadata.uid"),
        (json.dumps({**doc(), "metadata": {"uid": UID, "generation": "1"}}).encode(), "metadata.generation"),
        (json.dumps({**doc(), "requests": [{"devices": [1]}]}).encode(), "requests[0].devices"),
        (b"\xff", "$"),
    ],
)
def test_a_file_that_is_not_our_document_is_a_contract_violation_naming_the_field(
    raw: bytes, field: str
) -> None:
    with pytest.raises(errors.ContractViolation) as info:
        md.decode(raw, source="/data/f.json")
    assert "/data/f.json" in str(info.value)
    assert any(e.path == field or e.path.startswith(field) for e in info.value.errors), info.value.errors


def test_network_data_goes_on_the_devices_matched_by_pci_address_and_bumps_the_generation() -> None:
    d = doc(device("vf-0", PCI_A), device("vf-1", PCI_B, key=f"{DRIVER}/pciAddress"), device("vf-2", None))
    before = copy.deepcopy(d)
    new = md.with_network_data(d, {PCI_A: NET_A, PCI_B: NET_B, "0000:99:00.1": NET_A})
    assert d == before, "the input is not edited"
    assert new is not None
    assert new["metadata"]["generation"] == 2  # type: ignore[index]
    listed = new["requests"][0]["devices"]  # type: ignore[index]
    assert [x.get("networkData") for x in listed] == [NET_A.to_json(), NET_B.to_json(), None]
    assert [x["attributes"] for x in listed] == [x["attributes"] for x in d["requests"][0]["devices"]]
    assert md.with_network_data(new, {PCI_A: NET_A}) is None, "the same data again changes nothing"
    assert md.with_network_data(d, {"0000:99:00.1": NET_A}) is None


def test_network_data_uses_the_resource_v1_field_names_and_omits_empty_ones() -> None:
    assert NET_A.to_json() == {
        "interfaceName": "dra0",
        "ips": ["192.0.2.5/24"],
        "hardwareAddress": "02:00:00:00:00:0a",
    }
    assert md.NetworkData("dra0", (), "").to_json() == {"interfaceName": "dra0"}


networks = st.none() | st.sampled_from([NET_A, NET_B])


@given(st.lists(networks, min_size=1, max_size=4), st.integers(min_value=1, max_value=2**40), st.booleans())
def test_property_a_repeated_prepare_keeps_the_network_part_and_bumps_the_generation_only_on_change(
    held: list[md.NetworkData | None], generation: int, attributes_changed: bool
) -> None:
    names = [f"vf-{i}" for i in range(len(held))]
    old = doc(*(device(n, f"0000:03:00.{i}") for i, n in enumerate(names)), generation=generation)
    for entry, net in zip(old["requests"][0]["devices"], held, strict=True):
        if net is not None:
            entry["networkData"] = net.to_json()
    fresh = doc(*(device(n, f"0000:03:00.{i}") for i, n in enumerate(names)))
    if attributes_changed:
        fresh["requests"][0]["devices"][0]["attributes"]["x.io/new"] = {"int": 1}
    kept = md.keep_network_data(fresh, old)
    listed = kept["requests"][0]["devices"]  # type: ignore[index]
    assert [x.get("networkData") for x in listed] == [n.to_json() if n else None for n in held]
    assert kept["metadata"]["generation"] == generation + (1 if attributes_changed else 0)  # type: ignore[index]
    assert (kept == old) is not attributes_changed


def test_a_device_the_old_file_did_not_list_gets_no_network_data() -> None:
    old = doc(device("vf-0", PCI_A))
    old["requests"][0]["devices"][0]["networkData"] = NET_A.to_json()
    kept = md.keep_network_data(doc(device("vf-9", PCI_A)), old)
    assert "networkData" not in kept["requests"][0]["devices"][0]  # type: ignore[index]
    assert kept["metadata"]["generation"] == 2  # type: ignore[index]
