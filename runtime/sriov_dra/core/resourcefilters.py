"""SriovResourcePolicy ``resourceFilters[]``: parsing one entry and matching it against a VF.

This module owns the filter semantics of upstream dra-driver-sriov (reference §2.2, §3.4): AND
across the nonempty fields, OR within each, exact case-sensitive strings, ``linkType``
normalised (``eth``/``ethernet``, ``ib``/``infiniband``). What the driver cannot honour exactly
(``drivers``, ``pfName#range``, an unknown field) is reported as ``UnsupportedResourceFilter``
through :class:`~sriov_dra.core.policyfindings.Findings` and dropped from matching, which
widens the match (spec §12.2.5: in managed mode the config then claims and blocks a superset).

It must never decide which config claims a device, or silently narrow a filter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sriov_dra.core.devicefacts import DeviceFacts
from sriov_dra.core.policyfindings import Findings, or_default
from sriov_dra_rules import errors

_FILTER_FIELDS = ("vendors", "devices", "pciAddresses", "pfNames", "pfPciAddresses")
_LINK_TYPES = {"eth": "ethernet", "ethernet": "ethernet", "ib": "infiniband", "infiniband": "infiniband"}


@dataclass(frozen=True)
class ResourceFilter:
    """One parsed ``resourceFilters[]`` entry; ``None`` or empty fields do not constrain."""

    vendors: frozenset[str] = frozenset()
    devices: frozenset[str] = frozenset()
    pci_addresses: frozenset[str] = frozenset()
    pf_names: frozenset[str] = frozenset()
    pf_pci_addresses: frozenset[str] = frozenset()
    link_type: str = ""

    def matches(self, facts: DeviceFacts) -> bool:
        """AND across the nonempty fields, OR within each; exact, case-sensitive strings."""
        pairs = (
            (self.vendors, facts.vendor),
            (self.devices, facts.device_id),
            (self.pci_addresses, facts.pci_address),
            (self.pf_names, facts.pf_name),
            (self.pf_pci_addresses, facts.pf_pci_address),
        )
        if any(allowed and value not in allowed for allowed, value in pairs):
            return False
        return (
            not self.link_type or _LINK_TYPES.get(facts.link_type.lower(), facts.link_type) == self.link_type
        )


def _string_list(raw: object, where: str, ctx: Findings) -> frozenset[str] | None:
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        ctx.structural.append(errors.FieldError(where, "must be a list of strings"))
        return None
    return frozenset(raw)


def parse_filter(
    raw: object, source: str, path: str, ctx: Findings, reasons: set[errors.Reason]
) -> ResourceFilter | None:
    """Parse one filter; anything the driver cannot honour exactly is dropped from matching.

    Dropping a constraint widens the match, so in managed mode the unresolved config claims and
    blocks a superset of the intended devices instead of letting them reach a later config.
    Shapes: ``source`` is ``SriovResourcePolicy/<name>``, ``path`` the entry's field path; what
    blocks the config is added to ``reasons``. Returns ``None`` after recording a structural
    error in ``ctx`` (a wrong JSON type or an unknown ``linkType``).
    """
    if not isinstance(raw, Mapping):
        ctx.structural.append(errors.FieldError(f"{source}.{path}", "must be an object"))
        return None
    values = {
        key: _string_list(raw.get(key), f"{source}.{path}.{key}", ctx) for key in (*_FILTER_FIELDS, "drivers")
    }
    link_raw = or_default(raw.get("linkType"), "")
    if not isinstance(link_raw, str) or (link_raw and link_raw.lower() not in _LINK_TYPES):
        ctx.structural.append(
            errors.FieldError(f"{source}.{path}.linkType", "must be eth, ethernet, ib or infiniband")
        )
        return None
    checked = {k: v for k, v in values.items() if v is not None}
    if len(checked) != len(values):
        return None
    pf_names = checked["pfNames"]
    ranged = sorted(p for p in pf_names if "#" in p)
    if ranged and ctx.managed:
        ctx.unsupported(
            source, f"{path}.pfNames", f"VF-range entries {ranged} are not supported; list whole PFs", reasons
        )
        pf_names = frozenset(p.split("#", 1)[0] for p in pf_names)
    if checked["drivers"]:
        ctx.unsupported(
            source, f"{path}.drivers", "the drivers filter is not implemented (upstream ignores it)", reasons
        )
    for key in sorted(set(map(str, raw)) - {*_FILTER_FIELDS, "drivers", "linkType"}):
        ctx.unsupported(
            source,
            f"{path}.{key}",
            "is not a resourceFilter field (vendors, devices, pciAddresses, "
            "pfNames, pfPciAddresses, drivers, linkType)",
            reasons,
        )
    return ResourceFilter(
        vendors=checked["vendors"],
        devices=checked["devices"],
        pci_addresses=checked["pciAddresses"],
        pf_names=pf_names,
        pf_pci_addresses=checked["pfPciAddresses"],
        link_type=_LINK_TYPES.get(link_raw.lower(), ""),
    )
