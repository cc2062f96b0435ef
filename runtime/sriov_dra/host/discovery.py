"""SR-IOV VF discovery: the node's VFs with upstream dra-driver-sriov's attribute set.

Turns a sysfs tree into the :class:`DiscoveredVf` values the plugin advertises (after policy
filtering). Device names, attribute names, types and value formats are upstream's, so existing
DeviceClass CEL, SriovResourcePolicy and Multus keep working; the attribute map is
``core.device_facts.discovered_attributes``'s. Unknown topology is omitted, never published as
``-1`` or ``""`` (docs/design.md#device-attributes); ``EswitchMode`` falls back to ``legacy``.
Never writes to the host, invents a hardware fact, or reads policy.
"""

from __future__ import annotations

import dataclasses
import logging
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from sriov_dra.core import attributes, device_facts, identities
from sriov_dra.host import pcie_root
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra_rules import names

LOG = logging.getLogger(__name__)

_D = names.DOMAIN
VENDOR = f"{_D}/vendor"
DEVICE_ID = f"{_D}/deviceID"
PF_DEVICE_ID = f"{_D}/pfDeviceID"
PCI_ADDRESS = f"{_D}/pciAddress"
MULTUS_DEVICE_ID = "k8s.cni.cncf.io/deviceID"
PF_NAME = f"{_D}/PFName"
ESWITCH_MODE = f"{_D}/EswitchMode"
VF_ID = f"{_D}/vfID"
PCIE_ROOT = pcie_root.ATTRIBUTE
PF_PCI_ADDRESS = f"{_D}/pfPciAddress"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
LINK_TYPE = f"{_D}/linkType"
RDMA_CAPABLE = f"{_D}/rdmaCapable"
NUMA_NODE = "dra.net/numaNode"
STANDARD_NUMA_NODE = "resource.kubernetes.io/numaNode"

DISCOVERY_ATTRIBUTES = frozenset(
    {
        VENDOR,
        DEVICE_ID,
        PF_DEVICE_ID,
        PCI_ADDRESS,
        MULTUS_DEVICE_ID,
        PF_NAME,
        ESWITCH_MODE,
        VF_ID,
        PCIE_ROOT,
        PF_PCI_ADDRESS,
        PCI_BUS_ID,
        LINK_TYPE,
        RDMA_CAPABLE,
        NUMA_NODE,
        STANDARD_NUMA_NODE,
    }
)
"""Every key discovery may publish; equal to ``attributes.RESERVED_ATTRIBUTES`` (a test checks)."""


class EswitchModeSource(Protocol):
    """Asks the kernel (devlink) for a PF's eswitch mode; None when it cannot tell.

    The production source is ``host/devlink.py`` (the host's own devices); a test tree passes its
    own (the lab's ``FakeEswitchModes``). Without one, discovery publishes ``legacy``.
    """

    def __call__(self, pf_bdf: identities.PciAddress) -> str | None: ...


@dataclass(frozen=True)
class DiscoveredVf:
    """One VF as discovered, with the attributes the plugin publishes for it.

    Shapes: ``name`` is the DRA device name (:func:`device_name`); IDs are lowercase hex without
    ``0x``; ``numa_node`` is the PF's node or None (no node; then absent from ``attributes``);
    ``pcie_root`` is the PF's root or None when it could not be computed (then absent too);
    ``driver`` None when unbound; ``netdev`` set only while a netdevice driver is bound;
    ``attributes`` is read-only and holds exactly the published keys. Facts are a snapshot of
    discovery time, not live state.
    """

    name: str
    pci_address: identities.PciAddress
    vf_id: int
    vendor: str
    device_id: str
    pf_device_id: str
    pf_name: str
    pf_pci_address: identities.PciAddress
    eswitch_mode: sysfs_mod.EswitchMode
    link_type: sysfs_mod.LinkType
    numa_node: int | None
    pcie_root: str | None
    rdma_capable: bool
    driver: str | None
    netdev: str | None
    driver_override: str | None
    attributes: Mapping[str, attributes.AttributeValue] = field(hash=False)

    def to_device_facts(self) -> device_facts.DeviceFacts:
        """The policy layer's view of this VF (``core.device_facts.DeviceFacts``)."""
        return device_facts.DeviceFacts(
            pci_address=self.pci_address,
            vendor=self.vendor,
            device_id=self.device_id,
            pf_device_id=self.pf_device_id,
            pf_name=self.pf_name,
            pf_pci_address=self.pf_pci_address,
            vf_id=self.vf_id,
            driver=self.driver,
            numa_node=self.numa_node,
            pcie_root=self.pcie_root,
            link_type=self.link_type.value,
            eswitch_mode=self.eswitch_mode.value,
            rdma_capable=self.rdma_capable,
        )


def device_name(bdf: str) -> str:
    """DRA device name of a VF: its BDF with every ``:`` and ``.`` replaced by ``-``.

    Shapes: ``0000:03:02.0`` → ``0000-03-02-0`` (a DNS label for any valid BDF).
    Source: upstream dra-driver-sriov ``discovery.go``.
    """
    return bdf.replace(":", "-").replace(".", "-")


