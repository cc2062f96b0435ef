# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""How a selector names hardware: vendor and device IDs, PCI addresses, PF names with VF ranges.

The one spelling rule of every path that selects PFs or VFs by what sysfs reports (the
collection's ``sriov_vf_plan``, the operator's filter translation, the plugin's
SriovResourcePolicy filters), so a PF the plan creates VFs on is the PF the operator and the
plugin then select (docs/design.md#policy-precedence): IDs as sysfs spells them
(:func:`pci_id`), addresses with their domain (:func:`pci_address`), ``pfNames`` ranges as
upstream's webhook requires (:func:`pf_name`). Pure, standard library and siblings only.
"""

from __future__ import annotations

import re

_ID = re.compile(r"(?:0[xX])?([0-9a-fA-F]{4})")
_BDF = re.compile(
    r"(?:(?P<domain>[0-9a-fA-F]{1,4}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<device>[0-9a-fA-F]{1,2})"
    r"\.(?P<function>[0-9a-fA-F])"
)
_VF_INDEX_DIGITS = 5
"""A VF index has at most this many digits (a PF has at most 65,535 VFs)."""


def pci_id(value: object, what: str = "ID") -> tuple[str | None, str]:
    """``(canonical, "")`` for a vendor or device ID, else ``(None, problem)``.

    Shapes: canonical is four lowercase hex digits without ``0x``, as sysfs spells it (``15B3``
    and ``0x15b3`` read as ``15b3``); ``what`` names the field in the problem (``vendor``,
    ``deviceID``).
    """
    match = _ID.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return None, (
            f"{what} {value!r} is not a PCI ID; write the four hex digits sysfs shows, lowercase "
            "without 0x, such as '15b3' or '8086'"
        )
    return match.group(1).lower(), ""


def pci_address(value: object) -> tuple[str | None, str]:
    """``(canonical, "")`` for a PCI address, else ``(None, problem)``.

    Shapes: ``[domain:]bus:device.function``, any case, domain 1-4 hex digits (``0000`` when
    omitted), device at most ``1f``, function at most 7; canonical ``dddd:bb:dd.f`` lowercase.
    """
    if not isinstance(value, str):
        return None, f"must be a string, got {type(value).__name__}"
    if value[:4].lower() == "pci:":
        return None, f"{value!r} has a 'pci:' prefix; use the plain BDF such as 0000:03:00.1"
    match = _BDF.fullmatch(value)
    if match is None:
        return (
            None,
            f"{value!r} is not a PCI address; expected domain:bus:device.function such as 0000:03:00.1",
        )
    device, function = int(match["device"], 16), int(match["function"], 16)
    if device > 0x1F:
        return None, f"{value!r} has device number {device:#x}; PCI device numbers are 0x00-0x1f"
    if function > 7:
        return None, f"{value!r} has function number {function}; PCI function numbers are 0-7"
    domain = int(match["domain"] or "0", 16)
    return f"{domain:04x}:{int(match['bus'], 16):02x}:{device:02x}.{function}", ""


def pf_name(value: str, num_vfs: int | None = None) -> tuple[str, tuple[int, int] | None, str]:
    """Split a ``pfNames`` entry into ``(pf, (first, last) or None, problem)``.

    A range is ``<pf>#<first>-<last>``: exactly one ``#`` and one ``-``, decimal VF indexes with
    ``first <= last``, as upstream sriov-network-operator's webhook requires. ``problem`` is
    ``""`` for a plain PF name or a valid range; ``num_vfs`` (the policy's ``numVfs``) bounds
    ``last`` when given. A refused entry still gives its PF part.
    """
    pf, sharp, vf_range = value.partition("#")
    if not sharp:
        return value, None, ""
    form = f"pfNames entry {value!r}: write <pf>#<first>-<last> with VF indexes first <= last"
    first_text, dash, last_text = vf_range.partition("-")
    parts_ok = all(
        p.isascii() and p.isdigit() and len(p) <= _VF_INDEX_DIGITS for p in (first_text, last_text)
    )
    if not pf or "#" in vf_range or not dash or "-" in last_text or not parts_ok:
        return pf, None, f"{form}, such as ens1f0#0-3 (exactly one '#' and one '-', decimal numbers)"
    first, last = int(first_text), int(last_text)
    if first > last:
        return pf, None, f"{form}; the range ends ({last}) before it starts ({first})"
    if num_vfs is not None and last >= num_vfs:
        return (
            pf,
            None,
            f"{form}; VF {last} does not exist with numVfs {num_vfs} (the last VF is {num_vfs - 1})",
        )
    return pf, (first, last), ""


def ranges_overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two inclusive VF ranges share an index."""
    return a[0] <= b[1] and b[0] <= a[1]
