# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Multus's delegate cache as the ``multus-guard`` shim checks it before a DEL.

Multus v4.3.0 keeps one file per container, ``<cniDir>/<container ID>``, with the delegates it ran
at ADD, and DEL replays them. A file it cannot decode makes it skip every delegate DEL and leak
the sandbox's reservations (multus-cni #948, #1087; docs/design.md#cni-teardown), so the shim
moves such a file aside, keeping a copy next to it, and Multus takes its cache-missing path
(:func:`set_aside_unreadable_cache`). Reads and writes the node; standard library only (the
installed shim runs it).
"""

from __future__ import annotations

import json
import os
import stat
from typing import Final

DEFAULT_MULTUS_CACHE_DIR: Final = "/var/lib/cni/multus"
"""Multus's ``cniDir`` default (v4.3.0 ``pkg/types/conf.go``): one delegate cache file per container ID."""
CORRUPT_COPY_INFIX: Final = ".corrupt-"
"""An unreadable cache ``<cniDir>/<id>`` is kept as ``<cniDir>/<id>.corrupt-<UTC time>[.<n>]``."""


def is_container_id(value: str) -> bool:
    """True for a CNI container ID (libcni's rule: ``[a-zA-Z0-9][a-zA-Z0-9_.-]*``), never a path."""
    return (
        bool(value) and all(c.isascii() and (c.isalnum() or c in "_.-") for c in value) and value[0].isalnum()
    )


def cache_problem(data: bytes) -> str | None:
    """Why Multus v4.3.0 cannot use ``data`` as a container's delegate cache, or ``None`` if it can.

    Multus's DEL decodes the file as a JSON list of delegate objects and indexes its first entry; a
    file that is not JSON (0 bytes, cut short by a crash), not a list, an empty list or a list with
    a non-object entry makes it log ``cannot properly delete`` (or panic) and answer success
    without running any delegate. Entries are not checked field by field.
    Shapes: the problem as a short phrase (``"0 bytes"``, ``"not JSON (...)"``, ``"a JSON object,
    not a list of delegates"``).
    Source: Multus v4.3.0 ``pkg/multus/multus.go`` ``CmdDel``; multus-cni #948, #1087.
    """
    if not data.strip():
        return f"{len(data)} bytes" if not data else "only whitespace"
    try:
        decoded = json.loads(data.decode("utf-8", "replace"), parse_constant=_no_constant)
    except ValueError as exc:
        return f"not JSON ({exc}; {len(data)} bytes, cut short?)"
    except RecursionError:
        return "not JSON (nested too deeply)"
    if not isinstance(decoded, list):
        return f"a JSON {_JSON_KINDS.get(type(decoded), 'value')}, not a list of delegates"
    if not decoded:
        return "an empty list of delegates"
    for index, entry in enumerate(decoded):
        if not isinstance(entry, dict):
            return f"delegate [{index}] is not a JSON object"
    return None


_JSON_KINDS: Final[dict[type, str]] = {
    dict: "object",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _keep_copy(path: str, data: bytes, stamp: str) -> str:
    """Put a copy of ``path`` (contents ``data``) next to it under a name no file has; return it."""
    for n in range(1000):
        copy = f"{path}{CORRUPT_COPY_INFIX}{stamp}" + (f".{n}" if n else "")
        try:
            os.link(path, copy)  # the same inode: contents, mode and mtime as Multus left them
            return copy
        except FileExistsError:
            continue
        except OSError:  # no hard links on this filesystem: write the bytes instead
            try:
                fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            return copy
    raise OSError(f"no free name for a copy of {path}")


def set_aside_unreadable_cache(
    cache_dir: str, container_id: str, *, stamp: str
) -> tuple[str, str, str] | None:
    """Move Multus's cache ``<cache_dir>/<container_id>`` aside when Multus cannot read it.

    A valid cache, a missing one and anything that is not a regular file are left untouched
    (``None``). An unreadable one (:func:`cache_problem`) is first linked (or copied) to
    ``<file>.corrupt-<stamp>[.<n>]`` next to it, never over an existing file, and only then
    removed, so DEL finds no cache: Multus v4.3.0 then rebuilds the delegates from the live Pod and
    its NADs (for a managed Pod the frozen shadows its finalizer keeps) and runs every delegate's
    DEL. Returns ``(path, copy, problem)`` when it moved one.
    Raises: ``OSError`` when the file cannot be read, copied or removed (a copy already made is
    kept); ``ValueError`` for a ``container_id`` that is not a CNI container ID.
    Source: Multus v4.3.0 ``CmdDel`` (a missing cache with the Pod alive is rebuilt; any other read
    failure skips every delegate); multus-cni #948, #1087.
    """
    if not is_container_id(container_id):
        raise ValueError(
            f"CNI_CONTAINERID {container_id!r} is not a container ID; its cache is not looked up"
        )
    path = os.path.join(cache_dir, container_id)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None  # a directory or device by that name: not a cache file; Multus decides
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
    finally:
        os.close(fd)
    problem = cache_problem(data)
    if problem is None:
        return None
    copy = _keep_copy(path, data, stamp)
    os.unlink(path)
    dir_fd = os.open(cache_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path, copy, problem
