# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Read-only view of a host's PCI/SR-IOV sysfs under a configurable root, for modules.

This file owns every sysfs *read* the collection's modules need: SR-IOV PFs and their
``virtfn<N>`` links, VF drivers and netdevs, link types, NUMA nodes and the standard
``resource.kubernetes.io/pcieRoot`` string. Paths are ``<root>/sys/...`` so that tests and
molecule scenarios run on fake trees; on a host the root is ``/``.

The rules are the plugin's (``sriov_dra.host.sysfs`` and ``sriov_dra.host.pcieroot``), written
again here because modules run on managed nodes where the ``sriov_dra`` package is not installed.
``tests/unit/plugins/module_utils/test_sysfs_parity.py`` feeds both implementations the same
fake trees and asserts equal answers, so the two cannot drift:

- a PF has ``sriov_totalvfs``, no ``physfn`` link, a network class code (``0x02xxxx``) and a
  netdev; with several netdevs (switchdev representors) the one whose ``phys_port_name`` is
  ``p<N>`` is the uplink, else the first name;
- IDs are lowercase hex without ``0x``; a missing, negative or garbled ``numa_node`` is ``-1``;
- link type from ``class/net/<if>/type``: 1 ``ethernet``, 32 ``infiniband``, else ``unknown``;
- pcieRoot: the Kubernetes ``deviceattribute`` helper's algorithm (one ``readlink`` of
  ``bus/pci/devices/<bdf>``, lexical clean, target under ``sys/devices/pci*`` ending in the
  BDF, first element after ``sys/devices/``); never ``""``: None with a reason instead.

