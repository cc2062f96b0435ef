"""The node's Multus delegate layout, as the plugin counts it before it patches a Pod.

The plugin refuses a managed interface name that another delegate of the Pod would also get
(spec §6.5, §9 rule 5) before any VF is touched; Multus numbers unnamed delegates ``net<position>``
after the cluster network and ``defaultNetworks`` (reference multus.md §3), so that check needs the
node's layout. :class:`LayoutSource` is where it comes from: the plugin settings
(``--multus-primary-interface``, ``--multus-default-networks``, ``--multus-system-namespaces``,
``--multus-auxiliary-chain``), overlaid, when ``--multus-config-file`` names one, by the keys of
the node's Multus config file (thick ``daemon-config.json`` or thin ``00-multus.conf[list]``),
read with :mod:`sriov_dra.core.multus_conf`, the guard's own reading.

The file is read again on every use (an admin's edit counts from the next prepare, as in the
guard). ``auxiliaryCNIChainName`` in the file is not interpreted here: the chain's directory is
relative to the cluster network's path inside the Multus container, which the plugin cannot see;
set ``--multus-auxiliary-chain`` instead (the guard, which sees it, counts it in its final check).

It must never cache the file, write anything, or fall back to defaults when a named file cannot
be read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sriov_dra.core import interface_naming, multus_conf
from sriov_dra_rules import errors


@dataclass(frozen=True)
class LayoutSource:
    """The node's Multus layout: ``base`` from the settings, overlaid by ``config_file`` if set.

    Shapes: ``config_file`` absolute, or ``None`` (``base`` is the layout).
    """

    base: interface_naming.MultusLayout = interface_naming.DEFAULT_LAYOUT
    config_file: Path | None = None

    def current(self) -> interface_naming.MultusLayout:
        """Return the layout to check a Pod's interface names against now (reads the file).

        Raises: ``InvalidSpec`` (``HostReadFailed``) when the named file cannot be read;
        ``InvalidSpec`` when it is not a Multus config or a key is malformed (see
        ``core.multus_conf``). Source: spec §6.5; reference multus.md §2.3, §3.
        """
        if self.config_file is None:
            return self.base
        try:
            data = self.config_file.read_bytes()
        except OSError as exc:
            raise errors.InvalidSpec(
                f"cannot read the node's Multus config {self.config_file} (--multus-config-file / "
                f"MULTUS_CONFIG_FILE): {exc.strerror or exc}; mount the file into the plugin or fix the path",
                reason=errors.Reason.HOST_READ_FAILED,
            ) from exc
        source = f"{self.config_file} (--multus-config-file)"
        keys = multus_conf.decode_config(data, source=source)
        return multus_conf.layout_from_keys(keys, source=source, base=self.base)


DEFAULT_SOURCE: Final = LayoutSource()
"""Multus's default layout and no config file: what a node gets when nothing is configured."""
