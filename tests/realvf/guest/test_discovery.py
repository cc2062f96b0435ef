"""Discovery and the published ResourceSlice on real igbvf VFs, compared with raw sysfs.

Also two real-kernel behaviours seen from discovery: a VF whose netdev is inside
a Pod's netns (the host's ``net/`` is empty) and a VF handed back as the Pod's interface name when
its netns was deleted first are still the same device with the same attributes.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.realvf.guest.realvfs import NUM_VFS, ROOTS, VF_DRIVER, RawVf, RealPf, raw_vf, wait_until

from sriov_dra.core import policies
from sriov_dra.core.plugin import slices
from sriov_dra.host import discovery, netlink
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra_lab.fakes import net_edit

DRIVER = "sriovnetwork.k8snetworkplumbingwg.io"


def _discover() -> dict[str, discovery.DiscoveredVf]:
    return {str(vf.pci_address): vf for vf in discovery.discover(sysfs_mod.Sysfs(Path("/")))}


def test_discovery_reports_every_real_vf_with_its_pf_root_numa_driver_and_netdev_as_sysfs(
    real_pfs: list[RealPf], all_vfs: list[RawVf]
) -> None:
    found = _discover()
    assert sorted(found) == [v.bdf for v in all_vfs]
    assert len(found) == NUM_VFS * len(real_pfs)
    pfs = {pf.bdf: pf for pf in real_pfs}
    for raw in all_vfs:
        vf, pf = found[raw.bdf], pfs[raw.pf_bdf]
        assert raw.pcie_root == pf.pcie_root and raw.numa_node == ROOTS[pf.pcie_root]
        assert (vf.pf_pci_address, vf.pf_name, vf.vf_id) == (pf.bdf, pf.ifname, raw.index)
        assert (vf.pcie_root, vf.numa_node) == (raw.pcie_root, raw.numa_node)
        assert (vf.driver, vf.netdev) == (VF_DRIVER, raw.net[0] if raw.net else None)
        assert (vf.vendor, vf.device_id, vf.pf_device_id) == ("8086", raw.device_id, "10c9")
        assert vf.name == raw.bdf.replace(":", "-").replace(".", "-")


def test_resourceslice_publishes_each_real_vf_with_its_pcie_root_and_numa_node(
    real_pfs: list[RealPf], all_vfs: list[RawVf]
) -> None:
    found = discovery.discover(sysfs_mod.Sysfs(Path("/")))
    facts = [vf.to_device_facts() for vf in found]
    evaluation = policies.evaluate_policies(
        facts, [{"metadata": {"name": "all"}, "spec": {"configs": [{}]}}], [], node_labels={}, managed=False
    )
    devices = slices.published_devices(facts, evaluation)
    (published,) = slices.desired_slices(devices, driver=DRIVER, node="guest", node_uid="uid-1", generation=1)
    by_name = {d["name"]: d["attributes"] for d in published["spec"]["devices"]}
    pfs = {pf.bdf: pf for pf in real_pfs}
    assert len(by_name) == len(all_vfs)
    for raw in all_vfs:
        attrs = by_name[raw.bdf.replace(":", "-").replace(".", "-")]
        assert attrs["resource.kubernetes.io/pcieRoot"] == {"string": raw.pcie_root}
        assert attrs["dra.net/numaNode"] == {"int": raw.numa_node}
        assert attrs[f"{DRIVER}/pciAddress"] == {"string": raw.bdf}
        assert attrs["k8s.cni.cncf.io/deviceID"] == {"string": raw.bdf}
        assert attrs[f"{DRIVER}/PFName"] == {"string": pfs[raw.pf_bdf].ifname}
        assert attrs[f"{DRIVER}/pfPciAddress"] == {"string": raw.pf_bdf}
        assert attrs[f"{DRIVER}/vfID"] == {"int": raw.index}
        assert attrs[f"{DRIVER}/deviceID"] == {"string": "10ca"}


def _comparable(vf: discovery.DiscoveredVf) -> tuple[object, ...]:
    return (vf.name, vf.pf_name, vf.vf_id, vf.pcie_root, vf.numa_node, vf.driver, dict(vf.attributes))


def test_a_vf_inside_a_pod_netns_is_still_discovered_as_the_same_device(all_vfs: list[RawVf]) -> None:
    vf = all_vfs[0]
    (name,) = vf.net or ("",)
    before = _discover()[vf.bdf]
    pod = f"realvf-{uuid.uuid4().hex[:8]}"
    path = net_edit.create_netns(pod)
    try:
        net_edit.move_link(name, target_netns=path, new_name="net1")
        # The kernel fact the fake trees must show: net/ stays, but lists nothing in this netns.
        assert raw_vf(vf.bdf).net == ()
        inside = [link for link in netlink.links(path) if link.parent_device == vf.bdf]
        assert [(link.name, link.parent_bus) for link in inside] == [("net1", "pci")]
        now = _discover()[vf.bdf]
        assert _comparable(now) == _comparable(before)
        assert now.netdev is None
        net_edit.move_link("net1", target_netns=None, new_name=name, netns_path=path)
    finally:
        net_edit.remove_netns(pod)
    wait_until(f"{name} back in the host namespace", lambda: raw_vf(vf.bdf).net == (name,))


def test_a_vf_returned_by_a_deleted_pod_netns_comes_back_as_net1_and_is_the_same_device(
    all_vfs: list[RawVf],
) -> None:
    vf = all_vfs[-1]
    (name,) = vf.net or ("",)
    before = _discover()[vf.bdf]
    pod = f"realvf-{uuid.uuid4().hex[:8]}"
    path = net_edit.create_netns(pod)
    net_edit.move_link(name, target_netns=path, new_name="net1")
    net_edit.remove_netns(pod)  # the runtime deleted the sandbox before CNI DEL
    try:
        wait_until("the VF's netdev back in the host namespace", lambda: raw_vf(vf.bdf).net == ("net1",))
        now = _discover()[vf.bdf]
        assert _comparable(now) == _comparable(before)
        assert now.netdev == "net1"
    finally:
        if raw_vf(vf.bdf).net == ("net1",):
            net_edit.move_link("net1", target_netns=None, new_name=name)