It must never write (``numvfs.py`` does), and must import only the standard library.
"""

from __future__ import annotations

import os
import posixpath
import re

from ansible_collections.sriovnet.dra.plugins.module_utils import base

NET_CLASS = 0x02
ARPHRD_ETHER = 1
ARPHRD_INFINIBAND = 32
NO_NUMA_NODE = -1
FAKE_ESWITCH_MODE_FILE = "sriov_dra_eswitch_mode"
"""Not a kernel file: the fake trees' stand-in for devlink's eswitch mode (never on a host)."""

BDF_RE = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
"""Plain extended PCI address (``0000:03:00.0``), used with ``fullmatch``."""
_HELPER_BDF_RE = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]")
_VIRTFN_RE = re.compile(r"virtfn(0|[1-9][0-9]*)")
_UPLINK_PORT_RE = re.compile(r"p[0-9]+")


class SysfsError(base.ModuleError):
    """A sysfs fact that the caller needs is missing or unreadable; the message says what to do."""


class Sysfs:
    """Reader of ``<root>/sys``; every method takes plain PCI addresses (``0000:03:00.0``).

    Shapes: listings are sorted (BDFs lexicographically, VFs by index).
    """

    def __init__(self, root="/"):
        self.root = str(root)
        self.sys = os.path.join(self.root, "sys")
        self.pci = self.sys + "/bus/pci/devices"

    # --- paths ---------------------------------------------------------------------------------

    def device_path(self, bdf, *parts):
        """``<root>/sys/bus/pci/devices/<bdf>[/<parts>...]``."""
        return "/".join((self.pci, bdf) + parts)

    def sys_path(self, *parts):
        """``<root>/sys[/<parts>...]``."""
        return "/".join((self.sys,) + parts)

    # --- functions -----------------------------------------------------------------------------

    def pci_devices(self):
        """Every entry of ``sys/bus/pci/devices``, sorted.

        Raises: SysfsError when the directory cannot be listed (wrong root or no PCI bus).
        """
        try:
            return sorted(os.listdir(self.pci))
        except OSError as exc:
            raise SysfsError(
                "cannot list PCI devices in %s: %s; check host_root (it must hold the host's sys/)"
                % (self.pci, exc.strerror)
            )

    def is_vf(self, bdf):
        """True when the function has a ``physfn`` link."""
        return os.path.lexists(self.device_path(bdf, "physfn"))

    def is_sriov_pf(self, bdf):
        """True for a network-class physical function with ``sriov_totalvfs``."""
        if self.is_vf(bdf) or not os.path.exists(self.device_path(bdf, "sriov_totalvfs")):
            return False
        code = read_hex(self.device_path(bdf, "class"))
        return code is not None and (code >> 16) == NET_CLASS

    def vendor(self, bdf):
        """Vendor ID, lowercase hex without ``0x`` (``""`` when unreadable)."""
        return read_id(self.device_path(bdf, "vendor")) or ""

    def device_id(self, bdf):
        """Device ID, lowercase hex without ``0x`` (``""`` when unreadable)."""
        return read_id(self.device_path(bdf, "device")) or ""

    def numa_node(self, bdf):
        """NUMA node; ``-1`` when the file is absent, negative or not a number."""
        value = read_int(self.device_path(bdf, "numa_node"))
        return value if value is not None and value >= 0 else NO_NUMA_NODE

    def totalvfs(self, bdf):
        """``sriov_totalvfs`` or None."""
        return read_int(self.device_path(bdf, "sriov_totalvfs"))

    def numvfs(self, bdf):
        """``sriov_numvfs`` or None."""
        return read_int(self.device_path(bdf, "sriov_numvfs"))

    def driver(self, bdf):
        """Bound driver name (basename of the ``driver`` link) or None when unbound."""
        try:
            target = os.readlink(self.device_path(bdf, "driver"))
        except OSError:
            return None
        return os.path.basename(os.path.normpath(target)) or None

    def driver_override(self, bdf):
        """``driver_override``: None when absent, ``""`` when cleared (``(null)``)."""
        text = read_text(self.device_path(bdf, "driver_override"))
        if text is None:
            return None
        return "" if text in ("", "(null)") else text

    def netdevs(self, bdf):
        """Names under the function's ``net/`` directory (sorted, empty when none)."""
        try:
            return sorted(os.listdir(self.device_path(bdf, "net")))
        except OSError:
            return []

    def rdma_devices(self, bdf):
        """Names under the function's ``infiniband/`` directory."""
        try:
            return sorted(os.listdir(self.device_path(bdf, "infiniband")))
        except OSError:
            return []

    def pf_netdev(self, bdf):
        """The PF's uplink netdev (``phys_port_name`` ``p<N>`` wins among several), or None."""
        names = self.netdevs(bdf)
        if len(names) > 1:
            for name in names:
                port = read_text(self.device_path(bdf, "net", name, "phys_port_name"))
                if port is not None and _UPLINK_PORT_RE.fullmatch(port):
                    return name
        return names[0] if names else None

    def link_type(self, ifname):
        """``ethernet``, ``infiniband`` or ``unknown`` from ``class/net/<if>/type``."""
        value = read_int(self.sys_path("class", "net", ifname, "type"))
        if value == ARPHRD_ETHER:
            return "ethernet"
        if value == ARPHRD_INFINIBAND:
            return "infiniband"
        return "unknown"

    def eswitch_mode(self, bdf):
        """``legacy``/``switchdev`` from the fake-only file, else None (a host needs devlink)."""
        text = read_text(self.device_path(bdf, FAKE_ESWITCH_MODE_FILE))
        return text if text in ("legacy", "switchdev") else None

    def virtfns(self, pf_bdf):
        """``[(index, vf_bdf)]`` for every ``virtfn<N>`` link of the PF, sorted by index.

        Raises: SysfsError when the PF directory cannot be listed.
        """
        where = self.device_path(pf_bdf)
        try:
            entries = os.listdir(where)
        except OSError as exc:
            raise SysfsError("cannot list PF %s at %s: %s" % (pf_bdf, where, exc.strerror))
        links = []
        for entry in entries:
            match = _VIRTFN_RE.fullmatch(entry)
            if match is None:
                continue
            try:
                target = os.readlink(where + "/" + entry)
            except OSError:
                continue
            links.append((int(match.group(1)), os.path.basename(target)))
        return sorted(links)

    # --- PF lookup -----------------------------------------------------------------------------

    def resolve_pf(self, pf):
        """PCI address of ``pf``, given as a PF netdev name or a PCI address.

        Raises: SysfsError naming what was looked up and where, when it is not an SR-IOV PF.
        """
        if BDF_RE.fullmatch(pf):
            bdf = pf
        else:
            link = self.sys_path("class", "net", pf, "device")
            try:
                os.readlink(link)
                bdf = os.path.basename(os.path.realpath(link))
            except OSError:
                raise SysfsError(
                    "PF %s not found: %s is missing; use the PF's netdev name (ip link) or its PCI "
                    "address (lspci -D), and check host_root" % (pf, link)
                )
        if not os.path.lexists(self.device_path(bdf)):
            raise SysfsError("PF %s not found: %s does not exist; check the PCI address (lspci -D)" % (pf, self.device_path(bdf)))
        if self.is_vf(bdf):
            raise SysfsError("%s (%s) is a VF, not a PF; name its PF instead" % (pf, bdf))
        if not os.path.exists(self.device_path(bdf, "sriov_numvfs")):
            raise SysfsError(
                "%s (%s) does not support SR-IOV: %s is missing; enable SR-IOV in the NIC firmware "
                "and the BIOS, or pick an SR-IOV capable PF" % (pf, bdf, self.device_path(bdf, "sriov_numvfs"))
            )
        return bdf

    # --- facts ---------------------------------------------------------------------------------

    def pf_facts(self, bdf):
        """Facts of one PF as a plain dict, or None when ``bdf`` is not an SR-IOV PF with a netdev."""
        if not self.is_sriov_pf(bdf):
            return None
        ifname = self.pf_netdev(bdf)
        if ifname is None:
            return None
        root, problem = pcie_root(self, bdf)
        return {
            "pci_address": bdf,
            "name": ifname,
            "vendor": self.vendor(bdf),
            "device_id": self.device_id(bdf),
            "driver": self.driver(bdf),
            "numa_node": self.numa_node(bdf),
            "link_type": self.link_type(ifname),
            "eswitch_mode": self.eswitch_mode(bdf),
            "totalvfs": self.totalvfs(bdf),
            "numvfs": self.numvfs(bdf),
            "pcie_root": root,
            "pcie_root_problem": problem,
        }

    def vf_facts(self, pf, index, bdf):
        """Facts of VF ``index`` (at ``bdf``) of the PF facts ``pf``, as a plain dict."""
        netdevs = self.netdevs(bdf)
        root, problem = pcie_root(self, bdf)
        return {
            "pci_address": bdf,
            "vf_id": index,
            "pf_name": pf["name"],
            "pf_pci_address": pf["pci_address"],
            "vendor": self.vendor(bdf),
            "device_id": self.device_id(bdf),
            "driver": self.driver(bdf),
            "driver_override": self.driver_override(bdf),
            "netdev": netdevs[0] if netdevs else None,
            "numa_node": self.numa_node(bdf),
            "link_type": pf["link_type"],
            "rdma_devices": self.rdma_devices(bdf),
            "pcie_root": root,
            "pcie_root_problem": problem,
        }

    def pfs(self):
        """Facts of every SR-IOV PF with a netdev, sorted by PCI address."""
        found = (self.pf_facts(bdf) for bdf in self.pci_devices())
        return [pf for pf in found if pf is not None]


