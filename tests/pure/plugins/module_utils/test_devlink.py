"""The collection's eswitch mode from the kernel through ``devlink`` (``plugins/module_utils/devlink.py``):
the parser of ``devlink -j dev eswitch show`` JSON, the mapping of its failures, and the real command
path run against the lab's fake ``devlink`` on a fake tree."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from ansible_collections.sriovnet.dra.plugins.module_utils import devlink
from ansible_collections.sriovnet.dra.plugins.modules import sriov_facts
from hypothesis import given
from hypothesis import strategies as st
from tests.pure.plugins import harness

from sriov_dra_lab.fakes import fake_devlink, fake_pci, fake_sysfs

BDF = "0000:3b:00.0"


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ('{"dev":{"pci/0000:3b:00.0":{"mode":"switchdev","inline-mode":"none","encap-mode":"basic"}}}', "switchdev"),
        ('{"dev":{"pci/0000:3b:00.0":{"mode":"legacy","inline-mode":"none","encap":"disable"}}}', "legacy"),
        ('{"dev":{"pci/0000:3b:00.0":[{"mode":"switchdev"}]}}', "switchdev"),
        ('{"dev":{"pci/0000:3b:00.0":{"mode":"<unknown mode>"}}}', None),
        ('{"dev":{"pci/0000:3b:00.1":{"mode":"switchdev"}}}', None),
        ('{"dev":{"pci/0000:3b:00.0":{}}}', None),
        ("pci/0000:3b:00.0: mode switchdev", None),
        ("", None),
    ],
    ids=["switchdev", "legacy-old-encap-key", "one-element-list", "unknown-mode-name", "other-device",
         "no-mode", "text-not-json", "empty"],
)  # fmt: skip
def test_parser_reads_the_mode_of_the_asked_device_only(text: str, mode: str | None) -> None:
    assert devlink.parse_eswitch_show(text, BDF) == mode


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["dev", f"pci/{BDF}", "mode", "x"]) | st.text(max_size=6), inner, max_size=3
        )
    ),
    max_leaves=10,
)


@given(st.one_of(st.text(max_size=60), json_values.map(json.dumps)))
def test_parser_is_total_and_answers_only_a_known_mode(text: str) -> None:
    assert devlink.parse_eswitch_show(text, BDF) in (None, "legacy", "switchdev")


@pytest.mark.parametrize(
    ("stderr", "mode"),
    [
        ("kernel answers: Operation not supported\n", "legacy"),
        ("Error: devlink: Operation not supported.\n", "legacy"),
        ("devlink answers: No such device\n", "legacy"),
        ("Failed to connect to devlink Netlink\n", None),
        ("", None),
    ],
    ids=["not-supported", "not-supported-extack", "no-devlink-instance", "kernel-without-devlink", "silent"],
)
def test_not_supported_and_no_instance_are_legacy_explicitly_anything_else_unknown(stderr: str, mode) -> None:
    got, reason = devlink.classify_failure(stderr)
    assert got == mode
    assert ("no eswitch on this PF" in reason) is (mode == "legacy")


def test_a_missing_devlink_binary_is_unknown_with_the_fix() -> None:
    assert devlink.eswitch_mode(BDF, find=lambda: None) == (
        None, "devlink command not found (install iproute2): eswitch mode unknown")  # fmt: skip


def test_a_devlink_that_cannot_run_is_unknown_with_the_reason() -> None:
    def broken(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        raise subprocess.TimeoutExpired("devlink", devlink.TIMEOUT_S)

    mode, reason = devlink.eswitch_mode(BDF, find=lambda: "/usr/sbin/devlink", run=broken)
    assert mode is None and "could not run" in reason


@pytest.fixture
def fake_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pfs = (
        fake_pci.FakePf(bdf=BDF, ifname="ens2f0np0", eswitch_mode="switchdev", vfs=fake_pci.make_vfs(1)),
        fake_pci.FakePf(
            bdf="0000:5e:00.0", ifname="ens3f0", pcie_root="pci0000:5d", bridges=("0000:5d:00.0",)
        ),
    )
    fake_sysfs.build(tmp_path, pfs)
    bin_dir = fake_devlink.install(tmp_path / "fake-devlink-bin", tmp_path).parent
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return tmp_path


def test_the_command_path_finds_devlink_on_path_and_reads_the_kernels_answer(fake_node: Path) -> None:
    assert devlink.find_devlink() == str(fake_node / "fake-devlink-bin" / "devlink")
    assert devlink.eswitch_mode(BDF) == ("switchdev", None)
    mode, reason = devlink.eswitch_mode("0000:5e:00.0")
    assert (mode, reason) == ("legacy", "devlink: Operation not supported (no eswitch on this PF): legacy")


def test_sriov_facts_report_the_switchdev_mode_devlink_gives_and_why_legacy(fake_node: Path) -> None:
    result = harness.run_module(sriov_facts, {"host_root": str(fake_node)})
    got = {
        pf["pci_address"]: (pf["eswitch_mode"], pf["eswitch_mode_reason"])
        for pf in result["ansible_facts"]["sriov"]["pfs"]
    }
    assert got == {
        BDF: ("switchdev", None),
        "0000:5e:00.0": ("legacy", "devlink: Operation not supported (no eswitch on this PF): legacy"),
    }
