# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Topology rules: the PCIe root of a device path and the NUMA node of a ``numa_node`` text.

One decision for the plugin's discovery (whose answers become ResourceSlice attributes) and the
collection's ``sriov_facts`` module, so both publish the same values. Pure: :mod:`.sysfs_read`
reads the node and passes the text in. A device without a root or a node gets no attribute
(never ``""``); :func:`pcie_root` and :func:`numa_affinity` say why. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PCIE_ROOT_ATTRIBUTE = "resource.kubernetes.io/pcieRoot"
"""Qualified name of the standard attribute (type string)."""

HELPER_BDF_RE = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]")
"""The Kubernetes helper's ``verifyPCIBDFFormat`` (lowercase only; use with ``fullmatch``)."""

ROOT_BUS_RE = re.compile(r"pci[0-9a-f]{4,8}:[0-9a-f]{2}")
"""A root bus directory name, ``pci%04x:%02x`` in the kernel (``pci0000:00``, ``pci10000:00``)."""

MAX_NUMA_NODE = 2**31 - 1
"""The kernel prints ``numa_node`` from an ``int``; a larger number is not a node."""

_DECIMAL_RE = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class PcieRoot:
    """Outcome of one pcieRoot decision.

    Shapes: exactly one of ``root`` (a root bus name such as ``pci0000:00``, never ``""``) and
    ``problem`` (why there is none, naming the path) is set.
    """

    bdf: str
    root: str | None
    problem: str | None


@dataclass(frozen=True)
class NumaAffinity:
    """Outcome of one ``numa_node`` decision.

    Shapes: ``node`` is ``0 <= node <= MAX_NUMA_NODE`` or None; ``reason`` says why it is None
    (``-1`` from the kernel, a missing file or a bad text) and is None when ``node`` is set.
    """

    node: int | None
    reason: str | None


def pcie_root(device_path: str, bdf: str) -> PcieRoot:
    """The PCIe root of ``bdf`` whose directory is ``device_path`` (relative to ``/sys/devices``).

    ``device_path`` is the cleaned target of the ``/sys/bus/pci/devices/<bdf>`` link with the
    ``/sys/devices/`` prefix removed, ``/``-separated, such as
    ``pci0000:00/0000:00:01.0/0000:03:00.0``.
    The root is the *nearest* ``pciDDDD:BB`` component (a root bus, as the kernel names it:
    ``pci%04x:%02x``), read from the device towards ``/sys/devices``:

    - ``pci0000:00/0000:00:01.0/0000:03:00.0`` (a device behind a root port) gives ``pci0000:00``;
      more bridges between change nothing, and neither does the domain (``pci0001:c0``) or a QEMU
      pxb-pcie expander, which is a root bus of its own (``pci0000:20``);
    - a Hyper-V/VMBus host bridge sits under ACPI and VMBus device directories
      (``LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/<guid>/pci0001:00/0001:00:00.0``) and gives
      ``pci0001:00``;
    - a path with no such component gives no root and a reason; the caller omits the attribute
      and logs the reason, never publishing ``""`` (upstream dra-driver-sriov does, so that
      ``matchAttribute`` pairs unrelated devices).

    This agrees with the Kubernetes helper (k8s.io/dynamic-resource-allocation
    ``deviceattribute.GetPCIeRootAttributeByPCIBusID``, which GPU drivers use) wherever the
    helper gives a root bus: it takes the first element after ``/sys/devices/``, and on every
    layout it accepts that element is the only root-bus component. It differs only where the
    helper fails or answers something that is not a root bus: it refuses every path not starting
    with ``/sys/devices/pci`` (so it publishes nothing for a VMBus device) and returns a first
    element such as Xen's ``pci-0`` verbatim. ``bdf`` must be in the helper's format (lowercase
    extended BDF, 4-hex-digit domain).

    Shapes: see :class:`PcieRoot`; ``root`` is always one of the components of ``device_path``.
    """
    if not HELPER_BDF_RE.fullmatch(bdf):
        return PcieRoot(bdf, None, f"{bdf!r} is not a lowercase extended BDF such as 0000:03:00.0")
    parts = device_path.split("/")
    if parts[-1] != bdf:
        return PcieRoot(bdf, None, f"the device path {device_path!r} does not end with {bdf}")
    for part in reversed(parts[:-1]):
        if ROOT_BUS_RE.fullmatch(part):
            return PcieRoot(bdf, part, None)
    return PcieRoot(bdf, None, f"the device path {device_path!r} has no PCI root bus component (pciDDDD:BB)")


def numa_affinity(text: str | None) -> NumaAffinity:
    """The NUMA node in the text of a ``numa_node`` file (None: the file is missing or unreadable).

    The kernel writes ``numa_node`` as a decimal, ``-1`` meaning "no affinity". A node is a
    number ``>= 0``; ``-1``, any other negative value, a missing or unreadable file and a text
    that is not a decimal all mean *no node*, which callers never publish as a value: they omit
    ``dra.net/numaNode`` (and every other NUMA-derived attribute) then.
    Shapes: see :class:`NumaAffinity`; surrounding whitespace is ignored.
    Source: Linux ``Documentation/ABI/testing/sysfs-bus-pci`` (``numa_node``, ``-1`` = none).
    """
    if text is None:
        return NumaAffinity(None, "numa_node is missing or unreadable")
    value = text.strip()
    if not _DECIMAL_RE.fullmatch(value):
        return NumaAffinity(None, f"numa_node holds {value[:32]!r}, not a decimal node number")
    number = int(value)
    if number == -1:
        return NumaAffinity(None, "the kernel reports no NUMA affinity (-1)")
    if number < 0 or number > MAX_NUMA_NODE:
        return NumaAffinity(None, f"numa_node is {value[:32]}, not a node number")
    return NumaAffinity(number, None)
