"""A VF that sriov-cni's DEL left in the host under the Pod's interface name, on a fake node.

Measured with sriov-cni v2.10.0 on real igbvf VFs (tests/realvf/guest/test_sriov_cni.py and
test_cni_chain.py): when a Pod's netns is deleted before CNI DEL, the kernel hands the VF back to
the host under the name it had in the Pod (``dra0``), and sriov-cni's DEL resets the VF's
settings and releases its address without renaming it; its ``pci/<bdf>`` allocation record stays
until the next ADD of that VF finds it stale (the plugin reads no sriov-cni file). The fake tree
shows the host what the kernel shows (``FakeSysfs.move_netdev_out`` for the ADD, then
``return_netdev(..., "dra0")``); the plugin must discover, prepare, repair, scan and release that
VF as any other, without renaming or rebinding it.
"""

from __future__ import annotations

from tests.fakes import claims_api as fx
from tests.fakes import kube_objects as ko
from tests.fakes import managed_node as mn

from sriov_dra.driver.managed import orphans
from sriov_dra.host import discovery
from sriov_dra.kubeletapi import messages

TWO_RAILS = [("nic-0", mn.DEV_A0), ("nic-1", mn.DEV_B0)]
LEFT = {mn.VF_A0: "dra0", mn.VF_B0: "dra1"}
"""The VFs of :data:`TWO_RAILS` and the names the first Pod gave them."""


def attach_then_delete_the_netns_before_del(node: mn.ManagedNode) -> None:
    """What CNI ADD, the netns deletion and sriov-cni's DEL leave on the host for :data:`LEFT`."""
    for vf, name in LEFT.items():
        node.fake.move_netdev_out(vf)
        node.fake.return_netdev(vf, name)


def netdevs(node: mn.ManagedNode) -> dict[str, list[str]]:
    return {vf: node.fake.sysfs.netdevs(vf) for vf in LEFT}


def second_pod_after_the_first_left_its_vfs(node: mn.ManagedNode) -> messages.ClaimRef:
    """The first Pod prepared, attached, its netns deleted before DEL, released and deleted; then a
    second Pod with a claim of the same VFs."""
    first = node.add_consumer(TWO_RAILS)
    node.prepare(first)
    attach_then_delete_the_netns_before_del(node)
    node.unprepare(first)
    node.kube.delete_pod(mn.NS, "consumer")
    return node.add_consumer(
        TWO_RAILS, pod="second", pod_uid=fx.OTHER_POD_UID, claim="vf-claim-2", claim_uid=fx.CLAIM_UID_2
    )


def test_a_vf_left_in_the_host_as_dra0_is_discovered_as_the_same_device_with_the_same_attributes(
    node: mn.ManagedNode,
) -> None:
    before = discovery.by_name(discovery.discover(node.fake.sysfs))
    attach_then_delete_the_netns_before_del(node)
    after = discovery.by_name(discovery.discover(node.fake.sysfs))
    assert set(after) == set(before)
    for name in (mn.DEV_A0, mn.DEV_B0):
        assert dict(after[name].attributes) == dict(before[name].attributes)
        assert (after[name].driver, after[name].pci_address) == (
            before[name].driver,
            before[name].pci_address,
        )
    assert [after[n].netdev for n in (mn.DEV_A0, mn.DEV_B0)] == ["dra0", "dra1"]


def test_the_first_pods_release_leaves_no_state_and_the_vfs_as_the_kernel_returned_them(
    node: mn.ManagedNode,
) -> None:
    first = node.add_consumer(TWO_RAILS)
    assert isinstance(node.prepare(first), messages.Prepared)
    attach_then_delete_the_netns_before_del(node)
    assert node.unprepare(first) is None
    assert mn.clean_problems(node) == []
    assert netdevs(node) == {vf: [name] for vf, name in LEFT.items()}, "neither renamed nor rebound"


def test_the_next_pods_claim_of_vfs_left_as_dra0_is_prepared_repaired_scanned_and_released(
    node: mn.ManagedNode,
) -> None:
    ref = second_pod_after_the_first_left_its_vfs(node)
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert mn.convergence_problems(node, pod="second") == []
    report = node.worker().run_once()
    assert report.ensured_pods == [fx.OTHER_POD_UID] and report.failed == {}, report
    scanned = orphans.scan(nads=node.attach.nads, store=node.store, node=node.node)
    assert [r.status for r in scanned] == [orphans.Status.ACTIVE] * 2, scanned
    assert node.unprepare(ref) is None
    assert mn.clean_problems(node, pod="second") == []
    assert netdevs(node) == {vf: [name] for vf, name in LEFT.items()}


def test_an_interrupted_prepare_of_vfs_left_as_dra0_is_completed_by_the_repair_worker(
    node: mn.ManagedNode,
) -> None:
    ref = second_pod_after_the_first_left_its_vfs(node)
    node.fail_write(ko.Crash("pending"), when="after", skip=0)
    try:
        node.prepare(ref)
    except ko.Crash:
        node.restart()
    else:
        raise AssertionError("the prepare did not die after its Pending checkpoint")
    assert node.phases() == {ref.uid: ["Pending", "Pending"]}
    assert node.worker().run_once().ensured_pods == [fx.OTHER_POD_UID]
    assert mn.convergence_problems(node, pod="second") == []
