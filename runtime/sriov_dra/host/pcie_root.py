"""The standard ``resource.kubernetes.io/pcieRoot`` attribute of a PCI function on this node.

Claims pair a VF with a GPU by ``matchAttribute`` on this attribute, which GPU drivers publish
with the Kubernetes ``deviceattribute`` helper, so the plugin must give the same string for the
same root complex. The rule is ``sriov_dra_rules.topology``'s (shared with ``sriov_facts``);
``/`` is the :class:`~sriov_dra.host.sysfs.Sysfs` root. Discovery publishes the PF's root for its
VFs, as upstream does (a VF's own path gives the same root). A failure is None with a reason and
the attribute is omitted: never ``""``, which would pair unrelated devices.
"""

from __future__ import annotations

from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra_rules import topology

ATTRIBUTE = topology.PCIE_ROOT_ATTRIBUTE
"""Qualified name of the standard attribute (type string)."""


def resolve(sysfs: sysfs_mod.Sysfs, bdf: str) -> topology.PcieRoot:
    """The PCIe root of ``bdf``, or why there is none.

    Shapes: ``root`` is a root bus name such as ``pci0000:00``, ``pci0000:80`` or (behind
    VMBus) ``pci0001:00``; exactly one of ``root`` and ``problem`` is set.
    Source: ``sriov_dra_rules.topology.pcie_root``; k8s.io/dynamic-resource-allocation
    ``deviceattribute.GetPCIeRootAttributeByPCIBusID``.
    """
    return sysfs.pcie_root(bdf)


def pcie_root(sysfs: sysfs_mod.Sysfs, bdf: str) -> str | None:
    """The ``pcieRoot`` string of ``bdf``, or None when it cannot be computed (see :func:`resolve`)."""
    return resolve(sysfs, bdf).root
