# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""SriovResourcePolicy ``resourceFilters[]``: the one parser and matcher of a filter entry.

Upstream dra-driver-sriov's ``deviceMatchesFilter`` semantics, for the plugin's policy evaluation
(``sriov_dra.core.policies``) and the preflight's policy-overlap check alike: AND across the
nonempty fields of :data:`FIELDS`, OR within each, exact strings, ``linkType`` normalised. What
cannot be honoured (``drivers``, which upstream only logs; ``pfNames`` VF ranges in managed mode;
unknown fields) is reported and widens the match, never narrows it, so the preflight counts such
a filter as overlapping (docs/design.md#eligibility). Standard library only; shared with the
collection (siblings by relative import).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from . import device_selectors, errors

FIELDS = ("vendors", "devices", "pciAddresses", "pfNames", "pfPciAddresses")
"""The fields that constrain a match, as upstream compares them."""
IGNORED_FIELDS = ("drivers",)
"""CRD fields upstream accepts but never matches on (a filter with them still matches)."""
LINK_TYPES = {"eth": "ethernet", "ethernet": "ethernet", "ib": "infiniband", "infiniband": "infiniband"}
"""``linkType`` spellings (case-insensitive) -> the normalised link type."""


class Device(Protocol):
    """What a filter compares: a VF's published attributes (``sriov_dra.core.device_facts.DeviceFacts``)."""

    @property
    def vendor(self) -> str: ...
    @property
    def device_id(self) -> str: ...
    @property
    def pci_address(self) -> str: ...
    @property
    def pf_name(self) -> str: ...
    @property
    def pf_pci_address(self) -> str: ...
    @property
    def link_type(self) -> str: ...


@dataclass(frozen=True)
class ResourceFilter:
    """One parsed ``resourceFilters[]`` entry; empty fields do not constrain."""

    vendors: frozenset[str] = frozenset()
    devices: frozenset[str] = frozenset()
    pci_addresses: frozenset[str] = frozenset()
    pf_names: frozenset[str] = frozenset()
    pf_pci_addresses: frozenset[str] = frozenset()
    link_type: str = ""

    def _sets(self) -> tuple[frozenset[str], ...]:
        return (self.vendors, self.devices, self.pci_addresses, self.pf_names, self.pf_pci_addresses)

    def matches(self, device: Device) -> bool:
        """AND across the nonempty fields, OR within each; exact, case-sensitive strings."""
        values = (device.vendor, device.device_id, device.pci_address, device.pf_name, device.pf_pci_address)
        if any(allowed and value not in allowed for allowed, value in zip(self._sets(), values, strict=True)):
            return False
        return (
            not self.link_type or LINK_TYPES.get(device.link_type.lower(), device.link_type) == self.link_type
        )

    def may_match_a_device_of(self, other: ResourceFilter) -> bool:
        """Whether some device could match both filters: every field set on both sides shares a value."""
        if any(a and b and not a & b for a, b in zip(self._sets(), other._sets(), strict=True)):
            return False
        return not (self.link_type and other.link_type and self.link_type != other.link_type)


@dataclass(frozen=True)
class ParsedFilter:
    """:func:`parse_filter`'s answer.

    ``filter`` is ``None`` when ``structural`` is not empty (a wrong JSON type, an unknown
    ``linkType``: the policy is invalid). ``unsupported`` lists what the driver cannot honour
    exactly and dropped from matching (reason ``UnsupportedResourceFilter``). Paths are the
    entry's ``path`` plus the field.
    """

    filter: ResourceFilter | None
    structural: tuple[errors.FieldError, ...] = ()
    unsupported: tuple[errors.FieldError, ...] = ()


def _string_list(raw: object, where: str, structural: list[errors.FieldError]) -> frozenset[str] | None:
    """The list's strings in sysfs spelling (``device_selectors``); None after a structural problem."""
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        structural.append(errors.FieldError(where, "must be a list of strings"))
        return None
    key = where.rsplit(".", 1)[-1]
    out: set[str] = set()
    found = len(structural)
    for i, value in enumerate(raw):
        canonical: str | None = value
        problem = ""
        if key in ("vendors", "devices"):
            canonical, problem = device_selectors.pci_id(value, key[:-1])
        elif key in ("pciAddresses", "pfPciAddresses"):
            canonical, problem = device_selectors.pci_address(value)
        elif key == "pfNames":
            problem = device_selectors.pf_name(value)[2]
        if canonical is None or problem:
            structural.append(errors.FieldError(f"{where}[{i}]", problem))
        else:
            out.add(canonical)
    return None if len(structural) > found else frozenset(out)


def parse_filter(raw: object, path: str, *, managed: bool) -> ParsedFilter:
    """Parse one ``resourceFilters[]`` entry the way the plugin applies it.

    ``managed`` (docs/design.md#eligibility) reads ``pfNames`` VF-range entries (``ens1f0#0-3``) as their whole
    PF; compatibility mode keeps upstream's exact comparison, where such an entry equals no PF
    name; both report them. IDs and addresses are read in sysfs spelling, and a misspelled one or
    a malformed VF range is structural, with the words of the collection's VF plan
    (``device_selectors``). ``drivers`` and unknown fields are reported in both modes and never
    constrain. Shapes: ``path`` is the entry's field path (``spec.configs[0].resourceFilters[1]``).
    """
    if not isinstance(raw, Mapping):
        return ParsedFilter(None, (errors.FieldError(path, "must be an object"),))
    structural: list[errors.FieldError] = []
    values = {
        key: _string_list(raw.get(key), f"{path}.{key}", structural) for key in (*FIELDS, *IGNORED_FIELDS)
    }
    link_raw = raw.get("linkType")
    link_raw = "" if link_raw is None else link_raw
    if not isinstance(link_raw, str) or (link_raw and link_raw.lower() not in LINK_TYPES):
        structural.append(errors.FieldError(f"{path}.linkType", "must be eth, ethernet, ib or infiniband"))
    checked = {k: v for k, v in values.items() if v is not None}
    if structural or not isinstance(link_raw, str):
        return ParsedFilter(None, tuple(structural))
    unsupported: list[errors.FieldError] = []
    pf_names = checked["pfNames"]
    ranged = sorted(p for p in pf_names if "#" in p)
    if ranged:  # managed: read as the whole PF (blocking); compatibility: upstream's exact match
        effect = "" if managed else " (as upstream, such an entry matches no PF)"
        unsupported.append(
            errors.FieldError(
                f"{path}.pfNames", f"VF-range entries {ranged} are not supported; list whole PFs{effect}"
            )
        )
    if ranged and managed:
        pf_names = frozenset(p.split("#", 1)[0] for p in pf_names)
    if checked["drivers"]:
        unsupported.append(
            errors.FieldError(
                f"{path}.drivers", "the drivers filter is not implemented (upstream ignores it)"
            )
        )
    for key in sorted(set(map(str, raw)) - {*FIELDS, *IGNORED_FIELDS, "linkType"}):
        unsupported.append(
            errors.FieldError(
                f"{path}.{key}",
                "is not a resourceFilter field (vendors, devices, pciAddresses, "
                "pfNames, pfPciAddresses, drivers, linkType)",
            )
        )
    resource_filter = ResourceFilter(
        vendors=checked["vendors"],
        devices=checked["devices"],
        pci_addresses=checked["pciAddresses"],
        pf_names=pf_names,
        pf_pci_addresses=checked["pfPciAddresses"],
        link_type=LINK_TYPES.get(link_raw.lower(), ""),
    )
    return ParsedFilter(resource_filter, (), tuple(unsupported))
