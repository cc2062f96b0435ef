"""A Pod's device metadata files, found by claim UID and rewritten keeping what the plugin wrote.

The guard fills the network part of the files the plugin wrote at prepare
(docs/design.md#device-metadata): :meth:`PodMetadataFiles.claim_files` finds the files of the
given claims of one namespace under ``<plugin data dir>/dra-device-metadata/<namespace>_<claim>/``,
:meth:`PodMetadataFiles.update` rewrites one under :func:`request_lock` (the lock the plugin's own
writer takes, so neither overwrites the other's change) by a rename: the guard runs before any
container of the Pod exists, so no mount holds the old inode, and a reader sees the whole old or
the whole new file. Only touches files that exist; never creates or removes one.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Final

from sriov_dra.core import metadata_document
from sriov_dra.host import atomic_file

FILE_MODE: Final = 0o644

_write: Final = functools.partial(atomic_file.write_atomic, mode=FILE_MODE, durable=False)
"""Derived files: the plugin rebuilds them from its record at every prepare."""

Edit = Callable[[Mapping[str, object]], dict[str, object] | None]
"""Gets the decoded document; returns the new one, or ``None`` to leave the file as it is."""


@contextlib.contextmanager
def request_lock(directory: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on a request's directory (every writer of its file takes it).

    Raises: ``OSError`` (e.g. the directory is missing).
    """
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


class PodMetadataFiles:
    """The metadata files under ``data_dir``, the plugin's data directory as this process sees it."""

    def __init__(self, data_dir: Path) -> None:
        self._root = data_dir / metadata_document.HOST_SUBDIR

    def claim_files(self, namespace: str, claim_uids: Collection[str]) -> list[Path]:
        """The files of ``namespace``'s claims whose document names one of ``claim_uids``, sorted.

        A namespace and a claim name never hold ``_``, so ``<namespace>_`` selects the namespace.
        Raises: ContractViolation for a file of the namespace that does not decode; ``OSError``.
        """
        try:
            claim_dirs = sorted(d for d in self._root.iterdir() if d.name.startswith(f"{namespace}_"))
        except FileNotFoundError:
            return []
        found: list[Path] = []
        for path in (p for d in claim_dirs for p in sorted(d.glob(f"*/{metadata_document.HOST_FILE_NAME}"))):
            data = atomic_file.read_optional(path)
            if data is None:
                continue  # removed meanwhile (an unprepare)
            doc = metadata_document.decode(data, source=str(path))
            if metadata_document.claim_uid(doc) in claim_uids:
                found.append(path)
        return found

    def update(self, path: Path, edit: Edit) -> bool:
        """Apply ``edit`` to the file's document under the request lock; True when it was rewritten.

        False, writing nothing, when the file is gone or ``edit`` returns ``None``.
        Raises: ContractViolation for a file that does not decode (it is left as it is); ``OSError``.
        """
        try:
            with request_lock(path.parent):
                data = atomic_file.read_optional(path)
                new = None if data is None else edit(metadata_document.decode(data, source=str(path)))
                if new is None:
                    return False
                _write(path, metadata_document.encode(new))
                return True
        except FileNotFoundError:  # the claim's directory went meanwhile (an unprepare)
            return False
