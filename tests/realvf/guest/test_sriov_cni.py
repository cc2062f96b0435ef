"""The SR-IOV CNI step on a real VF: sriov-cni itself (the release pinned in tools/versions.env).

Each CNI call execs the pinned ``sriov`` binary from the run image (:data:`CNI_PATH`, which also
holds the pinned ``host-local`` it runs for IPAM) with the CNI environment and stdin, as a runtime
or Multus does. sriov-cni keeps its cache in its fixed :data:`sriovcni.CACHE_DIR`. The PF's VF
table is read with the host's iproute2 (``ip link show <pf>``). What the tests assert is what the
real plugin does, including what its DEL leaves when the Pod's netns was deleted first: the VF
stays in the host under the Pod's interface name, and its ``pci/<bdf>`` record stays until the
next ADD finds it stale. Every test puts the VF back under its original name at the end.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.realvf.guest import realvfs, sriovcni

from sriov_dra.host import netlink

SUBNET = "10.56.1.0/24"


@pytest.fixture
def vf(real_pfs: list[realvfs.RealPf]) -> Iterator[sriovcni.Vf]:
    """The first PF's first VF, with the plugins it needs present; renamed back to its name after."""
    sriovcni.require_binaries("sriov", "host-local")
    pf = real_pfs[0]
    first = realvfs.raw_vfs(pf)[0]
    (name,) = first.net or ("",)
    yield sriovcni.Vf(pf, first, name)
    sriovcni.rename_back(first.bdf, name)


@pytest.fixture
def cni(tmp_path: Path) -> Iterator[sriovcni.Calls]:
    calls = sriovcni.Calls(sriovcni.real_plugin, tmp_path, SUBNET)
    yield calls
    calls.cleanup()


def test_add_moves_the_real_vf_into_the_netns_with_the_rail_address_and_programs_vlan_spoofchk_trust_on_the_pf(
    vf: sriovcni.Vf, cni: sriovcni.Calls
) -> None:
    before = vf.table_line()
    assert "vlan" not in before and "spoof checking on" in before and "trust off" in before, before
    pod = cni.netns()
    conf = cni.conf(vf.bdf, vlan=100, spoofchk="off", trust="on")
    status, result = cni("ADD", conf, netns=pod, container="c1")
    assert status == 0, result
    (link,) = sriovcni.inside(pod)
    assert (link.name, link.parent_device, link.up) == ("net1", vf.bdf, True)
    assert link.addresses[0].startswith("10.56.1.") and link.addresses[0].endswith("/24"), link
    assert result == {
        "cniVersion": "1.0.0",
        "interfaces": [{"name": "net1", "mac": link.mac, "mtu": 1500, "sandbox": pod}],
        "ips": [{"address": link.addresses[0], "gateway": "10.56.1.1", "interface": 0}],
    }, result
    assert realvfs.raw_vf(vf.bdf).net == (), "the VF's netdev left the host namespace"
    programmed = vf.table_line()
    assert "vlan 100" in programmed and "spoof checking off" in programmed and "trust on" in programmed
    cache = json.loads(sriovcni.cache_file("c1").read_text())
    assert (cache["deviceID"], cache["Master"], cache["VFID"], cache["OrigVfState"]["HostIFName"]) == (
        vf.bdf,
        vf.pf.ifname,
        vf.real.index,
        vf.name,
    ), cache
    assert (
        cache["OrigVfState"]["Vlan"],
        cache["OrigVfState"]["SpoofChk"],
        cache["OrigVfState"]["Trust"],
    ) == (
        0,
        True,
        False,
    )
    assert sriovcni.allocation(vf.bdf) == pod
    assert sriovcni.lock_file(vf.bdf).is_file()

    status, result = cni("DEL", conf, netns=pod, container="c1")
    assert (status, result) == (0, {})
    assert sriovcni.inside(pod) == []
    assert realvfs.raw_vf(vf.bdf).net == (vf.name,), "DEL gives the VF back under its original name"
    vf.assert_reset(before)
    assert cni.allocations() == []
    assert not sriovcni.cache_file("c1").exists() and sriovcni.allocation(vf.bdf) is None
    assert sriovcni.lock_file(vf.bdf).is_file(), "sriov-cni leaves its per-VF lock file"


def test_del_after_the_netns_was_deleted_resets_the_vf_and_releases_its_address_but_leaves_it_named_net1_and_its_allocation_record(
    vf: sriovcni.Vf, cni: sriovcni.Calls
) -> None:
    before = vf.table_line()
    pod = cni.netns()
    conf = cni.conf(vf.bdf, vlan=200)
    status, result = cni("ADD", conf, netns=pod, container="c2")
    assert status == 0, result
    assert len(cni.allocations()) == 1
    cni.remove_netns(pod)
    status, result = cni("DEL", conf, netns=pod, container="c2")
    assert (status, result) == (0, {})
    # The kernel gives the VF back under the name it had in the Pod; sriov-cni does not rename it.
    realvfs.wait_until("the VF back in the host", lambda: realvfs.raw_vf(vf.bdf).net == ("net1",))
    (host_link,) = [link for link in netlink.links(None) if link.name == "net1"]
    assert host_link.addresses == () and not host_link.up
    vf.assert_reset(before)
    assert cni.allocations() == []
    assert not sriovcni.cache_file("c2").exists()
    assert sriovcni.allocation(vf.bdf) == pod, "the pci/<bdf> record of the deleted netns stays"

    # The next ADD finds the record stale, drops it and takes the VF under its current name.
    again = cni.netns()
    status, result = cni("ADD", conf, netns=again, container="c3")
    assert status == 0, result
    assert [link.name for link in sriovcni.inside(again)] == ["net1"]
    assert json.loads(sriovcni.cache_file("c3").read_text())["OrigVfState"]["HostIFName"] == "net1"
    assert sriovcni.allocation(vf.bdf) == again
    status, result = cni("DEL", conf, netns=again, container="c3")
    assert (status, result) == (0, {})
    assert realvfs.raw_vf(vf.bdf).net == ("net1",), "DEL gives it back under the name it had before ADD"
    vf.assert_reset(before)
    assert cni.allocations() == [] and sriovcni.allocation(vf.bdf) is None


def test_a_second_add_on_a_vf_in_use_is_refused_before_anything_moves_and_an_add_without_device_id_is_refused(
    vf: sriovcni.Vf, cni: sriovcni.Calls
) -> None:
    first, second = cni.netns(), cni.netns()
    conf = cni.conf(vf.bdf, vlan=100)
    assert cni("ADD", conf, netns=first, container="c4")[0] == 0
    try:
        in_use = vf.table_line()
        status, error = cni("ADD", cni.conf(vf.bdf, vlan=300), netns=second, container="c5")
        assert (status, error) == (
            1,
            {
                "code": 999,
                "msg": f"SRIOV-CNI failed to load netconf: pci address {vf.bdf} is already allocated",
            },
        )
        assert [link.name for link in sriovcni.inside(first)] == ["net1"] and sriovcni.inside(second) == []
        assert vf.table_line() == in_use, "the refused ADD changed no VF setting"
        assert len(cni.allocations()) == 1 and not sriovcni.cache_file("c5").exists()
        assert sriovcni.allocation(vf.bdf) == first

        status, error = cni("ADD", cni.conf(None), netns=second, container="c5")
        assert (status, error["code"], error["msg"]) == (
            1,
            999,
            "SRIOV-CNI failed to load netconf: LoadConf(): VF pci addr is required",
        )
    finally:
        assert cni("DEL", conf, netns=first, container="c4")[0] == 0
    assert realvfs.raw_vf(vf.bdf).net == (vf.name,)
