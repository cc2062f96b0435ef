"""The failure-injection matrix (docs/design.md#fault-injection) at the handler level, on a fake node.

At every side-effect boundary of a first prepare after the ``Pending`` checkpoint (shadow create,
UID persist, Pod patch, ``Ready`` checkpoint; plus kills between the host steps) and of a release
(``Deleting``, shadow read and delete, selection removal, host release, ``ReleaseComplete``,
finalizer removal, record deletion), the fault is injected: a crash before or after the effect
(the process dies; :meth:`ManagedNode.restart`), Forbidden, NotFound, a timeout, a lost response,
409 and 422. Then **without another NodePrepare** the repair worker's pass must converge the
checkpoint, the Pod, the NADs and the host to the fault-free result, and a later kubelet retry
must find nothing left to write. Releases must end clean after the worker and the kubelet's
unprepare retry, and our finalizer must never be removed before ``ReleaseComplete`` is on disk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.fakes import claims_api as fx
from tests.fakes import kube_objects as ko
from tests.fakes import managed_node as mn

from sriov_dra.core import identities
from sriov_dra.core.plugin import checkpoint_codec as codec
from sriov_dra.driver import faults
from sriov_dra.host import checkpoint_files
from sriov_dra.kubeletapi import messages
from sriov_dra_rules import names

TWO_RAILS = [("nic-0", mn.DEV_A0), ("nic-1", mn.DEV_B0)]
Inject = Callable[[mn.ManagedNode], None]


def crash(point: str) -> ko.Crash:
    return ko.Crash(point)


def api(op: str, error: Any, *, after: bool = False) -> Inject:
    return lambda n: n.kube.fail(op, error, after=after)


def write(exc: BaseException, *, skip: int, when: str = "before") -> Inject:
    return lambda n: n.fail_write(exc, when=when, skip=skip)


def kill(point: str) -> Inject:
    def inject(n: mn.ManagedNode) -> None:
        n.kill_at = point

    return inject


def concurrent_pod_edit(n: mn.ManagedNode) -> None:
    """Another writer changes the Pod between our read and our patch (a real ``test`` failure)."""

    def once() -> None:
        n.kube.hooks.pop("pods.patch")
        n.kube.edit_pod(mn.NS, "consumer", lambda p: p["metadata"].setdefault("labels", {}).update(x="y"))

    n.kube.hooks["pods.patch"] = once


FORWARD = {
    "hardware:crash-after-pending-checkpoint": write(crash("pending"), skip=0, when="after"),
    "hardware:kill-after-bind": kill("prepare:bound"),
    "hardware:kill-after-claim-cdi": kill("prepare:claim-cdi"),
    "hardware:kill-after-pod-cdi": kill("prepare:pod-cdi"),
    "shadow-create:crash-before": api("nads.create", crash("create")),
    "shadow-create:crash-after": api("nads.create", crash("create"), after=True),
    "shadow-create:forbidden": api("nads.create", ko.forbidden),
    "shadow-create:namespace-notfound": api("nads.create", ko.not_found),
    "shadow-create:timeout": api("nads.create", ko.timeout),
    "shadow-create:lost-response": api("nads.create", ko.timeout, after=True),
    "shadow-create:409": api("nads.create", ko.conflict),
    "shadow-create:422": api("nads.create", ko.invalid),
    "uid-persist:disk-error": write(OSError(28, "No space left on device"), skip=1),
    "uid-persist:crash-before": write(crash("uids"), skip=1),
    "uid-persist:crash-after": write(crash("uids"), skip=1, when="after"),
    "pod-patch:crash-before": api("pods.patch", crash("patch")),
    "pod-patch:crash-after": api("pods.patch", crash("patch"), after=True),
    "pod-patch:forbidden": api("pods.patch", ko.forbidden),
    "pod-patch:timeout": api("pods.patch", ko.timeout),
    "pod-patch:lost-response": api("pods.patch", ko.timeout, after=True),
    "pod-patch:409": api("pods.patch", ko.conflict),
    "pod-patch:422-concurrent-writer": concurrent_pod_edit,
    "ready:disk-error": write(OSError(5, "Input/output error"), skip=2),
    "ready:crash-before": write(crash("ready"), skip=2),
    "ready:crash-after": write(crash("ready"), skip=2, when="after"),
}


FORWARD_PHASE_AFTER_FAULT = {k: "Pending" for k in FORWARD} | {
    "pod-patch:409": "Ready",  # retried inline after a re-read
    "pod-patch:422-concurrent-writer": "Ready",
    "ready:crash-after": "Ready",
}
"""What the checkpoint says right after the fault: never lost, never ahead of the API."""


def run(node: mn.ManagedNode, call: Callable[[], Any]) -> Any:
    """Call the handler; a crash restarts the plugin (state re-read from disk)."""
    try:
        return call()
    except ko.Crash:
        node.kill_at = ""
        node.restart()
        return "crashed"


@pytest.mark.parametrize("case", list(FORWARD), ids=list(FORWARD))
def test_forward_faults_converge_through_the_worker_without_another_prepare(
    node: mn.ManagedNode, case: str
) -> None:
    ref = node.add_consumer(TWO_RAILS)
    FORWARD[case](node)
    outcome = run(node, lambda: node.prepare(ref))
    want = FORWARD_PHASE_AFTER_FAULT[case]
    assert isinstance(outcome, messages.Prepared) == (want == "Ready" and outcome != "crashed")
    assert node.phases() == {ref.uid: [want, want]}
    report = node.worker().run_once()
    assert mn.convergence_problems(node) == [], report
    node.kube.calls.clear()
    assert isinstance(node.prepare(ref), messages.Prepared)  # the kubelet's retry finds it done
    assert [c for c in node.kube.calls if c[0] in ("nads.create", "pods.patch", "nads.patch")] == []
    assert node.cdi_files() and mn.convergence_problems(node) == []


THREE_VFS = [("nic-0", mn.DEV_A0), ("nic-1", mn.DEV_B0), ("nic-2", mn.DEV_A1)]
SHADOW_CREATE = [k for k in FORWARD if k.startswith("shadow-create:")]


def shadow_name_of(device: str) -> str:
    """The deterministic shadow name of ``device`` in the consumer's claim (known before prepare)."""
    identity = identities.build_binding_identity(
        node_uid=identities.NodeUid(mn.NODE_UID),
        pod_uid=identities.PodUid(fx.POD_UID),
        claim_uid=identities.ClaimUid(fx.CLAIM_UID),
        pool=fx.NODE,
        device=device,
    )
    return identities.shadow_name(identities.attachment_id(identity))