def discover(
    sysfs: sysfs_mod.Sysfs,
    *,
    eswitch_modes: EswitchModeSource | None = None,
    log: logging.Logger | logging.LoggerAdapter[logging.Logger] = LOG,
) -> tuple[DiscoveredVf, ...]:
    """Discover every VF of every SR-IOV PF with a netdev, sorted by device name.

    A PF without a netdev, a VF link whose target is not a plain BDF and a second VF with an
    already-seen name are skipped with a log line. The VFs of a PF whose ``pcieRoot`` cannot be
    computed are kept without that attribute (warning ``pcieRoot omitted`` with the reason, once
    per PF), and so are the VFs of a PF without a NUMA node without ``dra.net/numaNode`` (INFO
    ``numaNode omitted`` with the reason, once per PF): "no node" must never match as node
    ``-1``, and an empty root would pair unrelated devices. ``resource.kubernetes.io/numaNode`` is
    not published (upstream does not; dra-driver-sriov #147 would). ``EswitchMode`` comes from
    ``eswitch_modes``, else the fake-sysfs file, else ``legacy`` (upstream's fallback).
    Raises: sysfs.SysfsReadError if ``sys/bus/pci/devices`` or a PF directory is unreadable
    (upstream fails discovery then, and so does this).
    Every discovered VF stays in the inventory; eligibility is applied later
    (docs/design.md#eligibility).
    Source: upstream dra-driver-sriov's discovery.
    """
    found: dict[str, DiscoveredVf] = {}
    for bdf in sysfs.pci_devices():
        if not sysfs.is_sriov_pf(bdf):
            continue
        pf = sysfs.pf_info(bdf)
        if pf is None:
            log.info("pf skipped: no netdev", extra={"pci": bdf, "op": "discovery"})
            continue
        mode = _eswitch_mode(pf, eswitch_modes, log)
        pf_root = _pf_topology(sysfs, pf, log)
        for link in sysfs.virtfns(pf.bdf):
            if not names.is_pci_address(link.bdf):
                log.warning(
                    "vf skipped: bad address",
                    extra={"pci": link.bdf, "pf": pf.ifname, "vf_id": link.index, "op": "discovery"},
                )
                continue
            vf = sysfs.vf_info(pf, link)
            name = device_name(vf.bdf)
            if name in found:
                log.warning(
                    "vf skipped: duplicate", extra={"pci": vf.bdf, "pf": pf.ifname, "op": "discovery"}
                )
                continue
            found[name] = _discovered(sysfs, pf, vf, mode, pf_root, log)
    log.info("discovery completed", extra={"op": "discovery", "outcome": f"{len(found)} vfs"})
    return tuple(found[n] for n in sorted(found))


def by_name(vfs: tuple[DiscoveredVf, ...]) -> Mapping[str, DiscoveredVf]:
    """Index discovered VFs by device name (read-only)."""
    return types.MappingProxyType({vf.name: vf for vf in vfs})


def _pf_topology(
    sysfs: sysfs_mod.Sysfs,
    pf: sysfs_mod.PfInfo,
    log: logging.Logger | logging.LoggerAdapter[logging.Logger],
) -> str | None:
    """The PF's pcieRoot (None: omitted); logs once per PF why a topology attribute is omitted."""
    root = pcie_root.resolve(sysfs, pf.bdf)
    if root.root is None:
        log.warning(
            "pcieRoot omitted",
            extra={"pci": pf.bdf, "pf": pf.ifname, "op": "discovery", "reason": root.problem},
        )
    if pf.numa_node is None:
        log.info(
            "numaNode omitted",
            extra={"pci": pf.bdf, "pf": pf.ifname, "op": "discovery", "reason": pf.numa_node_reason},
        )
    return root.root


def _discovered(
    sysfs: sysfs_mod.Sysfs,
    pf: sysfs_mod.PfInfo,
    vf: sysfs_mod.VfInfo,
    mode: sysfs_mod.EswitchMode,
    pf_root: str | None,
    log: logging.Logger | logging.LoggerAdapter[logging.Logger],
) -> DiscoveredVf:
    own_root = pcie_root.pcie_root(sysfs, vf.bdf)
    if pf_root is not None and own_root is not None and own_root != pf_root:
        log.warning(
            "pcieRoot differs from pf",
            extra={"pci": vf.bdf, "pf": pf.ifname, "op": "discovery", "reason": f"{own_root} != {pf_root}"},
        )
    found = DiscoveredVf(
        name=device_name(vf.bdf),
        pci_address=vf.bdf,
        vf_id=vf.index,
        vendor=pf.vendor,
        device_id=vf.device_id,
        pf_device_id=pf.device_id,
        pf_name=pf.ifname,
        pf_pci_address=pf.bdf,
        eswitch_mode=mode,
        link_type=pf.link_type,
        numa_node=pf.numa_node,
        pcie_root=pf_root,
        rdma_capable=bool(vf.rdma_devices),
        driver=vf.driver,
        netdev=vf.netdev,
        driver_override=vf.driver_override,
        attributes=types.MappingProxyType({}),
    )
    # One source of truth for names and types: core.policies builds the map from the facts.
    published = device_facts.discovered_attributes(found.to_device_facts())
    return dataclasses.replace(found, attributes=types.MappingProxyType(dict(sorted(published.items()))))


def _eswitch_mode(
    pf: sysfs_mod.PfInfo,
    source: EswitchModeSource | None,
    log: logging.Logger | logging.LoggerAdapter[logging.Logger],
) -> sysfs_mod.EswitchMode:
    """The source's answer (devlink on a host), else ``legacy`` (upstream's fallback)."""
    if source is not None:
        raw = source(pf.bdf)
        if raw:
            try:
                return sysfs_mod.EswitchMode(raw)
            except ValueError:
                log.warning(
                    "eswitch mode unknown: using legacy",
                    extra={"pci": pf.bdf, "pf": pf.ifname, "op": "discovery", "reason": raw},
                )
                return sysfs_mod.EswitchMode.LEGACY
    return sysfs_mod.EswitchMode.LEGACY
