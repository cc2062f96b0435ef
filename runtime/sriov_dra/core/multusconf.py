"""The Multus config keys that shape a Pod's delegate list, read into an :class:`ifnames.MultusLayout`.

Multus names an unnamed secondary interface ``net<position in the full delegate list>``; that
list starts with the cluster network and ``defaultNetworks`` (skipped for Pods whose namespace is
in ``systemNamespaces``) and may end with the auxiliary chain (reference multus.md §2.4, §3). The
guard (over the config it hands Multus, overlaid by the thick daemon config) and the plugin (over
the node's Multus config file, ``--multus-config-file``) must count those delegates the same way,
so this module owns the one reading of those keys, and of a Multus config file's bytes:

* :func:`decode_config`: a config file's bytes to its Multus NetConf object (a ``.conf`` or
  ``daemon-config.json`` is the object itself; a ``.conflist`` holds it as its Multus plugin);
* :func:`layout_from_keys`: ``defaultNetworks`` / ``systemNamespaces`` over a base layout;
* :func:`auxiliary_chain_name`: the chain whose directory the caller looks into.

It must never do I/O (callers read the files and say whether the chain directory holds plugins),
and never guess a value it cannot read: a malformed key is an error naming the file and the key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from sriov_dra.core import ifnames
from sriov_dra_rules import errors

DEFAULT_SYSTEM_NAMESPACES: Final = ("kube-system",)
"""Multus's ``systemNamespaces`` when the key is absent (``GetDefaultNetConf``)."""

MULTUS_PLUGIN_TYPES: Final = frozenset({"multus", "multus-shim"})
"""``type`` of the Multus entry in a thin ``00-multus.conflist`` (or a thick shim conflist)."""

_LIST_KEYS: Final = ("defaultNetworks", "systemNamespaces")


def decode_config(data: bytes, *, source: str) -> dict[str, object]:
    """Decode one Multus config file into the NetConf object whose keys Multus reads.

    ``source`` names the file in messages. A plain object (``00-multus.conf``,
    ``daemon-config.json``) is returned as is; an object with ``plugins`` (``00-multus.conflist``)
    yields its first plugin whose ``type`` is ``multus`` or ``multus-shim``.

    Raises: ``InvalidSpec`` naming ``source`` when the bytes are not a JSON object, ``plugins``
    is not a list of objects, or a conflist has no Multus plugin.
    Source: reference multus.md §1.3, §2.1–§2.3.
    """
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise errors.InvalidSpec(
            f"Multus config {source} is not JSON ({exc}); point the setting at Multus's own config file"
        ) from exc
    if not isinstance(document, dict):
        raise errors.InvalidSpec(
            f"Multus config {source} is a JSON {type(document).__name__}, not an object; point the "
            "setting at daemon-config.json or 00-multus.conf[list]"
        )
    if "plugins" not in document:
        return document
    plugins = document["plugins"]
    if not isinstance(plugins, list) or not all(isinstance(p, dict) for p in plugins):
        raise errors.InvalidSpec(
            f"Multus config {source}: plugins must be a list of objects, got {plugins!r}"
        )
    for plugin in plugins:
        if plugin.get("type") in MULTUS_PLUGIN_TYPES:
            return dict(plugin)
    types = [p.get("type") for p in plugins]
    raise errors.InvalidSpec(
        f"Multus config {source} is a conflist without a Multus plugin (plugin types {types!r}); "
        f"name the file whose plugin type is one of {sorted(MULTUS_PLUGIN_TYPES)}"
    )


def _strings(keys: Mapping[str, object], key: str, problems: list[errors.FieldError]) -> tuple[str, ...]:
    value = keys.get(key)
    if value is None:
        return ()
    if isinstance(value, str):  # Multus accepts one comma-separated string for these keys
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    problems.append(
        errors.FieldError(
            key, f"must be a list of strings (or one comma-separated string), got {value!r}; fix the key"
        )
    )
    return ()


def layout_from_keys(
    keys: Mapping[str, object],
    *,
    source: str,
    base: ifnames.MultusLayout = ifnames.DEFAULT_LAYOUT,
    auxiliary_chain: bool | None = None,
) -> ifnames.MultusLayout:
    """Overlay a Multus NetConf's ``defaultNetworks`` and ``systemNamespaces`` on ``base``.

    A key present in ``keys`` replaces the base value (``null`` and ``[]`` mean none, as in
    Multus); an absent key keeps it. ``base.primary_ifname`` is kept (the runtime's
    ``CNI_IFNAME``, not a Multus key). ``auxiliary_chain`` replaces ``base.auxiliary_chain``
    when given (only the caller can see whether the chain directory holds plugins).

    Shapes: list keys keep their order; a comma-separated string is split and stripped.
    Raises: ``InvalidSpec`` naming ``source`` and every malformed key.
    Source: reference multus.md §2.3, §3 (delegate order, getIfname).
    """
    problems: list[errors.FieldError] = []
    found = {key: _strings(keys, key, problems) for key in _LIST_KEYS if key in keys}
    errors.raise_if_any(problems, f"Multus config {source} has keys the plugin and guard cannot read")
    return ifnames.MultusLayout(
        primary_ifname=base.primary_ifname,
        default_networks=found.get("defaultNetworks", base.default_networks),
        system_namespaces=found.get("systemNamespaces", base.system_namespaces),
        auxiliary_chain=base.auxiliary_chain if auxiliary_chain is None else auxiliary_chain,
    )


def auxiliary_chain_name(keys: Mapping[str, object]) -> str | None:
    """Return ``auxiliaryCNIChainName`` when it is a non-empty string, else ``None``.

    Multus adds the auxiliary delegate only when ``<dir of clusterNetwork>/<name>/`` holds plugin
    configs; the caller looks. Source: reference multus.md §2.5.
    """
    chain = keys.get("auxiliaryCNIChainName")
    return chain if isinstance(chain, str) and chain else None
