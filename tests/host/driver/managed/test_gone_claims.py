"""A record whose claim no longer exists is released by the repair worker after a grace period,
with a Warning Event, so a lost NodeUnprepareResources never blocks a VF for good
(docs/design.md#repair; kubernetes-sigs/dra-driver-nvidia-gpu #1162).

On a fake node (real checkpoint, CDI and driver binding on a fake sysfs tree; FAKE API objects).
"""

from __future__ import annotations

import copy

from tests.fakes import claims_api as fx
from tests.fakes import managed_node as mn

from sriov_dra.driver.managed import gone_claims
from sriov_dra.kubeletapi import messages

GRACE = 600.0


def _prepared(node: mn.ManagedNode) -> messages.ClaimRef:
    ref = node.add_consumer([("nic", mn.DEV_A0)])
    assert isinstance(node.prepare(ref), messages.Prepared)
    return ref


def _claim_deleted_and_pod_gone(node: mn.ManagedNode, ref: messages.ClaimRef) -> None:
    """What the API shows once the Pod is gone and its claim was deleted; the unprepare never came."""
    del node.claims.claims[(ref.namespace, ref.name)]
    node.kube.pods.pop((mn.NS, "consumer"), None)


def test_a_record_whose_claim_is_gone_is_kept_until_the_grace_period_passed(node: mn.ManagedNode) -> None:
    ref = _prepared(node)
    _claim_deleted_and_pod_gone(node, ref)
    worker = node.worker(claim_gone_grace_s=GRACE)
    worker.run_once()
    node.clock.now += GRACE - 1
    report = worker.run_once()
    assert report.released == [] and node.store.snapshot_claim(ref.uid) is not None
    assert gone_claims.REASON_CLAIM_GONE not in node.events.reasons()


def test_a_record_whose_claim_stayed_gone_past_the_grace_is_released_with_a_warning_event(
    node: mn.ManagedNode,
) -> None:
    ref = _prepared(node)
    _claim_deleted_and_pod_gone(node, ref)
    worker = node.worker(claim_gone_grace_s=GRACE)
    worker.run_once()
    node.clock.now += GRACE
    report = worker.run_once()
    assert report.released == [ref.uid]
    assert mn.clean_problems(node, pod=None) == []
    assert node.worker_host_releases == 1
    assert ("ResourceClaim", f"{ref.namespace}/{ref.name}", gone_claims.REASON_CLAIM_GONE, True) in (
        node.events.items
    )
    # the VF is free again: another claim allocated it prepares
    other = node.add_consumer(
        [("nic", mn.DEV_A0)],
        pod="second",
        pod_uid=fx.OTHER_POD_UID,
        claim="claim-b",
        claim_uid=fx.CLAIM_UID_2,
    )
    assert isinstance(node.prepare(other), messages.Prepared)


def test_a_claim_replaced_under_the_same_name_counts_as_gone(node: mn.ManagedNode) -> None:
    ref = _prepared(node)
    replaced = copy.deepcopy(node.claims.stored(ref.namespace, ref.name))
    replaced["metadata"]["uid"] = fx.CLAIM_UID_2
    node.claims.add(replaced)
    node.kube.pods.pop((mn.NS, "consumer"), None)
    worker = node.worker(claim_gone_grace_s=GRACE)
    worker.run_once()
    node.clock.now += GRACE
    assert worker.run_once().released == [ref.uid]


def test_a_claim_seen_again_with_its_uid_restarts_the_grace(node: mn.ManagedNode) -> None:
    ref = _prepared(node)
    stored = copy.deepcopy(node.claims.stored(ref.namespace, ref.name))
    worker = node.worker(claim_gone_grace_s=GRACE)
    del node.claims.claims[(ref.namespace, ref.name)]
    worker.run_once()  # a first sighting of the claim gone (a read racing a re-create, say)
    node.claims.add(stored)
    node.clock.now += GRACE / 2
    worker.run_once()  # present again with the recorded UID
    del node.claims.claims[(ref.namespace, ref.name)]
    node.clock.now += GRACE / 2
    assert worker.run_once().released == []
    assert node.store.snapshot_claim(ref.uid) is not None
