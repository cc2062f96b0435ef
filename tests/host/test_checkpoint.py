"""Tests for sriov_dra.host.checkpoint: durable store, rollback, claim-UID reuse, crash safety
(docs/design.md#checkpoint)."""

from __future__ import annotations

import dataclasses
import enum
import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import types
import typing
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.fakes import checkpoint_records as fx
from tests.fakes import faulty_checkpoint, rename_kill

from sriov_dra.core import identities
from sriov_dra.core.plugin import checkpoint_codec as codec
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.host import atomic_file, checkpoint_files, slot_file
from sriov_dra.host import checkpoint as store_mod
from sriov_dra_rules import checkpoint_doc, errors

P = model.Phase
REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "checkpoint" / "v1-no-managed.json"


class RecordingWrite:
    """Write function that records calls and fails on demand (an injected failure, docs/design.md#fault-injection)."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False

    def __call__(self, files: checkpoint_files.CheckpointFiles, data: bytes) -> None:
        self.calls += 1
        if self.fail:
            raise OSError(28, "No space left on device")
        checkpoint_files.CheckpointFiles.write(files, data)

    def store(self, path: Path) -> store_mod.CheckpointStore:
        """A store of the checkpoint at ``path`` whose writes go through this function."""
        return store_mod.CheckpointStore(path, files=faulty_checkpoint.FaultyCheckpointFiles(path, self))


@pytest.fixture
def write() -> RecordingWrite:
    return RecordingWrite()


@pytest.fixture
def store(tmp_path: Path, write: RecordingWrite) -> store_mod.CheckpointStore:
    s = write.store(tmp_path / checkpoint_doc.CHECKPOINT_FILE_NAME)
    s.load()
    return s


def reload(s: store_mod.CheckpointStore) -> dict[str, model.ClaimRecord]:
    return dict(store_mod.CheckpointStore(s.path).load())


def test_load_of_an_absent_file_creates_an_empty_valid_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    assert store_mod.CheckpointStore(path).load() == {}
    assert codec.decode_checkpoint(path.read_bytes()) == model.Checkpoint()
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)


def test_set_claim_persists_before_it_is_visible(store: store_mod.CheckpointStore) -> None:
    rec = fx.record()
    assert store.set_claim(rec) == rec
    assert store.snapshot_claim(fx.CLAIM_1) == rec
    assert reload(store) == {fx.CLAIM_1: rec}


def test_use_before_load_is_refused(tmp_path: Path) -> None:
    with pytest.raises(errors.ContractViolation, match=r"call load\(\) first"):
        store_mod.CheckpointStore(tmp_path / "c.json").snapshot_claim(fx.CLAIM_1)


def test_snapshot_pod_returns_only_that_pods_claims(store: store_mod.CheckpointStore) -> None:
    a1, a2 = fx.record(fx.CLAIM_2, fx.POD_A, indexes=(1,)), fx.record(fx.CLAIM_1, fx.POD_A)
    b = fx.record(fx.CLAIM_3, fx.POD_B, indexes=(2,))
    for rec in (a1, a2, b):
        store.set_claim(rec)
    assert list(store.snapshot_pod(fx.POD_A)) == [fx.CLAIM_1, fx.CLAIM_2]
    assert list(store.snapshot_pod(fx.POD_B)) == [fx.CLAIM_3]


def test_returned_records_are_copies(store: store_mod.CheckpointStore) -> None:
    rec = fx.record()
    store.set_claim(rec)
    rec.devices[0].vf_config["driver"] = "vfio-pci"  # the caller's object, changed after set
    snap = store.snapshot_claim(fx.CLAIM_1)
    assert snap is not None
    snap.devices[0].vf_config["ifName"] = "evil"
    store.all_claims()[fx.CLAIM_1].devices[0].vf_config.clear()
    assert store.snapshot_claim(fx.CLAIM_1) == fx.record()


def _mutable_fields(cls: type) -> list[str]:
    """Fields of a frozen dataclass whose type is not immutable, recursing into frozen dataclasses.

    Immutable: str/int/bool/float (and ``NewType`` ids over them), enums, ``tuple[X, ...]`` and
    ``X | None`` of those, and frozen dataclasses built of them.
    """
    out: list[str] = []
    for name, hint in typing.get_type_hints(cls).items():
        parts = [a for a in typing.get_args(hint) if a not in (type(None), Ellipsis)] or [hint]
        if typing.get_origin(hint) not in (tuple, types.UnionType, typing.Union, None):
            out.append(f"{cls.__name__}.{name}")
            continue
        for part in parts:
            base = getattr(part, "__supertype__", part)  # NewType ids
            frozen = dataclasses.is_dataclass(base) and base.__dataclass_params__.frozen  # type: ignore[union-attr]
            if frozen and isinstance(base, type):
                out += _mutable_fields(base)
            elif not (isinstance(base, type) and issubclass(base, str | int | bool | float | enum.Enum)):
                out.append(f"{cls.__name__}.{name}")
    return out


@dataclasses.dataclass(frozen=True)
class _WithList:
    ok: tuple[str, ...]
    bad: list[str]


def test_only_vf_config_is_mutable_in_the_record_model_so_the_cheap_record_copy_is_complete() -> None:
    assert _mutable_fields(_WithList) == ["_WithList.bad"]  # the inventory does see a mutable field
    assert _mutable_fields(model.ClaimRecord) == ["PreparedDevice.vf_config"]


def test_a_record_copy_is_equal_and_shares_no_vf_config() -> None:
    rec = replace(fx.record(), devices=(replace(fx.record().devices[0], vf_config={"a": {"b": [1]}}),))
    copied = store_mod.copy_record(rec)
    assert copied == rec and store_mod.copy_record(None) is None
    copied.devices[0].vf_config["a"]["b"].append(2)  # type: ignore[index, union-attr]
    assert rec.devices[0].vf_config == {"a": {"b": [1]}}


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12,
)


def _containers(value: object) -> list[int]:
    """ids of every dict and list inside ``value`` (itself included)."""
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in _containers(v))]
    if isinstance(value, list):
        return [id(value), *(i for v in value for i in _containers(v))]
    return []


@given(vf_config=st.dictionaries(st.text(max_size=4), _JSON, max_size=4))
def test_a_record_copy_of_any_json_vf_config_is_equal_of_the_same_types_and_shares_no_container(
    vf_config: dict[str, Any],
) -> None:
    rec = fx.record(indexes=(0, 1))
    rec = replace(rec, devices=tuple(replace(d, vf_config=vf_config) for d in rec.devices))
    copied = store_mod.copy_record(rec)
    assert copied == rec and copied is not rec and type(copied.devices[0]) is model.PreparedDevice
    assert copied.devices[1].managed is rec.devices[1].managed  # immutable: shared
    for new, old in zip(copied.devices, rec.devices, strict=True):
        assert new is not old and not set(_containers(new.vf_config)) & set(_containers(old.vf_config))
    with pytest.raises(dataclasses.FrozenInstanceError):
        copied.devices[0].pool = "other"  # type: ignore[misc]


def _mutations() -> list[tuple[str, Callable[[store_mod.CheckpointStore], object]]]:
    return [
        ("set-new-claim", lambda s: s.set_claim(fx.record(fx.CLAIM_2, fx.POD_A, indexes=(1,)))),
        (
            "update-bindings",
            lambda s: s.update_managed_bindings(fx.CLAIM_1, lambda b: replace(b, phase=P.READY)),
        ),
        ("mark-deleting", lambda s: s.mark_managed_deleting(fx.CLAIM_1)),
        ("delete-claim", lambda s: s.delete_claim(fx.CLAIM_3)),
    ]


@pytest.mark.parametrize("mutate", [m for _, m in _mutations()], ids=[i for i, _ in _mutations()])
def test_write_failure_rolls_back_memory_and_keeps_the_file(
    store: store_mod.CheckpointStore,
    write: RecordingWrite,
    mutate: Callable[[store_mod.CheckpointStore], object],
) -> None:
    store.set_claim(fx.record(fx.CLAIM_1, fx.POD_A, phase=P.PENDING))
    store.set_claim(fx.record(fx.CLAIM_3, fx.POD_B, indexes=(2,), phase=P.RELEASE_COMPLETE))
    before_memory, before_file = store.all_claims(), store.path.read_bytes()
    write.fail = True
    with pytest.raises(OSError, match="No space left"):
        mutate(store)
    assert store.all_claims() == before_memory
    assert store.path.read_bytes() == before_file
    write.fail = False
    mutate(store)  # the same mutation succeeds once the disk recovers
    assert reload(store) == store.all_claims() != before_memory


def test_release_complete_write_failure_keeps_deleting(
    store: store_mod.CheckpointStore, write: RecordingWrite
) -> None:
    store.set_claim(fx.record(phase=P.DELETING))
    write.fail = True
    with pytest.raises(OSError):
        store.mark_managed_release_complete(fx.CLAIM_1)
    snap = store.snapshot_claim(fx.CLAIM_1)
    assert snap is not None
    assert [b.phase for b in snap.managed_bindings()] == [P.DELETING]


def test_a_claim_uid_is_blocked_for_another_pod_until_its_record_is_removed(
    store: store_mod.CheckpointStore,
) -> None:
    store.set_claim(fx.record(fx.CLAIM_1, fx.POD_A, phase=P.READY))
    newcomer = fx.record(fx.CLAIM_1, fx.POD_B)
    for step in (store.mark_managed_deleting, store.mark_managed_release_complete, None):
        with pytest.raises(errors.LifecycleBlocked) as info:
            store.set_claim(newcomer)
        assert info.value.reason is errors.Reason.CLAIM_RELEASE_IN_PROGRESS
        if step is not None:
            step(fx.CLAIM_1)
    assert store.delete_claim(fx.CLAIM_1) is True
    assert store.set_claim(newcomer) == newcomer


def test_delete_claim_keeps_the_pods_other_claims(store: store_mod.CheckpointStore) -> None:
    keep = fx.record(fx.CLAIM_2, fx.POD_A, indexes=(1,))
    store.set_claim(fx.record(fx.CLAIM_1, fx.POD_A, phase=P.RELEASE_COMPLETE))
    store.set_claim(keep)
    assert store.delete_claim(fx.CLAIM_1) is True
    assert store.snapshot_pod(fx.POD_A) == {fx.CLAIM_2: keep}
    assert reload(store) == {fx.CLAIM_2: keep}


def test_delete_claim_of_an_absent_claim_writes_nothing(
    store: store_mod.CheckpointStore, write: RecordingWrite
) -> None:
    calls = write.calls
    assert store.delete_claim(fx.CLAIM_2) is False
    assert write.calls == calls


@pytest.mark.parametrize("phase", [P.PENDING, P.READY, P.DELETING], ids=["pending", "ready", "deleting"])
def test_delete_claim_refuses_bindings_not_release_complete(
    store: store_mod.CheckpointStore, phase: model.Phase
) -> None:
    store.set_claim(fx.record(phase=phase))
    with pytest.raises(errors.ContractViolation, match="not ReleaseComplete"):
        store.delete_claim(fx.CLAIM_1)
    assert store.snapshot_claim(fx.CLAIM_1) is not None


def test_unmanaged_record_can_be_deleted_directly(store: store_mod.CheckpointStore) -> None:
    store.set_claim(fx.record(managed=False))
    assert store.delete_claim(fx.CLAIM_1) is True


def test_update_persists_the_observed_shadow_uid(store: store_mod.CheckpointStore) -> None:
    store.set_claim(fx.record(phase=P.PENDING, shadow_uid=""))
    out = store.update_managed_bindings(fx.CLAIM_1, lambda b: replace(b, shadow_uid=fx.SHADOW_UID))
    assert [b.shadow_uid for b in out.managed_bindings()] == [fx.SHADOW_UID]
    assert reload(store)[fx.CLAIM_1] == out


def test_every_write_is_one_in_place_flush_of_the_slot_file_and_no_fsync(
    store: store_mod.CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint write is durable after one ``fdatasync`` of the slot file,
    without the two journal commits of a replace-by-rename (file and directory ``fsync``)."""
    flushes: list[str] = []
    real_fdatasync = os.fdatasync
    monkeypatch.setattr(os, "fsync", lambda fd: flushes.append("fsync"))
    monkeypatch.setattr(os, "fdatasync", lambda fd: (flushes.append("fdatasync"), real_fdatasync(fd))[1])
    store.set_claim(fx.record(phase=P.PENDING, shadow_uid=""))
    out = store.update_managed_bindings(fx.CLAIM_1, lambda b: replace(b, shadow_uid=fx.SHADOW_UID))
    assert flushes == ["fdatasync", "fdatasync"]
    assert reload(store)[fx.CLAIM_1] == out, "a fresh reader (a restarted plugin) sees the update"
    assert codec.decode_checkpoint(store.path.read_bytes()).claims[fx.CLAIM_1] == out, "the readable copy too"
    assert not list(store.path.parent.glob("*.tmp*")), "no temporary is left beside the checkpoint"


