"""A managed release issues each step's shadow requests together and keeps the order between steps.

Steps 1, 2 and 7–8 of docs/design.md#release run their shadows' requests concurrently (``fanout``,
``--api-max-in-flight``); every request of a step finishes before the next step begins, and a
failed request fails the release only after its step's other requests finished, with every
shadow still protected.
"""

from __future__ import annotations

import threading

from tests.fakes import kube_objects as ko
from tests.fakes import managed_node as mn

from sriov_dra.kubeletapi import messages

FOUR_VFS = [("nic-0", mn.DEV_A0), ("nic-1", mn.DEV_B0), ("nic-2", mn.DEV_A1), ("nic-3", mn.DEV_B1)]


def _prepared(node: mn.ManagedNode) -> messages.ClaimRef:
    ref = node.add_consumer(FOUR_VFS)
    assert isinstance(node.prepare(ref), messages.Prepared)
    node.kube.calls.clear()
    return ref


def test_every_shadow_request_of_a_release_step_is_in_flight_at_once(node: mn.ManagedNode) -> None:
    ref = _prepared(node)
    # Each NAD read, deletion and finalizer patch waits until all four shadows' requests of the same
    # kind arrived: a release that issued them one after the other breaks the barrier and fails.
    together = threading.Barrier(len(FOUR_VFS), timeout=30)
    for op in ("nads.get", "nads.delete", "nads.patch"):
        node.kube.hooks[op] = together.wait
    assert node.unprepare(ref) is None
    assert not together.broken
    assert mn.clean_problems(node) == []


def test_each_release_step_finishes_for_every_shadow_before_the_next_begins(node: mn.ManagedNode) -> None:
    ref = _prepared(node)
    shadows = {n["metadata"]["name"] for n in node.kube.shadows()}
    phases_at_patch: list[dict[str, list[str]]] = []
    node.kube.hooks["nads.patch"] = lambda: phases_at_patch.append(node.phases())
    assert node.unprepare(ref) is None
    assert mn.clean_problems(node) == []
    ops = [op for op, _ in node.kube.calls]
    k = len(shadows)
    assert ops[:k] == ["nads.get"] * k  # step 1: every shadow read and verified
    assert ops[k : 2 * k] == ["nads.delete"] * k  # step 2: then every deletion requested
    assert ops[2 * k : 2 * k + 2] == ["pods.get", "pods.patch"]  # step 3: then the selections
    finalize = node.kube.calls[2 * k + 2 :]
    assert sorted(op for op, _ in finalize) == ["nads.get"] * k + ["nads.patch"] * k
    for name in shadows:  # steps 7-8: each shadow re-read, then only our finalizer removed
        mine = [op for op, n in finalize if n == name]
        assert mine == ["nads.get", "nads.patch"]
    assert {n for op, n in node.kube.calls[:k]} == shadows
    # no finalizer is removed before ReleaseComplete is durable
    assert phases_at_patch and all(p == {ref.uid: ["ReleaseComplete"] * k} for p in phases_at_patch)


def test_a_failed_deletion_fails_the_release_after_the_others_with_every_shadow_protected(
    node: mn.ManagedNode,
) -> None:
    ref = _prepared(node)
    failing = sorted(n["metadata"]["name"] for n in node.kube.shadows())[1]
    node.kube.fail("nads.delete", ko.forbidden, name=failing)
    assert node.unprepare(ref) is not None
    state = {name: (protected, terminating) for name, protected, terminating in node.shadow_state()}
    assert all(protected for protected, _ in state.values())  # nothing unprotected before release
    assert {n for n, (_, terminating) in state.items() if not terminating} == {failing}
    assert node.phases() == {ref.uid: ["Deleting"] * len(FOUR_VFS)}
    assert node.cdi_files()  # the host is released only after the API cleanup
    assert node.unprepare(ref) is None  # the kubelet retries until success
    assert mn.clean_problems(node) == []
