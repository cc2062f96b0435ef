"""host.pod_metadata_files: the guard finds a Pod's metadata files by claim UID and rewrites them."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from sriov_dra.core import metadata_document as md
from sriov_dra.host import pod_metadata_files
from sriov_dra_rules import errors

CLAIM = "0b1e8d2c-3f4a-4b5c-8d6e-7f8091a2b3c4"
OTHER = "0b1e8d2c-3f4a-4b5c-8d6e-7f8091a2b3c5"
NET = md.NetworkData("dra0", ("192.0.2.5/24",), "02:00:00:00:00:0a")
PCI = "0000:03:00.1"


def write(data_dir: Path, namespace: str, claim: str, request: str, uid: str) -> Path:
    doc = {
        "apiVersion": md.API_VERSION,
        "kind": md.KIND,
        "metadata": {"name": claim, "namespace": namespace, "uid": uid, "generation": 1},
        "requests": [
            {
                "name": request,
                "devices": [
                    {
                        "driver": "d",
                        "pool": "p",
                        "name": "vf-0",
                        "attributes": {"resource.kubernetes.io/pciBusID": {"string": PCI}},
                    }
                ],
            }
        ],
    }
    path = data_dir / "dra-device-metadata" / f"{namespace}_{claim}" / request / "metadata.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(md.encode(doc))
    return path


def fill(doc: Any) -> dict[str, object] | None:
    return md.with_network_data(doc, {PCI: NET})


def test_the_files_of_the_pods_claims_are_found_by_claim_uid_in_its_namespace_only(tmp_path: Path) -> None:
    mine = [write(tmp_path, "ns-a", "c", "nic-0", CLAIM), write(tmp_path, "ns-a", "c", "nic-1", CLAIM)]
    write(tmp_path, "ns-a", "d", "nic", OTHER)
    write(tmp_path, "ns-ab", "c", "nic", CLAIM)
    files = pod_metadata_files.PodMetadataFiles(tmp_path)
    assert files.claim_files("ns-a", {CLAIM}) == mine
    assert files.claim_files("ns-b", {CLAIM}) == []
    assert pod_metadata_files.PodMetadataFiles(tmp_path / "absent").claim_files("ns-a", {CLAIM}) == []


def test_update_replaces_the_file_whole_keeping_what_the_plugin_wrote(tmp_path: Path) -> None:
    path = write(tmp_path, "ns-a", "c", "nic", CLAIM)
    before = json.loads(path.read_bytes())
    files = pod_metadata_files.PodMetadataFiles(tmp_path)
    assert files.update(path, fill)
    after = json.loads(path.read_bytes())
    assert after["requests"][0]["devices"][0]["networkData"] == NET.to_json()
    del after["requests"][0]["devices"][0]["networkData"]
    assert after == {**before, "metadata": {**before["metadata"], "generation": 2}}
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert not files.update(path, fill), "the same data again writes nothing"
    assert sorted(p.name for p in path.parent.iterdir()) == ["metadata.json"], "no temporary left"


def test_a_file_that_does_not_decode_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = write(tmp_path, "ns-a", "c", "nic", CLAIM)
    path.write_bytes(b'{"edited": true}\n')
    files = pod_metadata_files.PodMetadataFiles(tmp_path)
    with pytest.raises(errors.ContractViolation, match="not a DeviceMetadata document"):
        files.update(path, fill)
    with pytest.raises(errors.ContractViolation):
        files.claim_files("ns-a", {CLAIM})
    assert path.read_bytes() == b'{"edited": true}\n'


def test_a_file_removed_by_an_unprepare_is_not_recreated(tmp_path: Path) -> None:
    path = write(tmp_path, "ns-a", "c", "nic", CLAIM)
    files = pod_metadata_files.PodMetadataFiles(tmp_path)
    path.unlink()
    assert not files.update(path, fill)
    path.parent.rmdir()
    assert not files.update(path, fill)
    assert not path.parent.exists()


def test_update_waits_for_the_request_lock_another_writer_holds(tmp_path: Path) -> None:
    path = write(tmp_path, "ns-a", "c", "nic", CLAIM)
    files = pod_metadata_files.PodMetadataFiles(tmp_path)
    done = threading.Event()
    with pod_metadata_files.request_lock(path.parent):
        worker = threading.Thread(target=lambda: (files.update(path, fill), done.set()))
        worker.start()
        assert not done.wait(0.3), "update ran while the lock was held"
        held = path.read_bytes()
    worker.join(timeout=10)
    assert done.is_set() and path.read_bytes() != held
