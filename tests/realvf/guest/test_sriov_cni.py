"""The SR-IOV CNI step on a real VF: the lab's ``sriov`` plugin (the sriov-cni stand-in) in real-VF mode.

The plugin's CNI entry (:func:`sriov_dra_lab.sriov_cni.run` with ``--real-vfs``, what its wrapper
executes) runs in this process with the CNI environment and stdin; the device move and IPAM are
the pinned upstream ``host-device`` and ``host-local`` binaries it executes from ``CNI_PATH`` (the
run image's :data:`tests.realvf.vm.GUEST_CNI_DIR`). The PF's VF table is read with the host's
iproute2 (``ip link show <pf>``), independently of the plugin's own netlink code. Every test
leaves the VF in the host namespace under its original name with the PF's VF table as before.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.realvf.guest import realvfs

from sriov_dra.host import netlink
from sriov_dra_lab import sriov_cni
from sriov_dra_lab.fakes import net_edit

CNI_PATH = realvfs.REPO / ".realvf-cni"
SUBNET = "10.56.1.0/24"


@pytest.fixture
def vf(real_pfs: list[realvfs.RealPf]) -> tuple[realvfs.RealPf, realvfs.RawVf, str]:
    """(PF, VF, the VF's netdev name) of the first PF's first VF, with the plugins it needs present."""
    missing = [name for name in ("host-device", "host-local") if not os.access(CNI_PATH / name, os.X_OK)]
    if missing:
        pytest.skip(f"{missing} not in the run image (build the pinned CNI plugins: make setup)")
    pf = real_pfs[0]
    first = realvfs.raw_vfs(pf)[0]
    (name,) = first.net or ("",)
    return pf, first, name


class Cni:
    """The test's CNI calls, network namespaces (removed afterwards if still there) and host-local dir."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], data_dir: Path
    ) -> None:
        self.monkeypatch, self.capsys, self.data_dir = monkeypatch, capsys, data_dir
        self.netnses: list[str] = []

    def netns(self) -> str:
        name = f"pod-{uuid.uuid4().hex[:8]}"
        self.netnses.append(name)
        return net_edit.create_netns(name)

    def remove_netns(self, path: str) -> None:
        name = os.path.basename(path)
        self.netnses.remove(name)
        net_edit.remove_netns(name)

    def conf(self, bdf: str | None, **vf_settings: object) -> dict[str, Any]:
        ranges = [[{"subnet": SUBNET, "rangeStart": "10.56.1.10", "rangeEnd": "10.56.1.20"}]]
        conf: dict[str, Any] = {"cniVersion": "1.0.0", "name": "rail-a", "type": "sriov", **vf_settings}
        if bdf is not None:
            conf["deviceID"] = bdf
        conf["ipam"] = {"type": "host-local", "dataDir": str(self.data_dir), "ranges": ranges}
        return conf

    def __call__(
        self, command: str, conf: dict[str, Any], *, netns: str, container: str
    ) -> tuple[int, dict[str, Any]]:
        """One CNI call of the plugin: (exit status, the JSON it printed, or {})."""
        env = {"CNI_COMMAND": command, "CNI_CONTAINERID": container, "CNI_NETNS": netns, "CNI_IFNAME": "net1"}
        with self.monkeypatch.context() as patch:
            for key, value in {**env, "CNI_PATH": str(CNI_PATH)}.items():
                patch.setenv(key, value)
            patch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(conf).encode())))
            self.capsys.readouterr()
            status = sriov_cni.run(["--real-vfs"])
            out = self.capsys.readouterr().out.strip()
        return status, json.loads(out) if out else {}

    def allocations(self) -> list[str]:
        """host-local's allocated addresses of the network (one file per address)."""
        network = self.data_dir / "rail-a"
        if not network.is_dir():
            return []
        return sorted(p.name for p in network.iterdir() if re.fullmatch(r"[0-9.]+", p.name))


