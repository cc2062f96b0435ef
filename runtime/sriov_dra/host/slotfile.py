"""Durable in-place replacement of one small blob: an A/B slot file, one ``fdatasync`` per write.

Why: replacing a file by ``rename`` is durable only after two journal commits (``fsync`` of the
new file, then of its directory; 0.5 ms idle, several ms beside etcd's own flushes). The
checkpoint is written three times on a prepare's critical path (spec §8.1 steps 2, 3, 5), so the
store keeps its durable copy here instead: the file never changes size or blocks between writes,
so ``fdatasync`` flushes only the written pages (0.1 ms idle on the same disk; bench/prepare.py).

Layout: the file is two slots of ``capacity`` bytes each (``capacity`` a multiple of 4096, the
file exactly ``2 * capacity`` bytes). A slot is a 64-byte header, then the payload::

    magic b"SDRSLOT1" (8) | generation (u64, big-endian) | payload length (u64, big-endian)
    | SHA-256 of (generation, length, payload) (32) | zero (8)

A write goes to the slot that does *not* hold the newest valid generation, with the next
generation, and returns after ``fdatasync``; the other slot keeps the previous blob until the
write after that. A crash or power loss during a write leaves that slot torn (its digest does not
match) and the other slot whole, so :meth:`SlotFile.read` returns the previous blob: the write
never returned, so nobody was told it succeeded. Every write is flushed before the next one may
overwrite the other slot: skipping a flush could let a power loss tear both.

A blob that does not fit grows the file: a new file of twice the needed size is written
beside it and renamed over it with :func:`sriov_dra.host.atomicfile.write_atomic` (file and
directory ``fsync``), the one slow write, once per doubling.

This module owns only file mechanics (no JSON, no checkpoint rules). One writer per file: a
:class:`SlotFile` is not thread-safe (the checkpoint store calls it under its lock), and two
processes must never write the same file (one active plugin per node, spec §6.3).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import struct
from pathlib import Path
from typing import Final

from sriov_dra.host import atomicfile

MAGIC: Final = b"SDRSLOT1"
HEADER: Final = struct.Struct(">8sQQ32s8x")
"""Slot header: magic, generation, payload length, digest, padding (64 bytes)."""
PAGE: Final = 4096
MIN_CAPACITY: Final = 4 * PAGE


class SlotFileError(Exception):
    """The slot file exists but holds no valid slot, or is not a slot file at all.

    ``str()`` names the file, what is wrong with each slot, and that the file was left untouched.
    """


@dataclasses.dataclass(frozen=True)
class ReadResult:
    """What :meth:`SlotFile.read` found.

    ``payload``: the newest valid blob; ``generation``: its generation (1 for a new file);
    ``slot``: the slot (0 or 1) holding it; ``capacity``: bytes per slot; ``problems``: one line
    per slot that was not valid (empty when both were), for the caller to log.
    """

    payload: bytes
    generation: int
    slot: int
    capacity: int
    problems: tuple[str, ...]


def _digest(generation: int, payload: bytes) -> bytes:
    h = hashlib.sha256(struct.pack(">QQ", generation, len(payload)))
    h.update(payload)
    return h.digest()


def encode_slot(generation: int, payload: bytes) -> bytes:
    """Return the header and payload of one slot (no padding).

    Shapes: ``generation`` >= 1; the result is ``64 + len(payload)`` bytes.
    """
    return HEADER.pack(MAGIC, generation, len(payload), _digest(generation, payload)) + payload


def capacity_for(payload_size: int) -> int:
    """Slot capacity (bytes) for a blob of ``payload_size`` bytes: room to double, whole pages, at least 16 KiB."""
    needed = 2 * (HEADER.size + payload_size)
    capacity = MIN_CAPACITY
    while capacity < needed:
        capacity *= 2
    return capacity


def decode_slot(raw: bytes, index: int) -> tuple[int, bytes] | str:
    """Return ``(generation, payload)`` of a valid slot, else a one-line reason naming slot ``index``.

    ``raw`` is the slot's whole region (header, payload and any padding). An all-zero region is
    reported as "never written".
    """
    if len(raw) < HEADER.size:
        return f"slot {index}: shorter than its header ({len(raw)} bytes)"
    magic, generation, length, digest = HEADER.unpack_from(raw)
    if magic != MAGIC:
        if not any(raw[: HEADER.size]):
            return f"slot {index}: never written"
        return f"slot {index}: no slot header (magic {magic!r})"
    if length > len(raw) - HEADER.size:
        return f"slot {index}: generation {generation} claims {length} payload bytes, the slot holds {len(raw) - HEADER.size}"
    payload = raw[HEADER.size : HEADER.size + length]
    if generation < 1 or _digest(generation, payload) != digest:
        return (
            f"slot {index}: generation {generation} is torn (digest mismatch: a write that never completed)"
        )
    return generation, payload


def parse(raw: bytes, *, source: str) -> ReadResult:
    """Return the newest valid slot of a whole slot file's bytes.

    Raises: :class:`SlotFileError` naming ``source`` when the size is not two whole-page slots or
    neither slot is valid.
    """
    if len(raw) < 2 * PAGE or len(raw) % (2 * PAGE):
        raise SlotFileError(
            f"slot file {source} is {len(raw)} bytes, not two slots of whole {PAGE}-byte pages; "
            "it was left untouched"
        )
    capacity = len(raw) // 2
    found: list[tuple[int, int, bytes]] = []
    problems: list[str] = []
    for index in (0, 1):
        result = decode_slot(raw[index * capacity : (index + 1) * capacity], index)
        if isinstance(result, str):
            problems.append(result)
        else:
            found.append((result[0], index, result[1]))
    if not found:
        raise SlotFileError(
            f"slot file {source} holds no valid slot ({'; '.join(problems)}); it was left untouched"
        )
    generation, index, payload = max(found)
    return ReadResult(payload, generation, index, capacity, tuple(problems))


class SlotFile:
    """One A/B slot file at ``path`` (see the module docstring for the layout and guarantees).

    Use: :meth:`read` (or :meth:`create` when it returns ``None``) once, then :meth:`write` for
    every new blob. The file gets permission bits ``mode``.
    """

    def __init__(self, path: Path, *, mode: int = 0o600) -> None:
        self._path = path
        self._mode = mode
        self._fd: int | None = None
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
        """Read the newest valid blob and remember where the next write goes; ``None`` when absent.

        Leftover temporaries of an interrupted growth are removed first (one writer per file).
        Raises: :class:`SlotFileError` (see :func:`parse`; the file is left untouched);
        ``OSError`` when the file or its directory cannot be read.
        """
        atomicfile.remove_stale_temporaries(self._path)
        raw = atomicfile.read_optional(self._path)
        if raw is None:
            return None
        result = parse(raw, source=str(self._path))
        self._open()
        self._capacity, self._generation, self._newest_slot = result.capacity, result.generation, result.slot
        return result

    def create(self, payload: bytes) -> None:
        """Create (or replace) the file holding ``payload`` as generation 1 in slot 0, durably.

        Raises: ``OSError`` from the file system (the previous file, if any, is untouched).
        """
        self._replace(payload, 1)

    def write(self, payload: bytes) -> None:
        """Durably store ``payload`` as the next generation; returns after ``fdatasync``.

        Raises: ``RuntimeError`` before :meth:`read` or :meth:`create`; ``OSError`` from
        ``pwrite``/``fdatasync`` or a growth (the previous blob stays the newest valid one; the
        written slot may hold the new blob, unconfirmed: the next write replaces it).
        """
        if self._fd is None:
            raise RuntimeError(f"slot file {self._path} was written before read() or create()")
        generation = self._generation + 1
        slot = encode_slot(generation, payload)
        if len(slot) > self._capacity:
            self._replace(payload, generation)
            return
        target = 1 - self._newest_slot
        view, offset = memoryview(slot), target * self._capacity
        while view:
            written = os.pwrite(self._fd, view, offset)
            view, offset = view[written:], offset + written
        os.fdatasync(self._fd)
        self._generation, self._newest_slot = generation, target

    def close(self) -> None:
        """Close the file descriptor (a later :meth:`read` opens it again)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> None:
        self.close()
        self._fd = os.open(self._path, os.O_RDWR | os.O_CLOEXEC)

    def _replace(self, payload: bytes, generation: int) -> None:
        capacity = capacity_for(len(payload))
        slot = encode_slot(generation, payload)
        data = slot + bytes(2 * capacity - len(slot))
        atomicfile.write_atomic(self._path, data, mode=self._mode)
        self._open()
        self._capacity, self._generation, self._newest_slot = capacity, generation, 0
