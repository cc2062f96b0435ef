"""The checkpoint on disk: a durable A/B slot file and a readable copy beside it.

Three files in the plugin directory (``/var/lib/kubelet/plugins/<driver>/``), all mode 0600:

- ``checkpoint.slots``: the durable record (``host.slot_file``). Every checkpoint write returns
  only after its bytes are flushed there in place, one ``fdatasync`` (spec §8.1 steps 2, 3, 5 and
  §8.4 ask each write to be durable before the next API step).
- ``checkpoint.json``: the same bytes (the versioned, checksummed JSON document of
  ``core.plugin.checkpoint_codec``), replaced atomically by ``rename`` during each durable
  write, without ``fsync``: on a helper thread while the slot file's ``fdatasync`` runs (the
  flush releases the interpreter; replacing the copy right after it cost 0.1-0.3 ms more per
  write, three times on a prepare's critical path; bench/prepare.py). It is what people read
  (``jq . checkpoint.json``); ``sriov-dra orphans``, the lab and the drain and cleanup roles
  (``sriovnet.dra.checkpoint_info``) read the slot file through
  ``sriov_dra_rules.checkpoint_read`` (:func:`read_only` here). A reader always sees a complete
  document, never behind a write the plugin acted on (it is replaced before the write returns);
  while the flush runs it may already show the new state, as the slot file itself does (its page
  cache); after a power loss it may be older (or empty) until the plugin starts, which rewrites
  it from the slot file before it serves anything.
- ``checkpoint.lock``: empty; the writing process holds an exclusive POSIX lock (``lockf``) on it
  from :meth:`CheckpointFiles.read` until it ends or closes the files, taken before anything is
  read, cleaned or written, so a second plugin process on the node (spec §6.3: one active plugin
  per node) waits up to :data:`LOCK_WAIT_S` and then fails instead of writing slots or removing the
  first one's temporaries. The lock is per process: within one process it does not exclude, and
  closing another descriptor of the lock file would release it (nothing in the plugin opens it
  twice). On a file system without POSIX locks the plugin runs without it and logs a warning.

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
import fcntl
import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from sriov_dra.host import atomic_file, slot_file
from sriov_dra_rules import checkpoint_read, errors

CHECKPOINT_FILE_NAME: Final = checkpoint_read.CHECKPOINT_FILE_NAME
"""The readable copy's name inside the plugin directory, as upstream's checkpoint."""

SLOTS_FILE_NAME: Final = checkpoint_read.SLOTS_FILE_NAME
"""The durable record's name inside the plugin directory."""

LOCK_FILE_NAME: Final = "checkpoint.lock"
"""An empty file the writing process holds a POSIX lock on for its whole life (never replaced)."""

LOCK_WAIT_S: Final = 30.0
"""How long a second process waits for the lock before it fails (s): a rolling restart's old Pod
may still be stopping."""

CHECKPOINT_FILE_MODE: Final = 0o600
"""Permission bits of both files: rendered CNI configs may reference IPAM credentials; only root reads them."""

LOG: Final = logging.getLogger(__name__)


def read_only(path: Path) -> tuple[bytes, Path]:
    """Read a checkpoint without writing or locking anything: ``(document bytes, the file they came from)``.

    For tools (``sriov-dra orphans``, the lab) that must never write the plugin's files; the slot
    file wins over ``checkpoint.json`` (see ``sriov_dra_rules.checkpoint_read.read_only``, which the
    collection's ``checkpoint_info`` module uses too).
    Raises: ``FileNotFoundError`` when neither file exists; ``ContractViolation`` for a slot file
    that stays without a valid slot; ``OSError`` when unreadable.
    """
    return checkpoint_read.read_only(path)


