"""The node's Multus delegate layout, as the plugin counts it before it patches a Pod.

The plugin refuses a managed interface name another delegate of the Pod would get before any VF
is touched (docs/design.md#interface-names), which needs the node's layout. :class:`LayoutSource`
takes it from the ``--multus-*`` settings, overlaid by the keys of ``--multus-config-file`` when
given, read again on every use with ``core.multus_conf`` (the guard's reading). Its
``auxiliaryCNIChainName`` is not interpreted (the chain's directory is not visible here; set
``--multus-auxiliary-chain``). A named file that cannot be read is an error, never a default.
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
        ``core.multus_conf``). Source: docs/design.md#interface-names; Multus v4.3.0 delegate order.
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
