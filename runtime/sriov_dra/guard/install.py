"""Writing the guard onto a node: the shim file and the runtime-facing conflist.

What a node needs (the Ansible ``guard`` role does exactly this, ``sriov-dra-guard install`` is
the same code for the lab and for manual installs):

1. ``<cni bin dir>/multus-guard``: this package's ``guard/shim.py`` with a ``#!<python3> -IS``
   line (standard library only, so it needs no virtualenv and starts in tens of milliseconds);
2. ``<cni conf dir>/00-multus-guard.conflist``: one plugin of type ``multus-guard`` carrying the
   primary network's runtime capabilities (so ``portMappings``/``bandwidth`` reach Multus) and the
   guard's Multus settings;
3. Multus's primary pinned (``multusMasterCNI``, ``--multus-master-cni-file-name`` or a separate
   autoconfig directory).

The rules those files must follow (which file the runtime uses, which primary may be pinned,
what a guard file holds, Multus's pinning) are the shared install contract,
:mod:`sriov_dra_rules.cniinstall`, which ``sriov-dra preflight`` and the collection's
``cni_config`` and ``preflight`` modules use too. The guard never reads or edits Multus's own
``00-multus.conf``. Files are replaced atomically.
Source: reference multus.md §2.1, §2.2, §2.5; ARCHITECTURE.md §6.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from sriov_dra.guard import shim
from sriov_dra.host import atomicfile
from sriov_dra_rules import cniinstall

CONFLIST_NAME: Final = cniinstall.GUARD_FILE
SHIM_NAME: Final = cniinstall.GUARD_TYPE
PLUGIN_TYPE: Final = cniinstall.GUARD_TYPE
DEFAULT_NETWORK_NAME: Final = "multus-cni-network"


def guard_conflist(
    *,
    primary_config: Path,
    mode: str,
    socket_path: str = shim.DEFAULT_SOCKET,
    name: str = DEFAULT_NETWORK_NAME,
    cni_version: str | None = None,
    multus: Mapping[str, Any] | None = None,
) -> str:
    """Return the text of ``00-multus-guard.conflist`` for the primary at ``primary_config``.

    ``multus`` holds further ``multus.*`` keys (``binary``, ``clusterNetwork``,
    ``daemonSocketDir``, ``kubeconfig``, ``daemonConfigFile``, ``config``).
    Shapes: indented JSON, keys in a fixed order, newline-terminated; ``cniVersion`` defaults to
    the primary's (Multus requires compatible versions); ``capabilities`` are the primary's
    enabled ones (:func:`sriov_dra_rules.cniinstall.enabled_capabilities`). Whether the
    primary may be pinned in a given directory is :func:`sriov_dra_rules.cniinstall.check_primary_file`.
    Raises: ``cniinstall.ContractError`` when the primary cannot be read as one strict JSON
    object (a repeated key is named with its path) or the result is not a valid guard config (:func:`sriov_dra_rules.cniinstall.validate_guard_config`, which
    refuses what the shim refuses).
    """
    primary = cniinstall.load_json(primary_config, "primary network config")
    version = cni_version or primary.get("cniVersion")
    plugin: dict[str, Any] = {"type": PLUGIN_TYPE}
    caps = cniinstall.enabled_capabilities(primary)
    if caps:
        plugin["capabilities"] = {k: True for k in caps}
    plugin["guard"] = {"socket": socket_path}
    plugin["multus"] = {"mode": mode, "primaryConfig": str(primary_config), **dict(multus or {})}
    doc = {"cniVersion": version, "name": name, "plugins": [plugin]}
    cniinstall.validate_guard_config(CONFLIST_NAME, doc)
    return json.dumps(doc, indent=2) + "\n"


def shim_text(interpreter: str) -> bytes:
    """The installable shim: ``#!<interpreter> -IS`` followed by ``guard/shim.py`` unchanged."""
    source = Path(shim.__file__).read_bytes()
    return f"#!{interpreter} -IS\n".encode() + source


def write_shim(bin_dir: Path, *, interpreter: str) -> Path:
    """Install the shim as ``<bin_dir>/multus-guard`` (mode 0755, atomic). Returns its path."""
    path = bin_dir / SHIM_NAME
    bin_dir.mkdir(parents=True, exist_ok=True)
    atomicfile.write_atomic(path, shim_text(interpreter), mode=0o755)
    return path


def write_conflist(conf_dir: Path, text: str) -> Path:
    """Install ``<conf_dir>/00-multus-guard.conflist`` (mode 0644, atomic). Returns its path."""
    path = conf_dir / CONFLIST_NAME
    conf_dir.mkdir(parents=True, exist_ok=True)
    atomicfile.write_atomic(path, text.encode(), mode=0o644)
    return path
