"""lab pod_metadata: the demo's METADATA column, each row's VF as its request's device metadata file lists it."""

from __future__ import annotations

from sriov_dra.core import metadata_document
from sriov_dra_lab import pod_metadata

DRIVER = "sriovnetwork.k8snetworkplumbingwg.io"
UID = "0b1e8d2c-3f4a-4b5c-8d6e-7f8091a2b3c4"


def _claim(**annotations: str) -> dict[str, object]:
    results = [
        {"request": "gpu-0", "driver": "gpu.nvidia.com", "pool": "n", "device": "gpu-0"},
        {"request": "nic-0", "driver": DRIVER, "pool": "n", "device": "vf-a"},
        {"request": "nic-1/large", "driver": DRIVER, "pool": "n", "device": "vf-b"},
    ]
    return {
        "metadata": {"namespace": "ai", "name": "pod-devices-x1", "uid": UID, "annotations": annotations},
        "status": {"allocation": {"devices": {"results": results}}},
    }


def test_the_container_paths_are_the_helpers_for_this_drivers_requests_only() -> None:
    root = "/var/run/kubernetes.io/dra-device-attributes"
    assert pod_metadata.container_paths(_claim()) == {
        "nic-0": f"{root}/resourceclaims/pod-devices-x1/nic-0/{DRIVER}-metadata.json",
        "nic-1": f"{root}/resourceclaims/pod-devices-x1/nic-1/{DRIVER}-metadata.json",
    }
    templated = pod_metadata.container_paths(_claim(**{"resource.kubernetes.io/pod-claim-name": "devices"}))
    assert templated["nic-0"] == f"{root}/resourceclaimtemplates/devices/nic-0/{DRIVER}-metadata.json"


def _text(network_data: dict[str, object] | None) -> str:
    device: dict[str, object] = {"driver": DRIVER, "pool": "n", "name": "vf-a"}
    if network_data is not None:
        device["networkData"] = network_data
    doc = {
        "apiVersion": metadata_document.API_VERSION,
        "kind": metadata_document.KIND,
        "metadata": {"name": "c", "namespace": "ai", "uid": UID, "generation": 2},
        "requests": [{"name": "nic-0", "devices": [device]}],
    }
    return metadata_document.encode(doc).decode()


def test_a_cell_shows_the_vfs_network_data_and_generation_or_why_there_is_none() -> None:
    data = {"interfaceName": "dra0", "ips": ["192.0.2.5/24"], "hardwareAddress": "02:00:00:00:00:0a"}
    assert pod_metadata.cell(pod_metadata.device_entry(_text(data), "vf-a")) == (
        "dra0 192.0.2.5/24 02:00:00:00:00:0a gen 2"
    )
    assert pod_metadata.cell(pod_metadata.device_entry(_text(None), "vf-a")) == "(no networkData) gen 2"
    assert pod_metadata.device_entry(_text(data), "vf-z") is None
    assert pod_metadata.device_entry('{"edited": true}', "vf-a") is None
    assert pod_metadata.cell(pod_metadata.device_entry(None, "vf-a")) == "(no file)"


def test_the_column_goes_after_the_widest_row_and_leaves_the_lines_below_the_rows_alone() -> None:
    table = "Pod ai/p on node n: claim c\nREQUEST  IF\nnic-0    dra0\nnic-1    dra1-long\nchecks passed: x"
    out = pod_metadata.with_column(table, 2, "METADATA", ["a", "b"]).splitlines()
    assert out == [
        "Pod ai/p on node n: claim c",
        "REQUEST  IF         METADATA",
        "nic-0    dra0       a",
        "nic-1    dra1-long  b",
        "checks passed: x",
    ]
    assert pod_metadata.with_column("(no SR-IOV devices allocated to this Pod)", 0, "M", []) == (
        "(no SR-IOV devices allocated to this Pod)"
    )
