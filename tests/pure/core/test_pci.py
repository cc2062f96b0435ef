"""Tests of sriov_dra.core.pci: plain BDF validation and normalisation (docs/design.md#render)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import pci
from sriov_dra_rules import errors, names


@pytest.mark.parametrize(
    ("value", "canonical"),
    [("0000:03:00.1", "0000:03:00.1"), ("0000:3B:02.7", "0000:3b:02.7"), ("3b:02.1", "0000:3b:02.1"),
     ("0:3:0.1", "0000:03:00.1"), ("ffff:ff:1f.7", "ffff:ff:1f.7"), ("00AB:00:00.0", "00ab:00:00.0")],
    ids=["canonical", "uppercase-lowered", "domain-omitted", "short-fields-padded", "maximum-values", "domain-uppercase"],
)  # fmt: skip
def test_pci_address_is_normalised(value: str, canonical: str) -> None:
    assert pci.normalize(value) == canonical
    assert names.is_pci_address(canonical)


@pytest.mark.parametrize(
    ("value", "mentions"),
    [("pci:0000:03:00.1", "'pci:' prefix"), ("PCI:0000:03:00.1", "'pci:' prefix"), ("0000:03:00.8", "function number 8"),
     ("0000:03:20.1", "device number 0x20"), ("", "not a PCI address"), (" 0000:03:00.1", "not a PCI address"),
     ("0000:03:00.1\n", "not a PCI address"), ("00000:03:00.1", "not a PCI address"), ("0000:03:00", "not a PCI address"),
     ("0000-03-00-1", "not a PCI address"), ("0000:g3:00.1", "not a PCI address"), ("0000:003:00.1", "not a PCI address")],
    ids=["pci-prefix", "pci-prefix-uppercase", "function-over-7", "device-over-1f", "empty", "leading-space",
         "trailing-newline", "five-digit-domain", "no-function", "device-name-form", "non-hex", "three-digit-bus"],
)  # fmt: skip
def test_invalid_pci_address_is_rejected(value: str, mentions: str) -> None:
    with pytest.raises(errors.InvalidSpec) as caught:
        pci.normalize(value, path="allocation.pciAddress")
    assert caught.value.reason == errors.Reason.INVALID_PCI_ADDRESS
    assert [e.path for e in caught.value.errors] == ["allocation.pciAddress"]
    assert mentions in caught.value.errors[0].message


@given(
    st.integers(0, 0xFFFF),
    st.integers(0, 0xFF),
    st.integers(0, 0x1F),
    st.integers(0, 7),
    st.booleans(),
    st.booleans(),
)
def test_any_valid_bdf_normalises_to_the_contract_form(
    domain: int, bus: int, device: int, function: int, upper: bool, short: bool
) -> None:
    text = (
        f"{domain:x}:{bus:x}:{device:x}.{function}"
        if short
        else f"{domain:04x}:{bus:02x}:{device:02x}.{function}"
    )
    canonical = pci.normalize(text.upper() if upper else text)
    assert canonical == f"{domain:04x}:{bus:02x}:{device:02x}.{function}"
    assert names.is_pci_address(canonical)
    assert pci.normalize(canonical) == canonical


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0000:3B:02.1", ("0000:3b:02.1", "")), (7, (None, "must be a string, got int")),
     ("pci:0000:3b:02.1", (None, "'pci:0000:3b:02.1' has a 'pci:' prefix; use the plain BDF such as 0000:03:00.1"))],
    ids=["accepted-spelling", "not-a-string", "prefixed"],
)  # fmt: skip
def test_parse_reports_without_raising(value: object, expected: tuple[str | None, str]) -> None:
    assert pci.parse(value) == expected
