"""core.plugin.device_metadata: the KEP-5304 file, its paths and its CDI mount, as Kubernetes 1.36 lays them out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import attributes, metadata_document
from sriov_dra.core.plugin import cdi_spec
from sriov_dra.core.plugin import device_metadata as dm
from sriov_dra_rules import errors

DRIVER = "sriovnetwork.k8snetworkplumbingwg.io"
UID = "0b1e8d2c-3f4a-4b5c-8d6e-7f8091a2b3c4"

labels = st.from_regex(r"[a-z]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
attr_values = st.one_of(
    st.text(max_size=30).map(attributes.string_value),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(attributes.int_value),
    st.booleans().map(attributes.bool_value),
)
attr_maps = st.dictionaries(
    st.builds(
        lambda d, n: f"{d}.io/{n}", labels, st.from_regex(r"[a-zA-Z][a-zA-Z0-9]{0,20}", fullmatch=True)
    ),
    attr_values,
    max_size=6,
)
network = st.builds(
    metadata_document.NetworkData,
    interface_name=st.from_regex(r"[a-z][a-z0-9]{0,14}", fullmatch=True),
    ips=st.lists(st.ip_addresses(v=4).map(lambda a: f"{a}/24"), max_size=3).map(tuple),
    hardware_address=st.just("02:00:00:00:00:01"),
)
devices = st.builds(
    dm.MetadataDevice,
    driver=st.just(DRIVER),
    pool=labels,
    name=labels,
    attributes=attr_maps,
    network_data=st.none() | network,
)
claims = st.builds(
    dm.ClaimIdentity,
    namespace=labels,
    name=labels,
    uid=st.uuids().map(str),
    pod_claim_name=st.none() | labels,
)
requests = st.one_of(labels, st.builds(lambda a, b: f"{a}/{b}", labels, labels))


@given(claims, requests, st.lists(devices, max_size=4))
def test_property_the_file_is_one_json_document_with_the_v1alpha1_schema_and_every_device_round_trips(
    claim: dm.ClaimIdentity, request: str, listed: list[dm.MetadataDevice]
) -> None:
    raw = metadata_document.encode(dm.document(claim, request, listed))
    assert raw.endswith(b"\n")
    doc = json.loads(raw)
    assert metadata_document.decode(raw, source="f") == doc
    assert doc["apiVersion"] == "metadata.resource.k8s.io/v1alpha1"
    assert doc["kind"] == "DeviceMetadata"
    assert doc["metadata"] == {
        "name": claim.name,
        "namespace": claim.namespace,
        "uid": claim.uid,
        "generation": 1,
    }
    assert doc.get("podClaimName") == claim.pod_claim_name
    assert [r["name"] for r in doc["requests"]] == [request]
    written = doc["requests"][0]["devices"]
    assert [(d["driver"], d["pool"], d["name"]) for d in written] == [
        (d.driver, d.pool, d.name) for d in listed
    ]
    for entry, device in zip(written, listed, strict=True):
        assert entry.get("attributes", {}) == {k: v.to_json() for k, v in device.attributes.items()}
        assert list(entry.get("attributes", {})) == sorted(device.attributes)
        net = device.network_data.to_json() if device.network_data is not None else {}
        assert entry.get("networkData", {}) == net
        assert set(net) <= {"interfaceName", "ips", "hardwareAddress"}
        assert (device.network_data is None) == ("networkData" not in entry)


@given(claims, requests)
def test_property_paths_and_cdi_names_follow_the_helper_layout_and_load_as_cdi(
    claim: dm.ClaimIdentity, request: str
) -> None:
    top = request.split("/", 1)[0]
    parts = dm.host_file_parts(claim.namespace, claim.name, request)
    assert parts == ("dra-device-metadata", f"{claim.namespace}_{claim.name}", top, "metadata.json")
    sub, named = (
        ("resourceclaimtemplates", claim.pod_claim_name)
        if claim.pod_claim_name is not None
        else ("resourceclaims", claim.name)
    )
    expected = f"/var/run/kubernetes.io/dra-device-attributes/{sub}/{named}/{top}/{DRIVER}-metadata.json"
    assert dm.container_path(claim, request, DRIVER) == expected
    assert dm.cdi_device_id(DRIVER, claim.uid, request) == f"{DRIVER}/metadata={claim.uid}_{top}"
    assert dm.cdi_spec_file_name(DRIVER, claim.uid, request) == f"{DRIVER}_metadata_{claim.uid}_{top}.json"
    assert dm.cdi_spec_file_name(DRIVER, claim.uid, request).startswith(
        dm.cdi_spec_file_prefix(DRIVER, claim.uid)
    )
    spec = dm.mount_spec(DRIVER, claim, request, "/var/lib/kubelet/plugins/x/" + "/".join(parts))
    assert cdi_spec.spec_problems(spec) == []
    mount = spec["devices"][0]["containerEdits"]["mounts"][0]  # type: ignore[index]
    assert mount["containerPath"] == expected
    assert mount["options"] == ["ro", "bind"]
    assert spec["cdiVersion"] == "0.5.0"
    assert spec["kind"] == f"{DRIVER}/metadata"


def test_claim_identity_reads_the_pod_claim_name_annotation_and_not_the_claims_generation() -> None:
    claim = {
        "metadata": {
            "namespace": "ns-a",
            "name": "pod-gpu-nic-abcde",
            "uid": UID,
            "generation": 3,
            "annotations": {"resource.kubernetes.io/pod-claim-name": "pairs"},
        }
    }
    assert dm.claim_identity(claim) == dm.ClaimIdentity("ns-a", "pod-gpu-nic-abcde", UID, "pairs")
    plain = {"metadata": {"namespace": "ns-a", "name": "c", "uid": UID}}
    assert dm.claim_identity(plain) == dm.ClaimIdentity("ns-a", "c", UID, None)


def test_a_claim_without_uid_names_the_missing_field() -> None:
    with pytest.raises(errors.ContractViolation) as info:
        dm.claim_identity({"metadata": {"namespace": "ns-a", "name": "c"}})
    assert "metadata.uid" in str(info.value.errors)


@pytest.mark.parametrize(
    ("namespace", "name", "request_name"),
    [("../x", "c", "r"), ("ns", "a/b", "r"), ("ns", "c", "../r"), ("ns", "c", "R")],
)
def test_names_that_would_leave_the_metadata_directory_are_refused(
    namespace: str, name: str, request_name: str
) -> None:
    with pytest.raises(errors.ContractViolation):
        dm.host_file_parts(namespace, name, request_name)


def test_network_data_uses_the_resource_v1_field_names() -> None:
    net = metadata_document.NetworkData("dra0", ("192.0.2.5/24",), "02:00:00:00:00:01")
    assert dm.MetadataDevice(DRIVER, "node-a", "0000-03-02-0", network_data=net).to_json() == {
        "driver": DRIVER,
        "pool": "node-a",
        "name": "0000-03-02-0",
        "networkData": {
            "interfaceName": "dra0",
            "ips": ["192.0.2.5/24"],
            "hardwareAddress": "02:00:00:00:00:01",
        },
    }


def test_a_mount_with_a_relative_path_is_refused_by_the_cdi_checker() -> None:
    spec = dm.mount_spec(DRIVER, dm.ClaimIdentity("ns", "c", UID), "r", "relative/metadata.json")
    problems = cdi_spec.spec_problems(spec)
    assert [p.path for p in problems] == ["devices[0].containerEdits.mounts[0].hostPath"]