@pytest.mark.parametrize("index", [0, 1, 2], ids=["first-vf", "middle-vf", "last-vf"])
@pytest.mark.parametrize("case", SHADOW_CREATE, ids=SHADOW_CREATE)
def test_a_fault_at_one_of_three_concurrent_creates_converges_and_leaves_no_untracked_create(
    node: mn.ManagedNode, case: str, index: int
) -> None:
    ref = node.add_consumer(THREE_VFS)
    FORWARD[case](node)
    failing = shadow_name_of(THREE_VFS[index][1])
    node.kube.faults[-1].name = failing  # this VF's create fails; its two siblings' run concurrently
    outcome = run(node, lambda: node.prepare(ref))
    assert not isinstance(outcome, messages.Prepared)
    assert node.phases() == {ref.uid: ["Pending"] * 3}
    attempted = {name for op, name in node.kube.calls if op == "nads.create"}
    assert attempted == {shadow_name_of(dev) for _, dev in THREE_VFS}  # no sibling skipped
    recorded = {b.shadow_name: b.shadow_uid for b in node.store.snapshot_claim(ref.uid).managed_bindings()}
    if outcome != "crashed":  # every sibling that exists is tracked by its UID next to the failure
        assert recorded.pop(failing) == ""
        live = {n["metadata"]["name"]: n["metadata"]["uid"] for n in node.kube.shadows()}
        assert recorded == {name: live[name] for name in recorded}
        assert failing in outcome.message  # the failing VF's error is the claim's error
    report = node.worker().run_once()
    assert mn.convergence_problems(node) == [], report
    node.kube.calls.clear()
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert [c for c in node.kube.calls if c[0] in ("nads.create", "pods.patch", "nads.patch")] == []


