"""The diagnostic claim status write of a managed prepare runs beside the Pod patch.

The claim status is best-effort and not a connectivity barrier (docs/design.md#prepare), so the
prepare writes it concurrently with the Pod patch: never before the claim's host stage and shadows
exist (the shadow-UID checkpoint is durable first), always finished before the handler returns (no
status write outlives the operation locks), and ``Ready`` does not wait for it. The fake Pod patch
and status write meet at a barrier, so a serial implementation fails the overlap test (barrier
timeout) instead of passing it by luck. A failed or hanging status write (bounded by its request
timeout) never fails the prepare.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from tests.fakes import kube_objects as ko
from tests.fakes import managed_node as mn
from tests.host.driver.managed import test_concurrency as tc

from sriov_dra.kube import errors as kube_errors
from sriov_dra.kubeletapi import messages

TWO_VFS = [("nic-0", mn.DEV_A0), ("nic-1", mn.DEV_B0)]


class Recorder:
    """Side-effect log of one prepare: checkpoint writes, shadow creates, the Pod patch and the
    claim status write (start and end), in the order they happened."""

    def __init__(self, node: mn.ManagedNode, monkeypatch: pytest.MonkeyPatch, *, barrier: bool) -> None:
        self.log: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.barrier = threading.Barrier(2, timeout=10) if barrier else None
        self.status_body: Callable[[], None] = lambda: None
        self.ready = threading.Event()

        def on_write(data: bytes) -> None:
            kind = tc.checkpoint_kind(data)
            self.note("checkpoint", kind)
            if kind == "ready":
                self.ready.set()

        node.on_write = on_write
        pods, nads, claims = node.attach.pods, node.attach.nads, node.claims
        status = claims.update_device_status
        recorder = self

        class Pods:
            def __getattr__(self, attr: str) -> Any:
                return getattr(pods, attr)

            def json_patch(self, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]) -> Any:
                return recorder.around("patch", lambda: pods.json_patch(namespace, name, ops))

        class Nads:
            def __getattr__(self, attr: str) -> Any:
                return getattr(nads, attr)

            def create(self, body: dict[str, Any]) -> Any:
                recorder.note("create-start", body["metadata"]["name"])
                try:
                    return nads.create(body)
                finally:
                    recorder.note("create-end", body["metadata"]["name"])

        def update_device_status(*args: Any, **kwargs: Any) -> bool:
            def write() -> bool:
                self.status_body()
                return status(*args, **kwargs)

            return bool(recorder.around("status", write))

        node.attach.pods = Pods()
        node.attach.nads = Nads()  # type: ignore[assignment]
        monkeypatch.setattr(claims, "update_device_status", update_device_status)

    def note(self, event: str, detail: str = "") -> None:
        with self.lock:
            self.log.append((event, detail))

    def around(self, name: str, call: Callable[[], Any]) -> Any:
        self.note(f"{name}-start")
        try:
            if self.barrier is not None:
                self.barrier.wait()  # both in flight at once, or BrokenBarrierError
            return call()
        finally:
            self.note(f"{name}-end")

    def at(self, event: str, detail: str = "") -> int:
        return self.log.index((event, detail))

    def last(self, event: str) -> int:
        return max(i for i, (e, _) in enumerate(self.log) if e == event)


def test_the_claim_status_write_overlaps_the_pod_patch_after_the_shadow_uids_and_before_ready(
    node: mn.ManagedNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = node.add_consumer(TWO_VFS)
    rec = Recorder(node, monkeypatch, barrier=True)
    assert isinstance(node.prepare(ref), messages.Prepared)
    uids, ready = rec.at("checkpoint", "uids"), rec.at("checkpoint", "ready")
    assert rec.last("create-end") < uids < rec.at("status-start")
    assert uids < rec.at("patch-start") and rec.at("patch-end") < ready
    assert [e for e in rec.log if e[0] == "checkpoint"] == [
        ("checkpoint", "pending"),
        ("checkpoint", "uids"),
        ("checkpoint", "ready"),
    ]
    assert node.claims.status_writes == 1 and mn.convergence_problems(node) == []
    assert "prepare:pod-cdi" in node.points  # the host stage completed before the pass started


def test_with_one_request_in_flight_the_status_write_follows_the_pod_patch(
    node: mn.ManagedNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = node.add_consumer(TWO_VFS)
    node.attach.max_in_flight = 1
    rec = Recorder(node, monkeypatch, barrier=False)
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert rec.at("patch-end") < rec.at("checkpoint", "ready") < rec.at("status-start") < rec.at("status-end")


def test_ready_is_persisted_while_a_slow_status_write_is_still_in_flight(
    node: mn.ManagedNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = node.add_consumer(TWO_VFS)
    rec = Recorder(node, monkeypatch, barrier=False)
    rec.status_body = lambda: (
        None if rec.ready.wait(timeout=10) else pytest.fail("Ready waited for the status")
    )
    assert isinstance(node.prepare(ref), messages.Prepared)
    rec.note("returned")
    assert rec.at("checkpoint", "ready") < rec.at("status-end") < rec.at("returned")
    assert node.claims.status_writes == 1 and mn.convergence_problems(node) == []


def _forbidden() -> None:
    raise kube_errors.Forbidden("patch resourceclaims status: HTTP 403", status=403)


def _hang_until_timeout() -> None:
    threading.Event().wait(0.3)  # the claim client's request timeout, scaled down
    raise ko.timeout("patch resourceclaims status")


@pytest.mark.parametrize(
    "status_body",
    [_forbidden, _hang_until_timeout],
    ids=["status-write-refused", "status-write-hangs-until-its-request-timeout"],
)
def test_a_failed_or_hanging_status_write_does_not_fail_the_managed_prepare(
    node: mn.ManagedNode, monkeypatch: pytest.MonkeyPatch, status_body: Callable[[], None]
) -> None:
    ref = node.add_consumer(TWO_VFS)
    rec = Recorder(node, monkeypatch, barrier=False)
    rec.status_body = status_body
    assert isinstance(node.prepare(ref), messages.Prepared)
    rec.note("returned")
    assert rec.at("status-end") < rec.at("returned")  # joined before the handler returns, not abandoned
    assert node.phases() == {ref.uid: ["Ready", "Ready"]} and node.claims.status_writes == 0
    assert mn.convergence_problems(node) == []


def test_a_claim_whose_shadow_failed_gets_no_status_write(
    node: mn.ManagedNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = node.add_consumer(TWO_VFS)
    rec = Recorder(node, monkeypatch, barrier=False)
    node.kube.fail("nads.create", ko.forbidden)
    assert isinstance(node.prepare(ref), messages.ClaimError)
    assert ("status-start", "") not in rec.log and node.claims.status_writes == 0


def test_an_entry_written_beside_a_failed_pod_patch_is_removed_by_the_unprepare(
    node: mn.ManagedNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = node.add_consumer(TWO_VFS)
    rec = Recorder(node, monkeypatch, barrier=True)
    node.kube.fail("pods.patch", ko.forbidden)
    assert isinstance(node.prepare(ref), messages.ClaimError)
    assert rec.at("status-end") >= 0 and ("checkpoint", "ready") not in rec.log
    assert len(node.claims.stored(mn.NS, ref.name)["status"]["devices"]) == 2  # hardware stays prepared
    rec.barrier = None  # the unprepare's status write has no Pod patch beside it
    assert node.unprepare(ref) is None
    assert node.claims.stored(mn.NS, ref.name)["status"]["devices"] == []
    assert node.store.snapshot_claim(ref.uid) is None