class CheckpointFiles:
    """The durable slot file and the readable copy of one checkpoint (see the module docstring).

    ``path`` is the readable copy (``<dir>/checkpoint.json``); the slot file is its sibling
    ``checkpoint.slots``. Use: :meth:`read`, decode, :meth:`settle`, then :meth:`write` per change.
    Not thread-safe (the store calls it under its lock); one writer per directory.
    """

    def __init__(self, path: Path, *, lock_wait_s: float = LOCK_WAIT_S) -> None:
        self._path = path
        self._slots = slot_file.SlotFile(path.with_name(SLOTS_FILE_NAME), mode=CHECKPOINT_FILE_MODE)
        self._lock_path = path.with_name(LOCK_FILE_NAME)
        self._lock_wait_s = lock_wait_s
        self._lock_fd: int | None = None
        self._pending: bytes | None = None  # what settle() must still write
        self._adopt = False
        self._source = path

    @property
    def path(self) -> Path:
        """The readable copy, ``checkpoint.json``."""
        return self._path

    @property
    def source(self) -> Path:
        """The file the last :meth:`read` returned bytes from (for error messages)."""
        return self._source

    def read(self) -> bytes | None:
        """Return the checkpoint's bytes (the slot file's newest valid blob, else the readable copy), or ``None``.

        Takes the lock first (see the module docstring). Nothing of the checkpoint is written here
        (:meth:`settle` does it once the caller has decoded the bytes) except what makes the slot
        file's newest blob durable (``host.slot_file``). A torn slot (a write that never completed)
        is logged with its reason and the other is used.
        Raises: ``ContractViolation`` naming the lock file when another process holds it past the
        wait, or naming the slot file when it holds no valid slot (the files left untouched);
        ``OSError`` when a file is unreadable.
        """
        self._hold_lock()
        atomic_file.remove_stale_temporaries(self._path)
        try:
            found = self._slots.read()
        except slot_file.SlotFileError as exc:
            raise errors.ContractViolation(
                f"checkpoint {exc}. Restore it from a backup of the plugin directory, or drain the node "
                f"and move {self._slots.path} and {self._path} away before starting the plugin"
            ) from exc
        copy = atomic_file.read_optional(self._path)
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
        atomic_file.write_atomic(self._path, pending, mode=CHECKPOINT_FILE_MODE, durable=False)
        LOG.info("checkpoint copy rewritten from slot file", extra={"path": str(self._path)})

    def write(self, data: bytes) -> None:
        """Make ``data`` the checkpoint: durable in the slot file and in the readable copy when this returns.

        The copy is replaced on the :class:`_Copier` thread while the slot file's ``fdatasync``
        runs, and joined before this returns or raises (no write outlives the call); a new or
        growing slot file is written first and the copy after it, on this thread.
        Raises: ``OSError`` from either write (the slot write's first). When the slot write
        fails the previous checkpoint stays the durable one (the copy may already show the new
        bytes, as the slot file's page cache does; the next write replaces both); when only the
        copy fails the new bytes are durable but unconfirmed to the caller (the store keeps its
        old state; its next write replaces both).
        """
        if self._slots.generation == 0:
            self._slots.create(data)
            self._write_copy(data)
            return
        copy: _Copy | None = None

        def start_copy() -> None:
            nonlocal copy
            try:
                copy = _Copier.shared().start(functools.partial(self._write_copy, data))
            except RuntimeError:  # no thread can start (a limit, interpreter shutdown): copy after the flush
                copy = None

        try:
            self._slots.write(data, before_flush=start_copy)
        finally:
            failed = copy.wait() if copy is not None else None
        if copy is None:  # the slot file was replaced whole (a growth), or no thread could start
            self._write_copy(data)
        elif failed is not None:
            raise failed

    def _write_copy(self, data: bytes) -> None:
        atomic_file.write_atomic(self._path, data, mode=CHECKPOINT_FILE_MODE, durable=False)

    def close(self) -> None:
        """Close the slot file and release the lock."""
        self._slots.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _hold_lock(self) -> None:
        if self._lock_fd is not None:
            return
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, CHECKPOINT_FILE_MODE)
        deadline = time.monotonic() + self._lock_wait_s
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno in _LOCK_UNSUPPORTED:
                    LOG.warning(
                        "checkpoint lock unsupported: a second plugin process would not be stopped",
                        extra={"path": str(self._lock_path), "reason": os.strerror(exc.errno or 0)},
                    )
                    break
                if exc.errno in _LOCK_BUSY and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                os.close(fd)
                if exc.errno in _LOCK_BUSY:
                    raise errors.ContractViolation(
                        f"checkpoint lock {self._lock_path} is held by another process after "
                        f"{self._lock_wait_s:g} s (another plugin on this node?); stop it first: one plugin "
                        "writes a node's checkpoint"
                    ) from exc
                raise
        self._lock_fd = fd


class _Copy:
    """One readable-copy write handed to the :class:`_Copier`; :meth:`wait` joins it."""

    def __init__(self, work: Callable[[], None]) -> None:
        self.work = work
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # handed to the waiting writer, never lost
            self.error = exc
        finally:
            self.done.set()

    def wait(self) -> BaseException | None:
        """Block until the write ended; return what it raised (``None`` on success)."""
        self.done.wait()
        return self.error


class _Copier:
    """One daemon thread that writes readable copies while the writer's ``fdatasync`` runs.

    Shared by the process (one writer per checkpoint directory; the store serializes its
    writes under its lock, so at most one copy per store is in flight). A daemon thread holds
    no state between copies, and every copy's writer waits for it, so it never delays exit.
    """

    _instance: _Copier | None = None
    _instance_lock = threading.Lock()

    @classmethod
    def _after_fork_in_child(cls) -> None:
        """A forked child has no copy thread and may have forked while another thread held the lock."""
        cls._instance_lock = threading.Lock()
        cls._instance = None

    def __init__(self) -> None:
        self._items: queue.SimpleQueue[_Copy] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="sriov-dra-checkpoint-copy", daemon=True).start()

    @classmethod
    def shared(cls) -> _Copier:
        """The process's copier, started on first use (again in a forked child: :meth:`_after_fork_in_child`)."""
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def start(self, work: Callable[[], None]) -> _Copy:
        """Hand ``work`` to the thread and return at once; the caller must :meth:`_Copy.wait`."""
        copy = _Copy(work)
        self._items.put(copy)
        return copy

    def _serve(self) -> None:
        while True:
            self._items.get().run()


os.register_at_fork(after_in_child=_Copier._after_fork_in_child)

_LOCK_BUSY: Final = (errno.EACCES, errno.EAGAIN)
_LOCK_UNSUPPORTED: Final = (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)
