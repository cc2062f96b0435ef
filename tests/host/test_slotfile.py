"""Tests for sriov_dra.host.slotfile: A/B slots, one flush per write, torn writes, growth."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sriov_dra.host import slotfile


def fresh(tmp_path: Path, payload: bytes = b"first") -> slotfile.SlotFile:
    f = slotfile.SlotFile(tmp_path / "blob.slots")
    f.create(payload)
    return f


def test_a_created_file_reads_back_as_generation_one_with_both_slots_page_aligned(tmp_path: Path) -> None:
    f = fresh(tmp_path)
    got = slotfile.SlotFile(f.path).read()
    assert got is not None
    assert (got.payload, got.generation, got.slot) == (b"first", 1, 0)
    assert f.path.stat().st_size == 2 * got.capacity and got.capacity % slotfile.PAGE == 0
    assert got.problems == ("slot 1: never written",)
    assert f.path.stat().st_mode & 0o777 == 0o600


def test_an_absent_file_reads_as_none(tmp_path: Path) -> None:
    assert slotfile.SlotFile(tmp_path / "absent").read() is None


def test_writes_alternate_slots_with_increasing_generations_and_never_change_the_file_size(
    tmp_path: Path,
) -> None:
    f = fresh(tmp_path)
    size = f.path.stat().st_size
    for i in range(2, 7):
        f.write(b"payload %d" % i)
        got = slotfile.SlotFile(f.path).read()
        assert got is not None
        assert (got.payload, got.generation, got.slot) == (b"payload %d" % i, i, (i - 1) % 2)
        assert f.path.stat().st_size == size
    assert got.problems == ()


def test_each_write_is_one_fdatasync_and_no_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = fresh(tmp_path)
    calls: list[str] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append("fsync"))
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append("fdatasync"), real(fd))[1])
    f.write(b"second")
    f.write(b"third")
    assert calls == ["fdatasync", "fdatasync"]


def test_a_write_reopened_after_read_goes_to_the_slot_not_holding_the_newest(tmp_path: Path) -> None:
    f = fresh(tmp_path)
    f.write(b"second")  # slot 1, generation 2
    reopened = slotfile.SlotFile(f.path)
    assert reopened.read() is not None
    reopened.write(b"third")  # must land in slot 0
    got = slotfile.SlotFile(f.path).read()
    assert got is not None and (got.payload, got.generation, got.slot) == (b"third", 3, 0)


def test_a_torn_newest_slot_reads_the_previous_blob_and_names_the_torn_slot(tmp_path: Path) -> None:
    f = fresh(tmp_path)
    f.write(b"second")
    raw = bytearray(f.path.read_bytes())
    capacity = len(raw) // 2
    raw[capacity + slotfile.HEADER.size] ^= 0xFF  # one payload byte of slot 1 changed
    f.path.write_bytes(bytes(raw))
    got = slotfile.SlotFile(f.path).read()
    assert got is not None and (got.payload, got.generation) == (b"first", 1)
    assert got.problems == ("slot 1: generation 2 is torn (digest mismatch: a write that never completed)",)


def test_the_write_after_a_torn_slot_overwrites_the_torn_slot_never_the_valid_one(tmp_path: Path) -> None:
    f = fresh(tmp_path)
    f.write(b"second")
    raw = bytearray(f.path.read_bytes())
    raw[len(raw) // 2 + slotfile.HEADER.size] ^= 0xFF
    f.path.write_bytes(bytes(raw))
    again = slotfile.SlotFile(f.path)
    assert again.read() is not None
    again.write(b"third")
    capacity = len(raw) // 2
    assert slotfile.decode_slot(f.path.read_bytes()[:capacity], 0) == (1, b"first"), "the valid slot kept"
    got = slotfile.SlotFile(f.path).read()
    assert got is not None and (got.payload, got.generation) == (b"third", 2)


@settings(max_examples=60, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=600), min_size=1, max_size=5),
    torn=st.binary(min_size=1, max_size=600),
    cut=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
)
def test_property_a_write_cut_at_any_byte_reads_back_the_last_completed_blob(
    tmp_path_factory: pytest.TempPathFactory, payloads: list[bytes], torn: bytes, cut: float
) -> None:
    """Power loss model: only a prefix of the interrupted slot write reached the disk."""
    f = slotfile.SlotFile(tmp_path_factory.mktemp("slots") / "blob.slots")
    f.create(payloads[0])
    for p in payloads[1:]:
        f.write(p)
    before = f.path.read_bytes()
    f.write(torn)
    after = f.path.read_bytes()
    changed = [i for i in range(len(after)) if after[i] != before[i]]
    if not changed:
        return
    n = changed[int(cut * len(changed))]
    f.path.write_bytes(after[:n] + before[n:])
    got = slotfile.SlotFile(f.path).read()
    assert got is not None
    assert (got.payload, got.generation) == (payloads[-1], len(payloads))


def test_a_blob_larger_than_a_slot_grows_the_file_and_keeps_every_later_write_in_place(
    tmp_path: Path,
) -> None:
    f = fresh(tmp_path)
    small = f.path.stat().st_size
    big = bytes(range(256)) * 200  # 51,200 bytes > the 16 KiB minimum slot
    f.write(big)
    grown = f.path.stat()
    assert grown.st_size > small and grown.st_size == 2 * slotfile.capacity_for(len(big))
    got = slotfile.SlotFile(f.path).read()
    assert got is not None and (got.payload, got.generation) == (big, 2)
    f.write(big[::-1])
    assert f.path.stat().st_ino == grown.st_ino, "no new file once it fits"
    got = slotfile.SlotFile(f.path).read()
    assert got is not None and got.payload == big[::-1] and got.generation == 3


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (bytes(2 * slotfile.PAGE), "holds no valid slot (slot 0: never written; slot 1: never written)"),
        (b"\x5a" * (2 * slotfile.PAGE), "slot 0: no slot header"),
        (b"{}", "not two slots of whole 4096-byte pages"),
        (bytes(3 * slotfile.PAGE), "not two slots of whole 4096-byte pages"),
    ],
    ids=["zeros", "garbage", "short", "odd-pages"],
)
def test_a_file_without_a_valid_slot_raises_naming_it_and_is_left_untouched(
    tmp_path: Path, raw: bytes, detail: str
) -> None:
    path = tmp_path / "blob.slots"
    path.write_bytes(raw)
    with pytest.raises(slotfile.SlotFileError) as info:
        slotfile.SlotFile(path).read()
    assert str(path) in str(info.value) and detail in str(info.value) and "left untouched" in str(info.value)
    assert path.read_bytes() == raw


def test_a_header_claiming_more_bytes_than_the_slot_holds_is_not_valid() -> None:
    slot = slotfile.encode_slot(5, b"abc")
    region = slot[:16] + (10**6).to_bytes(8, "big") + slot[24:] + bytes(slotfile.PAGE)
    assert slotfile.decode_slot(region, 1) == (
        f"slot 1: generation 5 claims 1000000 payload bytes, the slot holds {len(region) - slotfile.HEADER.size}"
    )


def test_write_before_read_or_create_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="before read"):
        slotfile.SlotFile(tmp_path / "blob.slots").write(b"x")
