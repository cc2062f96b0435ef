# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The guard's CNI install contract (docs/guard.md, "Installation contract"), held once for
``sriov-dra-guard install``, ``sriov-dra preflight`` and the ``cni_config`` and ``preflight``
modules.

It decides which file the runtime uses, what a guard file holds, which primary may be pinned
and whether Multus's own primary is pinned. Every JSON file is read with the one strict reader;
errors are :class:`ContractError` naming the file, the key and the fix. Reads the node, writes
nothing; standard library and sibling rules only, so the collection carries it to managed nodes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Final

from . import errors, guard_conf, strict_json

GUARD_FILE: Final = "00-multus-guard.conflist"
"""The guard's runtime-facing config file name; it sorts first in the CNI config directory."""
GUARD_TYPE: Final = "multus-guard"
"""The guard shim's plugin type (and its binary's name in the CNI bin dir)."""
MULTUS_TYPES: Final = ("multus", "multus-shim", GUARD_TYPE)
"""Plugin types a primary must not have: each would call Multus or the guard again."""
MULTUS_GENERATED: Final = "00-multus"
"""Prefix of the files thick Multus generates (``00-multus.conf``) and of the guard's file."""
THIN_SKIPS: Final = "00-multus.conf"
"""The only prefix thin Multus's auto-discovery skips."""
CONF_EXTENSIONS: Final = (".conf", ".conflist", ".json")
"""Suffixes of the files a CNI runtime reads from its config directory (libcni's defaults)."""
RESERVED_MULTUS_KEYS: Final = guard_conf.RESERVED_MULTUS_KEYS
"""Keys of ``multus.config`` the guard sets itself (the shim refuses them; :mod:`.guard_conf`)."""


class ContractError(ValueError):
    """The guard's config or its surroundings break the install contract; the text names the
    file, the key, the value and the fix."""


def conf_files(conf_dir: str | os.PathLike[str]) -> list[str]:
    """CNI config file names in ``conf_dir``, in the runtime's (byte-wise) order.

    libcni's ``ConfFiles`` sorted, as containerd and CRI-O pick the file: names, not paths;
    regular files (symlinks followed) ending in one of :data:`CONF_EXTENSIONS`; hidden files
    (atomic writers' temporaries) left out. The first is the file the runtime uses; the guard's
    ``00-multus-guard.conflist`` sorts before Multus's ``00-multus.conf`` (``-`` < ``.``).
    Raises: ContractError when the directory cannot be listed.
    """
    directory = os.fspath(conf_dir)
    try:
        names = os.listdir(directory)
    except OSError as exc:
        raise ContractError(f"cannot list the CNI config directory {directory}: {exc.strerror}") from None
    return sorted(
        n
        for n in names
        if n.endswith(CONF_EXTENSIONS)
        and not n.startswith(".")
        and os.path.isfile(os.path.join(directory, n))
    )


def runtime_choice(conf_dir: str | os.PathLike[str]) -> str | None:
    """The file name the runtime uses from ``conf_dir`` (the first of :func:`conf_files`), or None."""
    files = conf_files(conf_dir)
    return files[0] if files else None


def load_json(path: str | os.PathLike[str], what: str) -> dict[str, Any]:
    """The JSON object in the file at ``path``; ``what`` names the file in errors.

    Shapes: values as ``json.loads`` gives them (:func:`strict_json.decode_file`).
    Raises: ContractError ``cannot read <what> <path>: <strerror>`` (missing, a directory, no
    permission), ``<what> <path> is not valid JSON: <path in the file>: <problem>`` (malformed,
    NaN, a repeated key), ``... is not UTF-8 text``, or ``... must hold a JSON object``.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise ContractError(f"cannot read {what} {name}: {exc.strerror}") from None
    try:
        data = strict_json.decode_file(raw, what=what, source=name)
    except errors.InvalidSpec as exc:
        raise ContractError(exc.detail) from None
    if not isinstance(data, dict):
        raise ContractError(f"{what} {name} must hold a JSON object, got {strict_json.kind(data)}")
    return data


def plugin_entries(config: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The plugin objects of a ``.conf`` (the root itself) or a ``.conflist`` (``plugins``)."""
    plugins = config.get("plugins")
    if isinstance(plugins, list):
        return [p for p in plugins if isinstance(p, Mapping)]
    return [config]


def enabled_capabilities(config: Mapping[str, Any]) -> list[str]:
    """Names of the capabilities set to ``true`` at the root or in any plugin entry, sorted.

    The runtime passes a capability only to a config that enables it, so the guard must enable
    the union of its primary's.
    """
    found: set[str] = set()
    for entry in [config, *plugin_entries(config)]:
        caps = entry.get("capabilities")
        if isinstance(caps, Mapping):
            found.update(k for k, v in caps.items() if v is True)
    return sorted(found)


