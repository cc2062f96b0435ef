"""Plain PCI BDF addresses: validate and normalise to the contract form ``dddd:bb:dd.f``.

The allocated VF's address becomes sriov-cni's ``deviceID``, is recorded in the binding
annotation and checked by the guard, so every part spells it alike: lowercase hex, four domain
digits, no ``pci:`` prefix (docs/design.md#render). :func:`normalize` turns an accepted spelling
into that form; :func:`parse` is the non-raising variant. Spelling only: never reads sysfs.
"""

from __future__ import annotations

import re
from typing import Final

from sriov_dra_rules import errors

_BDF: Final = re.compile(
    r"(?:(?P<domain>[0-9a-fA-F]{1,4}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<device>[0-9a-fA-F]{1,2})"
    r"\.(?P<function>[0-9a-fA-F])"
)


def parse(value: object) -> tuple[str | None, str]:
    """Return ``(canonical, "")`` for an accepted BDF spelling, else ``(None, problem)``.

    Shapes: see :func:`normalize`; ``problem`` is an actionable phrase naming the value.
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


def normalize(value: str, *, path: str = "pciAddress") -> str:
    """Validate a plain PCI BDF and return its canonical form ``dddd:bb:dd.f``.

    Shapes: accepts ``[domain:]bus:device.function`` with 1-4 hex digits of domain (padded; an
    omitted domain is ``0000``), 1-2 of bus and device, one of function, any case; returns
    lowercase, e.g. ``0000:3b:02.1``. Device must be at most ``1f`` and function at most 7
    (sysfs splits devfn that way even with ARI). Domains wider than 16 bits (VMD) are refused,
    as the contract form has four domain digits.
    Raises: errors.InvalidSpec (reason ``InvalidPciAddress``) naming ``path``, for a ``pci:``
    prefix, surrounding whitespace or any other form.
    Source: docs/design.md#render (the allocated VF's ``deviceID``); sriov-cni reads
    ``/sys/bus/pci/devices/<deviceID>``.
    """
    canonical, problem = parse(value)
    if canonical is None:
        raise errors.InvalidSpec(
            f"PCI address {value!r} is not usable",
            reason=errors.Reason.INVALID_PCI_ADDRESS,
            errors=[errors.FieldError(path, problem)],
        )
    return canonical
