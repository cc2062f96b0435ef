"""The bytes of an A/B slot file: encode one slot, and find the newest valid one in a whole file.

The plugin's durable checkpoint record, ``checkpoint.slots``, is written by
``sriov_dra.host.slot_file`` and read here by the collection's ``checkpoint_info`` module and the
runtime's read-only tools, so a reader never disagrees with the writer. A file is two slots of
``capacity`` bytes (a multiple of :data:`PAGE`); the newest valid slot (highest generation whose
digest matches) holds the current blob, the other the previous one or a write cut short.
Pure functions of bytes (docs/design.md#checkpoint).
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct

MAGIC = b"SDRSLOT1"
HEADER = struct.Struct(">8sQQ32s8x")
"""Slot header (64 bytes), followed by the payload and zero padding to the slot's capacity::

    magic b"SDRSLOT1" (8) | generation (u64, big-endian) | payload length (u64, big-endian)
    | SHA-256 of (generation, length, payload) (32) | zero (8)
"""
PAGE = 4096
"""Slot sizes are multiples of this in every file (the format)."""


class SlotFileError(Exception):
    """The slot file exists but holds no valid slot, or is not a slot file at all.

    ``str()`` names the file, what is wrong with each slot, and that the file was left untouched.
    """


@dataclasses.dataclass(frozen=True)
class ReadResult:
    """The newest valid slot of a slot file.

    ``payload``: the newest valid blob; ``generation``: its generation (>= 1); ``slot``: the slot
    (0 or 1) holding it; ``capacity``: bytes per slot; ``problems``: one line per slot that was not
    valid (empty when both were), for the caller to log.
    """

    payload: bytes
    generation: int
    slot: int
    capacity: int
    problems: tuple[str, ...]

    @property
    def damage(self) -> tuple[str, ...]:
        """The ``problems`` worth reporting: a write cut short, or damage (not a slot never written)."""
        return tuple(p for p in self.problems if not p.endswith("never written"))


def _digest(generation: int, payload: bytes) -> bytes:
    h = hashlib.sha256(struct.pack(">QQ", generation, len(payload)))
    h.update(payload)
    return h.digest()


def encode_slot(generation: int, payload: bytes) -> bytes:
    """Return the header and payload of one slot (no padding).

    Shapes: ``generation`` >= 1; the result is ``64 + len(payload)`` bytes.
    """
    return HEADER.pack(MAGIC, generation, len(payload), _digest(generation, payload)) + payload


def decode_slot(raw: bytes, index: int) -> tuple[int, bytes] | str:
    """Return ``(generation, payload)`` of a valid slot, else a one-line reason naming slot ``index``.

    ``raw`` is the slot's whole region (header, payload and padding; at least a page). An all-zero
    header is reported as "never written".
    """
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
            f"slot {index}: generation {generation} does not match its digest (a write cut short, or damage)"
        )
    return generation, payload


def parse(raw: bytes, *, source: str) -> ReadResult:
    """Return the newest valid slot of a whole slot file's bytes.

    Raises: :class:`SlotFileError` naming ``source`` when the size is not two whole-page slots,
    neither slot is valid, or both hold different blobs of one generation (no writer does that).
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
    if len(found) == 2 and found[0][0] == found[1][0] and found[0][2] != found[1][2]:
        raise SlotFileError(
            f"slot file {source} holds two different blobs of generation {found[0][0]} (no writer does "
            "that: the file was edited or damaged); it was left untouched"
        )
    generation, index, payload = max(found)
    return ReadResult(payload, generation, index, capacity, tuple(problems))
