"""The guard's post-ADD interface check against a real network namespace (host tier, root)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from tests import tiers

from sriov_dra.guard import decisions, shadow_checks, verify
from sriov_dra.host import netlink
from sriov_dra_lab import netns
from sriov_dra_lab.fakes import net_edit

EXPECTED = (
    shadow_checks.ExpectedInterface("dra0", "ns/dra-sriov-a", "0000:03:00.1"),
    shadow_checks.ExpectedInterface("dra1", "ns/dra-sriov-b", "0000:80:00.1"),
)


@pytest.fixture
def sandbox_with_dra0() -> Iterator[str]:
    """A sandbox holding one lab VF renamed dra0 (dra1 is missing) and a veth renamed eth1."""
    if os.geteuid() != 0:
        tiers.unavailable("host", "network namespaces need root")
    vfs = netns.create_vfs(["0000:03:00.1", "ordinary"], prefix="gvn")
    try:
        with netns.sandbox("gvn") as path:
            net_edit.move_link(vfs[0].ifname, target_netns=path, new_name="dra0")
            net_edit.move_link(vfs[1].ifname, target_netns=path, new_name="eth1")
            yield path
    finally:
        netns.delete_vfs(vfs)


def test_interfaces_read_from_the_sandbox_decide_the_verdict(sandbox_with_dra0: str) -> None:
    links = netlink.links(sandbox_with_dra0)
    found = verify.interface_violations(EXPECTED, links)
    assert [v.reason for v in found] == [decisions.Reason.INTERFACES_MISSING]
    assert "dra1" in found[0].message and "dra0 (" not in found[0].message
    assert verify.interface_violations(EXPECTED[:1], links) == []  # a veth reports no PCI parent


def test_ordinary_selections_are_checked_in_the_sandbox_too(sandbox_with_dra0: str) -> None:
    links = netlink.links(sandbox_with_dra0)
    present = shadow_checks.ExpectedInterface("eth1", "ns-a/net-a")
    missing = shadow_checks.ExpectedInterface("net2", "ns-a/net-b")
    assert verify.interface_violations((present, EXPECTED[0]), links) == []
    found = verify.interface_violations((present, missing, EXPECTED[0]), links, owner="Pod ns-a/p")
    assert [v.reason for v in found] == [decisions.Reason.INTERFACES_MISSING]
    assert "requested by Pod ns-a/p" in found[0].message and "net2 (NAD ns-a/net-b);" in found[0].message
    assert "eth1" not in found[0].message