def test_every_failed_shadow_of_a_claim_is_reported_not_only_the_first(
    node: mn.ManagedNode, caplog: pytest.LogCaptureFixture
) -> None:
    ref = node.add_consumer(THREE_VFS)
    first, last = shadow_name_of(mn.DEV_A0), shadow_name_of(mn.DEV_A1)
    node.kube.fail("nads.create", ko.forbidden, name=first)
    node.kube.fail("nads.create", ko.invalid, name=last)
    outcome = node.prepare(ref)
    assert isinstance(outcome, messages.ClaimError) and first in outcome.message  # device order
    assert any(r.getMessage() == "shadow not ensured" and last in str(r.__dict__) for r in caplog.records)
    recorded = {b.shadow_name: b.shadow_uid for b in node.store.snapshot_claim(ref.uid).managed_bindings()}
    assert recorded[first] == recorded[last] == "" and recorded[shadow_name_of(mn.DEV_B0)]
    assert "annotations" not in node.kube.pod(mn.NS, "consumer")["metadata"]  # nothing published
    assert isinstance(node.prepare(ref), messages.Prepared) and mn.convergence_problems(node) == []


def test_a_lost_create_response_is_adopted_only_after_a_full_identity_check(node: mn.ManagedNode) -> None:
    ref = node.add_consumer(TWO_RAILS)
    node.kube.fail("nads.create", ko.timeout, after=True)
    assert isinstance(node.prepare(ref), messages.ClaimError)
    recorded = {b.shadow_name: b.shadow_uid for b in node.store.snapshot_claim(ref.uid).managed_bindings()}
    (lost,) = [name for name, uid in recorded.items() if not uid]  # the sibling's UID was persisted
    (kept,) = set(recorded) - {lost}
    node.kube.calls.clear()
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert [c for c in node.kube.calls if c[1] == lost] == [("nads.create", lost), ("nads.get", lost)]
    assert [c for c in node.kube.calls if c[1] == kept] == [("nads.get", kept)]  # verified, not recreated
    assert mn.convergence_problems(node) == []


def test_a_prepare_writes_pending_then_the_shadow_uids_then_ready_each_durable_before_the_next_step(
    node: mn.ManagedNode,
) -> None:
    """The prepare's three durable writes (docs/design.md#prepare): ``Pending`` before the first create, the observed UIDs before the Pod
    patch, ``Ready`` before the answer; each write returns only once it is durable (slot file)."""
    ref = node.add_consumer(TWO_RAILS)
    written: list[list[tuple[str, str]]] = []
    node.on_write = lambda data: written.append(
        [
            (b.phase.value, b.shadow_uid)
            for r in codec.decode_checkpoint(data).claims.values()
            for b in r.managed_bindings()
        ]
    )
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert [sorted({phase for phase, _ in w}) for w in written] == [["Pending"], ["Pending"], ["Ready"]]
    assert [all(uid for _, uid in w) for w in written] == [False, True, True]
    assert node.writes == 4, "the empty checkpoint of the first load, then the three"


