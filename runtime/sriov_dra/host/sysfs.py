"""Read-only, typed view of the node's PCI and network sysfs under a configurable root.

The plugin's reads of ``/sys`` for discovery and driver binding: PCI devices, SR-IOV PFs and
their ``virtfn<N>`` links, IDs, NUMA node, bound driver, ``driver_override``, netdevs and link
type, at ``<root>/sys/...`` (``/`` in the plugin container, a fake tree in tests). The reading
rules are the shared ``sriov_dra_rules.sysfs_read`` and ``topology``; this module adds the
plugin's types and error messages. The eswitch mode is not in sysfs (``host.devlink``). Never
writes (``host.vf_driver_binding`` does); a missing optional fact is ``None``.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path

from sriov_dra.core import identities
from sriov_dra_rules import sysfs_read, topology

NET_CLASS = sysfs_read.NET_CLASS
ARPHRD_ETHER = sysfs_read.ARPHRD_ETHER
ARPHRD_INFINIBAND = sysfs_read.ARPHRD_INFINIBAND
"""Re-exported from ``sriov_dra_rules.sysfs_read`` for the fake tree builder and tests."""

SysfsReadError = sysfs_read.SysfsReadError
"""A sysfs directory that must be readable is not (reason ``HostReadFailed``)."""

_NO_PCI_FIX = "mount the host /sys (read-write, privileged) or point the plugin's sysfs root at it"
_NO_PF_FIX = "check that the PF still exists (lspci) and that the plugin can read the host /sys"


class LinkType(enum.StrEnum):
    """Published ``linkType`` values (upstream ``consts.LinkType*``)."""

    ETHERNET = sysfs_read.LINK_ETHERNET
    INFINIBAND = sysfs_read.LINK_INFINIBAND
    UNKNOWN = sysfs_read.LINK_UNKNOWN


class EswitchMode(enum.StrEnum):
    """Published ``EswitchMode`` values (upstream ``consts.EswitchMode*``)."""

    LEGACY = "legacy"
    SWITCHDEV = "switchdev"


@dataclass(frozen=True)
class VfLink:
    """One ``virtfn<N>`` entry of a PF: the VF index and the VF's PCI address."""

    index: int
    bdf: identities.PciAddress


@dataclass(frozen=True)
class PfInfo:
    """Facts of one SR-IOV PF that has a netdev.

    Shapes: IDs lowercase hex without ``0x`` (``""`` if unreadable); ``numa_node`` None when the
    kernel reports no node (``numa_node_reason`` then says why, else it is None). The eswitch mode
    is not a sysfs fact (discovery asks its devlink source).
    """

    bdf: identities.PciAddress
    ifname: str
    vendor: str
    device_id: str
    numa_node: int | None
    link_type: LinkType
    driver: str | None
    totalvfs: int | None
    numvfs: int | None
    numa_node_reason: str | None = None


@dataclass(frozen=True)
class VfInfo:
    """Facts of one VF as sysfs shows them now.

    ``driver`` is None when unbound; ``netdev`` is the VF's own netdev (present only while a
    netdevice driver is bound); ``numa_node`` is the VF's own file (None: no node); ``link_type``
    is the PF's (a VF has no netdev type while unbound); ``driver_override`` None when the file
    is absent, ``""`` when cleared.
    """

    bdf: identities.PciAddress
    index: int
    vendor: str
    device_id: str
    pf_name: str
    pf_bdf: identities.PciAddress
    driver: str | None
    netdev: str | None
    numa_node: int | None
    link_type: LinkType
    driver_override: str | None
    rdma_devices: tuple[str, ...]


