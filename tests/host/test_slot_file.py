"""Tests for sriov_dra.host.slot_file: A/B slots, one flush per write, torn writes, growth."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sriov_dra.host import slot_file
from sriov_dra_rules import slot_format


def fresh(tmp_path: Path, payload: bytes = b"first") -> slot_file.SlotFile:
    f = slot_file.SlotFile(tmp_path / "blob.slots")
    f.create(payload)
    return f


def test_a_created_file_reads_back_as_generation_one_with_both_slots_page_aligned(tmp_path: Path) -> None:
    f = fresh(tmp_path)
    got = slot_file.SlotFile(f.path).read()
    assert got is not None
    assert (got.payload, got.generation, got.slot) == (b"first", 1, 0)
    assert f.path.stat().st_size == 2 * got.capacity and got.capacity % slot_format.PAGE == 0
    assert got.problems == ("slot 1: never written",)
    assert f.path.stat().st_mode & 0o777 == 0o600


def test_an_absent_file_reads_as_none(tmp_path: Path) -> None:
    assert slot_file.SlotFile(tmp_path / "absent").read() is None


def test_writes_alternate_slots_with_increasing_generations_and_never_change_the_file_size(
    tmp_path: Path,
) -> None:
    f = fresh(tmp_path)
    size = f.path.stat().st_size
    for i in range(2, 7):
        f.write(b"payload %d" % i)
        got = slot_file.SlotFile(f.path).read()
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
    reopened = slot_file.SlotFile(f.path)
    assert reopened.read() is not None
    reopened.write(b"third")  # must land in slot 0
    got = slot_file.SlotFile(f.path).read()
    assert got is not None and (got.payload, got.generation, got.slot) == (b"third", 3, 0)


def test_a_torn_newest_slot_reads_the_previous_blob_and_names_the_torn_slot(tmp_path: Path) -> None:
    f = fresh(tmp_path)
    f.write(b"second")
    raw = bytearray(f.path.read_bytes())
    capacity = len(raw) // 2
    raw[capacity + slot_format.HEADER.size] ^= 0xFF  # one payload byte of slot 1 changed
    f.path.write_bytes(bytes(raw))
    got = slot_file.SlotFile(f.path).read()
    assert got is not None and (got.payload, got.generation) == (b"first", 1)
    assert got.problems == ("slot 1: generation 2 does not match its digest (a write cut short, or damage)",)


def test_the_write_after_a_torn_slot_overwrites_the_torn_slot_never_the_valid_one(tmp_path: Path) -> None:
    f = fresh(tmp_path)
    f.write(b"second")
    raw = bytearray(f.path.read_bytes())
    raw[len(raw) // 2 + slot_format.HEADER.size] ^= 0xFF
    f.path.write_bytes(bytes(raw))
    again = slot_file.SlotFile(f.path)
    assert again.read() is not None
    again.write(b"third")
    capacity = len(raw) // 2
    assert slot_format.decode_slot(f.path.read_bytes()[:capacity], 0) == (1, b"first"), "the valid slot kept"
    got = slot_file.SlotFile(f.path).read()
    assert got is not None and (got.payload, got.generation) == (b"third", 2)


_PAYLOAD = st.tuples(st.binary(min_size=1, max_size=16), st.integers(min_value=0, max_value=12000)).map(
    lambda t: (t[0] * (t[1] // len(t[0]) + 1))[: t[1]]
)
"""Blobs of one page and of several pages (a slot of the 16 KiB minimum holds up to 16,320 bytes)."""


@settings(max_examples=60, deadline=None)
@given(
    payloads=st.lists(_PAYLOAD, min_size=1, max_size=4),
    torn=_PAYLOAD,
    kept=st.lists(st.booleans(), min_size=8, max_size=8),
    following=_PAYLOAD,
)
def test_property_any_subset_of_pages_of_an_interrupted_write_reads_back_the_last_completed_blob(
    tmp_path_factory: pytest.TempPathFactory,
    payloads: list[bytes],
    torn: bytes,
    kept: list[bool],
    following: bytes,
) -> None:
    """Power loss model: any subset of the 4 KiB pages of the interrupted slot write reached the
    disk. The restarted reader gets the last completed blob, and the writes after it never
    overwrite that blob's slot (reading again after one more write gives that write)."""
    path = tmp_path_factory.mktemp("slots") / "blob.slots"
    f = slot_file.SlotFile(path)
    f.create(payloads[0])
    for p in payloads[1:]:
        f.write(p)
    before = path.read_bytes()
    f.write(torn)
    after = path.read_bytes()
    f.close()
    pages = [
        i
        for i in range(0, len(after), slot_format.PAGE)
        if after[i : i + slot_format.PAGE] != before[i : i + slot_format.PAGE]
    ]
    disk = bytearray(before)
    for n, start in enumerate(pages):
        if kept[n % len(kept)]:
            disk[start : start + slot_format.PAGE] = after[start : start + slot_format.PAGE]
    path.write_bytes(bytes(disk))
    restarted = slot_file.SlotFile(path)
    got = restarted.read()
    assert got is not None
    if bytes(disk) == after:  # every page of the write reached the disk: it completed
        assert (got.payload, got.generation) == (torn, len(payloads) + 1)
    else:
        assert (got.payload, got.generation) == (payloads[-1], len(payloads))
    restarted.write(following)
    restarted.close()
    again = slot_file.SlotFile(path).read()
    assert again is not None and again.payload == following and again.problems == ()


