# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Reads of a node's PCI and SR-IOV sysfs under a root, shared by the plugin and the collection.

The plugin (``sriov_dra.host.sysfs``) and the collection (``module_utils/sysfs.py``) read through
these functions so both report the same facts, following upstream dra-driver-sriov's reading
rules. Every function takes ``root``, the directory that stands for ``/``, and reads
``<root>/sys/...``; it never writes, and a missing optional file is None. Only the two listings
discovery needs (:func:`pci_devices`, :func:`virtfns`) raise :class:`SysfsReadError`. In the
runtime only ``sriov_dra.host`` may import it (an import-linter contract).
"""

from __future__ import annotations

import os
import posixpath
import re

from . import errors, topology

NET_CLASS = 0x02
"""PCI base class of network controllers (upstream ``consts.NetClass``)."""

ARPHRD_ETHER = 1
ARPHRD_INFINIBAND = 32
"""``/sys/class/net/<if>/type`` values from ``include/uapi/linux/if_arp.h``."""

LINK_ETHERNET = "ethernet"
LINK_INFINIBAND = "infiniband"
LINK_UNKNOWN = "unknown"
"""Published ``linkType`` values (upstream ``consts.LinkType*``)."""

_VIRTFN_RE = re.compile(r"virtfn(0|[1-9][0-9]*)")
_UPLINK_PORT_RE = re.compile(r"p[0-9]+")


class SysfsReadError(errors.SriovDraError):
    """A sysfs directory that must be readable is not (upstream fails discovery here too)."""

    default_reason = errors.Reason.HOST_READ_FAILED


# --- paths -------------------------------------------------------------------------------------


def sys_path(root: str, *parts: str) -> str:
    """``<root>/sys[/<parts>...]``."""
    return "/".join((os.path.join(root, "sys"), *parts))


def pci_path(root: str, bdf: str, *parts: str) -> str:
    """``<root>/sys/bus/pci/devices/<bdf>[/<parts>...]`` (a symlink into ``sys/devices``)."""
    return "/".join((os.path.join(root, "sys"), "bus", "pci", "devices", bdf, *parts))


# --- files -------------------------------------------------------------------------------------


def read_text(path: str) -> str | None:
    """The file's text without surrounding whitespace, or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def read_int(path: str, base: int = 10) -> int | None:
    """The integer in a file (decimal; ``base=16``: hexadecimal, ``0x`` optional), or None."""
    text = read_text(path)
    try:
        return int(text, base) if text is not None else None
    except ValueError:
        return None


def read_id(path: str) -> str | None:
    """A PCI ID as lowercase hex without ``0x`` (``8086``), or None when absent or empty."""
    text = read_text(path)
    if not text:
        return None
    text = text.lower()
    return text[2:] if text.startswith("0x") else text


