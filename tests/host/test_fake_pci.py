"""Tests for ``sriov_dra_lab.fakes.fake_pci``: the VF addresses and VF lists a fake tree is built from."""

from __future__ import annotations

import pytest

from sriov_dra_lab.fakes import fake_pci


@pytest.mark.parametrize(
    ("pf", "index", "expected"),
    [
        ("0000:03:00.0", 0, "0000:03:02.0"),
        ("0000:03:00.0", 7, "0000:03:02.7"),
        ("0000:03:00.0", 8, "0000:03:03.0"),
        ("0000:03:00.0", 127, "0000:03:11.7"),
        ("0000:03:00.0", 240, "0000:04:00.0"),
        ("0001:c1:00.1", 0, "0001:c1:02.1"),
    ],
    ids=[
        "first-vf-at-offset-16",
        "function-seven",
        "device-carry",
        "vf-127-of-128",
        "bus-carry",
        "pf-function-one",
    ],
)
def test_vf_address_follows_routing_id_rule(pf: str, index: int, expected: str) -> None:
    assert fake_pci.vf_address(pf, index) == expected


def test_vf_address_beyond_last_bus_is_refused() -> None:
    with pytest.raises(ValueError, match="use fewer VFs"):
        fake_pci.vf_address("0000:ff:1f.0", 200)


def test_make_vfs_rejects_wrong_name_count() -> None:
    with pytest.raises(ValueError, match="got 1 netdev names for 2 VFs"):
        fake_pci.make_vfs(2, netdevs=["only-one"])
