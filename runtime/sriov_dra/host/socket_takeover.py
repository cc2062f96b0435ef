"""One unix socket path served by the newest daemon of a rolling update, changed only under a lock.

docs/guard.md#rolling-update. Beside the socket ``<dir>/<name>`` live ``.<name>.lock``, an empty
file locked (``flock``) around every change of the path, so that one daemon's look at the path and
its change of it are one step against every other daemon's; and ``<name>.instances``, the instances
(Pod UIDs) that took the path over, oldest first. The ordering rule: the newest listed instance,
a new one (then listed last) and a daemon without an instance name take the path over; an instance
listed before the last was superseded by a newer Pod and takes the path only while no daemon
accepts connections at it (the newer Pod's daemon stopped, a rollback deleted it, or it died), so
its daemon idles while the newer one serves and takes over once nobody does; taking it back keeps
its place in the list, so the newer Pod's restart takes the path again. A daemon gives the path up
only while it is still its own socket.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sriov_dra.host import atomic_file

INSTANCES_KEPT: Final = 16
"""How many instances the ``.instances`` file keeps (the newest ones)."""
FILE_MODE: Final = 0o600
PROBE_TIMEOUT_S: Final = 1.0
"""How long the look whether a daemon accepts at the path may wait to connect (s)."""


class Retired(Exception):
    """This instance was superseded by a newer one, whose daemon accepts at the path: it must not take it back."""

    def __init__(self, instance: str, holder: str) -> None:
        super().__init__(f"instance {instance} was superseded by {holder}, which holds the socket path")
        self.instance = instance
        self.holder = holder


@dataclass(frozen=True)
class Holding:
    """The socket a daemon put at the path: its inode, and the instances it superseded or found superseded."""

    inode: int
    superseded: tuple[str, ...]
    """The instances listed before this one (none for a daemon without an instance name: every one)."""


def _lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


def instances_path(path: Path) -> Path:
    """The file recording which instances took ``path`` over."""
    return path.with_name(f"{path.name}.instances")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of ``path``'s changes (blocks while another daemon holds it)."""
    fd = os.open(_lock_path(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def instances(path: Path) -> list[str]:
    """The instances that took ``path`` over, oldest first (``[]`` without the file)."""
    data = atomic_file.read_optional(instances_path(path))
    return [] if data is None else [line for line in data.decode(errors="replace").splitlines() if line]


def accepting(path: Path) -> bool:
    """Whether a daemon accepts connections at ``path`` (a connect succeeds, or waits in a full backlog).

    ``False`` only when there is nothing at the path or nobody listens on it (``ENOENT``,
    ``ECONNREFUSED``); any other failure counts as a daemon there. The connection is closed
    without a byte sent: the daemon reads an empty request and answers nothing.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(PROBE_TIMEOUT_S)
        try:
            probe.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            return False
        except OSError:
            return True
    return True


def take_over(path: Path, instance: str, bind: Callable[[Path], None]) -> Holding:
    """Put a new socket at ``path`` in one rename, unless a newer instance's daemon accepts there.

    ``bind(staging)`` binds and listens on a socket at the staging path beside ``path``; it is then
    renamed over ``path`` (a shim connecting meanwhile reaches the previous socket or the new one,
    never none). A new ``instance`` is recorded last; a listed one keeps its place. ``instance``
    empty: always taken over, nothing recorded.
    Raises: :class:`Retired` when ``instance`` is listed before the last and a daemon accepts at
    ``path`` (nothing bound); ``OSError`` when binding or renaming fails (the staging path is removed).
    """
    with locked(path):
        seen = instances(path)
        if instance and instance in seen[:-1] and accepting(path):
            raise Retired(instance, seen[-1])
        staging = path.with_name(f".{path.name}.{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staging)
        try:
            bind(staging)
            inode = os.stat(staging).st_ino
            os.rename(staging, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(staging)
            raise
        if not instance:
            return Holding(inode, tuple(seen))
        if instance in seen:
            return Holding(inode, tuple(seen[: seen.index(instance)]))
        kept = seen[-(INSTANCES_KEPT - 1) :]
        data = "".join(f"{i}\n" for i in [*kept, instance]).encode()
        atomic_file.write_atomic(instances_path(path), data, mode=FILE_MODE, durable=False)
        return Holding(inode, tuple(kept))


def release(path: Path, inode: int) -> bool:
    """Remove ``path`` if it is still the socket with ``inode``; a newer daemon's socket stays.

    Returns whether it was removed (``False`` too when the directory is gone: so is the path).
    """
    try:
        with locked(path):
            if os.stat(path).st_ino != inode:
                return False
            os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def holds(path: Path, inode: int) -> bool:
    """Whether ``path`` is still the socket with ``inode`` (a missing path counts as held: nobody took it)."""
    try:
        return os.stat(path).st_ino == inode
    except FileNotFoundError:
        return True
