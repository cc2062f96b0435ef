"""The checkpoint on disk: a durable A/B slot file and a readable copy beside it.

Two files in the plugin directory (``/var/lib/kubelet/plugins/<driver>/``), both mode 0600:

- ``checkpoint.slots``: the durable record (``host.slotfile``). Every checkpoint write returns
  only after its bytes are flushed there in place, one ``fdatasync`` (spec §8.1 steps 2, 3, 5 and
  §8.4 ask each write to be durable before the next API step).
- ``checkpoint.json``: the same bytes (the versioned, checksummed JSON document of
  ``core.plugin.checkpoint_codec``), replaced atomically by ``rename`` right after each durable
  write, without ``fsync``. It is what people and the drain and cleanup roles read (``jq .
  checkpoint.json``); ``sriov-dra orphans`` and the lab read the slot file through
  :func:`read_only`. A reader always sees a complete document, never behind a write the plugin
  acted on (it is replaced before the write returns); after a power loss it may be older (or
  empty) until the plugin starts, which rewrites it from the slot file before it serves anything.

Upgrade: a plugin directory holding only ``checkpoint.json`` (written by a build before the slot
file existed, durably) is adopted: :meth:`CheckpointFiles.settle` creates the slot file from it
after the store decoded it. Never delete ``checkpoint.slots`` while ``checkpoint.json`` may be
stale. A build older than the slot file writes only ``checkpoint.json``: after rolling a node back
to one and forward again, the slot file's older content wins and the records written meanwhile
are lost, so drain the node (no prepared claim) before rolling back across this change.

This module owns only which file holds what; the bytes are the codec's, the rules the store's.
"""

from __future__ import annotations

import errno
import logging
import time
from pathlib import Path
from typing import Final

from sriov_dra.host import atomicfile, slotfile
from sriov_dra_rules import errors

CHECKPOINT_FILE_NAME: Final = "checkpoint.json"
"""The readable copy's name inside the plugin directory, as upstream's checkpoint."""

SLOTS_FILE_NAME: Final = "checkpoint.slots"
"""The durable record's name inside the plugin directory."""

CHECKPOINT_FILE_MODE: Final = 0o600
"""Permission bits of both files: rendered CNI configs may reference IPAM credentials; only root reads them."""

LOG: Final = logging.getLogger(__name__)


READ_ATTEMPTS: Final = 5
"""Reads of a live slot file before :func:`read_only` reports it corrupt (a read spanning two writes)."""


def read_only(path: Path) -> tuple[bytes, Path]:
    """Read a checkpoint without writing or locking anything: ``(document bytes, the file they came from)``.

    ``path`` is a slot file (any name ending ``.slots``: its newest valid slot), or a file named
    ``checkpoint.json`` whose sibling ``checkpoint.slots`` exists (the durable record wins: the
    readable copy may lag after a power loss), else that file itself. For tools (``sriov-dra
    orphans``, the lab) that must never write the plugin's files. A slot file without a valid slot
    is read again (up to :data:`READ_ATTEMPTS` times, 20 ms apart), since one read of a live file
    can span two of the plugin's writes.
    Raises: ``FileNotFoundError`` when neither exists; ``ContractViolation`` for a slot file that
    stays without a valid slot; ``OSError`` when unreadable.
    """
    if path.name.endswith(".slots"):
        slots = path
    elif path.name == CHECKPOINT_FILE_NAME:
        slots = path.with_name(SLOTS_FILE_NAME)
    else:
        return path.read_bytes(), path
    for attempt in range(READ_ATTEMPTS):
        raw = atomicfile.read_optional(slots)
        if raw is None:
            if slots == path:
                raise FileNotFoundError(errno.ENOENT, "no slot file", str(path))
            return path.read_bytes(), path
        try:
            return slotfile.parse(raw, source=str(slots)).payload, slots
        except slotfile.SlotFileError as exc:
            if attempt + 1 == READ_ATTEMPTS:
                raise errors.ContractViolation(f"checkpoint {exc}") from exc
            time.sleep(0.02)
    raise AssertionError("unreachable")


