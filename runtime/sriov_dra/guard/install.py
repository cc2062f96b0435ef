"""Writing the guard onto a node: the shim file and the runtime-facing conflist.

What the Ansible ``guard`` role and ``sriov-dra-guard install`` write (docs/guard.md,
"Installation contract"): the shared rules as one content-addressed ``multus-guard.d/<digest>/``
directory, then the ``multus-guard`` shim naming that digest (:func:`write_shim`), then
``00-multus-guard.conflist`` carrying the primary's capabilities. The shim is replaced atomically
after its rules, so an exec never mixes versions. The rules those files follow are
``sriov_dra_rules.cni_install``'s; Multus's own ``00-multus.conf`` is never read or edited.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import py_compile
import re
import shutil
import stat
import tempfile
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import sriov_dra_rules
from sriov_dra.guard import shim
from sriov_dra.host import atomic_file
from sriov_dra_rules import cni_install, guard_conf

CONFLIST_NAME: Final = cni_install.GUARD_FILE
SHIM_NAME: Final = cni_install.GUARD_TYPE
PLUGIN_TYPE: Final = cni_install.GUARD_TYPE
DEFAULT_NETWORK_NAME: Final = "multus-cni-network"


def guard_conflist(
    *,
    primary_config: Path,
    mode: str,
    socket_path: str = shim.DEFAULT_SOCKET,
    name: str = DEFAULT_NETWORK_NAME,
    cni_version: str | None = None,
    multus: Mapping[str, Any] | None = None,
    plugin_checkpoint: str = guard_conf.DEFAULT_PLUGIN_CHECKPOINT,
    verify_ordinary_selections: bool = False,
) -> str:
    """Return the text of ``00-multus-guard.conflist`` for the primary at ``primary_config``.

    ``multus`` holds further ``multus.*`` keys (``binary``, ``clusterNetwork``,
    ``daemonSocketDir``, ``kubeconfig``, ``daemonConfigFile``, ``config``);
    ``plugin_checkpoint`` (``guard.pluginCheckpoint``, the plugin's ``checkpoint.json``) and
    ``verify_ordinary_selections`` (``guard.verifyOrdinarySelections``, written only when on) are
    the guard's keys of docs/guard.md.
    Shapes: indented JSON, keys in a fixed order, newline-terminated; ``cniVersion`` defaults to
    the primary's (Multus requires compatible versions); ``capabilities`` are the primary's
    enabled ones (:func:`sriov_dra_rules.cni_install.enabled_capabilities`). Whether the
    primary may be pinned in a given directory is :func:`sriov_dra_rules.cni_install.check_primary_file`.
    Raises: ``cni_install.ContractError`` when ``multus`` holds ``mode`` or ``primaryConfig``
    (they would override the checked arguments), when the primary cannot be read as one strict JSON
    object (a repeated key is named with its path) or the result is not a valid guard config (:func:`sriov_dra_rules.cni_install.validate_guard_config`, which
    refuses what the shim refuses).
    """
    overridden = sorted(set(multus or {}) & {"mode", "primaryConfig"})
    if overridden:  # they would silently replace the checked --mode / --primary-config
        raise cni_install.ContractError(
            f"multus.{overridden[0]} cannot be given among the further multus keys "
            "(the mode and the primary config are their own settings: --mode, --primary-config)"
        )
    primary = cni_install.load_json(primary_config, "primary network config")
    version = cni_version or primary.get("cniVersion")
    plugin: dict[str, Any] = {"type": PLUGIN_TYPE}
    caps = cni_install.enabled_capabilities(primary)
    if caps:
        plugin["capabilities"] = {k: True for k in caps}
    plugin["guard"] = {"socket": socket_path, "pluginCheckpoint": plugin_checkpoint}
    if verify_ordinary_selections:
        plugin["guard"]["verifyOrdinarySelections"] = True
    plugin["multus"] = {"mode": mode, "primaryConfig": str(primary_config), **dict(multus or {})}
    doc = {"cniVersion": version, "name": name, "plugins": [plugin]}
    cni_install.validate_guard_config(CONFLIST_NAME, doc)
    return json.dumps(doc, indent=2) + "\n"


RULES_PACKAGE: Final = "sriov_dra_rules"
_VERSION_LINE: Final = b"\nRULES_VERSION: str | None = None\n"


def rules_sources() -> dict[str, bytes]:
    """The rules package the shim imports, as installed: ``{file name: bytes}`` of its ``*.py`` files."""
    root = Path(sriov_dra_rules.__file__).parent
    return {p.name: p.read_bytes() for p in sorted(root.glob("*.py"))}


def rules_digest(sources: Mapping[str, bytes]) -> str:
    """The version of a rules copy: SHA-256 (hex, first 16 characters) over its file names and bytes."""
    h = hashlib.sha256()
    for name in sorted(sources):
        data = sources[name]
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


def shim_text(interpreter: str, rules_version: str) -> bytes:
    """The installable shim: ``#!<interpreter> -IS``, then ``guard/shim.py`` with ``RULES_VERSION`` set.

    Raises: ``ValueError`` when the source does not hold the one ``RULES_VERSION`` line to set.
    """
    source = Path(shim.__file__).read_bytes()
    if source.count(_VERSION_LINE) != 1:
        raise ValueError(f"{shim.__file__} must hold exactly one line {_VERSION_LINE.strip().decode()!r}")
    versioned = source.replace(_VERSION_LINE, f"\nRULES_VERSION: str | None = {rules_version!r}\n".encode())
    return f"#!{interpreter} -IS\n".encode() + versioned


def _matches(directory: Path, sources: Mapping[str, bytes]) -> bool:
    package = directory / RULES_PACKAGE
    try:
        found = {p.name: p.read_bytes() for p in package.glob("*.py")}
    except OSError:
        return False
    return found == dict(sources)


def write_rules(bin_dir: Path) -> str:
    """Install the rules the shim imports as ``<bin_dir>/multus-guard.d/<digest>/``; return the digest.

    The directory is written under a hidden temporary name (every file fsynced, bytecode compiled
    for this interpreter at optimization level 0 (the shim's ``-IS``; the image's services run
    with ``PYTHONOPTIMIZE=2``) with unchecked hashes, so the read-only tree needs no writes later) and
    renamed into place; an existing directory of that digest with the same sources is kept, one
    with other contents is replaced. Raises: ``OSError`` when it cannot be written.
    """
    sources = rules_sources()
    digest = rules_digest(sources)
    parent = bin_dir / shim.RULES_PARENT
    target = parent / digest
    if _matches(target, sources):
        return digest
    parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{digest}.tmp-"))
    try:
        _fill(temp, sources)
        if (
            target.exists() or target.is_symlink()
        ):  # other contents under this digest: set aside, then removed
            aside = Path(tempfile.mkdtemp(dir=parent, prefix=f".{digest}.old-"))
            os.rename(target, aside / digest)
            shutil.rmtree(aside)
        os.rename(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    atomic_file.fsync_directory(parent)
    return digest


def _fill(temp: Path, sources: Mapping[str, bytes]) -> None:
    """Write ``sources`` as ``temp/sriov_dra_rules/`` with level-0 bytecode, everything fsync'd."""
    package = temp / RULES_PACKAGE
    package.mkdir()
    for name, data in sources.items():
        atomic_file.write_atomic(package / name, data, mode=0o644)
        py_compile.compile(  # optimize=0: the shim runs as ``python3 -IS`` whatever PYTHONOPTIMIZE installs it
            str(package / name),
            doraise=True,
            optimize=0,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
    for directory in (package / "__pycache__", package, temp):
        atomic_file.fsync_directory(directory)


def installed_rules_version(shim_path: Path) -> str | None:
    """The ``RULES_VERSION`` an installed shim names (``None``: no shim, or none it names).

    Raises: ``OSError`` when the shim exists but cannot be read.
    """
    try:
        text = shim_path.read_bytes()
    except FileNotFoundError:
        return None
    found = re.search(rb"^RULES_VERSION: str \| None = '([0-9a-f]{16})'$", text, re.M)
    return found.group(1).decode() if found else None


def prune_rules(bin_dir: Path, keep: Collection[str]) -> list[Path]:
    """Remove every entry of ``<bin_dir>/multus-guard.d`` but those named in ``keep`` (and the
    parent when ``keep`` is empty and nothing is left).

    Run after the shim that uses ``keep`` is in place (empty: after the shim is removed).
    Returns the removed paths. Raises: ``OSError`` when one cannot be removed.
    """
    parent = bin_dir / shim.RULES_PARENT
    try:
        entries = sorted(parent.iterdir())
    except FileNotFoundError:
        return []
    removed = []
    for entry in entries:
        if entry.name not in keep:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
            removed.append(entry)
    if not keep:
        parent.rmdir()
    elif removed:
        atomic_file.fsync_directory(parent)
    return removed


def write_shim(bin_dir: Path, *, interpreter: str) -> Path:
    """Install the rules, then the shim as ``<bin_dir>/multus-guard`` (mode 0755, atomic), then prune.

    Order: :func:`write_rules`, the shim naming that digest, :func:`prune_rules`. The rules the
    replaced shim named are kept too (until the next upgrade): a CNI call that exec'd the old shim
    just before the replacement still finds its rules. Older directories and temporaries of an
    interrupted install are removed. A shim that already holds these bytes with mode 0755 is not
    rewritten (an init container restarted on an unchanged node changes no file, not even its
    mtime). Returns the shim's path. Raises: ``OSError`` when a file cannot be written or removed.
    """
    path = bin_dir / SHIM_NAME
    bin_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive(bin_dir):
        previous = installed_rules_version(path)
        digest = write_rules(bin_dir)
        _replace_unless_same(path, shim_text(interpreter, digest), mode=0o755)
        prune_rules(bin_dir, {digest} | ({previous} if previous else set()))
    return path


@contextlib.contextmanager
def _exclusive(bin_dir: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``bin_dir`` itself: installs and removals on one node never
    interleave (two init containers, or an install beside one), and no lock file is left behind."""
    fd = os.open(bin_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def remove_shim(bin_dir: Path) -> list[Path]:
    """Remove ``<bin_dir>/multus-guard`` first, then every rules directory; return what was removed."""
    path = bin_dir / SHIM_NAME
    if not bin_dir.is_dir():
        return []
    with _exclusive(bin_dir):
        removed = [path] if atomic_file.remove_durable(path) else []
        return removed + prune_rules(bin_dir, ())


def uninstall(bin_dir: Path, conf_dir: Path) -> list[Path]:
    """Take the guard off the node: the conflist first, then the shim, then its rules directories.

    In that order the runtime never finds a conflist naming a shim that is gone, nor a shim
    without its rules. Returns the removed paths (``[]`` when nothing was installed).
    Raises: ``OSError`` when one cannot be removed (what came before it is already removed).
    """
    conflist = conf_dir / CONFLIST_NAME
    removed = [conflist] if atomic_file.remove_durable(conflist) else []
    return removed + remove_shim(bin_dir)


def write_conflist(conf_dir: Path, text: str) -> Path:
    """Install ``<conf_dir>/00-multus-guard.conflist`` (mode 0644, atomic). Returns its path.

    An existing file with these bytes and mode is left as it is: the runtime's config watch sees
    no change when an unchanged install runs again. Raises: ``OSError`` from the file system.
    """
    path = conf_dir / CONFLIST_NAME
    conf_dir.mkdir(parents=True, exist_ok=True)
    _replace_unless_same(path, text.encode(), mode=0o644)
    return path


def _replace_unless_same(path: Path, data: bytes, *, mode: int) -> bool:
    """Write ``data`` to ``path`` atomically unless it is a regular file already holding exactly
    ``data`` with permission bits ``mode`` (as ``host.cdi`` skips an identical spec); return
    whether it was written."""
    if atomic_file.read_optional(path) == data:
        st = path.lstat()
        if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == mode:
            return False
    atomic_file.write_atomic(path, data, mode=mode)
    return True
