"""What the simulated runtime reports as the Pod's IPs from a CNI result."""

from __future__ import annotations

from typing import Any

import pytest

from sriov_dra_lab import sandboxes

BRIDGE_RESULT = {
    "interfaces": [{"name": "cni0"}, {"name": "veth1"}, {"name": "eth0", "sandbox": "/var/run/netns/x"}],
    "ips": [{"address": "10.244.1.5/24", "interface": 2}, {"address": "fd00::5/64", "interface": 2}],
}


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (BRIDGE_RESULT, ["10.244.1.5", "fd00::5"]),
        (
            {
                "interfaces": [{"name": "eth0"}],
                "ips": [
                    {"address": "fd00::9/64", "interface": 0},
                    {"address": "10.1.0.9/16", "interface": 0},
                ],
            },
            ["10.1.0.9", "fd00::9"],
        ),
        ({"interfaces": [{"name": "net1"}], "ips": [{"address": "10.9.0.1/24", "interface": 0}]}, []),
        ({"ips": [{"address": "10.2.0.2/24"}]}, ["10.2.0.2"]),
        ({}, []),
    ],
    ids=[
        "addresses-on-eth0",
        "ipv4-first",
        "other-interface-ignored",
        "no-interface-index-means-pod",
        "empty-result",
    ],
)
def test_pod_ips_are_the_primary_interface_addresses(result: dict[str, Any], expected: list[str]) -> None:
    assert sandboxes.pod_ips(result) == expected