@pytest.fixture
def cni(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Iterator[Cni]:
    calls = Cni(monkeypatch, capsys, tmp_path)
    yield calls
    for name in calls.netnses:
        if (netlink.NETNS_RUN_DIR / name).exists():
            net_edit.remove_netns(name)


def _inside(netns: str) -> list[netlink.LinkInfo]:
    return [link for link in netlink.links(netns) if link.name != "lo"]


def _assert_released(
    cni: Cni, vf: tuple[realvfs.RealPf, realvfs.RawVf, str], before: str, *, container: str
) -> None:
    """After DEL: the VF in the host namespace under its original name without addresses, its VF-table
    line as before ADD, its address released and both sriov-cni cache files gone."""
    pf, real, name = vf
    assert realvfs.raw_vf(real.bdf).net == (name,), "DEL gives the VF back under its original name"
    (host_link,) = [link for link in netlink.links(None) if link.name == name]
    assert host_link.addresses == ()
    assert realvfs.vf_table_line(pf.ifname, real.index) == before, "VLAN, spoofchk and trust as before ADD"
    assert cni.allocations() == []
    assert not Path(f"/var/lib/cni/sriov/{container}-net1").exists()
    assert not Path(f"/var/lib/cni/sriov/pci/{real.bdf}").exists()


def test_add_moves_the_real_vf_into_the_netns_with_the_rail_address_and_programs_vlan_spoofchk_trust_on_the_pf(
    vf: tuple[realvfs.RealPf, realvfs.RawVf, str], cni: Cni
) -> None:
    pf, real, name = vf
    before = realvfs.vf_table_line(pf.ifname, real.index)
    assert "vlan" not in before and "spoof checking on" in before and "trust off" in before, before
    pod = cni.netns()
    conf = cni.conf(real.bdf, vlan=100, spoofchk="off", trust="on")
    status, result = cni("ADD", conf, netns=pod, container="c1")
    assert status == 0, result
    (link,) = _inside(pod)
    assert (link.name, link.parent_device, link.up) == ("net1", real.bdf, True)
    assert link.addresses[0].startswith("10.56.1.") and link.addresses[0].endswith("/24"), link
    assert [ip["address"] for ip in result["ips"]] == [link.addresses[0]]
    assert result["interfaces"][0]["name"] == "net1" and result["interfaces"][0]["sandbox"] == pod
    assert realvfs.raw_vf(real.bdf).net == (), "the VF's netdev left the host namespace"
    programmed = realvfs.vf_table_line(pf.ifname, real.index)
    assert "vlan 100" in programmed and "spoof checking off" in programmed and "trust on" in programmed
    state = json.loads(Path("/var/lib/cni/sriov/c1-net1").read_text())
    assert (state["deviceID"], state["pf"], state["vfIndex"], state["hostIfname"]) == (
        real.bdf,
        pf.ifname,
        real.index,
        name,
    )
    assert Path(f"/var/lib/cni/sriov/pci/{real.bdf}").read_text() == pod

    status, result = cni("DEL", conf, netns=pod, container="c1")
    assert (status, result) == (0, {})
    assert _inside(pod) == []
    _assert_released(cni, vf, before, container="c1")


def test_del_after_the_netns_was_deleted_renames_the_returned_vf_back_and_releases_its_address(
    vf: tuple[realvfs.RealPf, realvfs.RawVf, str], cni: Cni
) -> None:
    pf, real, _ = vf
    before = realvfs.vf_table_line(pf.ifname, real.index)
    pod = cni.netns()
    conf = cni.conf(real.bdf, vlan=200)
    status, result = cni("ADD", conf, netns=pod, container="c2")
    assert status == 0, result
    assert len(cni.allocations()) == 1
    cni.remove_netns(pod)
    status, result = cni("DEL", conf, netns=pod, container="c2")
    assert (status, result) == (0, {})
    _assert_released(cni, vf, before, container="c2")  # the kernel gave it back as net1


def test_a_second_add_on_a_vf_in_use_is_refused_as_sriov_cni_refuses_it_before_anything_moves(
    vf: tuple[realvfs.RealPf, realvfs.RawVf, str], cni: Cni
) -> None:
    pf, real, name = vf
    first, second = cni.netns(), cni.netns()
    conf = cni.conf(real.bdf, vlan=100)
    assert cni("ADD", conf, netns=first, container="c3")[0] == 0
    try:
        in_use = realvfs.vf_table_line(pf.ifname, real.index)
        status, error = cni("ADD", cni.conf(real.bdf, vlan=300), netns=second, container="c4")
        assert status == 1
        assert (error["code"], error["msg"]) == (999, f"pci address {real.bdf} is already allocated")
        assert [link.name for link in _inside(first)] == ["net1"] and _inside(second) == []
        assert realvfs.vf_table_line(pf.ifname, real.index) == in_use, "the refused ADD changed no VF setting"
        assert len(cni.allocations()) == 1 and not Path("/var/lib/cni/sriov/c4-net1").exists()

        status, error = cni("ADD", cni.conf(None), netns=second, container="c4")
        assert (status, error["code"], error["msg"]) == (
            1,
            999,
            "SRIOV-CNI failed to load netconf: LoadConf(): VF pci addr is required",
        )
    finally:
        assert cni("DEL", conf, netns=first, container="c3")[0] == 0
    assert realvfs.raw_vf(real.bdf).net == (name,)