def test_a_pending_record_without_shadow_uids_adopts_the_live_shadows_by_name_and_releases_them(
    node: mn.ManagedNode,
) -> None:
    """The disk holds only the ``Pending`` record (no UIDs) while both shadows exist, as after a
    lost create response and a crash: the next prepare adopts the live shadows by name after the
    identity check and creates none."""
    ref = node.add_consumer(TWO_RAILS)
    pending: list[bytes] = []
    node.on_write = lambda data: pending.append(data) if not pending else None
    assert run(node, lambda: (write(crash("ready"), skip=2)(node), node.prepare(ref))[1]) == "crashed"
    live = {n["metadata"]["name"]: n["metadata"]["uid"] for n in node.kube.shadows(mn.NS)}
    assert len(live) == 2
    node.replace_disk_checkpoint(pending[0])
    node.on_write = None
    node.restart()
    assert {b.shadow_uid for b in node.store.snapshot_claim(ref.uid).managed_bindings()} == {""}

    node.kube.calls.clear()
    assert isinstance(node.prepare(ref), messages.Prepared)
    recorded = {b.shadow_name: b.shadow_uid for b in node.store.snapshot_claim(ref.uid).managed_bindings()}
    assert recorded == live, "the live shadows were adopted, not replaced"
    assert {n["metadata"]["uid"] for n in node.kube.shadows(mn.NS)} == set(live.values())
    assert mn.convergence_problems(node) == []
    assert node.unprepare(ref) is None
    assert node.kube.shadows(mn.NS) == []


def test_an_unrelated_object_under_the_shadow_name_is_never_overwritten(node: mn.ManagedNode) -> None:
    ref = node.add_consumer(TWO_RAILS)
    node.kube.fail("nads.create", crash("create"), after=True)
    run(node, lambda: node.prepare(ref))
    taken = node.kube.shadows()[0]["metadata"]["name"]
    node.kube.edit_nad(
        mn.NS, taken, lambda o: o["spec"].update(config='{"cniVersion":"1.0.0","type":"sriov"}')
    )
    edited = node.kube.nads[(mn.NS, taken)]["spec"]["config"]
    outcome = node.prepare(ref)
    assert "ShadowConflict" in outcome.message
    assert node.kube.nads[(mn.NS, taken)]["spec"]["config"] == edited
    assert node.phases() == {ref.uid: ["Pending", "Pending"]}
    assert (
        all(name != taken for name, _ in node.selected())
        if "annotations" in node.kube.pod(mn.NS, "consumer")["metadata"]
        else True
    )


def finalizer_guard(node: mn.ManagedNode) -> None:
    """Fail the test if our finalizer is removed while the on-disk checkpoint is not ReleaseComplete."""
    path = node.store.path

    def check(name: str, ops: Any) -> None:
        removing = any(op["op"] == "remove" and op["path"].startswith("/metadata/finalizers/") for op in ops)
        if not removing:
            return
        raw, source = checkpoint_files.read_only(path)
        for record in codec.decode_checkpoint(raw, source=str(source)).claims.values():
            for b in record.managed_bindings():
                if b.shadow_name == name:
                    assert b.phase.value == "ReleaseComplete", (
                        f"finalizer of {name} removed in phase {b.phase}"
                    )

    node.kube.on_nad_patch = check


def foreign_finalizer_race(n: mn.ManagedNode) -> None:
    """Another controller adds and removes its finalizer between our read and our patch."""

    def once() -> None:
        n.kube.hooks.pop("nads.patch")
        for shadow in n.kube.shadows():
            name = shadow["metadata"]["name"]
            n.kube.edit_nad(mn.NS, name, lambda o: o["metadata"]["labels"].update(touched="yes"))

    n.kube.hooks["nads.patch"] = once


