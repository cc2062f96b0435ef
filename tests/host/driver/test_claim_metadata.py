"""Device metadata files at prepare and unprepare, on a fake-sysfs node with a FAKE claim API.

The files, the CDI mount specs and the kubelet answer are real (``host.device_metadata_files``
under a temporary plugin data dir and CDI root); the claim API is the fake of
``tests.fakes.claims_api``, as in ``test_prepare_handler.py``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from tests.fakes import claims_api as fx
from tests.host.driver.test_prepare_handler import DEV0, DEV1, VF0, Node, add_claim

from sriov_dra.core import metadata_document
from sriov_dra.core.plugin import cdi_spec
from sriov_dra.driver import prepare
from sriov_dra.host import device_metadata_files, pod_metadata_files
from sriov_dra.kubeletapi import messages

MOUNT_KIND = f"{fx.DRIVER}/metadata"


def with_metadata(node: Node, tmp_path: Path) -> device_metadata_files.DeviceMetadataFiles:
    files = device_metadata_files.DeviceMetadataFiles(
        tmp_path / "plugins" / fx.DRIVER, node.cdi.root, fx.DRIVER
    )
    node.ctx = dataclasses.replace(node.ctx, metadata=files)
    node.handler = prepare.DraHandler(node.ctx)
    return files


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def read(files: device_metadata_files.DeviceMetadataFiles, request: str, name: str = "vf-claim") -> Any:
    raw = files.read("ns-a", name, request)
    assert raw is not None
    return json.loads(raw)


def test_prepare_writes_one_file_per_request_with_the_published_attributes_and_mounts_it(
    node: Node, tmp_path: Path
) -> None:
    files = with_metadata(node, tmp_path)
    claim = add_claim(node, [fx.result(DEV0, "nic-0"), fx.result(DEV1, "nic-1/large")])
    out = node.prepare(claim)[fx.CLAIM_UID]
    assert isinstance(out, messages.Prepared)
    ids = {d.device_name: d.cdi_device_ids for d in out.devices}
    assert ids[DEV0][-1] == f"{MOUNT_KIND}={fx.CLAIM_UID}_nic-0"
    assert ids[DEV1][-1] == f"{MOUNT_KIND}={fx.CLAIM_UID}_nic-1"
    doc = read(files, "nic-1")
    assert doc["apiVersion"] == "metadata.resource.k8s.io/v1alpha1"
    assert doc["metadata"] == {"name": "vf-claim", "namespace": "ns-a", "uid": fx.CLAIM_UID, "generation": 1}
    assert doc["requests"][0]["name"] == "nic-1/large"
    (device,) = doc["requests"][0]["devices"]
    assert (device["driver"], device["pool"], device["name"]) == (fx.DRIVER, fx.NODE, DEV1)
    published = node.inventory.vfs()[DEV1].attributes
    assert {k: v for k, v in device["attributes"].items() if k in published} == {
        k: v.to_json() for k, v in published.items()
    }
    assert "networkData" not in device
    host_file = files.file_path("ns-a", "vf-claim", "nic-0")
    assert oct(host_file.stat().st_mode & 0o777) == "0o644"
    assert oct(host_file.parent.stat().st_mode & 0o777) == "0o755"
    spec = json.loads(files.spec_path(fx.CLAIM_UID, "nic-0").read_text())
    assert cdi_spec.spec_problems(spec) == []
    assert spec["devices"][0]["containerEdits"]["mounts"] == [
        {
            "hostPath": str(host_file),
            "containerPath": "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/vf-claim/nic-0/"
            f"{fx.DRIVER}-metadata.json",
            "options": ["ro", "bind"],
        }
    ]


def test_two_devices_of_one_request_share_one_file_and_only_the_first_carries_the_mount(
    node: Node, tmp_path: Path
) -> None:
    files = with_metadata(node, tmp_path)
    claim = add_claim(node, [fx.result(DEV0, "nics"), fx.result(DEV1, "nics")])
    out = node.prepare(claim)[fx.CLAIM_UID]
    assert isinstance(out, messages.Prepared)
    first, second = out.devices
    assert first.cdi_device_ids[-1] == f"{MOUNT_KIND}={fx.CLAIM_UID}_nics"
    assert not any(i.startswith(MOUNT_KIND) for i in second.cdi_device_ids)
    assert [d["name"] for d in read(files, "nics")["requests"][0]["devices"]] == [DEV0, DEV1]


def test_the_interface_name_the_vf_gets_is_in_the_attributes(node: Node, tmp_path: Path) -> None:
    files = with_metadata(node, tmp_path)
    claim = add_claim(node, [fx.result(DEV0, "nic")], configs=[fx.config(fx.vf_config(ifName="net7"))])
    node.prepare(claim)
    attrs = read(files, "nic")["requests"][0]["devices"][0]["attributes"]
    assert attrs[f"{fx.DRIVER}/interfaceName"] == {"string": "net7"}
    assert attrs["resource.kubernetes.io/pciBusID"] == {"string": VF0}


def test_a_metadata_write_failure_never_fails_the_prepare_and_leaves_the_request_without_a_mount(
    node: Node, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    files = with_metadata(node, tmp_path)
    blocker = tmp_path / "plugins" / fx.DRIVER / "dra-device-metadata"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("a file where the directory belongs")
    claim = add_claim(node, [fx.result(DEV0, "nic")])
    out = node.prepare(claim)[fx.CLAIM_UID]
    assert isinstance(out, messages.Prepared)
    assert not any(i.startswith(MOUNT_KIND) for d in out.devices for i in d.cdi_device_ids)
    assert not files.spec_path(fx.CLAIM_UID, "nic").exists()
    assert any(r.getMessage() == "device metadata not written" for r in caplog.records)


def test_a_repeated_prepare_leaves_the_file_untouched(node: Node, tmp_path: Path) -> None:
    files = with_metadata(node, tmp_path)
    claim = add_claim(node, [fx.result(DEV0, "nic")])
    first = node.prepare(claim)
    path = files.file_path("ns-a", "vf-claim", "nic")
    before = path.stat()
    assert node.prepare(claim) == first
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_unprepare_removes_the_files_and_the_mount_specs_and_nothing_of_another_claim(
    node: Node, tmp_path: Path
) -> None:
    files = with_metadata(node, tmp_path)
    other_uid = "c1a1c1a1-0000-4000-8000-000000000002"
    claim = add_claim(node, [fx.result(DEV0, "nic")])
    other = add_claim(node, [fx.result(DEV1, "nic")], uid=other_uid, name="other")
    node.prepare(claim, other)
    assert node.unprepare(claim) == {fx.CLAIM_UID: None}
    assert not files.claim_dir("ns-a", "vf-claim").exists()
    assert not files.spec_path(fx.CLAIM_UID, "nic").exists()
    assert files.read("ns-a", "other", "nic") is not None
    assert files.spec_path(other_uid, "nic").exists()


def test_a_failed_removal_fails_the_unprepare_and_keeps_the_record_until_a_retry_removes_it(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = with_metadata(node, tmp_path)
    claim = add_claim(node, [fx.result(DEV0, "nic")])
    node.prepare(claim)

    def refuse(path: object) -> None:  # FAKE: the file system refuses the removal
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(device_metadata_files.shutil, "rmtree", refuse)
    out = node.unprepare(claim)
    assert isinstance(out[fx.CLAIM_UID], messages.ClaimError)
    assert "Permission denied" in out[fx.CLAIM_UID].message
    assert node.store.snapshot_claim(fx.CLAIM_UID) is not None
    monkeypatch.undo()
    assert node.unprepare(claim) == {fx.CLAIM_UID: None}
    assert not files.claim_dir("ns-a", "vf-claim").exists()
    assert node.store.snapshot_claim(fx.CLAIM_UID) is None


def test_a_repeated_prepare_keeps_the_network_data_the_guard_wrote_and_leaves_the_file_untouched(
    node: Node, tmp_path: Path
) -> None:
    files = with_metadata(node, tmp_path)
    claim = add_claim(node, [fx.result(DEV0, "nic")])
    node.prepare(claim)
    path = files.file_path("ns-a", "vf-claim", "nic")
    net = metadata_document.NetworkData("dra0", ("192.0.2.5/24",), "02:00:00:00:00:0a")
    pci = read(files, "nic")["requests"][0]["devices"][0]["attributes"]["resource.kubernetes.io/pciBusID"]
    guard = pod_metadata_files.PodMetadataFiles(tmp_path / "plugins" / fx.DRIVER)
    assert guard.claim_files("ns-a", {fx.CLAIM_UID}) == [path]
    assert guard.update(path, lambda doc: metadata_document.with_network_data(doc, {pci["string"]: net}))
    filled, inode = path.read_bytes(), path.stat().st_ino
    assert json.loads(filled)["metadata"]["generation"] == 2

    node.prepare(claim)
    assert path.read_bytes() == filled and path.stat().st_ino == inode
    assert read(files, "nic")["requests"][0]["devices"][0]["networkData"] == net.to_json()


GPU_DRIVER = "gpu.example.com"
ROOT = "resource.kubernetes.io/pcieRoot"


def paired_claim(node: Node, configs: list[dict[str, object]] | None = None) -> messages.ClaimRef:
    """gpu-0 with nic-0 (an RDMA VF) and gpu-1 with nic-1 (no RDMA), each pair by pcieRoot."""
    results = [
        {"request": "gpu-0", "driver": GPU_DRIVER, "pool": fx.NODE, "device": "gpu-3"},
        fx.result(DEV0, "nic-0"),
        {"request": "gpu-1", "driver": GPU_DRIVER, "pool": fx.NODE, "device": "gpu-0"},
        fx.result(DEV1, "nic-1"),
    ]
    ref = add_claim(
        node, results, configs=configs or [fx.config(fx.vf_config(ifName="dra0"), requests=["nic-0"])]
    )
    claim = node.api.stored("ns-a", "vf-claim")
    claim["spec"]["devices"]["constraints"] = [
        {"requests": ["gpu-0", "nic-0"], "matchAttribute": ROOT},
        {"requests": ["gpu-1", "nic-1"], "matchAttribute": ROOT},
    ]
    return ref


def rdma(node: Node, bdf: str, name: str) -> None:
    (node.fake.sysfs.pci_device_dir(bdf) / "infiniband" / name).mkdir(parents=True)


def test_a_paired_rdma_vf_gets_the_exact_nccl_variables_and_every_vf_its_gpu_in_the_file(
    node: Node, tmp_path: Path
) -> None:
    files = with_metadata(node, tmp_path)
    rdma(node, VF0, "mlx5_3")
    node.prepare(paired_claim(node))
    for request in ("nic-0", "nic-1"):
        spec = json.loads(files.spec_path(fx.CLAIM_UID, request).read_text())
        assert spec["devices"][0]["containerEdits"]["env"] == [
            "NCCL_IB_HCA==mlx5_3",
            "NCCL_SOCKET_IFNAME==dra0",
        ]
    nic0 = read(files, "nic-0")["requests"][0]["devices"][0]["attributes"]
    assert nic0[f"{fx.DRIVER}/rdmaDevice"] == {"string": "mlx5_3"}
    assert nic0[f"{fx.DRIVER}/pairedGpu"] == {"string": f"{GPU_DRIVER}/{fx.NODE}/gpu-3"}
    assert nic0[f"{fx.DRIVER}/pairedGpuRequest"] == {"string": "gpu-0"}
    assert nic0[f"{fx.DRIVER}/pairedBy"] == {"string": ROOT}
    nic1 = read(files, "nic-1")["requests"][0]["devices"][0]["attributes"]
    assert nic1[f"{fx.DRIVER}/pairedGpu"] == {"string": f"{GPU_DRIVER}/{fx.NODE}/gpu-0"}
    assert f"{fx.DRIVER}/rdmaDevice" not in nic1


def test_without_an_rdma_vf_no_nccl_variable_is_set(node: Node, tmp_path: Path) -> None:
    files = with_metadata(node, tmp_path)
    node.prepare(paired_claim(node))
    spec = json.loads(files.spec_path(fx.CLAIM_UID, "nic-0").read_text())
    assert "env" not in spec["devices"][0]["containerEdits"]


def test_disable_nccl_hints_in_a_vfconfig_turns_the_variables_off_and_keeps_the_map(
    node: Node, tmp_path: Path
) -> None:
    files = with_metadata(node, tmp_path)
    rdma(node, VF0, "mlx5_3")
    node.prepare(paired_claim(node, [fx.config(fx.vf_config(disableNcclHints=True))]))
    spec = json.loads(files.spec_path(fx.CLAIM_UID, "nic-0").read_text())
    assert "env" not in spec["devices"][0]["containerEdits"]
    nic0 = read(files, "nic-0")["requests"][0]["devices"][0]["attributes"]
    assert nic0[f"{fx.DRIVER}/pairedGpu"] == {"string": f"{GPU_DRIVER}/{fx.NODE}/gpu-3"}
