"""What a prepared VF's container needs, read from sysfs: VFIO group, RDMA devices.

The host reads behind one VF's CDI container edits (``core.plugin.cdi_spec.VfEdits``), after the
driver binding: a ``vfio-pci`` VF's IOMMU group and whether it is a ``vfio-noiommu`` group; a VF
with exactly one RDMA device, that device and its character devices (``uverbs<N>``, ``umad<N>``,
``issm<N>``, ``rdma_cm``). Zero or several RDMA devices add nothing (several are logged) instead
of upstream's prepare failure, which breaks VFIO on RDMA-capable NICs (dra-driver-sriov #142).
Read-only, under the sysfs root.
"""

from __future__ import annotations

import logging
import os

from sriov_dra.core.plugin import cdi_spec
from sriov_dra.host import sysfs as sysfs_mod

LOG = logging.getLogger(__name__)

VFIO_DRIVER = "vfio-pci"
NOIOMMU_MARK = "vfio-noiommu"
RDMA_DEV_DIR = "/dev/infiniband"


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _group_is_noiommu(sysfs: sysfs_mod.Sysfs, group: str) -> bool:
    try:
        with open(sysfs.sys_path("kernel", "iommu_groups", group, "name"), encoding="ascii") as f:
            return NOIOMMU_MARK in f.read()
    except (OSError, UnicodeDecodeError):
        return False


def rdma_char_devices(sysfs: sysfs_mod.Sysfs, bdf: str) -> tuple[str, ...]:
    """The RDMA character devices of a VF, as ``/dev/infiniband/...`` paths (sorted).

    Shapes: ``uverbs<N>`` from ``infiniband_verbs/``, ``umad<N>``/``issm<N>`` from
    ``infiniband_mad/``, plus ``rdma_cm`` when the VF has any of them.
    """
    found = [n for n in _listdir(sysfs.device_path(bdf, "infiniband_verbs")) if n.startswith("uverbs")]
    found += [n for n in _listdir(sysfs.device_path(bdf, "infiniband_mad")) if n.startswith(("umad", "issm"))]
    if found:
        found.append("rdma_cm")
    return tuple(sorted(f"{RDMA_DEV_DIR}/{n}" for n in found))


def vf_edits(
    sysfs: sysfs_mod.Sysfs,
    bdf: str,
    *,
    device: str,
    net_attach_def_name: str = "",
    vhost: bool = False,
    log: logging.Logger | logging.LoggerAdapter[logging.Logger] = LOG,
) -> cdi_spec.VfEdits:
    """Read the container-edit facts of VF ``bdf`` (DRA device ``device``) as bound now.

    Shapes: ``vfio_group`` is set iff the VF is bound to ``vfio-pci`` and has an IOMMU group.
    Raises: nothing for missing files (absent facts add no edits); ``core.plugin.cdi_spec`` validates
    the values when the spec is built.
    """
    group = ""
    noiommu = False
    if sysfs.current_driver(bdf) == VFIO_DRIVER:
        group = sysfs.iommu_group(bdf) or ""
        if not group:
            log.warning("vfio vf without iommu group", extra={"pci": bdf, "op": "cdi"})
        noiommu = bool(group) and _group_is_noiommu(sysfs, group)
    rdma = sysfs.rdma_devices(bdf)
    rdma_device = ""
    char_devices: tuple[str, ...] = ()
    if len(rdma) == 1:
        rdma_device = rdma[0]
        char_devices = rdma_char_devices(sysfs, bdf)
    elif len(rdma) > 1:
        log.warning(
            "vf has several rdma devices: none exposed", extra={"pci": bdf, "op": "cdi", "reason": rdma}
        )
    return cdi_spec.VfEdits(
        device=device,
        pci_address=bdf,
        net_attach_def_name=net_attach_def_name,
        vfio_group=group,
        vfio_noiommu=noiommu,
        vhost=vhost,
        rdma_device=rdma_device,
        rdma_char_devices=char_devices,
    )