def test_a_blob_larger_than_a_slot_grows_the_file_and_keeps_every_later_write_in_place(
    tmp_path: Path,
) -> None:
    f = fresh(tmp_path)
    small = f.path.stat().st_size
    big = bytes(range(256)) * 200  # 51,200 bytes > the 16 KiB minimum slot
    f.write(big)
    grown = f.path.stat()
    assert grown.st_size > small and grown.st_size == 2 * slot_file.capacity_for(len(big))
    got = slot_file.SlotFile(f.path).read()
    assert got is not None and (got.payload, got.generation) == (big, 2)
    f.write(big[::-1])
    assert f.path.stat().st_ino == grown.st_ino, "no new file once it fits"
    got = slot_file.SlotFile(f.path).read()
    assert got is not None and got.payload == big[::-1] and got.generation == 3


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (bytes(2 * slot_format.PAGE), "holds no valid slot (slot 0: never written; slot 1: never written)"),
        (b"\x5a" * (2 * slot_format.PAGE), "slot 0: no slot header"),
        (b"{}", "not two slots of whole 4096-byte pages"),
        (bytes(3 * slot_format.PAGE), "not two slots of whole 4096-byte pages"),
    ],
    ids=["zeros", "garbage", "short", "odd-pages"],
)
def test_a_file_without_a_valid_slot_raises_naming_it_and_is_left_untouched(
    tmp_path: Path, raw: bytes, detail: str
) -> None:
    path = tmp_path / "blob.slots"
    path.write_bytes(raw)
    with pytest.raises(slot_format.SlotFileError) as info:
        slot_file.SlotFile(path).read()
    assert str(path) in str(info.value) and detail in str(info.value) and "left untouched" in str(info.value)
    assert path.read_bytes() == raw


def test_a_header_claiming_more_bytes_than_the_slot_holds_is_not_valid() -> None:
    slot = slot_format.encode_slot(5, b"abc")
    region = slot[:16] + (10**6).to_bytes(8, "big") + slot[24:] + bytes(slot_format.PAGE)
    assert slot_format.decode_slot(region, 1) == (
        f"slot 1: generation 5 claims 1000000 payload bytes, the slot holds {len(region) - slot_format.HEADER.size}"
    )


def test_read_makes_what_it_returns_durable_before_any_write_flushing_the_slot_and_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newest slot may be in the page cache only (a process killed before its ``fdatasync``, or a
    failed ``fdatasync``), and a growth killed before its directory ``fsync`` leaves the rename in
    memory: ``read`` writes the newest slot back, flushes it and syncs the directory, so the next
    write may overwrite the other slot."""
    f = fresh(tmp_path)
    f.write(b"second")
    f.close()
    raw = f.path.read_bytes()
    calls: list[str] = []
    real_pwrite, real_fdatasync = os.pwrite, os.fdatasync
    monkeypatch.setattr(
        os, "pwrite", lambda fd, data, off: (calls.append(f"pwrite@{off}"), real_pwrite(fd, data, off))[1]
    )
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append("fdatasync"), real_fdatasync(fd))[1])
    monkeypatch.setattr(slot_file.atomic_file, "fsync_directory", lambda d: calls.append(f"fsync-dir {d}"))
    got = slot_file.SlotFile(f.path).read()
    assert got is not None and got.slot == 1
    assert calls == [f"pwrite@{got.capacity}", "fdatasync", f"fsync-dir {tmp_path}"]
    assert f.path.read_bytes() == raw, "the same bytes: nothing changes but their durability"


def test_a_failed_flush_leaves_the_newest_slot_and_the_next_write_retries_the_same_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = fresh(tmp_path)  # generation 1 in slot 0
    real = os.fdatasync

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(OSError, match="Input/output"):
        f.write(b"unconfirmed")
    monkeypatch.setattr(os, "fdatasync", real)
    f.write(b"second")
    capacity = f.path.stat().st_size // 2
    raw = f.path.read_bytes()
    assert slot_format.decode_slot(raw[:capacity], 0) == (1, b"first"), (
        "the confirmed blob was never overwritten"
    )
    assert slot_format.decode_slot(raw[capacity:], 1) == (2, b"second")


def test_a_growth_whose_directory_sync_fails_never_lets_a_later_write_reach_the_replaced_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rename happened, its durability is unknown: the next write replaces the file again
    instead of writing in place into the descriptor of the unlinked old file."""
    f = fresh(tmp_path)
    real = slot_file.atomic_file.fsync_directory

    def failing(directory: Path) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(slot_file.atomic_file, "fsync_directory", failing)
    with pytest.raises(OSError):
        f.write(b"g" * 20000)  # does not fit the 16 KiB slot: a growth
    monkeypatch.setattr(slot_file.atomic_file, "fsync_directory", real)
    f.write(b"small")
    got = slot_file.SlotFile(f.path).read()
    assert got is not None and got.payload == b"small"