RELEASE = {
    "deleting:disk-error": write(OSError(28, "No space left on device"), skip=0),
    "deleting:crash-before": write(crash("deleting"), skip=0),
    "deleting:crash-after": write(crash("deleting"), skip=0, when="after"),
    "shadow-get:forbidden": api("nads.get", ko.forbidden),
    "shadow-get:timeout": api("nads.get", ko.timeout),
    "shadow-delete:forbidden": api("nads.delete", ko.forbidden),
    "shadow-delete:timeout": api("nads.delete", ko.timeout),
    "shadow-delete:lost-response": api("nads.delete", ko.timeout, after=True),
    "shadow-delete:crash-after": api("nads.delete", crash("delete"), after=True),
    "shadow-delete:409": api("nads.delete", ko.conflict),
    "pod-get:timeout": api("pods.get", ko.timeout),
    "pod-get:forbidden": api("pods.get", ko.forbidden),
    "selection-patch:409": api("pods.patch", ko.conflict),
    "selection-patch:422-concurrent-writer": concurrent_pod_edit,
    "selection-patch:forbidden": api("pods.patch", ko.forbidden),
    "selection-patch:lost-response": api("pods.patch", ko.timeout, after=True),
    "selection-patch:crash-after": api("pods.patch", crash("patch"), after=True),
    "host:kill-after-restore": kill("unprepare:restored"),
    "host:kill-after-claim-cdi": kill("unprepare:claim-cdi"),
    "host:kill-after-pod-cdi": kill("unprepare:pod-cdi"),
    "release-complete:disk-error": write(OSError(5, "Input/output error"), skip=1),
    "release-complete:crash-before": write(crash("rc"), skip=1),
    "release-complete:crash-after": write(crash("rc"), skip=1, when="after"),
    "finalizer-patch:422": api("nads.patch", ko.invalid),
    "finalizer-patch:422-concurrent-writer": foreign_finalizer_race,
    "finalizer-patch:409": api("nads.patch", ko.conflict),
    "finalizer-patch:forbidden": api("nads.patch", ko.forbidden),
    "finalizer-patch:lost-response": api("nads.patch", ko.timeout, after=True),
    "finalizer-patch:crash-after": api("nads.patch", crash("finalizer"), after=True),
    "status-clear:kill-after": kill("unprepare:status"),
    "record-delete:disk-error": write(OSError(5, "Input/output error"), skip=2),
    "record-delete:crash-before": write(crash("delete"), skip=2),
    "record-delete:crash-after": write(crash("delete"), skip=2, when="after"),
}


def _release_phase(case: str) -> str | None:
    if case.startswith("deleting:") and case != "deleting:crash-after":
        return "Ready"  # Deleting never became durable: nothing was released
    if (
        case in ("selection-patch:409", "selection-patch:422-concurrent-writer")
        or (
            case.startswith("finalizer-patch:")
            and case not in ("finalizer-patch:forbidden", "finalizer-patch:crash-after")
        )
        or case == "record-delete:crash-after"
    ):
        return None  # retried inline, or the last write was durable: the release finished
    if (
        case.startswith(("finalizer-patch:", "record-delete:", "status-clear:"))
        or case == "release-complete:crash-after"
    ):
        return "ReleaseComplete"
    return "Deleting"


@pytest.mark.parametrize("case", list(RELEASE), ids=list(RELEASE))
def test_release_faults_end_clean_and_never_unprotect_early(node: mn.ManagedNode, case: str) -> None:
    ref = node.add_consumer(TWO_RAILS)
    assert isinstance(node.prepare(ref), messages.Prepared)
    finalizer_guard(node)
    RELEASE[case](node)
    outcome = run(node, lambda: node.unprepare(ref))
    want = _release_phase(case)
    assert node.phases() == ({ref.uid: [want, want]} if want else {})
    assert outcome == "crashed" or (outcome is None) == (want is None)
    finalizer_guard(node)
    node.worker().run_once()
    assert run(node, lambda: node.unprepare(ref)) is None  # the kubelet retries unprepare until success
    assert mn.clean_problems(node) == []


def test_a_managed_release_reaches_the_unprepare_fault_points_in_the_documented_order(
    node: mn.ManagedNode,
) -> None:
    ref = node.add_consumer(TWO_RAILS)
    assert isinstance(node.prepare(ref), messages.Prepared)
    node.points.clear()
    assert node.unprepare(ref) is None
    assert tuple(node.points) == faults.UNPREPARE_POINTS


