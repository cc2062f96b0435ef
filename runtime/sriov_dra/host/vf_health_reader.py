"""Read what the node shows for a VF's health: its sysfs function and driver, its PF and the PF's link.

Per :class:`~sriov_dra.core.device_health.HealthTarget`: whether the VF's and PF's functions
exist, the VF's bound driver and the PF's interface (under the sysfs root), and through netlink
in the plugin's own namespace (the host's, with hostNetwork) whether that interface is up with
carrier. A fact the node does not answer becomes ``Unreadable`` naming the path or operation and
the error; absent files are facts. The decision is ``core.device_health.decide``'s. Read-only;
never enters another namespace.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

from sriov_dra.core import device_health
from sriov_dra.host import netlink
from sriov_dra.host import sysfs as sysfs_mod

_T = TypeVar("_T")

LinkTable = Callable[[], Mapping[str, device_health.PfLink]]
"""Returns the links of the plugin's network namespace by name; raises ``netlink.NetlinkError``."""


def own_namespace_links() -> Mapping[str, device_health.PfLink]:
    """The links of the caller's network namespace (``netlink.carrier_states(None)``)."""
    return netlink.carrier_states(None)


def _ask(path: Path, read: Callable[[Path], _T]) -> _T | device_health.Unreadable | None:
    """``read(path)``; None when the path is absent (a fact), ``Unreadable`` for any other error."""
    try:
        return read(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return device_health.Unreadable(f"cannot read {path}: {exc.strerror or exc} (errno {exc.errno})")


class VfHealthReader:
    """Reads :class:`~sriov_dra.core.device_health.VfReading` values for targets.

    ``sysfs`` is the plugin's sysfs view (its root); ``links`` the netlink link table of the
    plugin's namespace (default :func:`own_namespace_links`; host tests pass another namespace's).
    """

    def __init__(self, sysfs: sysfs_mod.Sysfs, *, links: LinkTable = own_namespace_links) -> None:
        self._sysfs = sysfs
        self._links = links

    def read(self, targets: Iterable[device_health.HealthTarget]) -> dict[str, device_health.VfReading]:
        """Read every target (one netlink dump for all); returns ``{device name: VfReading}``.

        Never raises for a node that does not answer; that becomes ``Unreadable`` facts.
        """
        table: Mapping[str, device_health.PfLink] | device_health.Unreadable
        try:
            table = self._links()
        except netlink.NetlinkError as exc:
            table = device_health.Unreadable(
                f"cannot list the links of the plugin's network namespace: {exc}"
            )
        return {t.device: self._read_one(t, table) for t in targets}

    def _present(self, bdf: str) -> bool | device_health.Unreadable:
        found = _ask(self._sysfs.pci_device_dir(bdf), os.stat)
        return found if isinstance(found, device_health.Unreadable) else found is not None

    def _driver(self, bdf: str) -> str | device_health.Unreadable | None:
        return _ask(
            self._sysfs.pci_device_dir(bdf) / "driver", lambda p: os.path.basename(os.readlink(p)) or None
        )

    def _pf_netdev(self, bdf: str) -> str | device_health.Unreadable | None:
        names = _ask(self._sysfs.pci_device_dir(bdf) / "net", os.listdir)
        if names is None or isinstance(names, device_health.Unreadable):
            return names
        return self._sysfs.pf_netdev(bdf)

    def _read_one(
        self,
        target: device_health.HealthTarget,
        table: Mapping[str, device_health.PfLink] | device_health.Unreadable,
    ) -> device_health.VfReading:
        vf_present = self._present(target.pci_address)
        pf_present = self._present(target.pf_pci_address)
        netdev = self._pf_netdev(target.pf_pci_address) if pf_present is True else None
        link: device_health.PfLink | device_health.Unreadable | None = None
        if isinstance(netdev, str):
            link = table if isinstance(table, device_health.Unreadable) else table.get(netdev)
        return device_health.VfReading(
            vf_present=vf_present,
            driver=self._driver(target.pci_address) if vf_present is True else None,
            pf_present=pf_present,
            pf_netdev=netdev,
            pf_link=link,
        )