def test_read_never_rewrites_the_only_valid_slot_it_only_flushes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the other slot never written or torn, the newest was flushed before (a create, a growth,
    the write before the torn one): a power cut during a rewrite could garble the only valid copy."""
    f = fresh(tmp_path)  # slot 1 never written
    f.close()
    calls: list[str] = []
    real_fdatasync = os.fdatasync
    monkeypatch.setattr(os, "pwrite", lambda fd, data, off: calls.append("pwrite"))
    monkeypatch.setattr(os, "fdatasync", lambda fd: (calls.append("fdatasync"), real_fdatasync(fd))[1])
    monkeypatch.setattr(slot_file.atomic_file, "fsync_directory", lambda d: calls.append("fsync-dir"))
    got = slot_file.SlotFile(f.path).read()
    assert got is not None and got.problems == ("slot 1: never written",)
    assert calls == ["fdatasync", "fsync-dir"]


def test_a_file_created_on_a_64k_page_machine_has_slots_of_whole_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slot_file.os, "sysconf", lambda name: 65536)
    f = fresh(tmp_path)
    assert f.path.stat().st_size == 2 * 65536
    f.write(b"x" * 40000)  # grows: still whole 64 KiB pages
    assert f.path.stat().st_size % (2 * 65536) == 0


def test_read_removes_the_temporaries_of_an_interrupted_growth(tmp_path: Path) -> None:
    f = fresh(tmp_path)
    f.close()
    leftover = tmp_path / ".blob.slots.abc123.tmp"
    leftover.write_bytes(b"half a growth")
    assert slot_file.SlotFile(f.path).read() is not None
    assert not leftover.exists()


def test_two_different_blobs_of_one_generation_are_refused_not_guessed(tmp_path: Path) -> None:
    path = tmp_path / "blob.slots"
    capacity = slot_file.MIN_CAPACITY
    a, b = slot_format.encode_slot(1, b"A"), slot_format.encode_slot(1, b"B")
    raw = a + bytes(capacity - len(a)) + b + bytes(capacity - len(b))
    path.write_bytes(raw)
    with pytest.raises(slot_format.SlotFileError, match="two different blobs of generation 1"):
        slot_file.SlotFile(path).read()
    assert path.read_bytes() == raw


def test_write_before_read_or_create_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="before read"):
        slot_file.SlotFile(tmp_path / "blob.slots").write(b"x")


def test_before_flush_runs_once_the_bytes_are_in_place_and_before_the_fdatasync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook the checkpoint's readable copy overlaps the flush with."""
    f = fresh(tmp_path)  # generation 1 in slot 0
    events: list[str] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (events.append("fdatasync"), real(fd))[1])

    def hook() -> None:
        capacity = f.path.stat().st_size // 2
        assert slot_format.decode_slot(f.path.read_bytes()[capacity:], 1) == (2, b"second")
        events.append("before_flush")

    f.write(b"second", before_flush=hook)
    assert events == ["before_flush", "fdatasync"]
    assert f.read() is not None and f.generation == 2


def test_a_failing_before_flush_confirms_nothing_and_the_next_write_retries_the_same_slot(
    tmp_path: Path,
) -> None:
    f = fresh(tmp_path)

    def hook() -> None:
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError, match="Input/output"):
        f.write(b"unconfirmed", before_flush=hook)
    assert f.generation == 1
    f.write(b"second")
    capacity = f.path.stat().st_size // 2
    raw = f.path.read_bytes()
    assert slot_format.decode_slot(raw[:capacity], 0) == (1, b"first")
    assert slot_format.decode_slot(raw[capacity:], 1) == (2, b"second")


def test_a_growth_does_not_call_before_flush(tmp_path: Path) -> None:
    f = fresh(tmp_path)
    calls: list[str] = []
    big = b"x" * (f.path.stat().st_size)
    f.write(big, before_flush=lambda: calls.append("called"))
    found = f.read()
    assert calls == [] and found is not None and found.payload == big
