"""Read-only view of the node's PCI and network sysfs under a configurable root.

This module owns every *read* of ``/sys`` that discovery and driver binding need: PCI devices
under ``sys/bus/pci/devices``, SR-IOV PFs and their ``virtfn<N>`` links, each function's vendor,
device and class IDs, NUMA node, bound driver, ``driver_override`` and netdevs, and a netdev's
link type. Every path is ``<root>/sys/...`` so that host-tier tests and the lab run on a fake
tree built by :mod:`sriov_dra.host.fakesysfs`; in the plugin container the root is ``/``.

The reading rules follow upstream dra-driver-sriov (reference dra-driver-sriov.md §3.1):

- a PF is a PCI function that has ``sriov_totalvfs``, no ``physfn`` link, a network class
  (``0x02xxxx``) and at least one netdev; its netdev name is the uplink (see :meth:`Sysfs.pf_netdev`);
- a VF is the target of a PF's ``virtfn<N>`` link, N being the VF index;
- IDs are lowercase hex without ``0x``; a missing NUMA file, ``-1`` or garbage means ``-1``;
- the link type comes from the PF netdev's ``type`` (1 ethernet, 32 infiniband, else unknown);
- the eswitch mode is not in sysfs: upstream asks devlink. This reader only knows the fake-only
  file :data:`FAKE_ESWITCH_MODE_FILE`; discovery takes a devlink source as a parameter.

It must never write to sysfs (:mod:`sriov_dra.host.binding` does), never follow a path outside
its root on purpose, and never raise for a missing optional file: absent facts are ``None``.
"""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass
from pathlib import Path

from sriov_dra.core import identities
from sriov_dra_rules import errors

NET_CLASS = 0x02
"""PCI base class of network controllers (upstream ``consts.NetClass``)."""

ARPHRD_ETHER = 1
ARPHRD_INFINIBAND = 32
"""``/sys/class/net/<if>/type`` values from ``include/uapi/linux/if_arp.h``."""

NO_NUMA_NODE = -1
"""Kernel value for "no NUMA affinity"; also used for a missing or unreadable ``numa_node``."""

FAKE_ESWITCH_MODE_FILE = "sriov_dra_eswitch_mode"
"""Not a kernel file. Written only by :mod:`sriov_dra.host.fakesysfs` into a fake PF's device
directory to stand in for devlink's eswitch mode; on a real host it never exists."""

_VIRTFN_RE = re.compile(r"virtfn(0|[1-9][0-9]*)")
_UPLINK_PORT_RE = re.compile(r"p[0-9]+")


class LinkType(enum.StrEnum):
    """Published ``linkType`` values (upstream ``consts.LinkType*``)."""

    ETHERNET = "ethernet"
    INFINIBAND = "infiniband"
    UNKNOWN = "unknown"


class EswitchMode(enum.StrEnum):
    """Published ``EswitchMode`` values (upstream ``consts.EswitchMode*``)."""

    LEGACY = "legacy"
    SWITCHDEV = "switchdev"


class SysfsReadError(errors.SriovDraError):
    """A sysfs directory that must be readable is not (upstream fails discovery here too)."""

    default_reason = errors.Reason.HOST_READ_FAILED


@dataclass(frozen=True)
class VfLink:
    """One ``virtfn<N>`` entry of a PF: the VF index and the VF's PCI address."""

    index: int
    bdf: identities.PciAddress


@dataclass(frozen=True)
class PfInfo:
    """Facts of one SR-IOV PF that has a netdev.

    Shapes: IDs lowercase hex without ``0x`` (``""`` if unreadable); ``eswitch_mode`` None when
    sysfs cannot tell (always on a real host; discovery then asks devlink or assumes legacy).
    """

    bdf: identities.PciAddress
    ifname: str
    vendor: str
    device_id: str
    numa_node: int
    link_type: LinkType
    eswitch_mode: EswitchMode | None
    driver: str | None
    totalvfs: int | None
    numvfs: int | None


@dataclass(frozen=True)
class VfInfo:
    """Facts of one VF as sysfs shows them now.

    ``driver`` is None when unbound; ``netdev`` is the VF's own netdev (present only while a
    netdevice driver is bound); ``numa_node`` is the VF's own file; ``link_type`` and
    ``eswitch_mode`` are the PF's (a VF has no netdev type while unbound, and the eswitch is the
    PF's); ``driver_override`` None when the file is absent, ``""`` when cleared.
    """

    bdf: identities.PciAddress
    index: int
    vendor: str
    device_id: str
    pf_name: str
    pf_bdf: identities.PciAddress
    driver: str | None
    netdev: str | None
    numa_node: int
    link_type: LinkType
    eswitch_mode: EswitchMode | None
    driver_override: str | None
    rdma_devices: tuple[str, ...]