def test_update_that_changes_nothing_writes_nothing(
    store: store_mod.CheckpointStore, write: RecordingWrite
) -> None:
    store.set_claim(fx.record())
    calls = write.calls
    store.update_managed_bindings(fx.CLAIM_1, lambda b: b)
    store.set_claim(fx.record())
    assert write.calls == calls


def test_repeated_release_marks_are_idempotent_and_write_once(
    store: store_mod.CheckpointStore, write: RecordingWrite
) -> None:
    store.set_claim(fx.record())
    calls = write.calls
    store.mark_managed_deleting(fx.CLAIM_1)
    store.mark_managed_deleting(fx.CLAIM_1)
    store.mark_managed_release_complete(fx.CLAIM_1)
    again = store.mark_managed_release_complete(fx.CLAIM_1)
    assert store.mark_managed_deleting(fx.CLAIM_1) == again  # never downgraded
    assert [b.phase for b in again.managed_bindings()] == [P.RELEASE_COMPLETE]
    assert write.calls == calls + 2


def test_update_of_an_absent_claim_is_refused(store: store_mod.CheckpointStore) -> None:
    with pytest.raises(errors.ContractViolation, match="has no checkpoint record"):
        store.update_managed_bindings(fx.CLAIM_1, lambda b: b)


def test_update_refuses_a_replaced_shadow_uid(store: store_mod.CheckpointStore) -> None:
    store.set_claim(fx.record())
    with pytest.raises(errors.Conflict):
        store.update_managed_bindings(fx.CLAIM_1, lambda b: replace(b, shadow_uid=fx.OTHER_SHADOW_UID))
    assert store.snapshot_claim(fx.CLAIM_1) == fx.record()


