"""The host-stage gate (``driver.managed.host_gate``): failure injection at the boundary between the
``Pending`` checkpoint and the end of the host step of a first prepare.

The record (``Pending`` bindings included) is written before the first host change; a plugin that
dies before the host step ends leaves bindings whose VF drivers and CDI specs may be missing. No
path may publish them (shadow create, Pod patch, ``Ready``) until the host step completed: not
the repair worker, not a sibling claim's prepare of the same Pod, not the kubelet's retry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.fakes import claims_api as fx
from tests.fakes import kube_objects as ko
from tests.fakes import managed_node as mn

from sriov_dra.kubeletapi import messages

TWO_RAILS = [("nic-0", mn.DEV_A0), ("nic-1", mn.DEV_B0)]
PUBLISHING = ("nads.create", "pods.patch", "nads.patch")
Inject = Callable[[mn.ManagedNode], None]


def crash_after_pending_checkpoint(node: mn.ManagedNode) -> None:
    node.fail_write(ko.Crash("pending"), when="after", skip=0)


def kill_at(point: str) -> Inject:
    def inject(node: mn.ManagedNode) -> None:
        node.kill_at = point

    return inject


BEFORE_HOST_DONE = {
    "crash-after-pending-checkpoint": crash_after_pending_checkpoint,
    "kill-after-bind": kill_at("prepare:bound"),
    "kill-after-claim-cdi": kill_at("prepare:claim-cdi"),
}
"""Deaths after the ``Pending`` checkpoint with the host step unfinished (no Pod CDI spec yet)."""


def crash(node: mn.ManagedNode, call: Callable[[], Any]) -> None:
    """Run ``call``, which must die; then restart the plugin (state re-read from disk)."""
    with pytest.raises(ko.Crash):
        call()
    node.kill_at = ""
    node.restart()


def published(node: mn.ManagedNode) -> list[tuple[str, str]]:
    return [c for c in node.kube.calls if c[0] in PUBLISHING]


@pytest.mark.parametrize("case", list(BEFORE_HOST_DONE), ids=list(BEFORE_HOST_DONE))
def test_the_worker_completes_the_host_step_before_it_publishes_an_interrupted_prepare(
    node: mn.ManagedNode, case: str
) -> None:
    ref = node.add_consumer(TWO_RAILS)
    BEFORE_HOST_DONE[case](node)
    crash(node, lambda: node.prepare(ref))
    assert node.phases() == {ref.uid: ["Pending", "Pending"]}
    assert node.worker().run_once().ensured_pods == [fx.POD_UID]
    assert len(node.cdi_files()) == 2  # claim and Pod CDI specs, written by the worker's host step
    assert mn.convergence_problems(node) == []


@pytest.mark.parametrize("case", list(BEFORE_HOST_DONE), ids=list(BEFORE_HOST_DONE))
def test_the_worker_never_publishes_an_interrupted_prepare_whose_host_step_fails(
    node: mn.ManagedNode, case: str
) -> None:
    ref = node.add_consumer(TWO_RAILS)
    BEFORE_HOST_DONE[case](node)
    crash(node, lambda: node.prepare(ref))
    node.cdi_write_error = OSError(28, "No space left on device")
    node.kube.calls.clear()
    report = node.worker().run_once()
    assert f"pod/{fx.POD_UID}" in report.failed
    assert published(node) == [] and node.kube.shadows() == []
    assert node.phases() == {ref.uid: ["Pending", "Pending"]}
    assert "annotations" not in node.kube.pod(mn.NS, "consumer")["metadata"]
    node.cdi_write_error = None  # the disk recovers: the kubelet's retry completes everything
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert mn.convergence_problems(node) == [] and len(node.cdi_files()) == 2


def test_a_host_step_the_record_can_never_satisfy_is_not_published_and_unprepare_cleans_up(
    node: mn.ManagedNode,
) -> None:
    ref = node.add_consumer(TWO_RAILS, configs=[fx.config(fx.vf_config(driver="vfio-pci"))])
    crash(node, lambda: (crash_after_pending_checkpoint(node), node.prepare(ref)))
    node.kube.calls.clear()
    report = node.worker().run_once()
    assert "UnsupportedVfDriver" in report.failed[f"pod/{fx.POD_UID}"]
    retry = node.prepare(ref)
    assert isinstance(retry, messages.ClaimError) and "netdevice" in retry.message.lower()
    assert published(node) == [] and node.phases() == {ref.uid: ["Pending", "Pending"]}
    assert node.unprepare(ref) is None
    assert mn.clean_problems(node) == []


def two_claim_pod(node: mn.ManagedNode, *, a_configs: list[dict[str, Any]]) -> tuple[Any, Any]:
    a = node.add_consumer([("nic", mn.DEV_A0)], alias="a", configs=a_configs, add_pod=False)
    b = node.add_consumer(
        [("nic", mn.DEV_B0)], claim="claim-b", claim_uid=fx.CLAIM_UID_2, alias="b", add_pod=False
    )
    node.kube.add_pod(mn.pod_json("consumer", fx.POD_UID, [("a", "vf-claim", True), ("b", "claim-b", True)]))
    return a, b


def test_a_sibling_prepare_completes_the_interrupted_host_step_before_it_publishes_both(
    node: mn.ManagedNode,
) -> None:
    a, b = two_claim_pod(node, a_configs=[])
    crash_after_pending_checkpoint(node)
    crash(node, lambda: node.prepare(a))
    assert isinstance(node.prepare(b), messages.Prepared)
    assert node.phases() == {a.uid: ["Ready"], b.uid: ["Ready"]}
    assert len(node.cdi_files()) == 3  # both claim specs and the Pod spec
    assert mn.convergence_problems(node) == []


def test_a_sibling_prepare_never_publishes_a_claim_whose_host_step_fails(node: mn.ManagedNode) -> None:
    a, b = two_claim_pod(node, a_configs=[fx.config(fx.vf_config(driver="vfio-pci"))])
    crash_after_pending_checkpoint(node)
    crash(node, lambda: node.prepare(a))
    assert isinstance(node.prepare(b), messages.Prepared)
    assert node.phases() == {a.uid: ["Pending"], b.uid: ["Ready"]}
    a_shadow = node.store.snapshot_claim(a.uid).devices[0].managed.shadow_name
    b_shadow = node.store.snapshot_claim(b.uid).devices[0].managed.shadow_name
    assert [s["metadata"]["name"] for s in node.kube.shadows()] == [b_shadow]
    assert [name for name, _ in node.selected()] == [b_shadow] and a_shadow not in str(node.pod_annotations())
    assert node.unprepare(a) is None and node.unprepare(b) is None
    assert mn.clean_problems(node) == []