def validate_guard_config(name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Check the guard file's name and content; return its one plugin entry.

    The one parser of the entry's keys is :func:`sriov_dra_rules.guard_conf.check_entry`, which the
    shim runs on the node, so this refuses exactly what the shim refuses, and more.
    Shapes: ``name`` is the file name (``00-multus-guard.conflist``), ``config`` the decoded file.
    Raises: ContractError naming the key, the value found and the fix: the entry, flattened as
    the runtime hands it to the shim, fails :func:`sriov_dra_rules.guard_conf.check_entry` (the
    shim's own check), or the file is more than the shim sees wrong (a root ``type``, not one
    plugin of type ``multus-guard``, a relative ``primaryConfig``, a ``.conf`` name).
    """
    if not name.endswith(".conflist"):
        raise ContractError(f"guard config file {name} must be a .conflist (for example {GUARD_FILE})")
    if "type" in config:
        raise ContractError(
            f"guard config {name}: a conflist must not have a root type key; put it in plugins[0]"
        )
    plugins = config.get("plugins")
    if not isinstance(plugins, list) or len(plugins) != 1 or not isinstance(plugins[0], dict):
        raise ContractError(
            f"guard config {name}: plugins must hold exactly one object of type {GUARD_TYPE}; "
            "Multus runs the delegates"
        )
    entry: dict[str, Any] = plugins[0]
    if entry.get("type") != GUARD_TYPE:
        raise ContractError(
            f"guard config {name}: plugins[0].type must be {GUARD_TYPE}, got {entry.get('type')!r}"
        )
    try:
        keys = guard_conf.check_entry(
            {**entry, "cniVersion": config.get("cniVersion"), "name": config.get("name")}
        )
    except guard_conf.GuardConfError as exc:
        where = f"key {exc.key}" if exc.key in ("cniVersion", "name") else f"plugins[0].{exc.key}"
        raise ContractError(f"guard config {name}: {where} {exc.problem}") from None
    primary = keys["multus.primaryConfig"]
    if not os.path.isabs(str(primary)):
        raise ContractError(
            f"guard config {name}: plugins[0].multus.primaryConfig must be the absolute path of the pinned "
            f"primary network's config file, got {primary!r}"
        )
    return entry


def check_primary_file(conf_dir: str | os.PathLike[str], name: str, primary: str) -> dict[str, Any]:
    """The file ``primary`` may be pinned as the primary of the guard file ``name`` in ``conf_dir``.

    Returns the primary's decoded config.
    Raises: ContractError when it is the guard's own file, a Multus-generated ``00-multus*`` file
    or a config of a Multus or guard plugin type (recursion), or cannot be read as a strict JSON
    object (:func:`load_json`).
    """
    recursion = "(recursion); point it at the cluster network's config"
    if os.path.normpath(primary) == os.path.normpath(os.path.join(os.fspath(conf_dir), name)):
        raise ContractError(
            f"guard config {name}: multus.primaryConfig points at the guard's own file {recursion}"
        )
    if os.path.basename(primary).startswith(MULTUS_GENERATED):
        raise ContractError(
            f"guard config {name}: multus.primaryConfig {primary} is a Multus-generated file {recursion}"
        )
    config = load_json(primary, "primary network config")
    bad = sorted({str(p.get("type")) for p in plugin_entries(config) if p.get("type") in MULTUS_TYPES})
    if bad:
        raise ContractError(
            f"guard config {name}: primary {primary} has plugin type {', '.join(bad)} (recursion); the primary "
            "must be the cluster network (for example flannel or calico)"
        )
    return config


def check_primary(conf_dir: str | os.PathLike[str], name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The pinned primary is a real cluster network and the guard carries its capabilities.

    Shapes: ``entry`` is what :func:`validate_guard_config` returned for the guard file ``name``
    in ``conf_dir``. Returns the primary's decoded config.
    Raises: ContractError as :func:`check_primary_file`, or when the primary enables a
    capability the guard's entry does not (the runtime would not pass port mappings or
    bandwidth to the guard, so Multus would not get them).
    """
    primary = entry["multus"]["primaryConfig"]
    config = check_primary_file(conf_dir, name, primary)
    held = entry.get("capabilities")
    caps: Mapping[str, Any] = held if isinstance(held, Mapping) else {}
    missing = [c for c in enabled_capabilities(config) if caps.get(c) is not True]
    if missing:
        raise ContractError(
            f"guard config {name}: capabilities {missing} of the primary {primary} are not enabled in "
            "plugins[0].capabilities, so the runtime would not pass them (portMappings, bandwidth ...); add them"
        )
    return config


def check_sorts_first(conf_dir: str | os.PathLike[str], name: str) -> None:
    """The guard file ``name`` sorts before every other CNI config file in ``conf_dir``.

    Raises: ContractError naming the earlier files and the fix; or as :func:`conf_files`.
    """
    earlier = [n for n in conf_files(conf_dir) if n != name and n < name]
    if earlier:
        raise ContractError(
            f"guard config {name} sorts after {', '.join(earlier)} in {os.fspath(conf_dir)}, and the container "
            f"runtime uses the lexically first file; rename the guard file ({GUARD_FILE} sorts first) or move "
            "those files away"
        )


def check_multus_daemon_config(path: str | os.PathLike[str], guard_name: str) -> dict[str, Any]:
    """Thick Multus with ``multusConfigFile: auto`` pins ``multusMasterCNI`` to a real primary.

    Returns the decoded daemon config.
    Without ``multusMasterCNI``, thick auto-discovery picks the first config file that does not
    start with ``00-multus``: an early primary other than the cluster network.
    Raises: ContractError when ``multusMasterCNI`` is unset or names the guard's or a
    ``00-multus*`` file; or as :func:`load_json`.
    """
    source = os.fspath(path)
    config = load_json(source, "Multus daemon config")
    if config.get("multusConfigFile", "auto") != "auto":
        return config
    master = config.get("multusMasterCNI")
    if not isinstance(master, str) or not master:
        raise ContractError(
            f"Multus daemon config {source}: multusConfigFile is auto but multusMasterCNI is not set, so thick "
            "Multus picks the first config file in its autoconfig dir as its primary; set multusMasterCNI to the "
            "primary network's file name"
        )
    if master == guard_name or master.startswith(MULTUS_GENERATED):
        raise ContractError(
            f"Multus daemon config {source}: multusMasterCNI {master} is the guard's or Multus's own file "
            "(recursion); set it to the primary network's file name"
        )
    return config


def check_installed(
    conf_dir: str, guard_file: str, daemon_config: str | None, expected_mode: str | None = None
) -> str:
    """What the preflight's ``guard-config`` check verifies on a node; returns a one-line summary.

    The guard file in ``conf_dir`` passes :func:`validate_guard_config`, runs Multus in
    ``expected_mode`` (``thick``/``thin``) when one is given, its primary passes
    :func:`check_primary` and, for thick mode with ``daemon_config`` given, Multus's daemon
    config passes :func:`check_multus_daemon_config`.
    Shapes: ``"<path>: mode <mode>, primary pinned to <primary>"``.
    Raises: ContractError as those functions, or naming both modes and the flag to correct when
    the installed mode is not ``expected_mode``.
    """
    path = os.path.join(conf_dir, guard_file)
    entry = validate_guard_config(guard_file, load_json(path, "guard config"))
    mode = entry["multus"]["mode"]
    if expected_mode and mode != expected_mode:
        raise ContractError(
            f"{path}: the guard runs Multus {mode}, but the check was asked for {expected_mode}; if this "
            f"node runs {mode}, pass --multus-mode {mode} (module option multus_mode; the preflight role takes "
            f"the inventory's multus_mode), else reinstall with the multus and guard roles in mode {expected_mode}"
        )
    check_primary(conf_dir, guard_file, entry)
    primary = entry["multus"]["primaryConfig"]
    if daemon_config and mode == "thick":
        check_multus_daemon_config(daemon_config, guard_file)
    return f"{path}: mode {mode}, primary pinned to {primary}"


def installation_problems(
    conf_dir: str | os.PathLike[str],
    *,
    mode: str,
    multus_master_cni: str | None,
    autoconfig_dir: str | os.PathLike[str] | None,
) -> list[str]:
    """What in a node's CNI setup would bypass the guard or make Multus select it; ``[]`` if none.

    Checks: the runtime picks :data:`GUARD_FILE`; ``multus_master_cni`` does not name it; without
    a pinned primary, Multus's auto-discovery in ``autoconfig_dir`` would not pick it (thick skips
    every ``00-multus*`` name, thin only ``00-multus.conf*``).
    Raises: ContractError when ``conf_dir`` cannot be listed.
    """
    problems: list[str] = []
    directory = os.fspath(conf_dir)
    chosen = runtime_choice(directory)
    if chosen != GUARD_FILE:
        problems.append(
            f"the runtime would use {chosen!r} from {directory}, not {GUARD_FILE}: the guard is bypassed; "
            "install the guard's conflist (its name must sort first)"
        )
    if multus_master_cni == GUARD_FILE:
        problems.append(f"multusMasterCNI names {GUARD_FILE}: Multus would run the guard as its primary")
    same_dir = autoconfig_dir is not None and os.path.realpath(autoconfig_dir) == os.path.realpath(directory)
    if not multus_master_cni and same_dir:
        skip = MULTUS_GENERATED if mode == "thick" else THIN_SKIPS
        candidates = sorted(
            n for n in os.listdir(directory) if n.endswith(CONF_EXTENSIONS) and not n.startswith(skip)
        )
        if candidates and candidates[0] == GUARD_FILE:
            problems.append(
                f"{mode} Multus auto-discovery in {directory} would pick {GUARD_FILE} as the primary: pin the "
                "primary with multusMasterCNI (thin: --multus-master-cni-file-name) or use a separate "
                "multusAutoconfigDir"
            )
    return problems
