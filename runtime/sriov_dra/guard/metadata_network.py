"""The network part of the device metadata files, from a verified ADD (pure).

After Multus ADD succeeded and the guard verified every managed interface, and before the
runtime creates any container of the Pod, each managed VF's ``networkData`` goes into its
claim's metadata files (docs/design.md#device-metadata): the interface the binding names, its
MAC and the addresses the kernel holds on it with their prefix, of those Multus reported for it
in network-status (the IPAM's; a link-local address the kernel added is left out), in
network-status order. The same data as the claim's ``status.devices[].networkData``. The files
are found by claim UID and matched by PCI address; the I/O is ``host.pod_metadata_files``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any

from sriov_dra.core import metadata_document
from sriov_dra.guard import shadow_checks, verify


def network_data(
    expected: Sequence[shadow_checks.ExpectedInterface],
    links: Sequence[verify.Link],
    pod: Mapping[str, Any],
) -> dict[str, dict[str, metadata_document.NetworkData]]:
    """Claim UID → PCI address → ``networkData`` of each managed interface present in ``links``.

    Shapes: ``expected`` as verified (ordinary NADs, without a PCI address or claim, are
    skipped); ``pod`` the live Pod read after ADD; ``ips`` canonical CIDRs (``192.0.2.5/24``).
    """
    by_name = {link.name: link for link in links}
    entries, _ = verify.network_status_entries(pod)
    out: dict[str, dict[str, metadata_document.NetworkData]] = {}
    for e in expected:
        link = by_name.get(e.ifname)
        if e.pci_address is None or e.claim_uid is None or link is None:
            continue
        reported: list[object] = []
        for entry in entries:
            ips = entry.get("ips")
            if (
                entry.get("name") == e.network
                and entry.get("interface") == e.ifname
                and isinstance(ips, list)
            ):
                reported.extend(ips)
        data = metadata_document.NetworkData(e.ifname, _prefixed(reported, link.addresses), link.mac or "")
        out.setdefault(e.claim_uid, {})[e.pci_address] = data
    return out


def _prefixed(reported: Sequence[object], kernel: Sequence[str]) -> tuple[str, ...]:
    """The kernel's CIDR of each reported address (reported order, unique); unknown ones skipped."""
    held: dict[ipaddress.IPv4Address | ipaddress.IPv6Address, str] = {}
    for cidr in kernel:
        try:
            iface = ipaddress.ip_interface(cidr)
        except ValueError:
            continue
        held.setdefault(iface.ip, f"{iface.ip}/{iface.network.prefixlen}")
    out: list[str] = []
    for text in reported:
        try:
            ip = ipaddress.ip_address(str(text).split("/", 1)[0])
        except ValueError:
            continue
        if ip in held and held[ip] not in out:
            out.append(held[ip])
    return tuple(out)
