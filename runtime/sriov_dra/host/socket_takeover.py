"""One unix socket path served by the newest daemon of a rolling update, changed only under a lock.

docs/guard.md#rolling-update. Beside the socket ``<dir>/<name>`` live ``.<name>.lock``, an empty
file locked (``flock``) around every change of the path, so that one daemon's look at the path and
its change of it are one step against every other daemon's; and ``<name>.instances``, the instances
(Pod UIDs) that took the path over, oldest first, the last one the holder. The ordering rule: an
instance listed before the last was superseded by a newer Pod and never takes the path again (a
restart of its container before its Pod is deleted idles); the holder's own restart, a new
instance, or a daemon without an instance name takes it over. A daemon gives the path up only
while it is still its own socket.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sriov_dra.host import atomic_file

INSTANCES_KEPT: Final = 16
"""How many instances the ``.instances`` file keeps (the holder and the last superseded ones)."""
FILE_MODE: Final = 0o600


class Retired(Exception):
    """This instance was superseded by a newer one and must not take the path back."""

    def __init__(self, instance: str, holder: str) -> None:
        super().__init__(f"instance {instance} was superseded by {holder}, which holds the socket path")
        self.instance = instance
        self.holder = holder


@dataclass(frozen=True)
class Holding:
    """The socket a daemon put at the path: its inode, and the instances it superseded or found superseded."""

    inode: int
    superseded: tuple[str, ...]


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


def take_over(path: Path, instance: str, bind: Callable[[Path], None]) -> Holding:
    """Put a new socket at ``path`` in one rename, unless ``instance`` was superseded.

    ``bind(staging)`` binds and listens on a socket at the staging path beside ``path``; it is then
    renamed over ``path`` (a shim connecting meanwhile reaches the previous socket or the new one,
    never none) and ``instance`` recorded as the holder. ``instance`` empty: always taken over,
    nothing recorded.
    Raises: :class:`Retired` (nothing bound); ``OSError`` when binding or renaming fails (the staging
    path is removed).
    """
    with locked(path):
        seen = instances(path)
        if instance and instance in seen[:-1]:
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
        kept = [i for i in seen if i != instance][-(INSTANCES_KEPT - 1) :]
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