class Sysfs:
    """Reader of ``<root>/sys``; every method takes plain PCI addresses (``0000:03:00.0``).

    Shapes: listing methods return names sorted (BDFs lexicographically, VFs by index).
    Source: ``sriov_dra_rules.sysfs_read`` (the shared rules, upstream dra-driver-sriov's);
    Linux ``Documentation/ABI/testing/sysfs-bus-pci``.
    """

    def __init__(self, root: Path = Path("/")) -> None:
        self._root = Path(root)
        # Hot paths build plain strings: pathlib parsing costs more than the sysfs read itself.
        self._top = str(self._root)
        self._sys = os.path.join(self._top, "sys")
        self._pci = f"{self._sys}/bus/pci/devices"

    def device_path(self, bdf: str, *parts: str) -> str:
        """``<root>/sys/bus/pci/devices/<bdf>[/<parts>...]`` as a string (the fast form)."""
        return "/".join((self._pci, bdf, *parts))

    def sys_path(self, *parts: str) -> str:
        """``<root>/sys[/<parts>...]`` as a string (the fast form of :meth:`path`)."""
        return "/".join((self._sys, *parts))

    @property
    def root(self) -> Path:
        """The directory that stands for ``/`` (``/`` in production)."""
        return self._root

    def path(self, *parts: str) -> Path:
        """Return ``<root>/sys/<parts...>``."""
        return self._root.joinpath("sys", *parts)

    def pci_device_dir(self, bdf: str) -> Path:
        """Return ``<root>/sys/bus/pci/devices/<bdf>`` (a symlink into ``sys/devices``)."""
        return self.path("bus", "pci", "devices", bdf)

    def driver_dir(self, driver: str) -> Path:
        """Return ``<root>/sys/bus/pci/drivers/<driver>``."""
        return self.path("bus", "pci", "drivers", driver)

    # --- PCI functions -----------------------------------------------------------------------

    def pci_devices(self) -> list[identities.PciAddress]:
        """List every entry of ``sys/bus/pci/devices``.

        Raises: SysfsReadError if the directory is missing or unreadable (no PCI bus: the
        plugin cannot run on this root).
        """
        return [identities.PciAddress(n) for n in sysfs_read.pci_devices(self._top, fix=_NO_PCI_FIX)]

    def is_vf(self, bdf: str) -> bool:
        """True if the function has a ``physfn`` link (upstream ``IsSriovVF``, an lstat)."""
        return sysfs_read.is_vf(self._top, bdf)

    def pci_class(self, bdf: str) -> int | None:
        """The 24-bit class code from ``class`` (e.g. ``0x020000``), or None if unreadable."""
        return sysfs_read.pci_class(self._top, bdf)

    def is_sriov_pf(self, bdf: str) -> bool:
        """True for a network-class physical function that supports SR-IOV.

        A VF (``physfn`` present) is never a PF; ``sriov_totalvfs`` must exist; the class code,
        when readable, must be network (``0x02xxxx``), as upstream skips other classes.
        """
        return sysfs_read.is_sriov_pf(self._top, bdf)

    def vendor(self, bdf: str) -> str | None:
        """Vendor ID as lowercase hex without ``0x`` (``8086``), or None if unreadable."""
        return sysfs_read.vendor(self._top, bdf)

    def device_id(self, bdf: str) -> str | None:
        """Device (product) ID as lowercase hex without ``0x`` (``1889``), or None."""
        return sysfs_read.device_id(self._top, bdf)

    def numa_affinity(self, bdf: str) -> topology.NumaAffinity:
        """NUMA node of the function and, when there is none, why (``sriov_dra_rules.topology``)."""
        return sysfs_read.numa_affinity(self._top, bdf)

    def numa_node(self, bdf: str) -> int | None:
        """NUMA node of the function; None for ``-1``, a missing file or a text that is no node.

        Units: NUMA node number. Source: ``sriov_dra_rules.topology.numa_affinity``.
        """
        return self.numa_affinity(bdf).node

    def sriov_totalvfs(self, bdf: str) -> int | None:
        """``sriov_totalvfs`` of a PF, or None if absent or unparsable."""
        return sysfs_read.sriov_totalvfs(self._top, bdf)

    def sriov_numvfs(self, bdf: str) -> int | None:
        """``sriov_numvfs`` of a PF, or None if absent or unparsable."""
        return sysfs_read.sriov_numvfs(self._top, bdf)

    def current_driver(self, bdf: str) -> str | None:
        """Name of the bound driver (basename of the ``driver`` link), or None when unbound."""
        return sysfs_read.current_driver(self._top, bdf)

    def driver_override(self, bdf: str) -> str | None:
        """``driver_override`` contents: None if the file is absent, ``""`` if cleared.

        Shapes: the kernel shows a cleared override as ``(null)``; that is returned as ``""``.
        """
        return sysfs_read.driver_override(self._top, bdf)

    def netdevs(self, bdf: str) -> list[str]:
        """Names under the function's ``net/`` directory (empty when no netdev is bound)."""
        return sysfs_read.netdevs(self._top, bdf)

    def rdma_devices(self, bdf: str) -> list[str]:
        """Names under the function's ``infiniband/`` directory (rdmamap's RDMA check)."""
        return sysfs_read.rdma_devices(self._top, bdf)

    def iommu_group(self, bdf: str) -> str | None:
        """The IOMMU group number (basename of the ``iommu_group`` link), or None."""
        try:
            return os.path.basename(os.readlink(self.device_path(bdf, "iommu_group"))) or None
        except OSError:
            return None

    # --- SR-IOV topology ---------------------------------------------------------------------

    def pf_netdev(self, bdf: str) -> str | None:
        """The PF's uplink netdev name, or None when the PF has no netdev.

        With one netdev that is the answer; among several (switchdev representors) the one whose
        ``phys_port_name`` is ``p<N>``, else the first (``sriov_dra_rules.sysfs_read.pf_netdev``).
        """
        return sysfs_read.pf_netdev(self._top, bdf)

    def virtfns(self, pf_bdf: str) -> list[VfLink]:
        """Every ``virtfn<N>`` link of a PF, sorted by N.

        Raises: SysfsReadError if the PF directory cannot be listed (upstream fails discovery).
        """
        return [
            VfLink(index, identities.PciAddress(bdf))
            for index, bdf in sysfs_read.virtfns(self._top, pf_bdf, fix=_NO_PF_FIX)
        ]

    def physfn(self, vf_bdf: str) -> identities.PciAddress | None:
        """The PF address of a VF (basename of ``physfn``), or None if not a VF."""
        found = sysfs_read.physfn(self._top, vf_bdf)
        return identities.PciAddress(found) if found is not None else None

    def link_type(self, ifname: str) -> LinkType:
        """Link type of a netdev from ``class/net/<if>/type``; ``unknown`` when unreadable."""
        return LinkType(sysfs_read.link_type(self._top, ifname))

    def pcie_root(self, bdf: str) -> topology.PcieRoot:
        """The ``pcieRoot`` of ``bdf`` or why there is none (``sriov_dra_rules.topology``)."""
        return sysfs_read.pcie_root(self._top, bdf)

    # --- Records -----------------------------------------------------------------------------

    def pf_info(self, bdf: str) -> PfInfo | None:
        """Facts of ``bdf`` if it is an SR-IOV PF with a netdev, else None (upstream skips it)."""
        if not self.is_sriov_pf(bdf):
            return None
        ifname = self.pf_netdev(bdf)
        if ifname is None:
            return None
        numa = self.numa_affinity(bdf)
        return PfInfo(
            bdf=identities.PciAddress(bdf),
            ifname=ifname,
            vendor=self.vendor(bdf) or "",
            device_id=self.device_id(bdf) or "",
            numa_node=numa.node,
            link_type=self.link_type(ifname),
            driver=self.current_driver(bdf),
            totalvfs=self.sriov_totalvfs(bdf),
            numvfs=self.sriov_numvfs(bdf),
            numa_node_reason=numa.reason,
        )

    def pfs(self) -> list[PfInfo]:
        """Every SR-IOV PF with a netdev, sorted by BDF.

        Raises: SysfsReadError if ``sys/bus/pci/devices`` cannot be listed.
        """
        found = (self.pf_info(bdf) for bdf in self.pci_devices())
        return [pf for pf in found if pf is not None]

    def vf_info(self, pf: PfInfo, link: VfLink) -> VfInfo:
        """Facts of the VF behind one ``virtfn`` link of ``pf``."""
        bdf = link.bdf
        netdevs = self.netdevs(bdf)
        return VfInfo(
            bdf=bdf,
            index=link.index,
            vendor=self.vendor(bdf) or "",
            device_id=self.device_id(bdf) or "",
            pf_name=pf.ifname,
            pf_bdf=pf.bdf,
            driver=self.current_driver(bdf),
            netdev=netdevs[0] if netdevs else None,
            numa_node=self.numa_node(bdf),
            link_type=pf.link_type,
            driver_override=self.driver_override(bdf),
            rdma_devices=tuple(self.rdma_devices(bdf)),
        )

    def vfs(self, pf: PfInfo) -> list[VfInfo]:
        """Facts of every VF of ``pf``, sorted by VF index.

        Raises: SysfsReadError if the PF directory cannot be listed.
        """
        return [self.vf_info(pf, link) for link in self.virtfns(pf.bdf)]
