"""Read the plugin's checkpoint from its directory without writing or locking anything.

The directory holds ``checkpoint.slots`` (the durable record, ``slot_format``) and
``checkpoint.json`` (a readable copy, renamed into place without a flush: after a power loss it
may lag, and a person may delete it). A reader that must be right (``checkpoint_info``,
``sriov-dra orphans``, the lab) takes the slot file when it exists, ``checkpoint.json`` only
without one (docs/design.md#checkpoint). Reads the node; the runtime reaches it only through
``sriov_dra.host.checkpoint_files``.
"""

from __future__ import annotations

import dataclasses
import errno
import time
from pathlib import Path

from . import checkpoint_doc, errors, slot_format

READ_ATTEMPTS = 5
"""Reads of a live slot file before :func:`read` reports it corrupt (a read spanning two writes)."""

RETRY_DELAY_S = 0.02
"""Pause between those reads (s)."""


@dataclasses.dataclass(frozen=True)
class Reading:
    """What :func:`read` found.

    ``payload``: the checkpoint document's bytes; ``source``: the file they came from;
    ``problems``: one line per slot of a slot file that was not used (a write cut short, or
    damage; a slot never written is not a problem), empty for ``checkpoint.json``.
    """

    payload: bytes
    source: Path
    problems: tuple[str, ...]


def read(path: Path) -> Reading:
    """Read a checkpoint without writing or locking anything.

    ``path`` is a slot file (any name ending ``.slots``: its newest valid slot), or a file named
    ``checkpoint.json`` whose sibling ``checkpoint.slots`` exists (the durable record wins: the
    readable copy may lag after a power loss, or be gone), else ``checkpoint.json`` itself; a
    file of any other name (a backup) is read as it is. A symlink is resolved first, so the
    siblings are the real file's. A slot file without a valid slot, or whose other slot is not
    valid, is read again (up to :data:`READ_ATTEMPTS` times, :data:`RETRY_DELAY_S` apart): one
    read of a live file can span two of the plugin's writes; problems that stay are returned.
    Raises: ``FileNotFoundError`` when neither file exists; ``ContractViolation`` naming the slot
    file when it stays without a valid slot; ``OSError`` when unreadable.
    """
    path = path.resolve()
    if path.name.endswith(".slots"):
        slots, copy = path, path.with_name(checkpoint_doc.CHECKPOINT_FILE_NAME)
    elif path.name == checkpoint_doc.CHECKPOINT_FILE_NAME:
        slots, copy = path.with_name(checkpoint_doc.SLOTS_FILE_NAME), path
    else:
        return Reading(path.read_bytes(), path, ())
    for attempt in range(READ_ATTEMPTS):
        last = attempt + 1 == READ_ATTEMPTS
        try:
            raw = slots.read_bytes()
        except FileNotFoundError:
            try:
                return Reading(copy.read_bytes(), copy, ())
            except FileNotFoundError:
                raise FileNotFoundError(errno.ENOENT, "no checkpoint file", str(path)) from None
        try:
            found = slot_format.parse(raw, source=str(slots))
        except slot_format.SlotFileError as exc:
            if last:
                raise errors.ContractViolation(f"checkpoint {exc}") from exc
        else:
            if not found.damage or last:
                return Reading(found.payload, slots, found.damage)
        time.sleep(RETRY_DELAY_S)
    raise AssertionError("unreachable")


def copy_beside(slots: Path) -> bytes | None:
    """The readable copy ``checkpoint.json`` beside the slot file ``slots``, or ``None`` when absent.

    Raises: ``OSError`` other than ``FileNotFoundError``.
    """
    try:
        return slots.with_name(checkpoint_doc.CHECKPOINT_FILE_NAME).read_bytes()
    except FileNotFoundError:
        return None