@pytest.mark.parametrize("finisher", ["kubelet-retry", "worker"])
@pytest.mark.parametrize("point", faults.UNPREPARE_POINTS, ids=list(faults.UNPREPARE_POINTS))
def test_a_managed_release_killed_at_any_step_clears_claim_status_before_the_record_goes(
    node: mn.ManagedNode, point: str, finisher: str
) -> None:
    ref = node.add_consumer(TWO_RAILS)
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert len(mn.our_status_entries(node)) == 2  # the prepare's diagnostic status.devices entries
    node.kill_at = point
    assert run(node, lambda: node.unprepare(ref)) == "crashed"
    if point == "unprepare:status":  # cleared, but the record is still on disk: the retry repeats it
        assert mn.our_status_entries(node) == [] and node.phases() == {ref.uid: ["ReleaseComplete"] * 2}
    # never forgotten while stale entries remain: no later call would find them
    assert node.store.all_claims() or mn.our_status_entries(node) == []
    if finisher == "worker":  # the worker may finish first; the kubelet's retry then finds no record
        node.worker().run_once()
        assert node.store.all_claims() == {}
    assert node.unprepare(ref) is None
    assert mn.clean_problems(node) == []


@pytest.mark.parametrize(
    ("inject", "host_releases"),
    [
        pytest.param(
            write(crash("deleting"), skip=0, when="after"), 1, id="deleting-durable:worker-releases-host"
        ),
        pytest.param(write(crash("rc"), skip=1, when="after"), 0, id="release-complete-durable:api-only"),
    ],
)
def test_the_worker_resumes_an_authorized_release_and_never_repeats_host_cleanup(
    node: mn.ManagedNode, inject: Inject, host_releases: int
) -> None:
    ref = node.add_consumer(TWO_RAILS)
    node.prepare(ref)
    inject(node)
    assert run(node, lambda: node.unprepare(ref)) == "crashed"
    report = node.worker().run_once()
    assert report.released == [ref.uid]
    assert node.worker_host_releases == host_releases
    assert mn.clean_problems(node) == []


def test_the_worker_never_releases_a_ready_binding_when_the_pod_or_shadow_goes_away(
    node: mn.ManagedNode,
) -> None:
    ref = node.add_consumer(TWO_RAILS)
    node.prepare(ref)
    first = node.kube.shadows()[0]["metadata"]["name"]
    node.kube.delete_nad_now(mn.NS, first)  # someone deletes a shadow of a live Pod
    report = node.worker().run_once()
    assert node.phases() == {ref.uid: ["Ready", "Ready"]} and node.worker_host_releases == 0
    assert "ShadowDeletionPending" in report.failed.get(
        f"pod/{node.store.snapshot_claim(ref.uid).pod_uid}", ""
    )
    assert "ShadowDeletionPending" in node.events.reasons()
    assert (first, True, True) in node.shadow_state()  # kept, protected, never recreated
    node.kube.delete_pod(mn.NS, "consumer")
    report = node.worker().run_once()
    assert node.phases() == {ref.uid: ["Ready", "Ready"]} and node.worker_host_releases == 0
    assert node.unprepare(ref) is None and mn.clean_problems(node, pod=None) == []


def test_repair_recreates_a_truly_missing_shadow_and_restores_selections_and_finalizer(
    node: mn.ManagedNode,
) -> None:
    ref = node.add_consumer(TWO_RAILS)
    node.prepare(ref)
    gone, unprotected = (n["metadata"]["name"] for n in node.kube.shadows())
    old_uid = node.kube.nads[(mn.NS, gone)]["metadata"]["uid"]
    node.kube.nads.pop((mn.NS, gone))  # force-deleted (finalizer stripped by someone)
    node.kube.edit_nad(mn.NS, unprotected, lambda o: o["metadata"].update(finalizers=[]))
    node.kube.edit_pod(mn.NS, "consumer", lambda p: p["metadata"].update(annotations={}))
    report = node.worker().run_once()
    assert mn.convergence_problems(node) == [], report
    assert node.kube.nads[(mn.NS, gone)]["metadata"]["uid"] != old_uid
    assert "ShadowRepaired" in node.events.reasons()
    assert node.metrics.repair_seconds.collect()[0].samples[-1].value >= 1  # one repair observed (count)


