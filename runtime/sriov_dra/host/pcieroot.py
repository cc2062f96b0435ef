"""The standard ``resource.kubernetes.io/pcieRoot`` attribute of a PCI function on this node.

GPU drivers publish ``pcieRoot`` with the Kubernetes ``deviceattribute`` helper, and claims pair
a VF with a GPU by ``matchAttribute: resource.kubernetes.io/pcieRoot``, so the plugin must give
the same string for the same root complex. The rule, shared with the collection's
``sriov_facts`` module, lives in ``sriov_dra_rules.topology`` (the nearest ``pciDDDD:BB``
component of the device's resolved path under ``/sys/devices``, which equals the helper's answer
wherever the helper gives a root bus, and also finds the root behind a Hyper-V/VMBus parent);
``sriov_dra_rules.sysfsread`` reads the link. Here ``/`` is the
:class:`~sriov_dra.host.sysfs.Sysfs` root.

Discovery publishes the PF's root for each of its VFs (upstream dra-driver-sriov does the same,
reference dra-driver-sriov.md §3.1); a VF sits beside its PF under the same upstream bridge, so
its own path gives the same root (tests verify this).

On failure the answer is None with a reason; the caller omits the attribute and logs the reason.
Upstream dra-driver-sriov publishes ``""`` then (reference dra-driver-sriov.md §8.1), which makes
``matchAttribute`` pair unrelated devices; this module must never return ``""``.
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