class CheckpointFiles:
    """The durable slot file and the readable copy of one checkpoint (see the module docstring).

    ``path`` is the readable copy (``<dir>/checkpoint.json``); the slot file is its sibling
    ``checkpoint.slots``. Use: :meth:`read`, decode, :meth:`settle`, then :meth:`write` per change.
    Not thread-safe (the store calls it under its lock); one writer per directory.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._slots = slotfile.SlotFile(path.with_name(SLOTS_FILE_NAME), mode=CHECKPOINT_FILE_MODE)
        self._pending: bytes | None = None  # what settle() must still write
        self._adopt = False
        self._source = path

    @property
    def path(self) -> Path:
        """The readable copy, ``checkpoint.json``."""
        return self._path

    @property
    def slots_path(self) -> Path:
        """The durable record, ``checkpoint.slots``."""
        return self._slots.path

    @property
    def source(self) -> Path:
        """The file the last :meth:`read` returned bytes from (for error messages)."""
        return self._source

    def read(self) -> bytes | None:
        """Return the checkpoint's bytes (the slot file's newest valid blob, else the readable copy), or ``None``.

        Nothing is written here (:meth:`settle` does it once the caller has decoded the bytes).
        A torn slot (a write that never completed) is logged with its reason and the other is used.
        Raises: ``ContractViolation`` naming the slot file when it
        holds no valid slot, with the files left untouched; ``OSError`` when a file is unreadable.
        """
        atomicfile.remove_stale_temporaries(self._path)
        try:
            found = self._slots.read()
        except slotfile.SlotFileBusy as exc:
            raise errors.ContractViolation(f"checkpoint {exc}") from exc
        except slotfile.SlotFileError as exc:
            raise errors.ContractViolation(
                f"checkpoint {exc}. Restore it from a backup of the plugin directory, or drain the node "
                f"and move {self._slots.path} and {self._path} away before starting the plugin"
            ) from exc
        copy = atomicfile.read_optional(self._path)
        if found is None:
            self._source = self._path
            self._adopt = copy is not None
            self._pending = copy
            return copy
        for problem in found.problems:
            if not problem.endswith("never written"):
                LOG.warning(
                    "checkpoint slot not used",
                    extra={"path": str(self._slots.path), "detail": problem, "generation": found.generation},
                )
        self._source = self._slots.path
        self._adopt = False
        self._pending = found.payload if copy != found.payload else None
        return found.payload

    def settle(self) -> None:
        """After a successful decode: adopt a legacy ``checkpoint.json`` or refresh a stale copy.

        Adopting writes the slot file durably from the legacy bytes (the legacy file stays as the
        readable copy); a stale or missing copy is rewritten from the slot file.
        Raises: ``OSError`` when a write fails (nothing the caller read is lost: rerun).
        """
        pending, self._pending = self._pending, None
        if pending is None:
            return
        if self._adopt:
            self._slots.create(pending)
            self._adopt = False
            LOG.info("checkpoint adopted into slot file", extra={"path": str(self._slots.path)})
            return
        atomicfile.write_atomic(self._path, pending, mode=CHECKPOINT_FILE_MODE, durable=False)
        LOG.info("checkpoint copy rewritten from slot file", extra={"path": str(self._path)})

    def write(self, data: bytes) -> None:
        """Make ``data`` the checkpoint: durable in the slot file when this returns, then the readable copy.

        Raises: ``OSError`` from either write. When the slot write fails the previous checkpoint
        stays the durable one; when only the copy fails the new bytes are durable but unconfirmed
        to the caller (the store keeps its old state; its next write replaces both).
        """
        if self._slots.generation == 0:
            self._slots.create(data)
        else:
            self._slots.write(data)
        atomicfile.write_atomic(self._path, data, mode=CHECKPOINT_FILE_MODE, durable=False)

    def close(self) -> None:
        """Close the slot file's descriptor."""
        self._slots.close()