def pcie_root(sysfs, bdf):
    """``(root, None)`` or ``(None, problem)`` for ``bdf`` with the Kubernetes helper's rules.

    Shapes: ``root`` is like ``pci0000:00``; never ``""``.
    Source: k8s.io/dynamic-resource-allocation ``deviceattribute`` (``resolvePCIeRoot``).
    """
    if not _HELPER_BDF_RE.fullmatch(bdf):
        return None, "%r is not a lowercase extended BDF such as 0000:03:00.0" % (bdf,)
    link = sysfs.device_path(bdf)
    try:
        target = os.readlink(link)
    except OSError as exc:
        return None, "cannot read the symlink %s: %s" % (link, exc.strerror)
    if not posixpath.isabs(target):
        target = _clean(posixpath.join(posixpath.dirname(link), target))
    devices = _clean(sysfs.sys_path("devices"))
    if not target.startswith(posixpath.join(devices, "pci")):
        return None, "%s points to %s, which is not under %s/pci* (not a PCI root)" % (link, target, devices)
    if posixpath.basename(target) != bdf:
        return None, "%s points to %s, which does not end with %s" % (link, target, bdf)
    return target[len(devices) + 1:].split("/", 1)[0], None


def _clean(path):
    """Lexical clean like Go's ``filepath.Clean`` (``normpath`` keeps a leading ``//``)."""
    cleaned = posixpath.normpath(path)
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def read_text(path):
    """Stripped file contents, or None when unreadable."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except (OSError, IOError):
        return None


def read_int(path):
    """Decimal integer in a file, or None."""
    text = read_text(path)
    try:
        return int(text, 10) if text is not None else None
    except ValueError:
        return None


def read_hex(path):
    """Hexadecimal integer in a file (``0x`` optional), or None."""
    text = read_text(path)
    try:
        return int(text, 16) if text is not None else None
    except ValueError:
        return None


def read_id(path):
    """A PCI ID as lowercase hex without ``0x``, or None when absent or empty."""
    text = read_text(path)
    if not text:
        return None
    text = text.lower()
    return text[2:] if text.startswith("0x") else text