class Sysfs:
    """Reader of ``<root>/sys``; every method takes plain PCI addresses (``0000:03:00.0``).

    Shapes: listing methods return names sorted (BDFs lexicographically, VFs by index).
    Source: reference dra-driver-sriov.md §3.1; Linux ``Documentation/ABI/testing/sysfs-bus-pci``.
    """

    def __init__(self, root: Path = Path("/")) -> None:
        self._root = Path(root)
        # Hot paths build plain strings: pathlib parsing costs more than the sysfs read itself.
        self._sys = os.path.join(str(self._root), "sys")
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
        where = self.path("bus", "pci", "devices")
        try:
            names = sorted(os.listdir(where))
        except OSError as exc:
            raise SysfsReadError(
                f"cannot list PCI devices in {where}: {exc.strerror}; mount the host /sys "
                "(read-write, privileged) or point the plugin's sysfs root at it"
            ) from exc
        return [identities.PciAddress(n) for n in names]

    def is_vf(self, bdf: str) -> bool:
        """True if the function has a ``physfn`` link (upstream ``IsSriovVF``, an lstat)."""
        return os.path.lexists(self.device_path(bdf, "physfn"))

    def pci_class(self, bdf: str) -> int | None:
        """The 24-bit class code from ``class`` (e.g. ``0x020000``), or None if unreadable."""
        return _read_hex(self.device_path(bdf, "class"))

    def is_sriov_pf(self, bdf: str) -> bool:
        """True for a network-class physical function that supports SR-IOV.

        A VF (``physfn`` present) is never a PF; ``sriov_totalvfs`` must exist; the class code,
        when readable, must be network (``0x02xxxx``), as upstream skips other classes.
        """
        if self.is_vf(bdf) or not os.path.exists(self.device_path(bdf, "sriov_totalvfs")):
            return False
        code = self.pci_class(bdf)
        return code is not None and (code >> 16) == NET_CLASS

    def vendor(self, bdf: str) -> str | None:
        """Vendor ID as lowercase hex without ``0x`` (``8086``), or None if unreadable."""
        return _read_id(self.device_path(bdf, "vendor"))

    def device_id(self, bdf: str) -> str | None:
        """Device (product) ID as lowercase hex without ``0x`` (``1889``), or None."""
        return _read_id(self.device_path(bdf, "device"))

    def numa_node(self, bdf: str) -> int:
        """NUMA node of the function; ``-1`` when absent, negative or unparsable.

        Units: NUMA node number. Source: upstream ``numa_node`` read (missing file → -1).
        """
        text = _read_text(self.device_path(bdf, "numa_node"))
        if text is None:
            return NO_NUMA_NODE
        try:
            value = int(text, 10)
        except ValueError:
            return NO_NUMA_NODE
        return value if value >= 0 else NO_NUMA_NODE

    def sriov_totalvfs(self, bdf: str) -> int | None:
        """``sriov_totalvfs`` of a PF, or None if absent or unparsable."""
        return _read_int(self.device_path(bdf, "sriov_totalvfs"))

    def sriov_numvfs(self, bdf: str) -> int | None:
        """``sriov_numvfs`` of a PF, or None if absent or unparsable."""
        return _read_int(self.device_path(bdf, "sriov_numvfs"))

    def current_driver(self, bdf: str) -> str | None:
        """Name of the bound driver (basename of the ``driver`` link), or None when unbound."""
        link = self.device_path(bdf, "driver")
        try:
            target = os.readlink(link)
        except OSError:
            return None
        return os.path.basename(os.path.normpath(target)) or None

    def driver_override(self, bdf: str) -> str | None:
        """``driver_override`` contents: None if the file is absent, ``""`` if cleared.

        Shapes: the kernel shows a cleared override as ``(null)``; that is returned as ``""``.
        """
        text = _read_text(self.device_path(bdf, "driver_override"))
        if text is None:
            return None
        return "" if text in ("", "(null)") else text

    def netdevs(self, bdf: str) -> list[str]:
        """Names under the function's ``net/`` directory (empty when no netdev is bound)."""
        try:
            return sorted(os.listdir(self.device_path(bdf, "net")))
        except OSError:
            return []

    def rdma_devices(self, bdf: str) -> list[str]:
        """Names under the function's ``infiniband/`` directory (rdmamap's RDMA check)."""
        try:
            return sorted(os.listdir(self.device_path(bdf, "infiniband")))
        except OSError:
            return []

    def iommu_group(self, bdf: str) -> str | None:
        """The IOMMU group number (basename of the ``iommu_group`` link), or None."""
        try:
            return os.path.basename(os.readlink(self.device_path(bdf, "iommu_group"))) or None
        except OSError:
            return None

    # --- SR-IOV topology ---------------------------------------------------------------------

    def pf_netdev(self, bdf: str) -> str | None:
        """The PF's uplink netdev name, or None when the PF has no netdev.

        With one netdev that is the answer. In switchdev mode the PF's ``net/`` also holds VF
        representors; upstream asks devlink for the physical port (sriovnet
        ``GetUplinkRepresentor``), whose sysfs trace is ``phys_port_name`` ``p<N>``. Without such
        an entry the first name wins, as in upstream's fallback.
        """
        names = self.netdevs(bdf)
        if len(names) > 1:
            for name in names:
                port = _read_text(self.device_path(bdf, "net", name, "phys_port_name"))
                if port is not None and _UPLINK_PORT_RE.fullmatch(port):
                    return name
        return names[0] if names else None

    def virtfns(self, pf_bdf: str) -> list[VfLink]:
        """Every ``virtfn<N>`` link of a PF, sorted by N.

        Raises: SysfsReadError if the PF directory cannot be listed (upstream fails discovery).
        """
        where = self.device_path(pf_bdf)
        try:
            entries = os.listdir(where)
        except OSError as exc:
            raise SysfsReadError(
                f"cannot list PF {pf_bdf} at {where}: {exc.strerror}; check that the PF still "
                "exists (lspci) and that the plugin can read the host /sys"
            ) from exc
        links: list[VfLink] = []
        for entry in entries:
            match = _VIRTFN_RE.fullmatch(entry)
            if match is None:
                continue
            try:
                target = os.readlink(f"{where}/{entry}")
            except OSError:
                continue
            links.append(VfLink(int(match.group(1)), identities.PciAddress(os.path.basename(target))))
        return sorted(links, key=lambda link: link.index)

    def physfn(self, vf_bdf: str) -> identities.PciAddress | None:
        """The PF address of a VF (basename of ``physfn``), or None if not a VF."""
        try:
            return identities.PciAddress(os.path.basename(os.readlink(self.device_path(vf_bdf, "physfn"))))
        except OSError:
            return None

    def link_type(self, ifname: str) -> LinkType:
        """Link type of a netdev from ``class/net/<if>/type``; ``unknown`` when unreadable."""
        value = _read_int(f"{self._sys}/class/net/{ifname}/type")
        if value == ARPHRD_ETHER:
            return LinkType.ETHERNET
        if value == ARPHRD_INFINIBAND:
            return LinkType.INFINIBAND
        return LinkType.UNKNOWN

    def eswitch_mode(self, pf_bdf: str) -> EswitchMode | None:
        """Eswitch mode as far as sysfs can tell: the fake-only :data:`FAKE_ESWITCH_MODE_FILE`.

        Returns None on a real host (the kernel exposes the mode only through devlink) and for a
        value other than ``legacy``/``switchdev``.
        """
        text = _read_text(self.device_path(pf_bdf, FAKE_ESWITCH_MODE_FILE))
        try:
            return EswitchMode(text) if text is not None else None
        except ValueError:
            return None

    # --- Records -----------------------------------------------------------------------------

    def pf_info(self, bdf: str) -> PfInfo | None:
        """Facts of ``bdf`` if it is an SR-IOV PF with a netdev, else None (upstream skips it)."""
        if not self.is_sriov_pf(bdf):
            return None
        ifname = self.pf_netdev(bdf)
        if ifname is None:
            return None
        return PfInfo(
            bdf=identities.PciAddress(bdf),
            ifname=ifname,
            vendor=self.vendor(bdf) or "",
            device_id=self.device_id(bdf) or "",
            numa_node=self.numa_node(bdf),
            link_type=self.link_type(ifname),
            eswitch_mode=self.eswitch_mode(bdf),
            driver=self.current_driver(bdf),
            totalvfs=self.sriov_totalvfs(bdf),
            numvfs=self.sriov_numvfs(bdf),
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
            eswitch_mode=pf.eswitch_mode,
            driver_override=self.driver_override(bdf),
            rdma_devices=tuple(self.rdma_devices(bdf)),
        )

    def vfs(self, pf: PfInfo) -> list[VfInfo]:
        """Facts of every VF of ``pf``, sorted by VF index.

        Raises: SysfsReadError if the PF directory cannot be listed.
        """
        return [self.vf_info(pf, link) for link in self.virtfns(pf.bdf)]


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _read_int(path: str) -> int | None:
    text = _read_text(path)
    if text is None:
        return None
    try:
        return int(text, 10)
    except ValueError:
        return None


def _read_hex(path: str) -> int | None:
    text = _read_text(path)
    if text is None:
        return None
    try:
        return int(text, 16)
    except ValueError:
        return None


def _read_id(path: str) -> str | None:
    text = _read_text(path)
    if not text:
        return None
    text = text.lower()
    return text[2:] if text.startswith("0x") else text
