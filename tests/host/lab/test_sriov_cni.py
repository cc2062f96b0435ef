"""The lab ``sriov`` plugin keeps sriov-cni's DEL contract (sriov-cni #212).

sriov-cni's DEL reads only its own cache: without it, DEL succeeds and does nothing, not even IPAM
DEL; an ADD that fails after its IPAM ADD releases the address before failing. The stand-in must
behave the same, or lab tests would hide leaks that real sriov-cni produces. The IPAM plugin here is
a recording script (a fake at the IPAM boundary); the VF is a real veth moved into a real netns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import tiers

from sriov_dra.host import netlink
from sriov_dra_lab import netns
from sriov_dra_lab.fakes import net_edit

PCI = "0000:03:00.5"


@pytest.fixture
def plugin_dirs(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    """``(bin dir with the recording IPAM 'fakeipam', calls log, state dir)``."""
    bin_dir, log = tmp_path / "bin", tmp_path / "ipam-calls.log"
    bin_dir.mkdir()
    ipam = bin_dir / "fakeipam"
    ipam.write_text(
        "#!/bin/sh\n"
        f'echo "$CNI_COMMAND" >> {log}\n'
        'if [ "$CNI_COMMAND" = ADD ]; then\n'
        '  echo \'{"cniVersion":"1.0.0","ips":[{"address":"not-an-address"}]}\'\n'
        "fi\n"
    )
    ipam.chmod(0o755)
    yield bin_dir, log, tmp_path / "state"


def _run(
    command: str, state: Path, vf_map: Path, bin_dir: Path, sandbox: str, container: str
) -> dict[str, object]:
    conf = {
        "cniVersion": "1.0.0",
        "name": "rail",
        "type": "sriov",
        "deviceID": PCI,
        "ipam": {"type": "fakeipam"},
    }
    env = dict(
        os.environ,
        CNI_COMMAND=command,
        CNI_CONTAINERID=container,
        CNI_NETNS=sandbox,
        CNI_IFNAME="dra0",
        CNI_PATH=str(bin_dir),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "sriov_dra_lab.sriov_cni", "--vf-map", str(vf_map), "--state-dir", str(state)],
        input=json.dumps(conf).encode(),
        capture_output=True,
        env=env,
        check=False,
        timeout=60,
    )
    out = proc.stdout.decode().strip()
    return {"rc": proc.returncode, "out": json.loads(out) if out else {}}


def _calls(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_del_without_a_record_succeeds_and_runs_no_ipam_del(
    plugin_dirs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    bin_dir, log, state = plugin_dirs
    vf_map = tmp_path / "map.json"
    vf_map.write_text(json.dumps({PCI: "absent0"}))

    done = _run("DEL", state, vf_map, bin_dir, "/var/run/netns/none", "never-added")

    assert done["rc"] == 0, done
    assert _calls(log) == []


def test_add_failing_after_ipam_add_releases_the_address_and_returns_the_vf(
    plugin_dirs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        tiers.unavailable("host", "moving a veth into a network namespace needs root")
    bin_dir, log, state = plugin_dirs
    vfs = netns.create_vfs([PCI], prefix="scni")
    sandbox = net_edit.create_netns(netns.unique_name("scni"))
    try:
        vf_map = netns.write_vf_map(tmp_path / "map.json", vfs)

        added = _run("ADD", state, vf_map, bin_dir, sandbox, "c1")

        assert added["rc"] == 1 and "not-an-address" in json.dumps(added["out"]), added
        assert _calls(log) == ["ADD", "DEL"]  # the address the IPAM gave is released before failing
        assert vfs[0].ifname in netlink.link_names(None)  # the VF is back on the host
        assert netlink.link_names(sandbox) == frozenset({"lo"})

        deleted = _run("DEL", state, vf_map, bin_dir, sandbox, "c1")  # the runtime's DEL: no record left
        assert deleted["rc"] == 0, deleted
        assert _calls(log) == ["ADD", "DEL"]
    finally:
        netns.remove_sandbox(sandbox)
        netns.delete_vfs(vfs)
