"""The repair pass reads the node's shadows with one label-selected LIST.

On a fake node (real handler, checkpoint and fake-sysfs host; the fake API logs every call): a
pass over prepared claims where nothing changed issues one NAD LIST and no NAD GET and no write;
a shadow the LIST does not return is still read live before anything is decided, so the
decisions are those of one GET per shadow; a LIST that fails falls back to those GETs.
"""

from __future__ import annotations

from tests.fakes import claims_api as fx
from tests.fakes import kube_objects as ko
from tests.fakes import managed_node as mn

from sriov_dra.driver.managed import orphans
from sriov_dra_rules import names

TWO_RAILS = [("nic-0", mn.DEV_A0), ("nic-1", mn.DEV_B0)]
WRITES = ("nads.create", "nads.patch", "nads.delete", "pods.patch")


def two_prepared_pods(node: mn.ManagedNode) -> None:
    first = node.add_consumer([TWO_RAILS[0]])
    second = node.add_consumer(
        [TWO_RAILS[1]], pod="second", pod_uid=fx.OTHER_POD_UID, claim="vf-claim-2", claim_uid=fx.CLAIM_UID_2
    )
    assert node.prepare(first) is not None and node.prepare(second) is not None
    assert len(node.kube.shadows()) == 2


def nad_calls(node: mn.ManagedNode) -> list[tuple[str, str]]:
    return [c for c in node.kube.calls if c[0].startswith("nads.")]


def test_a_pass_with_nothing_changed_lists_the_shadows_once_and_writes_nothing(node: mn.ManagedNode) -> None:
    two_prepared_pods(node)
    worker = node.worker()
    worker.run_once()  # the first pass also runs the orphan scan (its own LIST)
    node.kube.calls.clear()
    report = worker.run_once()
    assert sorted(report.ensured_pods) == sorted([fx.POD_UID, fx.OTHER_POD_UID]), report
    assert nad_calls(node) == [("nads.list", orphans.label_selector(node.attach.node.uid))]
    assert [c for c in node.kube.calls if c[0] in WRITES] == []


def test_a_shadow_the_list_misses_is_read_live_and_refused_as_before(node: mn.ManagedNode) -> None:
    ref = node.add_consumer(TWO_RAILS)
    node.prepare(ref)
    edited = node.kube.shadows()[0]["metadata"]["name"]
    worker = node.worker()
    worker.run_once()
    node.kube.edit_nad(mn.NS, edited, lambda o: o["metadata"]["labels"].pop(names.LABEL_NODE_UID))
    node.kube.calls.clear()
    report = worker.run_once()
    assert ("nads.get", edited) in nad_calls(node)  # not listed: read live, never assumed missing
    assert report.failed == {f"pod/{fx.POD_UID}": "ShadowConflict"}
    assert [c for c in node.kube.calls if c[0] in WRITES] == []  # not recreated, not overwritten


def test_a_shadow_that_is_gone_is_confirmed_by_a_live_get_then_recreated(node: mn.ManagedNode) -> None:
    ref = node.add_consumer(TWO_RAILS)
    node.prepare(ref)
    gone = node.kube.shadows()[0]["metadata"]["name"]
    node.kube.nads.pop((mn.NS, gone))
    node.kube.calls.clear()
    node.worker().run_once()
    mine = [c for c in nad_calls(node) if c[1] == gone]
    assert mine == [("nads.get", gone), ("nads.create", gone)]
    assert mn.convergence_problems(node) == []


def test_a_failed_list_falls_back_to_one_get_per_shadow(node: mn.ManagedNode) -> None:
    two_prepared_pods(node)
    worker = node.worker()
    worker.run_once()
    node.kube.calls.clear()
    node.kube.fail("nads.list", ko.forbidden)
    report = worker.run_once()
    assert sorted(report.ensured_pods) == sorted([fx.POD_UID, fx.OTHER_POD_UID]), report
    assert sorted(c[0] for c in nad_calls(node)) == ["nads.get", "nads.get", "nads.list"]
    assert [c for c in node.kube.calls if c[0] in WRITES] == []
