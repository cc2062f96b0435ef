"""The standard ``resource.kubernetes.io/pcieRoot`` attribute, computed as Kubernetes does.

GPU drivers publish ``pcieRoot`` with the Kubernetes ``deviceattribute`` helper, and claims pair
a VF with a GPU by ``matchAttribute: resource.kubernetes.io/pcieRoot``, so this module must give
the same string for the same device, and nothing when the helper would fail. The helper
(k8s.io/dynamic-resource-allocation ``deviceattribute/pci_linux.go``, ``resolvePCIeRoot``):

1. requires an extended BDF matching ``^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-9a-f]$``;
2. reads the link ``/sys/bus/pci/devices/<bdf>`` once (``readlink``, not a full resolve) and
   makes a relative target absolute against the link's directory with a lexical clean;
3. requires the target to start with ``/sys/devices/pci`` and to end with ``<bdf>``;
4. returns the first path element after ``/sys/devices/``, e.g. ``pci0000:00``.

Here ``/`` is the :class:`~sriov_dra.host.sysfs.Sysfs` root. A VF sits beside its PF under the
same upstream bridge, so it reports its PF's root without special casing (tests verify this).

On failure the answer is None with a reason; the caller omits the attribute and logs the reason.
Upstream dra-driver-sriov publishes ``""`` then (reference dra-driver-sriov.md §8.1), which makes
``matchAttribute`` pair unrelated devices; this module must never return ``""``.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass

from sriov_dra.host import sysfs as sysfs_mod

ATTRIBUTE = "resource.kubernetes.io/pcieRoot"
"""Qualified name of the standard attribute (type string)."""

_HELPER_BDF_RE = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]")
"""``verifyPCIBDFFormat`` of the helper (lowercase only; use with ``fullmatch``)."""


@dataclass(frozen=True)
class PcieRootResult:
    """Outcome of one lookup: ``root`` (never ``""``) or ``problem`` saying why there is none."""

    bdf: str
    root: str | None
    problem: str | None


def resolve(sysfs: sysfs_mod.Sysfs, bdf: str) -> PcieRootResult:
    """Compute the PCIe root complex of ``bdf`` with the Kubernetes helper's rules.

    Shapes: ``root`` is the first element after ``sys/devices/`` of the link target, such as
    ``pci0000:00`` or ``pci0000:80``; it always starts with ``pci``. Exactly one of ``root`` and
    ``problem`` is set.
    Source: k8s.io/dynamic-resource-allocation ``deviceattribute.GetPCIeRootAttributeByPCIBusID``.
    """
    if not _HELPER_BDF_RE.fullmatch(bdf):
        return _fail(bdf, f"{bdf!r} is not a lowercase extended BDF such as 0000:03:00.0")
    link = sysfs.device_path(bdf)
    try:
        target = os.readlink(link)
    except OSError as exc:
        return _fail(bdf, f"cannot read the symlink {link}: {exc.strerror}")
    if not posixpath.isabs(target):
        target = _clean(posixpath.join(posixpath.dirname(link), target))
    devices = _clean(sysfs.sys_path("devices"))
    if not target.startswith(posixpath.join(devices, "pci")):
        return _fail(bdf, f"{link} points to {target}, which is not under {devices}/pci* (not a PCI root)")
    if posixpath.basename(target) != bdf:
        return _fail(bdf, f"{link} points to {target}, which does not end with {bdf}")
    rest = target[len(devices) + 1 :]
    return PcieRootResult(bdf, rest.split("/", 1)[0], None)


def pcie_root(sysfs: sysfs_mod.Sysfs, bdf: str) -> str | None:
    """The ``pcieRoot`` string of ``bdf``, or None when it cannot be computed (see :func:`resolve`)."""
    return resolve(sysfs, bdf).root


def _fail(bdf: str, problem: str) -> PcieRootResult:
    return PcieRootResult(bdf, None, problem)


def _clean(path: str) -> str:
    """Lexical clean like Go's ``filepath.Clean`` (``normpath`` keeps a leading ``//``)."""
    cleaned = posixpath.normpath(path)
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned
