"""The Multus delegate layout around a Pod's selections, read from the Multus config the guard uses.

Multus names an unnamed secondary ``net<position in the full delegate list>`` (cluster network,
``defaultNetworks`` unless the Pod is in ``systemNamespaces``, selections, auxiliary chain); the
guard must count alike before refusing a collision (docs/design.md#interface-names). The three
settings come from ``multus.config`` overlaid in thick mode by the daemon's ``daemon-config.json``
(daemon keys win, as in Multus), read by ``core.multus_conf`` as the plugin reads them. Local files
only, at the node's paths; never cached across requests, never guessed.
"""

from __future__ import annotations

import os
from typing import Any

from sriov_dra.core import interface_naming, multus_conf
from sriov_dra.guard import decisions, multus, shim
from sriov_dra_rules import errors

_CONFIG_SUFFIXES = (".conf", ".conflist", ".json")


def effective_multus_keys(conf: shim.GuardConf, *, host_root: str | None = None) -> dict[str, Any]:
    """``multus.config`` overlaid with the thick daemon's config file, when one is named.

    ``host_root``: the node's root as the daemon sees it (the file is read at the node's path under
    it; messages name the node's path).
    Raises: :class:`decisions.Rejected` (``InvalidCniRequest``) when the daemon config cannot be
    read or is not a JSON object.
    """
    keys = dict(conf.extra)
    if conf.mode == "thick" and conf.daemon_config_file:
        try:
            with open(multus.node_path(host_root, conf.daemon_config_file), "rb") as f:
                data = f.read()
        except OSError as exc:
            raise decisions.Rejected.one(
                decisions.Reason.INVALID_CNI_REQUEST,
                f"cannot read Multus daemon config {conf.daemon_config_file} (multus.daemonConfigFile): {exc}",
            ) from exc
        try:
            keys.update(multus_conf.decode_config(data, source=conf.daemon_config_file))
        except errors.InvalidSpec as exc:
            raise decisions.Rejected.one(decisions.Reason.INVALID_CNI_REQUEST, str(exc)) from exc
    return keys


def _auxiliary_chain(conf: shim.GuardConf, chain: str | None, host_root: str | None) -> bool:
    """Multus adds the aux-chain delegate when its sub-directory holds plugin configs."""
    if chain is None:
        return False
    directory = multus.node_path(host_root, os.path.join(os.path.dirname(conf.primary_config), chain))
    try:
        return any(name.endswith(_CONFIG_SUFFIXES) for name in os.listdir(directory))
    except OSError:
        return False


def multus_layout(
    conf: shim.GuardConf, *, primary_ifname: str, host_root: str | None = None
) -> interface_naming.MultusLayout:
    """Return the delegate layout Multus will use for this request.

    ``host_root``: as :func:`effective_multus_keys` (the node's files under it).

    Raises: :class:`decisions.Rejected` (``InvalidCniRequest``) for unreadable or malformed keys.
    Source: Multus v4.3.0 delegate order and ``getIfname``.
    """
    keys = effective_multus_keys(conf, host_root=host_root)
    source = "multus.config of the guard"
    if conf.mode == "thick" and conf.daemon_config_file:
        source += f" overlaid by {conf.daemon_config_file}"
    try:
        return multus_conf.layout_from_keys(
            keys,
            source=source,
            base=interface_naming.MultusLayout(
                primary_ifname=primary_ifname, system_namespaces=multus_conf.DEFAULT_SYSTEM_NAMESPACES
            ),
            auxiliary_chain=_auxiliary_chain(conf, multus_conf.auxiliary_chain_name(keys), host_root),
        )
    except errors.InvalidSpec as exc:
        raise decisions.Rejected.one(decisions.Reason.INVALID_CNI_REQUEST, str(exc)) from exc
