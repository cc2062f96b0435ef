"""The checkpoint on disk: a durable A/B slot file, a readable copy beside it, and a writer lock.

Three files, mode 0600 (docs/design.md#checkpoint): ``checkpoint.slots`` (``host.slot_file``),
the durable record, one in-place ``fdatasync`` per write; ``checkpoint.json``, the same bytes for
people and tools, renamed into place without a flush while the slot file flushes and rewritten
from the slot file at load when stale or missing (a directory with only ``checkpoint.json`` is
adopted); ``checkpoint.lock``, a POSIX lock held by the writing process, so a second plugin waits
:data:`LOCK_WAIT_S` and then fails before touching anything. Owns which file holds what.

The hand-over (docs/plugin.md#rolling-update): a process that wants the writer lock first holds
a POSIX lock on ``checkpoint.handover`` while it waits; the writing process polls
:meth:`CheckpointFiles.successor_waiting`, finishes and closes its writes, then releases the
writer lock. A waiter that dies releases its request with its process, so a request never
outlives the process that made it.
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

from sriov_dra.core.plugin import instance_order
from sriov_dra.host import atomic_file, slot_file
from sriov_dra_rules import checkpoint_doc, checkpoint_read, errors, slot_format

LOCK_FILE_NAME: Final = "checkpoint.lock"
"""An empty file the writing process holds a POSIX lock on for its whole life (never replaced).

