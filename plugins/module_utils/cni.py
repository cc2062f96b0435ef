# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The guard's runtime-facing CNI config: validation, ordering, primary pinning, atomic install.

This file owns the installation contract of ``multus-guard`` (ARCHITECTURE.md §6; reference
multus.md §2.5; the guard's config keys are ``sriov_dra.guard.shim.GuardConf``):

- the file is a conflist with exactly one plugin, ``type: multus-guard``, a ``multus`` section
  with ``mode`` ``thick``/``thin`` and ``primaryConfig`` (the pinned primary network's file);
- it sorts first among the ``.conf``/``.conflist``/``.json`` files of the CNI config directory
  (the runtime uses the lexically first file; ``00-multus-guard.conflist`` sorts before
  ``00-multus.conf`` because ``-`` < ``.``);
- no recursion: the primary is neither the guard's file, nor Multus's generated ``00-multus*``,
  nor a config whose plugin type is ``multus``, ``multus-shim`` or ``multus-guard``; and the
  guard's ``capabilities`` include every capability the primary enables (trap 4);
- thick Multus with ``multusConfigFile: auto`` must pin its primary with ``multusMasterCNI``
  (thick auto-discovery would otherwise pick any early non-``00-multus`` file, trap 1);
- files are replaced atomically (temp file in the same directory, fsync, rename, directory
  fsync) and only when their JSON content or mode differs.

It must import only the standard library and the shared rules (``sriov_dra_rules``): every JSON
file it reads goes through the one strict reader, ``strictjson``, so a repeated key is refused.
"""

from __future__ import annotations

import json
import os
import tempfile

from ansible_collections.sriovnet.dra.plugins.module_utils import base
from ansible_collections.sriovnet.dra.plugins.module_utils.sriov_dra_rules import errors, strictjson

GUARD_TYPE = "multus-guard"
MULTUS_TYPES = ("multus", "multus-shim", GUARD_TYPE)
CONF_EXTENSIONS = (".conf", ".conflist", ".json")


class CniConfigError(base.ModuleError):
    """The guard config or its surroundings would make the CNI path unsafe; the message says why."""


def conf_files(conf_dir):
    """CNI config file names in ``conf_dir``, in the runtime's (byte-wise) order.

    Hidden files (temporary files of atomic writers) are not configs, as for the guard.
    """
    try:
        names = os.listdir(conf_dir)
    except OSError as exc:
        raise CniConfigError("cannot list the CNI config directory %s: %s" % (conf_dir, exc.strerror))
    return sorted(
        n for n in names
        if n.endswith(CONF_EXTENSIONS) and not n.startswith(".") and os.path.isfile(os.path.join(conf_dir, n))
    )


def load_json(path, what):
    """Decoded JSON object in ``path``; ``what`` names the file in the error.

    Read by the shared strict reader (``strictjson.decode_file``), as the guard reads it: values as
    ``json.loads`` gives them, but a repeated key, NaN or malformed JSON is refused with its path.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except (OSError, IOError) as exc:
        raise CniConfigError("cannot read %s %s: %s" % (what, path, getattr(exc, "strerror", exc)))
    try:
        data = strictjson.decode_file(raw, what=what, source=path)
    except errors.InvalidSpec as exc:
        raise CniConfigError(exc.detail)
    if not isinstance(data, dict):
        raise CniConfigError("%s %s must hold a JSON object" % (what, path))
    return data


def plugin_entries(config):
    """The plugin objects of a ``.conf`` (the root) or ``.conflist`` (``plugins``)."""
    plugins = config.get("plugins")
    if isinstance(plugins, list):
        return [p for p in plugins if isinstance(p, dict)]
    return [config]


def enabled_capabilities(config):
    """Names of capabilities set to true at the root or in any plugin entry, sorted."""
    found = set()
    for entry in [config] + plugin_entries(config):
        caps = entry.get("capabilities")
        if isinstance(caps, dict):
            found.update(k for k, v in caps.items() if v is True)
    return sorted(found)


def validate_guard_config(name, config):
    """Check the guard file's name and content; return the guard plugin entry.

    Raises: CniConfigError naming the key and the fix.
    """
    if not name.endswith(".conflist"):
        raise CniConfigError("guard config file %s must be a .conflist (for example 00-multus-guard.conflist)" % name)
    for key in ("cniVersion", "name"):
        if not isinstance(config.get(key), str) or not config.get(key):
            raise CniConfigError("guard config %s: key %s must be a non-empty string" % (name, key))
    if "type" in config:
        raise CniConfigError("guard config %s: a conflist must not have a root type key; put it in plugins[0]" % name)
    plugins = config.get("plugins")
    if not isinstance(plugins, list) or len(plugins) != 1 or not isinstance(plugins[0], dict):
        raise CniConfigError(
            "guard config %s: plugins must hold exactly one object of type %s; Multus runs the delegates" % (name, GUARD_TYPE))
    entry = plugins[0]
    if entry.get("type") != GUARD_TYPE:
        raise CniConfigError("guard config %s: plugins[0].type must be %s, got %r" % (name, GUARD_TYPE, entry.get("type")))
    multus = entry.get("multus")
    if not isinstance(multus, dict):
        raise CniConfigError("guard config %s: plugins[0].multus must be an object with mode and primaryConfig" % name)
    if multus.get("mode") not in ("thick", "thin"):
        raise CniConfigError('guard config %s: plugins[0].multus.mode must be "thick" or "thin", got %r' % (name, multus.get("mode")))
    primary = multus.get("primaryConfig")
    if not isinstance(primary, str) or not os.path.isabs(primary):
        raise CniConfigError(
            "guard config %s: plugins[0].multus.primaryConfig must be the absolute path of the pinned primary "
            "network's config file, got %r" % (name, primary))
    return entry


def check_primary(conf_dir, name, entry):
    """No recursion and complete capabilities: the primary must be a real cluster network.

    Returns the primary's decoded config. Raises: CniConfigError.
    """
    primary = entry["multus"]["primaryConfig"]
    base_name = os.path.basename(primary)
    if os.path.normpath(primary) == os.path.normpath(os.path.join(conf_dir, name)):
        raise CniConfigError("guard config %s: multus.primaryConfig points at the guard's own file (recursion); "
                             "point it at the cluster network's config" % name)
    if base_name.startswith("00-multus"):
        raise CniConfigError("guard config %s: multus.primaryConfig %s is a Multus-generated file (recursion); "
                             "point it at the cluster network's config" % (name, primary))
    config = load_json(primary, "primary network config")
    types = [p.get("type") for p in plugin_entries(config)]
    bad = sorted(set(t for t in types if t in MULTUS_TYPES))
    if bad:
        raise CniConfigError("guard config %s: primary %s has plugin type %s (recursion); the primary must be the "
                             "cluster network (for example flannel or calico)" % (name, primary, ", ".join(bad)))
    guard_caps = entry.get("capabilities") if isinstance(entry.get("capabilities"), dict) else {}
    missing = [c for c in enabled_capabilities(config) if guard_caps.get(c) is not True]
    if missing:
        raise CniConfigError(
            "guard config %s: capabilities %s of the primary %s are not enabled in plugins[0].capabilities, so the "
            "runtime would not pass them (portMappings, bandwidth ...); add them" % (name, missing, primary))
    return config


def check_sorts_first(conf_dir, name):
    """The guard file must sort before every other CNI config file in ``conf_dir``."""
    earlier = [n for n in conf_files(conf_dir) if n != name and n < name]
    if earlier:
        raise CniConfigError(
            "guard config %s sorts after %s in %s, and the container runtime uses the lexically first file; "
            "rename the guard file (00-multus-guard.conflist sorts first) or move those files away"
            % (name, ", ".join(earlier), conf_dir))


def check_multus_daemon_config(path, guard_name):
    """Thick Multus with ``multusConfigFile: auto`` must pin ``multusMasterCNI`` to a real primary.

    Returns the decoded daemon config. Raises: CniConfigError.
    """
    config = load_json(path, "Multus daemon config")
    if config.get("multusConfigFile", "auto") != "auto":
        return config
    master = config.get("multusMasterCNI")
    if not isinstance(master, str) or not master:
        raise CniConfigError(
            "Multus daemon config %s: multusConfigFile is auto but multusMasterCNI is not set, so thick Multus "
            "picks the first config file in its autoconfig dir as its primary; set multusMasterCNI to the "
            "primary network's file name" % path)
    if master == guard_name or master.startswith("00-multus"):
        raise CniConfigError("Multus daemon config %s: multusMasterCNI %s is the guard's or Multus's own file "
                             "(recursion); set it to the primary network's file name" % (path, master))
    return config


def render(config):
    """The exact bytes written for a config (sorted keys, 2-space indent, trailing newline)."""
    return (json.dumps(config, indent=2, sort_keys=True) + "\n").encode("utf-8")


def current_state(path):
    """``(decoded JSON or None, mode or None)`` of an existing file; content that is not strict JSON
    (a repeated key included) is None, so the module replaces it with the wanted config."""
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        return None, None
    try:
        with open(path, "rb") as handle:
            return strictjson.decode_file(handle.read(), what="guard config", source=path), mode
    except (OSError, errors.InvalidSpec):
        return None, mode


def atomic_write(path, data, mode):
    """Replace ``path`` with ``data``: temp file in the same directory, fsync, rename, dir fsync."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        os.write(fd, data)
        os.fchmod(fd, mode)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.rename(tmp, path)
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as exc:
        if fd >= 0:
            os.close(fd)
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise CniConfigError("cannot write %s: %s" % (path, exc.strerror))
