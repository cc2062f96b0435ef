"""On a fake node, prepare and repair require the Node's current UID to be the recorded one.

The contract: docs/design.md#consumer and docs/design.md#repair.

The plugin recorded ``mn.NODE_UID`` at startup; the test changes what the API server says the
Node's UID is now (``ManagedNode.live_node_uid``), as when the Node is deleted and registered
again under the same name while the plugin runs.
"""

from __future__ import annotations

import pytest
from tests.fakes import claims_api as fx
from tests.fakes import managed_node as mn

from sriov_dra.kubeletapi import messages

NEW_NODE_UID = "0b0b0b0b-0000-4000-8000-00000000000b"
POD2_UID = "22222222-3333-4444-5555-666666666666"
API_WRITES = ("nads.create", "nads.delete", "nads.patch", "pods.patch")


def writes(node: mn.ManagedNode) -> list[tuple[str, str]]:
    return [c for c in node.kube.calls if c[0] in API_WRITES]


def second_consumer(node: mn.ManagedNode) -> messages.ClaimRef:
    return node.add_consumer(
        [("nic", mn.DEV_B0)], pod="second", pod_uid=POD2_UID, claim="claim-b", claim_uid=fx.CLAIM_UID_2
    )


@pytest.mark.parametrize(
    ("live", "fragment"),
    [(NEW_NODE_UID, f"has UID {NEW_NODE_UID}"), (None, "does not exist")],
    ids=["node-re-registered-with-a-new-uid", "node-deleted"],
)
def test_a_new_prepare_after_the_node_identity_changed_is_refused_before_any_write(
    node: mn.ManagedNode, live: str | None, fragment: str
) -> None:
    first = node.add_consumer([("nic", mn.DEV_A0)])
    assert isinstance(node.prepare(first), messages.Prepared)
    before = node.snapshot()
    node.kube.calls.clear()
    node.live_node_uid = live
    ref = second_consumer(node)
    out = node.prepare(ref)
    assert isinstance(out, messages.ClaimError)
    for needed in ("ContractViolation", "Node node-a", fragment, mn.NODE_UID, "drain", "restart the plugin"):
        assert needed in out.message
    assert writes(node) == []
    assert node.store.snapshot_claim(ref.uid) is None
    records, shadows, _pods, drivers, cdi_files = node.snapshot()
    assert (records, shadows, drivers, cdi_files) == (before[0], before[1], before[3], before[4])
    assert "annotations" not in node.kube.pod(mn.NS, "second")["metadata"]


def test_a_retry_of_an_existing_claim_is_refused_too_and_its_record_is_kept(node: mn.ManagedNode) -> None:
    ref = node.add_consumer([("nic", mn.DEV_A0)])
    assert isinstance(node.prepare(ref), messages.Prepared)
    kept = node.store.snapshot_claim(ref.uid)
    node.kube.calls.clear()
    node.live_node_uid = NEW_NODE_UID
    out = node.prepare(ref)
    assert isinstance(out, messages.ClaimError) and "ContractViolation" in out.message
    assert writes(node) == [] and node.store.snapshot_claim(ref.uid) == kept


def test_every_managed_prepare_compares_the_current_node_uid_once(node: mn.ManagedNode) -> None:
    ref = node.add_consumer([("nic", mn.DEV_A0)])
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert node.node_uid_reads == 2


def test_the_worker_stops_forward_repair_on_a_node_uid_mismatch_and_never_recreates_shadows(
    node: mn.ManagedNode,
) -> None:
    ref = node.add_consumer([("nic", mn.DEV_A0)])
    assert isinstance(node.prepare(ref), messages.Prepared)
    shadow = node.kube.shadows()[0]["metadata"]["name"]
    node.kube.nads.pop((mn.NS, shadow))
    node.live_node_uid = NEW_NODE_UID
    node.kube.calls.clear()
    report = node.worker().run_once()
    assert list(report.stopped) == [f"pod/{fx.POD_UID}"]
    assert "node UID mismatch" in report.stopped[f"pod/{fx.POD_UID}"]
    assert NEW_NODE_UID in report.stopped[f"pod/{fx.POD_UID}"]
    assert writes(node) == [] and node.kube.shadows() == []
    assert node.phases() == {ref.uid: ["Ready"]}


def test_an_authorized_release_still_completes_after_the_node_uid_changed(node: mn.ManagedNode) -> None:
    ref = node.add_consumer([("nic", mn.DEV_A0)])
    assert isinstance(node.prepare(ref), messages.Prepared)
    node.live_node_uid = NEW_NODE_UID
    assert node.unprepare(ref) is None
    assert mn.clean_problems(node) == []


def test_the_worker_resumes_forward_repair_once_the_recorded_identity_is_current_again(
    node: mn.ManagedNode,
) -> None:
    ref = node.add_consumer([("nic", mn.DEV_A0)])
    assert isinstance(node.prepare(ref), messages.Prepared)
    node.kube.nads.pop((mn.NS, node.kube.shadows()[0]["metadata"]["name"]))
    worker = node.worker()
    node.live_node_uid = NEW_NODE_UID
    assert worker.run_once().stopped
    node.live_node_uid = mn.NODE_UID
    report = worker.run_once()
    assert report.ensured_pods == [fx.POD_UID] and mn.convergence_problems(node) == []
