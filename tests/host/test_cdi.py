"""Tests for sriov_dra.host.cdi: claim and Pod-global CDI spec files under a CDI root."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from tests.fakes import cdi_files
from tests.fakes import checkpoint_records as fx

from sriov_dra.core.plugin import cdi_spec
from sriov_dra.core.plugin import checkpoint_lifecycle as lifecycle
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.host import cdi, checkpoint
from sriov_dra_rules import checkpoint_doc, errors

P = model.Phase
VF0 = cdi_spec.VfEdits(device=fx.device_name(0), pci_address=fx.pci(0), net_attach_def_name="rail-a-net")
VF1 = cdi_spec.VfEdits(device=fx.device_name(1), pci_address=fx.pci(1), vfio_group="17")


class RecordingWrite:
    def __init__(self) -> None:
        self.paths: list[Path] = []
        self.fail = False

    def __call__(self, path: Path, data: bytes) -> None:
        self.paths.append(path)
        if self.fail:
            raise OSError(30, "Read-only file system")
        cdi.default_write(path, data)


@pytest.fixture
def write() -> RecordingWrite:
    return RecordingWrite()


@pytest.fixture
def specs(tmp_path: Path, write: RecordingWrite) -> cdi.CdiSpecs:
    s = cdi.CdiSpecs(tmp_path / "cdi", write=write)
    s.ensure_root()
    return s


def load(path: Path) -> dict[str, object]:
    doc: dict[str, object] = json.loads(path.read_bytes())
    return doc


def test_default_root_is_the_dynamic_cdi_directory() -> None:
    assert cdi.CdiSpecs().root == Path("/var/run/cdi")


def test_claim_spec_file_is_named_by_claim_uid_and_loadable(specs: cdi.CdiSpecs) -> None:
    path = specs.write_claim_spec(fx.CLAIM_1, [VF0, VF1])
    assert path == specs.root / f"sriovnetwork.k8snetworkplumbingwg.io-vf_{fx.CLAIM_1}.json"
    doc = load(path)
    assert cdi_spec.spec_problems(doc) == []
    assert doc["kind"] == "sriovnetwork.k8snetworkplumbingwg.io/vf"
    assert doc["cdiVersion"] == "0.5.0"
    names = [d["name"] for d in doc["devices"]]  # type: ignore[attr-defined]
    assert names == [f"{fx.CLAIM_1}-{fx.device_name(0)}", f"{fx.CLAIM_1}-{fx.device_name(1)}"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_claim_device_ids_resolve_to_entries_of_the_written_specs(specs: cdi.CdiSpecs) -> None:
    claim_path = specs.write_claim_spec(fx.CLAIM_1, [VF0])
    pod_path = specs.write_pod_spec(fx.POD_A, [VF0.pci_address])
    defined = {
        f"{load(p)['kind']}={d['name']}"
        for p in (claim_path, pod_path)
        for d in load(p)["devices"]  # type: ignore[attr-defined]
    }
    assert set(cdi_spec.prepared_device_ids(fx.CLAIM_1, fx.POD_A, VF0.device)) <= defined


def test_specs_are_written_without_fsync_while_the_checkpoint_write_stays_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real, real_data = os.fsync, os.fdatasync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append(fd), real_data(fd))[1])
    specs = cdi.CdiSpecs(tmp_path / "cdi")
    specs.ensure_root()
    specs.write_claim_spec(fx.CLAIM_1, [VF0])
    specs.sync_pod_spec(fx.POD_A, [fx.pci(0)])
    assert (
        calls == [] and len(cdi_files.spec_files(specs.root)) == 2
    )  # derived files: rebuilt by every prepare
    store = checkpoint.CheckpointStore(tmp_path / checkpoint_doc.CHECKPOINT_FILE_NAME)
    store.load()
    store.set_claim(fx.record())
    assert (
        len(calls) == 3
    )  # the record: load creates the slot file (file + directory), the set flushes it in place


def test_rewriting_identical_content_does_not_touch_the_file(
    specs: cdi.CdiSpecs, write: RecordingWrite
) -> None:
    path = specs.write_claim_spec(fx.CLAIM_1, [VF0])
    inode = path.stat().st_ino
    assert specs.write_claim_spec(fx.CLAIM_1, [VF0]) == path
    assert write.paths == [path]
    assert path.stat().st_ino == inode


def test_rewriting_changed_content_replaces_the_file(specs: cdi.CdiSpecs) -> None:
    path = specs.write_claim_spec(fx.CLAIM_1, [VF0])
    specs.write_claim_spec(fx.CLAIM_1, [VF0, VF1])
    assert len(load(path)["devices"]) == 2  # type: ignore[arg-type]


def test_failed_write_keeps_the_previous_spec(specs: cdi.CdiSpecs, write: RecordingWrite) -> None:
    path = specs.write_claim_spec(fx.CLAIM_1, [VF0])
    before = path.read_bytes()
    write.fail = True
    with pytest.raises(OSError, match="Read-only"):
        specs.write_claim_spec(fx.CLAIM_1, [VF0, VF1])
    assert path.read_bytes() == before


def test_invalid_input_writes_nothing(specs: cdi.CdiSpecs, write: RecordingWrite) -> None:
    with pytest.raises(errors.ContractViolation):
        specs.write_claim_spec(fx.CLAIM_1, [cdi_spec.VfEdits(device="0000-3b-02-0", pci_address="bad")])
    with pytest.raises(errors.ContractViolation):
        specs.write_claim_spec("../escape", [VF0])
    assert write.paths == []
    assert list(specs.root.iterdir()) == []


def test_remove_claim_spec_removes_and_absent_removal_succeeds(specs: cdi.CdiSpecs) -> None:
    path = specs.write_claim_spec(fx.CLAIM_1, [VF0])
    assert specs.remove_claim_spec(fx.CLAIM_1) is True
    assert not path.exists()
    assert specs.remove_claim_spec(fx.CLAIM_1) is False


def test_pod_spec_carries_sorted_pci_addresses(specs: cdi.CdiSpecs) -> None:
    path = specs.write_pod_spec(fx.POD_A, [fx.pci(1), fx.pci(0)])
    assert load(path)["devices"] == [
        {"name": fx.POD_A, "containerEdits": {"env": [f"SRIOVNETWORK_PCI_ADDRESSES={fx.pci(0)},{fx.pci(1)}"]}}
    ]


def test_pod_spec_follows_unreleased_claims_and_goes_with_the_last(specs: cdi.CdiSpecs) -> None:
    """Unprepare of one claim rebuilds the Pod spec for the other; the last release removes it."""
    first = fx.record(fx.CLAIM_1, fx.POD_A, indexes=(0,))
    second = fx.record(fx.CLAIM_2, fx.POD_A, indexes=(1,))
    path = specs.sync_pod_spec(fx.POD_A, lifecycle.pod_cdi_pci_addresses([first, second], fx.POD_A))
    assert path is not None
    assert fx.pci(0) in path.read_text() and fx.pci(1) in path.read_text()

    # Release the first claim: Deleting now, local cleanup running for it.
    first = fx.with_phase(first, P.DELETING)
    remaining = lifecycle.pod_cdi_pci_addresses([first, second], fx.POD_A, releasing=fx.CLAIM_1)
    assert specs.sync_pod_spec(fx.POD_A, remaining) == path
    assert fx.pci(0) not in path.read_text() and fx.pci(1) in path.read_text()

    # Its ReleaseComplete record (kept for finalizer work) is no longer a CDI consumer.
    first = fx.with_phase(first, P.RELEASE_COMPLETE)
    second = fx.with_phase(second, P.DELETING)
    assert lifecycle.pod_cdi_pci_addresses([first, second], fx.POD_A, releasing=fx.CLAIM_2) == ()
    assert specs.sync_pod_spec(fx.POD_A, ()) is None
    assert not path.exists()
    assert specs.sync_pod_spec(fx.POD_A, ()) is None  # idempotent when already gone


def test_ensure_root_creates_missing_directories(tmp_path: Path) -> None:
    root = tmp_path / "run" / "cdi"
    cdi.CdiSpecs(root).ensure_root()
    assert root.is_dir()


def test_ensure_root_refuses_a_file_in_its_place(tmp_path: Path) -> None:
    root = tmp_path / "cdi"
    root.write_bytes(b"")
    with pytest.raises(NotADirectoryError, match="fix --cdi-root"):
        cdi.CdiSpecs(root).ensure_root()
