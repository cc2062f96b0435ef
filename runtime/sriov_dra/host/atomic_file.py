"""Crash-safe replacement and removal of small state files (checkpoint, CDI specs).

A reader of the target sees the complete old or the complete new content, never a prefix, even
across a kill or a power loss: write a temporary ``.<target>.<random>.tmp`` in the same directory,
``fsync`` it, ``rename`` it over the target, ``fsync`` the directory (derived files may skip both
flushes, :func:`write_atomic`). File mechanics only: never decides content, never follows a
symlink at the target, never deletes anything but the target and its own temporaries.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

TEMP_SUFFIX = ".tmp"
"""Suffix of temporary files; with the ``.<name>.`` prefix it identifies this module's leftovers."""


def _temp_prefix(target: Path) -> str:
    return f".{target.name}."


def fsync_directory(directory: Path) -> None:
    """Make a rename, create or unlink inside ``directory`` durable.

    Raises: ``OSError`` from ``open``/``fsync`` (e.g. the directory is missing).
    """
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, mode: int = 0o644, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically and (unless ``durable=False``) durably.

    On any failure before the rename the temporary file is removed and ``path`` keeps its old
    content (or stays absent). The parent directory must already exist; it is not created, so a
    wrong root fails loudly instead of scattering state.

    ``durable=False`` skips both ``fsync`` calls: readers and a killed process still see the old
    or the new complete content (the rename is atomic), but after a power loss or kernel crash
    the file may be old, absent or empty. Only for derived files that are rebuilt from durable
    state before anyone reads them again after a reboot (CDI specs, ``host.cdi``; the
    checkpoint's readable copy, rebuilt from its slot file at start, ``host.checkpoint_files``).

    Shapes: ``data`` is written byte for byte; the file gets permission bits ``mode``.
    Raises: ``OSError`` from the file system (``FileNotFoundError`` for a missing directory,
    ``PermissionError``, ``OSError(ENOSPC)``); the target is untouched in every such case except
    a failure of the final directory ``fsync``, after which the new content is in place but its
    durability is unconfirmed (callers treat the write as failed and may safely write again).
    """
    directory = path.parent
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=_temp_prefix(path), suffix=TEMP_SUFFIX)
    tmp = Path(tmp_name)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    if durable:
        fsync_directory(directory)


def remove_durable(path: Path) -> bool:
    """Remove ``path`` and make the removal durable; an absent file is success.

    Returns whether a file was removed (``False`` when it was already absent).
    Raises: ``OSError`` other than ``FileNotFoundError`` (e.g. ``IsADirectoryError``,
    ``PermissionError``); the file is then still present.
    """
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_directory(path.parent)
    return True


def read_optional(path: Path) -> bytes | None:
    """Return the bytes of ``path``, or ``None`` when it does not exist.

    Raises: ``OSError`` other than ``FileNotFoundError`` (permission, is-a-directory).
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def stale_temporaries(path: Path) -> list[Path]:
    """List temporaries that an interrupted :func:`write_atomic` of ``path`` left behind.

    Shapes: sorted paths of regular files named ``.<path.name>.<anything>.tmp`` in the same
    directory; an absent directory gives ``[]``.
    """
    prefix = _temp_prefix(path)
    try:
        entries = list(path.parent.iterdir())
    except FileNotFoundError:
        return []
    found = [
        e
        for e in entries
        if e.name.startswith(prefix) and e.name.endswith(TEMP_SUFFIX) and e.is_file() and not e.is_symlink()
    ]
    return sorted(found)


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Delete the leftovers listed by :func:`stale_temporaries` and return what was removed.

    Only call this while no other writer of ``path`` can be running (one active plugin per node,
    docs/design.md#checkpoint), e.g. at startup before the first write.

    Raises: ``OSError`` other than ``FileNotFoundError`` from ``unlink``.
    """
    removed: list[Path] = []
    for tmp in stale_temporaries(path):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed.append(tmp)
    if removed:
        fsync_directory(path.parent)
    return removed