Held from :meth:`CheckpointFiles.read` until the files are closed or the process exits; on a file
system without POSIX locks the plugin runs unlocked and warns."""

LOCK_WAIT_S: Final = 90.0
"""How long a second process waits for the lock before it fails (s): the writing process hands
over after its in-flight kubelet calls (at most the kubelet's 45 s deadline) and its workers stopped."""

HANDOVER_FILE_NAME: Final = "checkpoint.handover"
"""An empty file a process waiting for the writer lock holds a POSIX lock on (never replaced):
the writing process sees the request and hands the lock over."""

RETIRED_FILE_NAME: Final = "checkpoint.retired"
"""The instances (Pod UIDs) that handed the lock over, newest last, one a line: such an instance,
restarted before its Pod is deleted, must not ask for the lock back."""

INSTANCES_FILE_NAME: Final = "checkpoint.instances"
"""The Pod UIDs of the node's plugin instances in the order they first started, one a line
(``core.plugin.instance_order``): the node goes only to a newer instance."""

OWNER_FILE_NAME: Final = "checkpoint.owner"
"""The instance that last took the node and serves it, one line: written by a successor once it
serves, which confirms a hand-over to the instance that released the writer lock (that one wrote
its own name there just before, so no earlier name can pass for the confirmation)."""

RETIRED_KEPT: Final = 16
"""How many handed-over instances :func:`record_retired` keeps."""

CHECKPOINT_FILE_MODE: Final = 0o600
"""Permission bits of every file: rendered CNI configs may reference IPAM credentials."""

LOG: Final = logging.getLogger(__name__)


def read_only(path: Path) -> tuple[bytes, Path]:
    """Read a checkpoint without writing or locking anything: ``(document bytes, the file they came from)``.

    For tools that must never write the plugin's files (``sriov-dra orphans``, the lab); which file
    is read: ``sriov_dra_rules.checkpoint_read.read``, as the collection's ``checkpoint_info``.
    Raises: ``FileNotFoundError`` when neither file exists; ``ContractViolation`` for a slot file
    that stays without a valid slot; ``OSError`` when unreadable.
    """
    found = checkpoint_read.read(path)
    return found.payload, found.source


def record_retired(directory: Path, instance: str) -> None:
    """Record that ``instance`` handed the writer lock over (before it releases it), durably.

    Raises: ``OSError`` when the file cannot be written.
    """
    kept = [i for i in retired(directory) if i != instance][-(RETIRED_KEPT - 1) :]
    data = "".join(f"{i}\n" for i in [*kept, instance]).encode()
    atomic_file.write_atomic(directory / RETIRED_FILE_NAME, data, mode=CHECKPOINT_FILE_MODE, durable=True)


def retired(directory: Path) -> list[str]:
    """The instances recorded by :func:`record_retired`, oldest first (``[]`` without the file)."""
    return _lines(directory / RETIRED_FILE_NAME)


def record_instance(directory: Path, instance: str) -> tuple[str, ...]:
    """Append ``instance`` to the instance record unless it is there (durably); return the record.

    Appends of two processes are serialised by a lock on ``directory``. Raises: ``OSError`` when
    the record cannot be read or written.
    """
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released with the descriptor
        current = instances(directory)
        record = instance_order.recorded(current, instance)
        if record != current:
            data = "".join(f"{i}\n" for i in record).encode()
            atomic_file.write_atomic(
                directory / INSTANCES_FILE_NAME, data, mode=CHECKPOINT_FILE_MODE, durable=True
            )
        return record
    finally:
        os.close(fd)


def instances(directory: Path) -> tuple[str, ...]:
    """The instance record, oldest first (``()`` without the file). Raises: ``OSError`` when unreadable."""
    return tuple(_lines(directory / INSTANCES_FILE_NAME))


def record_owner(directory: Path, instance: str) -> None:
    """Record ``instance`` as the node's serving owner, durably. Raises: ``OSError`` when it cannot be written."""
    data = f"{instance}\n".encode()
    atomic_file.write_atomic(directory / OWNER_FILE_NAME, data, mode=CHECKPOINT_FILE_MODE, durable=True)


def owner(directory: Path) -> str | None:
    """The instance :func:`record_owner` recorded last (``None`` without the file). Raises: ``OSError``."""
    lines = _lines(directory / OWNER_FILE_NAME)
    return lines[-1] if lines else None


def node_claimed(directory: Path) -> bool:
    """Whether another process holds the writer lock or asks for it (the hand-over request).

    Only for a process that holds neither itself: probing a POSIX lock the process holds through
    another descriptor would release it. The request is probed first: a successor takes the
    writer lock before it ends its request, so it is seen in one of the two. ``False`` on a file
    system without POSIX locks. Raises: ``OSError`` when a file cannot be opened.
    """
    return _held_elsewhere(directory / HANDOVER_FILE_NAME) or _held_elsewhere(directory / LOCK_FILE_NAME)


def _lines(path: Path) -> list[str]:
    data = atomic_file.read_optional(path)
    return [] if data is None else [line for line in data.decode(errors="replace").splitlines() if line]


def _held_elsewhere(path: Path) -> bool:
    """Whether another process holds the POSIX lock of ``path`` (probed without waiting, then released)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, CHECKPOINT_FILE_MODE)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _LOCK_BUSY:
            return True
        if exc.errno in _LOCK_UNSUPPORTED:
            return False
        raise
    finally:
        os.close(fd)  # closing releases a probe lock taken above
    return False


class CheckpointFiles:
    """The durable slot file and the readable copy of one checkpoint (see the module docstring).

    ``path`` is the readable copy (``<dir>/checkpoint.json``); the slot file is its sibling
    ``checkpoint.slots``. Use: :meth:`read`, decode, :meth:`settle`, then :meth:`write` per change.
    Not thread-safe (the store calls it under its lock); one writer per directory.
    """

    def __init__(self, path: Path, *, lock_wait_s: float = LOCK_WAIT_S) -> None:
        self._path = path
        self._slots = slot_file.SlotFile(
            path.with_name(checkpoint_doc.SLOTS_FILE_NAME), mode=CHECKPOINT_FILE_MODE
        )
        self._lock_path = path.with_name(LOCK_FILE_NAME)
        self._handover_path = path.with_name(HANDOVER_FILE_NAME)
        self._lock_wait_s = lock_wait_s
        self._lock_fd: int | None = None
        self._pending: bytes | None = None  # what settle() must still write
        self._adopt = False
        self._source = path

    @property
    def source(self) -> Path:
        """The file the last :meth:`read` returned bytes from (for messages)."""
        return self._source

    def read(self) -> bytes | None:
        """Return the checkpoint's bytes (the slot file's newest valid blob, else the readable copy), or ``None``.

        Takes the lock first. Writes nothing of the checkpoint (:meth:`settle` does, once the
        caller has decoded the bytes) except what makes the slot file's newest blob durable
        (``host.slot_file``). A slot not used for damage (a write cut short) is logged.
        Raises: ``ContractViolation`` naming the lock file when another process holds it past the
        wait, or naming the slot file when it holds no valid slot (the files left untouched);
        ``OSError`` when a file is unreadable.
        """
        self._hold_lock()
        atomic_file.remove_stale_temporaries(self._path)
        try:
            found = self._slots.read()
        except slot_format.SlotFileError as exc:
            raise errors.ContractViolation(
                f"checkpoint {exc}. Restore it from a backup of the plugin directory, or drain the node "
                f"and move {self._slots.path} and {self._path} away before starting the plugin"
            ) from exc
        copy = atomic_file.read_optional(self._path)
        if found is None:
            self._source, self._adopt, self._pending = self._path, copy is not None, copy
            return copy
        for problem in found.damage:
            LOG.warning(
                "checkpoint slot not used",
                extra={"path": str(self._slots.path), "detail": problem, "generation": found.generation},
            )
        self._source, self._adopt = self._slots.path, False
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
        self._write_copy(pending)
        LOG.info("checkpoint copy rewritten from slot file", extra={"path": str(self._path)})

    def write(self, data: bytes) -> None:
        """Make ``data`` the checkpoint: durable in the slot file and in the readable copy when this returns.

        The copy is replaced on the helper thread while the slot file's ``fdatasync`` runs and
        joined before this returns or raises; when the slot file is created or replaced whole (a
        growth), or no thread can start, the copy is written after it on this thread.
        Raises: ``OSError`` from either write (the slot write's first). When the slot write
        fails the previous checkpoint stays the durable one (the copy may already show the new
        bytes, as the slot file's page cache does; the next write replaces both); when only the
        copy fails the new bytes are durable but unconfirmed to the caller (the store keeps its
        old state; its next write replaces both).
        """
        copy: _Copy | None = None

        def start_copy() -> None:
            nonlocal copy
            try:
                copy = _start_copy(functools.partial(self._write_copy, data))
            except RuntimeError:  # no thread can start (a limit, interpreter shutdown): copy after the flush
                copy = None

        try:
            if self._slots.generation == 0:
                self._slots.create(data)
            else:
                self._slots.write(data, before_flush=start_copy)
        finally:
            failed = copy.wait() if copy is not None else None
        if copy is None:
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

    def successor_waiting(self) -> bool:
        """Whether another process waits for the writer lock (holds the hand-over request).

        The writing process polls this; on ``True`` it stops writing and calls :meth:`close`.
        ``False`` on a file system without POSIX locks. Raises: ``OSError`` when the request file
        cannot be opened.
        """
        return _held_elsewhere(self._handover_path)

    def _hold_lock(self) -> None:
        if self._lock_fd is not None:
            return
        deadline = time.monotonic() + self._lock_wait_s
        # The request first: the writing process sees it and hands over; only one waiter at a time.
        request = self._locked(self._handover_path, deadline, "hand-over request")
        try:
            self._lock_fd = self._locked(self._lock_path, deadline, "lock")
        finally:
            if request is not None:
                os.close(request)  # the request ends: the lock is ours or the wait failed

    def _locked(self, path: Path, deadline: float, what: str) -> int | None:
        """An open descriptor of ``path`` holding its POSIX lock, waiting until ``deadline`` (``None``: no locks)."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, CHECKPOINT_FILE_MODE)
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except OSError as exc:
                if exc.errno in _LOCK_UNSUPPORTED:
                    LOG.warning(
                        "checkpoint lock unsupported: a second plugin process would not be stopped",
                        extra={"path": str(path), "reason": os.strerror(exc.errno or 0)},
                    )
                    os.close(fd)
                    return None
                if exc.errno in _LOCK_BUSY and time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                os.close(fd)
                if exc.errno in _LOCK_BUSY:
                    raise errors.ContractViolation(
                        f"checkpoint {what} {path} is held by another process after "
                        f"{self._lock_wait_s:g} s (another plugin on this node that does not hand over?); "
                        "stop it first: one plugin writes a node's checkpoint"
                    ) from exc
                raise


class _Copy:
    """One readable-copy write run on the copy thread; :meth:`wait` joins it."""

    def __init__(self, work: Callable[[], None]) -> None:
        self._work = work
        self._error: BaseException | None = None
        self._done = threading.Event()

    def run(self) -> None:
        try:
            self._work()
        except BaseException as exc:  # handed to the waiting writer, never lost
            self._error = exc
        finally:
            self._done.set()

    def wait(self) -> BaseException | None:
        """Block until the write ended; return what it raised (``None`` on success)."""
        self._done.wait()
        return self._error


_copies: queue.SimpleQueue[_Copy] | None = None


def _start_copy(work: Callable[[], None]) -> _Copy:
    """Hand ``work`` to the process's copy thread and return at once; the caller must :meth:`_Copy.wait`.

    One daemon thread (the writer joins every copy, so it never delays exit), started on first
    use, and again in a forked child, which has none (two stores racing to start it start two,
    which is harmless). Raises: ``RuntimeError`` when no thread can start.
    """
    global _copies
    if _copies is None:
        items: queue.SimpleQueue[_Copy] = queue.SimpleQueue()
        threading.Thread(target=_serve, args=(items,), name="sriov-dra-checkpoint-copy", daemon=True).start()
        _copies = items
    copy = _Copy(work)
    _copies.put(copy)
    return copy


def _serve(items: queue.SimpleQueue[_Copy]) -> None:
    while True:
        items.get().run()


def _forget_copy_thread() -> None:
    global _copies
    _copies = None


os.register_at_fork(after_in_child=_forget_copy_thread)

_LOCK_BUSY: Final = (errno.EACCES, errno.EAGAIN)
_LOCK_UNSUPPORTED: Final = (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)
