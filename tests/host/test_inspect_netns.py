"""``sriov-dra inspect --netns`` reads a real network namespace through netlink, without the lab."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from sriov_dra.cli import inspect


@pytest.fixture
def netns(scratch_netns: str) -> str:
    """A namespace holding ``dra0`` (IPv4 + IPv6) and its veth peer ``peer0``."""
    name = scratch_netns.rsplit("/", 1)[-1]
    for args in (
        ["link", "add", "dra0", "type", "veth", "peer", "name", "peer0"],
        ["addr", "add", "192.0.2.10/24", "dev", "dra0"],
        ["addr", "add", "2001:db8::10/64", "dev", "dra0"],
        ["link", "set", "dra0", "up"],
        ["link", "set", "peer0", "up"],
    ):
        subprocess.run(["ip", "-n", name, *args], check=True)
    return scratch_netns


def test_inspect_reads_the_namespace_addresses_by_netlink_leaving_out_link_local(netns: str) -> None:
    found = inspect.read_netns(netns)
    assert found["dra0"] == ["192.0.2.10/24", "2001:db8::10/64"]
    assert found["peer0"] == [] and "lo" in found  # peer0's fe80:: address is left out


def test_inspect_names_a_path_that_is_not_a_network_namespace(tmp_path: Path) -> None:
    plain = tmp_path / "not-a-netns"
    plain.write_text("")
    with pytest.raises(inspect.NetnsUnreadable) as caught:
        inspect.read_netns(str(plain))
    assert str(caught.value).startswith(f"cannot read network namespace {plain}: ")


def test_inspect_imports_nothing_from_the_lab() -> None:
    code = "import sys, sriov_dra.cli.inspect as i; i.read_netns; print(sorted(m for m in sys.modules if m.startswith('sriov_dra_lab')))"
    out = subprocess.run([os.sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
