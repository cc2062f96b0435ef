"""Tests for sriov_dra.guard.verify: post-ADD interface and network-status checks."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from sriov_dra.guard import decisions, shadow_checks, verify
from sriov_dra_rules import names

R = decisions.Reason
EXPECTED = (
    shadow_checks.ExpectedInterface("dra0", "ns/dra-sriov-a", "0000:03:00.1"),
    shadow_checks.ExpectedInterface("dra1", "ns/dra-sriov-b", "0000:80:00.1"),
)


@dataclass(frozen=True)
class Link:
    name: str
    parent_bus: str | None = None
    parent_device: str | None = None
    mac: str | None = None
    addresses: tuple[str, ...] = ()


def _pod(status: object) -> dict[str, Any]:
    ann = (
        {}
        if status is None
        else {names.NETWORK_STATUS_ANNOTATION: status if isinstance(status, str) else json.dumps(status)}
    )
    return {"metadata": {"annotations": ann}}


def test_all_interfaces_present_passes() -> None:
    links = [Link("lo"), Link("eth0"), Link("dra0", "pci", "0000:03:00.1"), Link("dra1")]
    assert verify.interface_violations(EXPECTED, links) == []


def test_missing_interfaces_are_named_in_one_violation() -> None:
    found = verify.interface_violations(EXPECTED, [Link("eth0")])
    assert [v.reason for v in found] == [R.INTERFACES_MISSING]
    assert "dra0" in found[0].message and "dra1" in found[0].message and "0000:80:00.1" in found[0].message


def test_pci_parent_of_another_device_is_refused() -> None:
    found = verify.interface_violations(EXPECTED, [Link("dra0", "pci", "0000:03:00.2"), Link("dra1")])
    assert [v.reason for v in found] == [R.INTERFACE_DEVICE_MISMATCH]


def test_non_pci_parent_is_not_compared() -> None:
    assert verify.interface_violations(EXPECTED, [Link("dra0", "usb", "1-1"), Link("dra1")]) == []


ORDINARY = shadow_checks.ExpectedInterface("eth1", "ns-a/net-a")


def test_missing_ordinary_interface_is_named_with_its_nad_and_the_pod() -> None:
    found = verify.interface_violations(
        (ORDINARY, *EXPECTED), [Link("eth0"), *map(Link, ("dra0", "dra1"))], owner="Pod ns/p"
    )
    assert [v.reason for v in found] == [R.INTERFACES_MISSING]
    assert "requested by Pod ns/p" in found[0].message and "eth1 (NAD ns-a/net-a);" in found[0].message
    assert "dra0" not in found[0].message


def test_ordinary_interface_on_any_pci_device_is_accepted() -> None:
    # An ordinary NAD binds no VF: whatever device its plugin moved in is the Pod's business.
    assert verify.interface_violations((ORDINARY,), [Link("eth1", "pci", "0000:03:00.7")]) == []


GOOD_STATUS = [
    {"name": "primary", "interface": "eth0", "default": True},
    {"name": "ns/dra-sriov-a", "interface": "dra0", "ips": ["192.0.2.2"]},
    {"name": "ns/dra-sriov-b", "interface": "dra1", "ips": ["198.51.100.2"]},
]


@pytest.mark.parametrize(
    ("status", "missing", "why"),
    [
        (GOOD_STATUS, [], ""),
        (None, ["dra0", "dra1"], "absent"),
        ("[{", ["dra0", "dra1"], "not JSON"),
        ({"name": "x"}, ["dra0", "dra1"], "not a JSON list"),
        (GOOD_STATUS[:2], ["dra1"], ""),
        ([GOOD_STATUS[0], GOOD_STATUS[1], dict(GOOD_STATUS[2], interface="net1")], ["dra1"], ""),
        ([GOOD_STATUS[0]], ["dra0", "dra1"], ""),
    ],
    ids=["complete", "absent", "malformed", "not-a-list", "one-missing", "wrong-interface", "primary-only"],
)
def test_network_status_entries(status: object, missing: list[str], why: str) -> None:
    found = verify.network_status_violations(EXPECTED, _pod(status))
    if not missing:
        assert found == []
        return
    assert [v.reason for v in found] == [R.NETWORK_STATUS_MISSING]
    for ifname in missing:
        assert f"on {ifname}" in found[0].message
    assert why in found[0].message


@pytest.mark.parametrize(
    ("status", "why"),
    [
        (
            [{"name": ["ns/dra-sriov-a"], "interface": "dra0"}, {"name": "ns/dra-sriov-b", "interface": {}}],
            "",
        ),
        ("[" * 100_000 + "]" * 100_000, "not JSON"),
    ],
    ids=["unhashable-name-and-interface", "nested-too-deeply"],
)
def test_hostile_network_status_is_a_missing_entry_not_a_crash(status: object, why: str) -> None:
    # Thin Multus without API access leaves the Pod author's own annotation in place; a crash here
    # would skip the Multus DEL that undoes a failed verification.
    found = verify.network_status_violations(EXPECTED, _pod(status))
    assert [v.reason for v in found] == [R.NETWORK_STATUS_MISSING]
    assert "on dra0" in found[0].message and "on dra1" in found[0].message and why in found[0].message


def test_ordinary_network_needs_its_own_network_status_entry() -> None:
    found = verify.network_status_violations((ORDINARY, *EXPECTED), _pod(GOOD_STATUS), owner="Pod ns/p")
    assert [v.reason for v in found] == [R.NETWORK_STATUS_MISSING]
    assert "of Pod ns/p has no entry for ns-a/net-a on eth1;" in found[0].message
    status = [*GOOD_STATUS, {"name": "ns-a/net-a", "interface": "eth1"}]
    assert verify.network_status_violations((ORDINARY, *EXPECTED), _pod(status)) == []
