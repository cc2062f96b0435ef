"""The guard's post-ADD interface check against a real network namespace (host tier, root)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from tests import tiers

from sriov_dra.guard import decisions, shadows, verify
from sriov_dra.host import netlink
from sriov_dra.lab import netns

EXPECTED = (
    shadows.ExpectedInterface("dra0", "ns/dra-sriov-a", "0000:03:00.1"),
    shadows.ExpectedInterface("dra1", "ns/dra-sriov-b", "0000:80:00.1"),
)


@pytest.fixture
def sandbox_with_dra0() -> Iterator[str]:
    """A sandbox holding one lab VF renamed dra0 (dra1 is missing)."""
    if os.geteuid() != 0:
        tiers.unavailable("host", "network namespaces need root")
    vfs = netns.create_vfs(["0000:03:00.1"], prefix="gvn")
    try:
        with netns.sandbox("gvn") as path:
            netlink.move_link(vfs[0].ifname, target_netns=path, new_name="dra0")
            yield path
    finally:
        netns.delete_vfs(vfs)


def test_interfaces_read_from_the_sandbox_decide_the_verdict(sandbox_with_dra0: str) -> None:
    links = netlink.links(sandbox_with_dra0)
    found = verify.interface_violations(EXPECTED, links)
    assert [v.reason for v in found] == [decisions.Reason.INTERFACES_MISSING]
    assert "dra1" in found[0].message and "dra0 (" not in found[0].message
    assert verify.interface_violations(EXPECTED[:1], links) == []  # a veth reports no PCI parent