def _names(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _link_name(path: str) -> str | None:
    """Basename of a symlink's target, or None when the link cannot be read."""
    try:
        return os.path.basename(os.path.normpath(os.readlink(path))) or None
    except OSError:
        return None


# --- PCI functions -----------------------------------------------------------------------------


def pci_devices(root: str, *, fix: str) -> list[str]:
    """Every entry of ``sys/bus/pci/devices``, sorted.

    Raises: SysfsReadError naming the directory, the OS error and ``fix`` (what the caller's
    user should change) when it cannot be listed: there is no PCI bus under this root.
    """
    where = sys_path(root, "bus", "pci", "devices")
    try:
        return sorted(os.listdir(where))
    except OSError as exc:
        raise SysfsReadError(f"cannot list PCI devices in {where}: {exc.strerror}; {fix}") from exc


def is_vf(root: str, bdf: str) -> bool:
    """True when the function has a ``physfn`` link (upstream ``IsSriovVF``, an lstat)."""
    return os.path.lexists(pci_path(root, bdf, "physfn"))


def pci_class(root: str, bdf: str) -> int | None:
    """The 24-bit class code (``0x020000``), or None when unreadable."""
    return read_int(pci_path(root, bdf, "class"), 16)


def is_sriov_pf(root: str, bdf: str) -> bool:
    """True for a PCI function with ``sriov_totalvfs``, no ``physfn`` link and a network class code.

    The class code is ``0x02xxxx``; the eswitch mode is not in sysfs (the kernel answers it through
    devlink: ``sriov_dra.host.devlink``, the collection's ``module_utils/devlink.py``).
    """
    if is_vf(root, bdf) or not os.path.exists(pci_path(root, bdf, "sriov_totalvfs")):
        return False
    code = pci_class(root, bdf)
    return code is not None and (code >> 16) == NET_CLASS


def vendor(root: str, bdf: str) -> str | None:
    """Vendor ID, lowercase hex without ``0x``, or None when unreadable."""
    return read_id(pci_path(root, bdf, "vendor"))


def device_id(root: str, bdf: str) -> str | None:
    """Device (product) ID, lowercase hex without ``0x``, or None when unreadable."""
    return read_id(pci_path(root, bdf, "device"))


def numa_affinity(root: str, bdf: str) -> topology.NumaAffinity:
    """The function's NUMA node by :func:`.topology.numa_affinity` (None for ``-1`` or no file)."""
    return topology.numa_affinity(read_text(pci_path(root, bdf, "numa_node")))


def sriov_totalvfs(root: str, bdf: str) -> int | None:
    """``sriov_totalvfs`` of a PF, or None when absent or not a number."""
    return read_int(pci_path(root, bdf, "sriov_totalvfs"))


def sriov_numvfs(root: str, bdf: str) -> int | None:
    """``sriov_numvfs`` of a PF, or None when absent or not a number."""
    return read_int(pci_path(root, bdf, "sriov_numvfs"))


def current_driver(root: str, bdf: str) -> str | None:
    """Name of the bound driver (basename of the ``driver`` link), or None when unbound."""
    return _link_name(pci_path(root, bdf, "driver"))


def driver_override(root: str, bdf: str) -> str | None:
    """``driver_override``: None when the file is absent, ``""`` when cleared (``(null)``)."""
    text = read_text(pci_path(root, bdf, "driver_override"))
    if text is None:
        return None
    return "" if text in ("", "(null)") else text


def netdevs(root: str, bdf: str) -> list[str]:
    """Names under the function's ``net/`` directory (sorted; empty when no netdev is bound)."""
    return _names(pci_path(root, bdf, "net"))


def rdma_devices(root: str, bdf: str) -> list[str]:
    """Names under the function's ``infiniband/`` directory (rdmamap's RDMA check)."""
    return _names(pci_path(root, bdf, "infiniband"))


# --- SR-IOV topology ---------------------------------------------------------------------------


def pf_netdev(root: str, bdf: str) -> str | None:
    """The PF's uplink netdev, or None when it has none.

    With several netdevs (switchdev: the PF's ``net/`` also holds VF representors) the one whose
    ``phys_port_name`` is ``p<N>`` is the uplink, the sysfs trace of sriovnet
    ``GetUplinkRepresentor``; without one the first name wins, as in upstream's fallback.
    """
    found = netdevs(root, bdf)
    if len(found) > 1:
        for name in found:
            port = read_text(pci_path(root, bdf, "net", name, "phys_port_name"))
            if port is not None and _UPLINK_PORT_RE.fullmatch(port):
                return name
    return found[0] if found else None


def virtfns(root: str, pf_bdf: str, *, fix: str) -> list[tuple[int, str]]:
    """``(index, vf_bdf)`` for every ``virtfn<N>`` link of a PF, sorted by index.

    Shapes: ``vf_bdf`` is the link target's basename, unchecked (callers validate it).
    Raises: SysfsReadError naming the PF, the directory, the OS error and ``fix`` when the PF
    directory cannot be listed (upstream fails discovery then).
    """
    where = pci_path(root, pf_bdf)
    try:
        entries = os.listdir(where)
    except OSError as exc:
        raise SysfsReadError(f"cannot list PF {pf_bdf} at {where}: {exc.strerror}; {fix}") from exc
    links = []
    for entry in entries:
        match = _VIRTFN_RE.fullmatch(entry)
        if match is None:
            continue
        try:
            target = os.readlink(f"{where}/{entry}")
        except OSError:
            continue
        links.append((int(match.group(1)), os.path.basename(target)))
    return sorted(links)


def physfn(root: str, vf_bdf: str) -> str | None:
    """The PF address of a VF (basename of its ``physfn`` link), or None when not a VF."""
    return _link_name(pci_path(root, vf_bdf, "physfn"))


def link_type(root: str, ifname: str) -> str:
    """:data:`LINK_ETHERNET`, :data:`LINK_INFINIBAND` or :data:`LINK_UNKNOWN` from ``class/net/<if>/type``."""
    value = read_int(sys_path(root, "class", "net", ifname, "type"))
    if value == ARPHRD_ETHER:
        return LINK_ETHERNET
    if value == ARPHRD_INFINIBAND:
        return LINK_INFINIBAND
    return LINK_UNKNOWN


def pcie_root(root: str, bdf: str) -> topology.PcieRoot:
    """The PCIe root of ``bdf`` from its ``sys/bus/pci/devices`` link.

    The link is read once (``readlink``, as the Kubernetes helper does, not a full resolve); a
    relative target is made absolute against the link's directory with a lexical clean (Go's
    ``filepath.Clean``) and must lie under ``<root>/sys/devices``.
    Shapes: see :class:`.topology.PcieRoot`; a problem names the link and its target.
    Source: k8s.io/dynamic-resource-allocation ``deviceattribute`` (``resolvePCIeRoot``) for the
    link reading; :func:`.topology.pcie_root` for the root.
    """
    if not topology.HELPER_BDF_RE.fullmatch(bdf):
        return topology.pcie_root("", bdf)
    link = pci_path(root, bdf)
    try:
        target = os.readlink(link)
    except OSError as exc:
        return topology.PcieRoot(bdf, None, f"cannot read the symlink {link}: {exc.strerror}")
    if not posixpath.isabs(target):
        target = _clean(posixpath.join(posixpath.dirname(link), target))
    devices = _clean(sys_path(root, "devices"))
    if not target.startswith(devices + "/"):
        return topology.PcieRoot(bdf, None, f"{link} points to {target}, which is not under {devices}")
    found = topology.pcie_root(target[len(devices) + 1 :], bdf)
    if found.problem is None:
        return found
    return topology.PcieRoot(bdf, None, f"{link} points to {target}: {found.problem}")


def _clean(path: str) -> str:
    """Lexical clean like Go's ``filepath.Clean`` (``normpath`` keeps a leading ``//``)."""
    cleaned = posixpath.normpath(path)
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned
