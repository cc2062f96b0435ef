# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The collection's view of a host's PCI/SR-IOV sysfs under a configurable root, for modules.

Gives ``sriov_facts`` and ``sriov_numvfs`` plain-dict facts (PFs and their VFs, drivers,
netdevs, link types, NUMA nodes, ``resource.kubernetes.io/pcieRoot``), PF lookup by name or
address, and the modules' error type. The reading rules are the plugin's own, from the shared
``sriov_dra_rules.sysfs_read`` and ``topology``, so both report the same facts; a VF reports its
PF's pcieRoot, and an unknown NUMA node or root is None (with a reason), never ``-1`` or ``""``.
Paths are ``<root>/sys/...``. Never writes (``numvfs.py`` does); standard library only.
"""

from __future__ import annotations

import os
import re

from ansible_collections.sriovnet.dra.plugins.module_utils import base, devlink
from ansible_collections.sriovnet.dra.plugins.module_utils.sriov_dra_rules import sysfs_read

BDF_RE = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
"""Plain extended PCI address (``0000:03:00.0``), used with ``fullmatch``."""

_NO_PCI_FIX = "check host_root (it must hold the host's sys/)"
_NO_PF_FIX = "check the PF address (lspci -D) and host_root"


class SysfsError(base.ModuleError):
    """A sysfs fact that the caller needs is missing or unreadable; the message says what to do."""


class Sysfs:
    """Reader of ``<root>/sys``; every method takes plain PCI addresses (``0000:03:00.0``).

    Shapes: listings are sorted (BDFs lexicographically, VFs by index).
    """

    def __init__(self, root="/", eswitch=None):
        """``eswitch(bdf) -> (mode, reason)`` asks the kernel; default ``devlink.eswitch_mode``."""
        self.root = str(root)
        self._eswitch = eswitch or devlink.eswitch_mode

    # --- paths ---------------------------------------------------------------------------------

    def device_path(self, bdf, *parts):
        """``<root>/sys/bus/pci/devices/<bdf>[/<parts>...]``."""
        return sysfs_read.pci_path(self.root, bdf, *parts)

    def sys_path(self, *parts):
        """``<root>/sys[/<parts>...]``."""
        return sysfs_read.sys_path(self.root, *parts)

    # --- functions -----------------------------------------------------------------------------

    def pci_devices(self):
        """Every entry of ``sys/bus/pci/devices``, sorted.

        Raises: SysfsError when the directory cannot be listed (wrong root or no PCI bus).
        """
        try:
            return sysfs_read.pci_devices(self.root, fix=_NO_PCI_FIX)
        except sysfs_read.SysfsReadError as exc:
            raise SysfsError(exc.summary) from exc

    def is_vf(self, bdf):
        """True when the function has a ``physfn`` link."""
        return sysfs_read.is_vf(self.root, bdf)

    def is_sriov_pf(self, bdf):
        """True for a network-class physical function with ``sriov_totalvfs``."""
        return sysfs_read.is_sriov_pf(self.root, bdf)

    def vendor(self, bdf):
        """Vendor ID, lowercase hex without ``0x`` (``""`` when unreadable)."""
        return sysfs_read.vendor(self.root, bdf) or ""

    def device_id(self, bdf):
        """Device ID, lowercase hex without ``0x`` (``""`` when unreadable)."""
        return sysfs_read.device_id(self.root, bdf) or ""

    def numa_node(self, bdf):
        """NUMA node, or None when the kernel reports ``-1`` or the file is missing or garbled."""
        return sysfs_read.numa_affinity(self.root, bdf).node

    def totalvfs(self, bdf):
        """``sriov_totalvfs`` or None."""
        return sysfs_read.sriov_totalvfs(self.root, bdf)

    def numvfs(self, bdf):
        """``sriov_numvfs`` or None."""
        return sysfs_read.sriov_numvfs(self.root, bdf)

    def driver(self, bdf):
        """Bound driver name (basename of the ``driver`` link) or None when unbound."""
        return sysfs_read.current_driver(self.root, bdf)

    def driver_override(self, bdf):
        """``driver_override``: None when absent, ``""`` when cleared (``(null)``)."""
        return sysfs_read.driver_override(self.root, bdf)

    def netdevs(self, bdf):
        """Names under the function's ``net/`` directory (sorted, empty when none)."""
        return sysfs_read.netdevs(self.root, bdf)

    def rdma_devices(self, bdf):
        """Names under the function's ``infiniband/`` directory."""
        return sysfs_read.rdma_devices(self.root, bdf)

    def pf_netdev(self, bdf):
        """The PF's uplink netdev (``phys_port_name`` ``p<N>`` wins among several), or None."""
        return sysfs_read.pf_netdev(self.root, bdf)

    def link_type(self, ifname):
        """``ethernet``, ``infiniband`` or ``unknown`` from ``class/net/<if>/type``."""
        return sysfs_read.link_type(self.root, ifname)

    def eswitch_mode(self, bdf):
        """``(mode, reason)`` from the kernel through ``devlink`` (sysfs has no eswitch mode).

        ``mode`` is ``legacy``/``switchdev`` or None (unknown); ``reason`` says why when the kernel
        did not simply answer a mode (``module_utils/devlink.py``).
        """
        return self._eswitch(bdf)

    def virtfns(self, pf_bdf):
        """``[(index, vf_bdf)]`` for every ``virtfn<N>`` link of the PF, sorted by index.

        Raises: SysfsError when the PF directory cannot be listed.
        """
        try:
            return sysfs_read.virtfns(self.root, pf_bdf, fix=_NO_PF_FIX)
        except sysfs_read.SysfsReadError as exc:
            raise SysfsError(exc.summary) from exc

    def pcie_root(self, bdf):
        """``(root, None)`` or ``(None, problem)`` for ``bdf`` (``sriov_dra_rules.topology``)."""
        found = sysfs_read.pcie_root(self.root, bdf)
        return found.root, found.problem

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
            raise SysfsError(
                "PF %s not found: %s does not exist; check the PCI address (lspci -D)"
                % (pf, self.device_path(bdf))
            )
        if self.is_vf(bdf):
            raise SysfsError("%s (%s) is a VF, not a PF; name its PF instead" % (pf, bdf))
        if not os.path.exists(self.device_path(bdf, "sriov_numvfs")):
            raise SysfsError(
                "%s (%s) does not support SR-IOV: %s is missing; enable SR-IOV in the NIC firmware "
                "and the BIOS, or pick an SR-IOV capable PF"
                % (pf, bdf, self.device_path(bdf, "sriov_numvfs"))
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
        root, problem = self.pcie_root(bdf)
        eswitch, eswitch_reason = self.eswitch_mode(bdf)
        return {
            "pci_address": bdf,
            "name": ifname,
            "vendor": self.vendor(bdf),
            "device_id": self.device_id(bdf),
            "driver": self.driver(bdf),
            "numa_node": self.numa_node(bdf),
            "link_type": self.link_type(ifname),
            "eswitch_mode": eswitch,
            "eswitch_mode_reason": eswitch_reason,
            "totalvfs": self.totalvfs(bdf),
            "numvfs": self.numvfs(bdf),
            "pcie_root": root,
            "pcie_root_problem": problem,
        }

    def vf_facts(self, pf, index, bdf):
        """Facts of VF ``index`` (at ``bdf``) of the PF facts ``pf``, as a plain dict.

        ``pcie_root`` and ``pcie_root_problem`` are the PF's, as the plugin publishes them.
        """
        netdevs = self.netdevs(bdf)
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
            "pcie_root": pf["pcie_root"],
            "pcie_root_problem": pf["pcie_root_problem"],
        }

    def pfs(self):
        """Facts of every SR-IOV PF with a netdev, sorted by PCI address."""
        found = (self.pf_facts(bdf) for bdf in self.pci_devices())
        return [pf for pf in found if pf is not None]
