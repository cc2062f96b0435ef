"""The guard's installation contract: the shim file, the runtime-facing conflist, and the ordering rules.

What a node needs (the Ansible ``guard`` role does exactly this, ``sriov-dra-guard install`` is
the same code for the lab and for manual installs):

1. ``<cni bin dir>/multus-guard``: this package's ``guard/shim.py`` with a ``#!<python3> -IS``
   line (standard library only, so it needs no virtualenv and starts in tens of milliseconds);
2. ``<cni conf dir>/00-multus-guard.conflist``: one plugin of type ``multus-guard`` carrying the
   primary network's runtime capabilities (so ``portMappings``/``bandwidth`` reach Multus) and the
   guard's Multus settings. Its name sorts before Multus's ``00-multus.conf`` (``-`` < ``.``) and
   before every primary, so the runtime picks it;
3. Multus's primary pinned: ``multusMasterCNI`` in the thick daemon config (or
   ``--multus-master-cni-file-name`` for thin), or a separate autoconfig directory, because thin
   auto-discovery skips only ``00-multus.conf*`` and would pick the guard's file
   (:func:`installation_problems`).

The guard never reads or edits Multus's own ``00-multus.conf``. Files are replaced atomically.
Source: reference multus.md §2.1, §2.2, §2.5; ARCHITECTURE.md §6.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from sriov_dra.guard import shim
from sriov_dra.host import atomicfile
from sriov_dra_rules import errors, strictjson

CONFLIST_NAME: Final = "00-multus-guard.conflist"
SHIM_NAME: Final = "multus-guard"
PLUGIN_TYPE: Final = "multus-guard"
DEFAULT_NETWORK_NAME: Final = "multus-cni-network"
CONFIG_SUFFIXES: Final = (".conf", ".conflist", ".json")


def primary_capabilities(primary: Mapping[str, Any]) -> dict[str, bool]:
    """Union of the enabled ``capabilities`` of a primary config (root or each ``plugins`` entry).

    Shapes: keys sorted; only ``true`` values. Source: reference multus.md §2.1 (Multus's rule).
    """
    found: set[str] = set()
    holders = [primary, *[p for p in primary.get("plugins", []) if isinstance(p, Mapping)]]
    for holder in holders:
        caps = holder.get("capabilities")
        if isinstance(caps, Mapping):
            found.update(k for k, v in caps.items() if v is True)
    return {k: True for k in sorted(found)}


def read_json(path: Path, what: str) -> object:
    """The strict JSON of the file at ``path`` (a CNI config a person or an installer wrote).

    Shapes: plain values as ``json.loads`` gives them (floats included), decoded from UTF-8.
    Raises: OSError when it cannot be read; ValueError naming ``what``, the file and each
    problem with its path (malformed JSON, NaN, a repeated key such as ``$.plugins[0].type``),
    from the shared reader :func:`sriov_dra_rules.strictjson.decode_file`.
    """
    try:
        return strictjson.decode_file(path.read_bytes(), what=what, source=str(path))
    except errors.InvalidSpec as exc:
        raise ValueError(exc.detail) from exc


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
    the primary's (Multus requires compatible versions).
    Raises: ``OSError``/``ValueError`` when the primary cannot be read as one strict JSON object
    (:func:`read_json`: a repeated key is named with its path);
    ``ValueError`` when the result is not a valid guard config (checked with the shim's parser).
    """
    primary = read_json(primary_config, "primary config")
    if not isinstance(primary, dict):
        raise ValueError(f"{primary_config} is not a JSON object")
    version = cni_version or primary.get("cniVersion")
    plugin: dict[str, Any] = {"type": PLUGIN_TYPE}
    caps = primary_capabilities(primary)
    if caps:
        plugin["capabilities"] = caps
    plugin["guard"] = {"socket": socket_path}
    plugin["multus"] = {"mode": mode, "primaryConfig": str(primary_config), **dict(multus or {})}
    doc = {"cniVersion": version, "name": name, "plugins": [plugin]}
    shim.parse_conf(json.dumps({"cniVersion": version, "name": name, **plugin}).encode())
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


def runtime_choice(conf_dir: Path) -> str | None:
    """The file a CNI runtime uses: the lexically first ``*.conf``/``*.conflist``/``*.json``."""
    names = sorted(n for n in os.listdir(conf_dir) if n.endswith(CONFIG_SUFFIXES) and not n.startswith("."))
    return names[0] if names else None


def installation_problems(
    conf_dir: Path,
    *,
    mode: str,
    multus_master_cni: str | None,
    autoconfig_dir: Path | None,
) -> list[str]:
    """Say what in a node's CNI setup would bypass the guard or make Multus select it; ``[]`` if none.

    Checks: the runtime picks ``00-multus-guard.conflist``; ``multusMasterCNI`` does not name it;
    without a pinned primary, Multus's auto-discovery in ``autoconfig_dir`` would not pick it
    (thick skips every ``00-multus*`` name, thin only ``00-multus.conf*``).
    Source: reference multus.md §2.1, §2.2, §2.5 (traps 1 and 2).
    """
    problems: list[str] = []
    chosen = runtime_choice(conf_dir)
    if chosen != CONFLIST_NAME:
        problems.append(
            f"the runtime would use {chosen!r} from {conf_dir}, not {CONFLIST_NAME}: the guard is bypassed; "
            "install the guard's conflist (its name must sort first)"
        )
    if multus_master_cni == CONFLIST_NAME:
        problems.append(f"multusMasterCNI names {CONFLIST_NAME}: Multus would run the guard as its primary")
    if (
        not multus_master_cni
        and autoconfig_dir is not None
        and autoconfig_dir.resolve() == conf_dir.resolve()
    ):
        skip = "00-multus" if mode == "thick" else "00-multus.conf"
        candidates = sorted(
            n for n in os.listdir(conf_dir) if n.endswith(CONFIG_SUFFIXES) and not n.startswith(skip)
        )
        if candidates and candidates[0] == CONFLIST_NAME:
            problems.append(
                f"{mode} Multus auto-discovery in {conf_dir} would pick {CONFLIST_NAME} as the primary: pin the "
                "primary with multusMasterCNI (thin: --multus-master-cni-file-name) or use a separate "
                "multusAutoconfigDir"
            )
    return problems
