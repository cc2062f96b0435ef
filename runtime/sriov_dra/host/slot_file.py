"""Durable in-place replacement of one small blob: an A/B slot file, one ``fdatasync`` per write.

The layout is ``sriov_dra_rules.slot_format``'s. A write goes into the slot not holding the
newest valid generation and returns after one ``fdatasync`` (the file keeps its size, so only
those pages are flushed); a write cut short fails its digest and leaves the other slot whole.
:meth:`SlotFile.read` makes what it returns durable before a write may overwrite the other slot.
A blob that does not fit grows the file by a durable replace-by-rename (docs/design.md#checkpoint).
One writer per file, not thread-safe; ``host.checkpoint_files`` keeps other processes out.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Final

from sriov_dra.host import atomic_file
from sriov_dra_rules.slot_format import HEADER, PAGE, ReadResult, encode_slot, parse

MIN_CAPACITY: Final = 4 * PAGE


def _write_unit() -> int:
    """The alignment this machine's writer uses: 4096 or the page size when larger (64 KiB pages)."""
    return max(PAGE, os.sysconf("SC_PAGE_SIZE"))


def capacity_for(payload_size: int) -> int:
    """Slot capacity (bytes) for a blob of ``payload_size`` bytes: room to double, a power of two of
    at least 16 KiB and of this machine's page size (see :func:`_write_unit`)."""
    needed = 2 * (HEADER.size + payload_size)
    capacity = max(MIN_CAPACITY, _write_unit())
    while capacity < needed:
        capacity *= 2
    return capacity


class SlotFile:
    """One A/B slot file at ``path`` (see the module docstring for the layout and guarantees).

    Use: :meth:`read` (or :meth:`create` when it returns ``None``) once, then :meth:`write` for
    every new blob. The file gets permission bits ``mode``.
    """

    def __init__(self, path: Path, *, mode: int = 0o600) -> None:
        self._path = path
        self._mode = mode
        self._fd: int | None = None
        self._closer: weakref.finalize | None = None  # type: ignore[type-arg]
        self._capacity = 0
        self._generation = 0
        self._newest_slot = 1  # the first write after create goes to slot 1

    @property
    def path(self) -> Path:
        """The slot file."""
        return self._path

    @property
    def generation(self) -> int:
        """Generation of the newest blob read or written (0 before :meth:`read`/:meth:`create`)."""
        return self._generation

    def read(self) -> ReadResult | None:
        """Read the newest valid blob, make it durable, and remember where the next write goes.

        ``None`` when the file is absent (then :meth:`create`). Leftover temporaries of an
        interrupted growth are removed. Before returning, the blob is made durable (see the module
        docstring: what was read may have been only in the page cache).
        Raises: :class:`SlotFileError` (see :func:`parse`; the file is left untouched); ``OSError``
        when a file or the directory cannot be read or flushed.
        """
        atomic_file.remove_stale_temporaries(self._path)
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            raw = _read_all(fd)
            result = parse(raw, source=str(self._path))
            if not result.problems:  # the other slot is valid: the newest may be an unflushed write
                _pwrite_all(fd, encode_slot(result.generation, result.payload), result.slot * result.capacity)
            os.fdatasync(fd)
            atomic_file.fsync_directory(self._path.parent)
        except BaseException:
            os.close(fd)
            raise
        self._adopt(fd)
        self._capacity, self._generation, self._newest_slot = result.capacity, result.generation, result.slot
        return result

    def create(self, payload: bytes) -> None:
        """Create (or replace) the file holding ``payload`` as generation 1 in slot 0, durably.

        Raises: ``OSError`` from the file system (the previous file, if any, is untouched).
        """
        self._replace(payload, 1)

    def write(self, payload: bytes, *, before_flush: Callable[[], None] | None = None) -> None:
        """Durably store ``payload`` as the next generation; returns after ``fdatasync``.

        ``before_flush`` is called once the slot's bytes are written in place (page cache) and
        before the ``fdatasync`` that makes them durable, so that other work can overlap the
        flush (the checkpoint's readable copy, ``host.checkpoint_files``); it must return at once.
        It is not called when the write fails before that point, nor on the rare paths that
        replace the whole file (a growth, or a retry after a failed one).

        Raises: ``RuntimeError`` before :meth:`read` or :meth:`create`; ``OSError`` from
        ``pwrite``/``fdatasync`` (the previous blob stays the newest valid one; the written slot
        may hold the new blob, unconfirmed: the next write goes to the same slot) or from a growth
        (the file is then the old one or the new one, unconfirmed: the next write replaces the
        whole file again, never an unlinked one); what ``before_flush`` raises (the bytes are
        then written but not flushed, and this generation is not confirmed: the next write goes
        to the same slot).
        """
        if self._fd is None:
            if self._generation == 0:
                raise RuntimeError(f"slot file {self._path} was written before read() or create()")
            self._replace(payload, self._generation + 1)  # an earlier growth failed part way
            return
        generation = self._generation + 1
        slot = encode_slot(generation, payload)
        if len(slot) > self._capacity:
            self._replace(payload, generation)
            return
        target = 1 - self._newest_slot
        _pwrite_all(self._fd, slot, target * self._capacity)
        if before_flush is not None:
            before_flush()
        os.fdatasync(self._fd)
        self._generation, self._newest_slot = generation, target

    def close(self) -> None:
        """Close the file descriptor (a later :meth:`read` opens it again); also done when collected."""
        if self._closer is not None:
            self._closer()
            self._closer = None
        self._fd = None

    def _adopt(self, fd: int) -> None:
        self.close()
        self._fd = fd
        self._closer = weakref.finalize(self, os.close, fd)

    def _replace(self, payload: bytes, generation: int) -> None:
        """Write a whole new file (``payload`` in slot 0) over the old one, durably, and open it.

        The old descriptor is closed first, so no later write can go to an unlinked inode when the
        rename or its directory ``fsync`` fails (the next write then replaces the file again).
        """
        self.close()
        capacity = capacity_for(len(payload))
        slot = encode_slot(generation, payload)
        data = slot + bytes(2 * capacity - len(slot))
        atomic_file.write_atomic(self._path, data, mode=self._mode)
        self._adopt(os.open(self._path, os.O_RDWR | os.O_CLOEXEC))
        self._capacity, self._generation, self._newest_slot = capacity, generation, 0


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _read_all(fd: int) -> bytes:
    with open(fd, "rb", closefd=False) as f:  # the descriptor was just opened: at offset 0
        return f.read()
