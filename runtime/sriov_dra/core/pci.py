"""Plain PCI BDF addresses: validate and normalise to the contract form ``dddd:bb:dd.f``.

The allocated VF's address becomes sriov-cni's ``deviceID``, is recorded in the binding
annotation and checked by the guard, so every part spells it alike: lowercase hex, four domain
digits, no ``pci:`` prefix (docs/design.md#render). :func:`normalize` turns an accepted spelling
into that form; :func:`parse` is the non-raising variant. Spelling only: never reads sysfs.
"""

from __future__ import annotations

from sriov_dra_rules import device_selectors, errors


def parse(value: object) -> tuple[str | None, str]:
    """Return ``(canonical, "")`` for an accepted BDF spelling, else ``(None, problem)``.

    The one rule of ``sriov_dra_rules.device_selectors.pci_address`` (selectors use it too).
    Shapes: see :func:`normalize`; ``problem`` is an actionable phrase naming the value.
    """
    return device_selectors.pci_address(value)


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