def test_a_failing_pod_is_retried_with_capped_backoff_and_one_event(node: mn.ManagedNode) -> None:
    ref = node.add_consumer(TWO_RAILS)
    node.prepare(ref)
    node.kube.edit_pod(mn.NS, "consumer", lambda p: p["metadata"].update(annotations={}))
    node.kube.fail("pods.patch", ko.forbidden, times=100)
    worker = node.worker(first_retry_s=5, max_retry_s=20, orphan_interval_s=10_000)
    key = f"pod/{node.store.snapshot_claim(ref.uid).pod_uid}"
    attempts = 0
    for _ in range(12):
        before = len([c for c in node.kube.calls if c[0] == "pods.patch"])
        report = worker.run_once()
        attempts += len([c for c in node.kube.calls if c[0] == "pods.patch"]) > before
        assert key in report.failed or key in report.deferred
        node.clock.now += 5
    assert 3 <= attempts <= 6  # 5 s, 10 s, 20 s, 20 s ... over 60 s, not every pass
    assert node.events.reasons().count("ApiForbidden") == 1
    node.kube.faults.clear()
    node.clock.now += 30
    worker.run_once()
    assert mn.convergence_problems(node) == []


def test_a_shadow_held_by_a_foreign_finalizer_is_reported_not_waited_for(node: mn.ManagedNode) -> None:
    ref = node.add_consumer(TWO_RAILS)
    node.prepare(ref)
    held = node.kube.shadows()[0]["metadata"]["name"]
    node.kube.edit_nad(mn.NS, held, lambda o: o["metadata"]["finalizers"].append("example.com/audit"))
    assert node.unprepare(ref) is None
    assert node.store.all_claims() == {}
    assert node.kube.nads[(mn.NS, held)]["metadata"]["finalizers"] == ["example.com/audit"]
    assert node.kube.nads[(mn.NS, held)]["metadata"].get("deletionTimestamp")
    assert names.FINALIZER_ATTACHMENT_PROTECTION not in str(node.kube.nads[(mn.NS, held)])


def test_a_hardware_failure_before_any_api_write_rolls_back_the_new_claim_completely(
    node: mn.ManagedNode,
) -> None:

    ref = node.add_consumer(TWO_RAILS, configs=[fx.config(fx.vf_config(driver="vfio-pci"))])
    outcome = node.prepare(ref)
    assert isinstance(outcome, messages.ClaimError) and "netdevice" in outcome.message.lower()
    assert node.store.all_claims() == {} and node.kube.shadows() == []
    assert [c for c in node.kube.calls if c[0] in ("nads.create", "pods.patch")] == []
    assert node.drivers() == ["iavf"] * 4 and node.cdi_files() == []


def test_a_new_pod_waits_with_claim_release_in_progress_until_the_record_is_gone(
    node: mn.ManagedNode,
) -> None:

    ref = node.add_consumer([("nic", mn.DEV_A0)], template=False)
    node.prepare(ref)
    node.kube.fail("nads.patch", ko.forbidden)  # finalizer removal refused: ReleaseComplete kept
    assert isinstance(node.unprepare(ref), messages.ClaimError)
    assert node.phases() == {ref.uid: ["ReleaseComplete"]}
    second = "22222222-3333-4444-5555-666666666666"
    node.claims.stored(mn.NS, "vf-claim")["status"]["reservedFor"] = [
        {"resource": "pods", "name": "second", "uid": second}
    ]
    node.kube.add_pod(mn.pod_json("second", second, [("devices", "vf-claim", False)]))
    waiting = node.prepare(ref)
    assert isinstance(waiting, messages.ClaimError) and "ClaimReleaseInProgress" in waiting.message
    assert "annotations" not in node.kube.pod(mn.NS, "second")["metadata"]
    assert node.unprepare(ref) is None
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert mn.convergence_problems(node, pod="second") == []