def test_invalid_record_is_refused_before_any_write(
    store: store_mod.CheckpointStore, write: RecordingWrite
) -> None:
    calls = write.calls
    with pytest.raises(errors.ContractViolation, match="refusing to write a checkpoint"):
        store.set_claim(fx.record(namespace="Bad_NS"))
    assert write.calls == calls
    assert store.all_claims() == {}


@pytest.mark.timeout(20)
def test_update_functions_run_outside_the_store_lock(store: store_mod.CheckpointStore) -> None:
    store.set_claim(fx.record(phase=P.PENDING))
    seen: list[int] = []

    def reads_the_store(b: model.ManagedBinding) -> model.ManagedBinding:
        seen.append(len(store.all_claims()))  # would deadlock if the lock were held here
        return replace(b, phase=P.READY)

    store.update_managed_bindings(fx.CLAIM_1, reads_the_store)
    assert seen == [1]


@pytest.mark.timeout(60)
def test_concurrent_mutations_of_different_claims_all_persist(store: store_mod.CheckpointStore) -> None:
    uids = [f"c1a1c1a1-0000-4000-8000-{i:012d}" for i in range(16)]
    failures: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            store.set_claim(fx.record(uids[i], fx.POD_A, indexes=(i,), phase=P.PENDING))
            store.update_managed_bindings(uids[i], lambda b: replace(b, phase=P.READY))
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    persisted = reload(store)
    assert sorted(persisted) == sorted(uids)
    assert all(b.phase is P.READY for r in persisted.values() for b in r.managed_bindings())


def test_pre_change_fixture_loads_without_managed_bindings(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    shutil.copyfile(FIXTURE, path)
    claims = store_mod.CheckpointStore(path).load()
    (rec,) = claims.values()
    assert rec.managed_bindings() == ()
    assert [d.pci_address for d in rec.devices] == ["0000:3b:02.0", "0000:3b:02.1"]
    assert path.read_bytes() == FIXTURE.read_bytes()


def _signed(raw: bytes) -> bytes:
    """Recompute the checksum, as a newer plugin writing this content would have."""
    doc = json.loads(raw)
    canonical = json.dumps(doc["data"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    doc["checksum"] = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return json.dumps(doc, indent=2).encode("utf-8")


def _corrupt_inputs() -> list[tuple[str, bytes, errors.Reason]]:
    good = codec.encode_checkpoint(fx.checkpoint(fx.record()))
    newer = good.replace(b',"version":1}\n', b',"version":2}\n')
    binding_v2 = _signed(good.replace(b'"bindingVersion":1', b'"bindingVersion":2'))
    assert newer != good and b'"bindingVersion":2' in binding_v2.replace(b" ", b"")
    return [
        ("truncated", good[:-40], errors.Reason.CONTRACT_VIOLATION),
        (
            "edited-without-checksum",
            good.replace(b"rail-a-net", b"rail-b-net"),
            errors.Reason.CONTRACT_VIOLATION,
        ),
        ("newer-version", newer, errors.Reason.UNSUPPORTED_VERSION),
        ("newer-binding-version", binding_v2, errors.Reason.UNSUPPORTED_VERSION),
    ]


@pytest.mark.parametrize(
    ("raw", "reason"), [(r, why) for _, r, why in _corrupt_inputs()], ids=[i for i, _, _ in _corrupt_inputs()]
)
def test_unreadable_checkpoint_fails_load_and_stays_untouched(
    tmp_path: Path, raw: bytes, reason: errors.Reason
) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_bytes(raw)
    before = path.stat()
    write = RecordingWrite()
    with pytest.raises(errors.ContractViolation) as info:
        write.store(path).load()
    assert info.value.reason is reason
    assert str(path) in str(info.value)
    assert "left untouched" in str(info.value)
    assert path.read_bytes() == raw
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert write.calls == 0
    assert not _slots(path).exists(), "no slot file was created"


def test_kill_before_the_readable_copy_is_replaced_keeps_the_durable_write_and_rewrites_the_copy(
    tmp_path: Path,
) -> None:
    """A kill after the slot write, at the copy's rename: the write is durable (the caller never
    learned it); the restarted store has it and rewrites ``checkpoint.json`` from the slot file."""
    path = tmp_path / "checkpoint.json"
    first = store_mod.CheckpointStore(path)
    first.load()
    first.set_claim(fx.record(fx.CLAIM_1, fx.POD_A))
    first.close()  # the restarted plugin below is another process: it takes the slot file's lock
    committed = path.read_bytes()
    rename_kill.kill_at_rename(
        setup=f"""
        from tests.fakes import checkpoint_records as fx
        from sriov_dra.host import checkpoint
        store = checkpoint.CheckpointStore(Path({str(path)!r}))
        store.load()
        """,
        write="store.set_claim(fx.record(fx.CLAIM_2, fx.POD_A, indexes=(1,)))\n",
    )
    assert path.read_bytes() == committed, "readers still see the previous complete document"
    assert len(atomic_file.stale_temporaries(path)) == 1
    restarted = store_mod.CheckpointStore(path)
    assert list(restarted.load()) == [fx.CLAIM_1, fx.CLAIM_2]
    assert list(codec.decode_checkpoint(path.read_bytes()).claims) == [fx.CLAIM_1, fx.CLAIM_2]
    assert atomic_file.stale_temporaries(path) == []


def _slots(path: Path) -> Path:
    return path.with_name(checkpoint_doc.SLOTS_FILE_NAME)


def test_a_power_cut_tearing_a_slot_write_loads_the_previous_checkpoint(tmp_path: Path) -> None:
    """Power loss in the middle of a write: the slot being written is torn, the other one whole."""
    path = tmp_path / "checkpoint.json"
    store = store_mod.CheckpointStore(path)
    store.load()
    store.set_claim(fx.record(fx.CLAIM_1, fx.POD_A))
    before = _slots(path).read_bytes()
    store.set_claim(fx.record(fx.CLAIM_2, fx.POD_A, indexes=(1,)))
    after = _slots(path).read_bytes()
    changed = [i for i in range(len(after)) if after[i] != before[i]]
    cut = changed[len(changed) // 2]
    _slots(path).write_bytes(after[:cut] + before[cut:])  # half the new slot reached the disk
    assert list(store_mod.CheckpointStore(path).load()) == [fx.CLAIM_1]


def test_a_legacy_checkpoint_json_alone_is_adopted_into_the_slot_file_unchanged(tmp_path: Path) -> None:
    """Upgrade: a plugin directory written before the slot file existed loads as it was."""
    path = tmp_path / "checkpoint.json"
    shutil.copyfile(FIXTURE, path)
    raw = path.read_bytes()
    claims = store_mod.CheckpointStore(path).load()
    assert claims == codec.decode_checkpoint(raw).claims
    assert path.read_bytes() == raw, "the legacy file stays as the readable copy"
    adopted = slot_file.SlotFile(_slots(path)).read()
    assert adopted is not None and adopted.payload == raw, "the slot file holds the legacy bytes as they were"
    path.unlink()
    assert store_mod.CheckpointStore(path).load() == claims, "now from the slot file"
    assert path.read_bytes() == raw


def test_a_stale_or_missing_readable_copy_is_rewritten_from_the_slot_file(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    store = store_mod.CheckpointStore(path)
    store.load()
    store.set_claim(fx.record(fx.CLAIM_1, fx.POD_A))
    current = path.read_bytes()
    for stale in (b"", codec.encode_checkpoint(model.Checkpoint()), None):
        if stale is None:
            path.unlink()
        else:
            path.write_bytes(stale)
        assert list(store_mod.CheckpointStore(path).load()) == [fx.CLAIM_1]
        assert path.read_bytes() == current


@pytest.mark.parametrize("damage", ["zeros", "garbage", "short"])
def test_a_slot_file_without_a_valid_slot_fails_load_naming_it_and_leaves_both_files_untouched(
    tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "checkpoint.json"
    store_mod.CheckpointStore(path).load()
    size = _slots(path).stat().st_size
    raw = {"zeros": bytes(size), "garbage": b"\x5a" * size, "short": b"{}"}[damage]
    _slots(path).write_bytes(raw)
    copy = path.read_bytes()
    with pytest.raises(errors.ContractViolation) as info:
        store_mod.CheckpointStore(path).load()
    assert str(_slots(path)) in str(info.value) and "left untouched" in str(info.value)
    assert _slots(path).read_bytes() == raw and path.read_bytes() == copy


def test_a_valid_slot_holding_a_corrupt_document_fails_load_naming_the_slot_file(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    store_mod.CheckpointStore(path).load()
    _slots(path).unlink()
    slot_file.SlotFile(_slots(path)).create(b'{"version": 1}')
    with pytest.raises(errors.ContractViolation) as info:
        store_mod.CheckpointStore(path).load()
    assert str(_slots(path)) in str(info.value)
    assert "is corrupt" in str(info.value)


# --- validation cost: only the changed claim is validated ---------------------------------------


@pytest.fixture
def validated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Claim UIDs passed to the model's record validator, in call order."""
    return fx.count_validations(monkeypatch)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: s.update_managed_bindings(fx.CLAIM_2, lambda b: replace(b, phase=P.READY)), [fx.CLAIM_2]),
        (lambda s: s.set_claim(fx.record(fx.CLAIM_3, indexes=(3,), phase=P.PENDING)), [fx.CLAIM_3]),
        (lambda s: s.mark_managed_deleting(fx.CLAIM_1), [fx.CLAIM_1]),
        (lambda s: s.delete_claim(fx.CLAIM_3), []),
    ],
    ids=[
        "binding-update-validates-its-claim",
        "new-claim-validates-itself",
        "mark-deleting",
        "delete-validates-none",
    ],
)
def test_a_write_validates_only_the_claim_it_changes(
    store: store_mod.CheckpointStore,
    write: RecordingWrite,
    validated: list[str],
    change: Callable[[store_mod.CheckpointStore], object],
    expected: list[str],
) -> None:
    store.set_claim(fx.record(fx.CLAIM_1))
    store.set_claim(fx.record(fx.CLAIM_2, indexes=(1,), phase=P.PENDING))
    if not expected:
        store.set_claim(fx.record(fx.CLAIM_3, indexes=(3,), namespace="ns-b", name="claim-c", managed=False))
    validated.clear()
    calls = write.calls
    change(store)
    assert validated == expected and write.calls == calls + 1
    assert store_mod.CheckpointStore(store.path).load() == store.all_claims()  # the file reads back


def test_a_corrupted_in_memory_record_still_cannot_be_written(
    store: store_mod.CheckpointStore, write: RecordingWrite
) -> None:
    store.set_claim(fx.record(phase=P.PENDING))
    good = store.snapshot_claim(fx.CLAIM_1)
    assert good is not None
    bad_device = replace(good.devices[0], pci_address=identities.PciAddress("not-a-pci-address"))
    # memory corrupted behind the store's API (nothing in the plugin can do this)
    store._claims[identities.ClaimUid(fx.CLAIM_1)] = replace(good, devices=(bad_device,))
    before, calls = store.path.read_bytes(), write.calls
    with pytest.raises(errors.ContractViolation, match="refusing to write a checkpoint") as caught:
        store.update_managed_bindings(fx.CLAIM_1, lambda b: replace(b, phase=P.READY))
    assert "pciAddress" in str(caught.value)
    assert write.calls == calls and store.path.read_bytes() == before


def test_a_read_only_reader_takes_the_slot_file_before_a_stale_copy_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """``sriov-dra orphans`` and the lab read through ``read_only``: the durable record wins, and
    neither file is created, replaced or touched."""
    path = tmp_path / "checkpoint.json"
    store = store_mod.CheckpointStore(path)
    store.load()
    store.set_claim(fx.record(fx.CLAIM_1, fx.POD_A))
    durable = path.read_bytes()
    path.write_bytes(codec.encode_checkpoint(model.Checkpoint()))  # a copy a power loss left older
    before = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    assert checkpoint_files.read_only(path) == (durable, _slots(path))
    assert checkpoint_files.read_only(_slots(path)) == (durable, _slots(path))
    assert {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in tmp_path.iterdir()} == before


def test_a_read_only_reader_of_a_legacy_directory_reads_checkpoint_json_and_misses_loudly(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoint.json"
    with pytest.raises(FileNotFoundError):
        checkpoint_files.read_only(path)
    shutil.copyfile(FIXTURE, path)
    assert checkpoint_files.read_only(path) == (FIXTURE.read_bytes(), path)
    assert not _slots(path).exists()


def test_a_read_only_reader_reads_a_live_slot_file_again_when_one_read_spans_two_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "checkpoint.json"
    store = store_mod.CheckpointStore(path)
    store.load()
    store.set_claim(fx.record(fx.CLAIM_1, fx.POD_A))
    good = _slots(path).read_bytes()
    reads = iter([bytes(len(good)), bytes(len(good)), good])  # two torn-looking reads, then a whole one
    slots, real_read_bytes = _slots(path).resolve(), Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda p: next(reads) if p == slots else real_read_bytes(p))
    raw, source = checkpoint_files.read_only(path)
    assert source == _slots(path) and codec.decode_checkpoint(raw).claims == store.all_claims()


def test_a_read_only_reader_takes_a_sibling_slot_file_only_for_checkpoint_json(tmp_path: Path) -> None:
    """A copy named after its node (``node-a.json``) is read as given, never another file's slots."""
    store = store_mod.CheckpointStore(tmp_path / "checkpoint.json")
    store.load()
    store.set_claim(fx.record(fx.CLAIM_1, fx.POD_A))
    other = tmp_path / "node-a.json"
    other.write_bytes(codec.encode_checkpoint(model.Checkpoint()))
    assert checkpoint_files.read_only(other) == (other.read_bytes(), other)


def test_a_second_plugin_process_waits_for_the_lock_and_then_fails_naming_it_and_writing_nothing(
    tmp_path: Path,
) -> None:
    """One plugin writes a node's checkpoint (docs/design.md#checkpoint). The lock file is never replaced, so a
    growth or a fresh directory leaves no window; the waiting process removes nothing."""
    path = tmp_path / "checkpoint.json"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from pathlib import Path; from sriov_dra.host import checkpoint;"
            f" s = checkpoint.CheckpointStore(Path({str(path)!r})); s.load(); print('locked', flush=True);"
            " time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"locked\n"
        temporary = tmp_path / ".checkpoint.json.inflight.tmp"  # the running plugin's write in progress
        temporary.write_bytes(b"x")
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
        second = store_mod.CheckpointStore(
            path, files=checkpoint_files.CheckpointFiles(path, lock_wait_s=0.2)
        )
        with pytest.raises(errors.ContractViolation, match=r"held by another process after 0\.2 s") as info:
            second.load()
        assert str(tmp_path / "checkpoint.lock") in str(info.value)
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    finally:
        holder.kill()
        holder.wait(timeout=10)
        if holder.stdout is not None:
            holder.stdout.close()
    third = store_mod.CheckpointStore(path, files=checkpoint_files.CheckpointFiles(path, lock_wait_s=5))
    assert third.load() == {}, "the lock ends with its process"


def test_a_file_system_without_posix_locks_runs_without_the_lock_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def unsupported(fd: int, cmd: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(checkpoint_files.fcntl, "lockf", unsupported)
    assert store_mod.CheckpointStore(tmp_path / "checkpoint.json").load() == {}
    assert "checkpoint lock unsupported: a second plugin process would not be stopped" in [
        r.getMessage() for r in caplog.records
    ]


def test_the_store_names_the_file_it_loaded_the_checkpoint_from(tmp_path: Path) -> None:
    """The plugin logs it at start (``checkpoint loaded``): the slot file, or a legacy copy it adopts."""
    path = tmp_path / "checkpoint.json"
    shutil.copyfile(FIXTURE, path)
    first = store_mod.CheckpointStore(path)
    first.load()
    assert first.source == path, "a legacy directory: read from checkpoint.json, then adopted"
    first.close()
    again = store_mod.CheckpointStore(path)
    again.load()
    assert again.source == _slots(path)


def test_the_readable_copy_is_replaced_on_another_thread_during_the_flush_and_before_the_write_returns(
    store: store_mod.CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy's rename overlaps the slot file's ``fdatasync`` instead of
    following it. The flush here waits until the copy holds the new bytes (a serial writer would
    never get there: the wait times out and the test fails), and the copy is in place on return."""
    real_fdatasync = os.fdatasync
    seen: list[tuple[str, bool]] = []

    def flush_waiting_for_the_copy(fd: int) -> None:
        wanted = store.path.with_name(checkpoint_doc.SLOTS_FILE_NAME)
        payload = checkpoint_files.read_only(wanted)[0]
        for _ in range(1000):
            if store.path.read_bytes() == payload:
                break
            threading.Event().wait(0.01)
        seen.append((threading.current_thread().name, store.path.read_bytes() == payload))
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", flush_waiting_for_the_copy)
    out = store.set_claim(fx.record(phase=P.PENDING, shadow_uid=""))
    assert seen == [(threading.current_thread().name, True)], "the copy was replaced while the flush ran"
    assert codec.decode_checkpoint(store.path.read_bytes()).claims[fx.CLAIM_1] == out
    assert not list(store.path.parent.glob("*.tmp*"))


def test_a_failed_copy_beside_a_durable_slot_write_fails_the_write_and_memory_keeps_the_old_state(
    store: store_mod.CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.set_claim(fx.record(phase=P.PENDING, shadow_uid=""))
    before = store.all_claims()
    real = atomic_file.write_atomic

    def full(path: Path, data: bytes, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint_files.atomic_file, "write_atomic", full)
    with pytest.raises(OSError, match="No space left"):
        store.update_managed_bindings(fx.CLAIM_1, lambda b: replace(b, shadow_uid=fx.SHADOW_UID))
    assert store.all_claims() == before
    monkeypatch.setattr(checkpoint_files.atomic_file, "write_atomic", real)
    out = store.update_managed_bindings(fx.CLAIM_1, lambda b: replace(b, shadow_uid=fx.SHADOW_UID))
    assert reload(store)[fx.CLAIM_1] == out
    assert codec.decode_checkpoint(store.path.read_bytes()).claims[fx.CLAIM_1] == out


def test_a_failed_flush_still_joins_the_copy_before_the_write_raises(
    store: store_mod.CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No copy outlives a failed write: the next write's copy can never be overtaken by it."""
    store.set_claim(fx.record(phase=P.PENDING, shadow_uid=""))
    before = store.all_claims()
    copies: list[str] = []
    real_copy = atomic_file.write_atomic

    def slow_copy(path: Path, data: bytes, **kwargs: Any) -> None:
        threading.Event().wait(0.05)
        real_copy(path, data, **kwargs)
        copies.append("done")

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(checkpoint_files.atomic_file, "write_atomic", slow_copy)
    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(OSError, match="Input/output"):
        store.update_managed_bindings(fx.CLAIM_1, lambda b: replace(b, shadow_uid=fx.SHADOW_UID))
    assert copies == ["done"], "the copy had ended when the write raised"
    assert store.all_claims() == before


def test_a_forked_child_writes_its_checkpoint_with_its_own_copy_thread(tmp_path: Path) -> None:
    """The copy thread does not survive ``fork``: a child that writes must not wait for it forever."""
    path = tmp_path / checkpoint_doc.CHECKPOINT_FILE_NAME
    parent = store_mod.CheckpointStore(path)
    parent.load()
    parent.set_claim(fx.record())  # the parent's copy thread now exists
    parent.close()
    pid = os.fork()
    if pid == 0:  # the child: no thread but the forking one
        code = 1
        try:
            child = store_mod.CheckpointStore(path)
            child.load()
            child.set_claim(fx.record(fx.CLAIM_2, fx.POD_B, indexes=(1,)))
            child.close()
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's checkpoint write never returned")
    assert os.waitstatus_to_exitcode(status) == 0
    assert sorted(reload(parent)) == [fx.CLAIM_1, fx.CLAIM_2]
    assert codec.decode_checkpoint(path.read_bytes()) == codec.decode_checkpoint(
        checkpoint_files.read_only(path)[0]
    )


# --- hand-over of the writer lock between two plugin processes (docs/plugin.md#rolling-update) ---


def hand_over_writer(path: str, claim_uid: str, index: int, writes: int, hand_over: bool) -> None:
    """A plugin-like process: load (asking for the lock), then write ``claim_uid`` renamed on each write.

    Prints one JSON line per event: ``loaded`` (the names of the claims it loaded), ``wrote`` (a
    committed write, the name it wrote), ``refused`` (a write after the store closed). With
    ``hand_over`` a watcher closes the store when a successor waits, while the writer thread goes on.
    """
    store = store_mod.CheckpointStore(Path(path))
    loaded = store.load()
    print(json.dumps({"loaded": {uid: r.name for uid, r in loaded.items()}}), flush=True)

    def write() -> None:
        for n in range(writes):
            name = f"w-{n}"
            try:
                store.set_claim(fx.record(claim_uid, fx.POD_A, indexes=(index,), name=name, managed=False))
            except errors.ContractViolation:
                print(json.dumps({"refused": name}), flush=True)
                return
            print(json.dumps({"wrote": name}), flush=True)
            time.sleep(0.01)

    writer = threading.Thread(target=write)
    writer.start()
    while hand_over and writer.is_alive():
        if store.successor_waiting():
            store.close()
            print(json.dumps({"handed": True}), flush=True)
            break
        time.sleep(0.01)
    writer.join()


def _writer_process(
    path: Path, claim_uid: str, index: int, writes: int, hand_over: bool
) -> subprocess.Popen[bytes]:
    code = (
        "import sys; from tests.host.test_checkpoint import hand_over_writer;"
        f" hand_over_writer({str(path)!r}, {claim_uid!r}, {index}, {writes}, {hand_over})"
    )
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=REPO)


def _events(process: subprocess.Popen[bytes]) -> list[dict[str, Any]]:
    out, _ = process.communicate(timeout=120)
    return [json.loads(line) for line in out.decode().splitlines()]


def test_a_waiting_process_gets_the_writer_lock_handed_over_with_every_write_of_the_holder_and_none_after(
    tmp_path: Path,
) -> None:
    """The holder writes until it sees the request, then closes: the successor loads exactly the
    holder's last committed write (no write lost, none after the hand-over: never two writers), and
    the holder's writer thread is refused from then on."""
    path = tmp_path / "checkpoint.json"
    holder = _writer_process(path, fx.CLAIM_1, 0, 100_000, hand_over=True)
    assert holder.stdout is not None
    assert "loaded" in json.loads(holder.stdout.readline())
    for _ in range(3):  # the holder is writing before the successor asks
        assert "wrote" in json.loads(holder.stdout.readline())
    successor = _writer_process(path, fx.CLAIM_2, 1, 5, hand_over=False)
    holder_events, successor_events = _events(holder), _events(successor)
    assert holder.returncode == 0 and successor.returncode == 0
    holder_writes = ["w-0", "w-1", "w-2"] + [e["wrote"] for e in holder_events if "wrote" in e]
    assert {"handed": True} in holder_events
    assert [e for e in holder_events if "refused" in e], "the holder's writer went on and was refused"
    assert successor_events[0] == {"loaded": {fx.CLAIM_1: holder_writes[-1]}}
    assert [e["wrote"] for e in successor_events[1:]] == [f"w-{n}" for n in range(5)]
    final = store_mod.CheckpointStore(path)
    assert {uid: r.name for uid, r in final.load().items()} == {
        fx.CLAIM_1: holder_writes[-1],
        fx.CLAIM_2: "w-4",
    }


def test_a_hand_over_request_lives_exactly_as_long_as_the_waiting_process(tmp_path: Path) -> None:
    """A successor that dies while it waits withdraws its request with its process: the holder
    never hands over to no one."""
    path = tmp_path / "checkpoint.json"
    files = checkpoint_files.CheckpointFiles(path)
    assert not files.successor_waiting()
    request = tmp_path / checkpoint_files.HANDOVER_FILE_NAME
    waiter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import fcntl, os, time; fd = os.open({str(request)!r}, os.O_RDWR | os.O_CREAT);"
            " fcntl.lockf(fd, fcntl.LOCK_EX); print('waiting', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert waiter.stdout is not None and waiter.stdout.readline() == b"waiting\n"
        assert files.successor_waiting()
    finally:
        waiter.kill()
        waiter.wait(timeout=10)
        if waiter.stdout is not None:
            waiter.stdout.close()
    assert not files.successor_waiting()


@settings(max_examples=4, deadline=None)
@given(writes_before_kill=st.integers(min_value=1, max_value=20))
def test_a_holder_killed_while_writing_and_a_successor_waits_leaves_it_the_last_committed_write(
    tmp_path_factory: pytest.TempPathFactory, writes_before_kill: int
) -> None:
    """Crash-style: SIGKILL of a holder that does not hand over; the successor's wait ends with the
    holder's process and it loads the last write the holder reported, or the one in progress."""
    path = tmp_path_factory.mktemp("handover") / "checkpoint.json"
    holder = _writer_process(path, fx.CLAIM_1, 0, 100_000, hand_over=False)
    assert holder.stdout is not None
    assert "loaded" in json.loads(holder.stdout.readline())
    reported = [json.loads(holder.stdout.readline())["wrote"] for _ in range(writes_before_kill)]
    successor = _writer_process(path, fx.CLAIM_2, 1, 1, hand_over=False)
    time.sleep(0.2)  # the successor is waiting (or about to): the kill may land on either side
    holder.kill()
    holder.communicate(timeout=30)
    loaded = _events(successor)[0]["loaded"][fx.CLAIM_1]
    later = int(loaded.removeprefix("w-"))
    assert later >= int(reported[-1].removeprefix("w-")), "a reported write is never lost"
