"""Concurrency inside one ordered step of a managed prepare, on the fake node.

The source NAD GETs of a plan and the shadow creates of a claim run concurrently (bounded), but
never across an ordering boundary of docs/design.md#prepare: every create starts after the ``Pending``
checkpoint is durable and ends before the checkpoint that records the shadow UIDs; every source
read finishes before the first checkpoint write. The fake API holds each call at a barrier until
all of its siblings are in flight, so a sequential implementation fails these tests (barrier
timeout) instead of passing them by luck.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from tests.fakes import kube_objects as ko
from tests.fakes import managed_node as mn

from sriov_dra.kubeletapi import messages

THREE_VFS = [("nic-0", mn.DEV_A0), ("nic-1", mn.DEV_B0), ("nic-2", mn.DEV_A1)]


class GatedNads:
    """Wraps the FAKE NAD API: records start/end of every call in ``log`` and holds the calls
    named in ``gated`` at a barrier until ``parties`` of them are in flight at once."""

    def __init__(self, inner: ko.NadView, log: list[tuple[str, str]], *, gated: str, parties: int) -> None:
        self.inner, self.log, self.gated = inner, log, gated
        self.barrier = threading.Barrier(parties, timeout=10)
        self.lock = threading.Lock()

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)

    def _call(self, op: str, name: str, run: Any) -> Any:
        with self.lock:
            self.log.append((f"{op}-start", name))
        if op == self.gated:
            self.barrier.wait()  # raises BrokenBarrierError if the siblings never get in flight
        try:
            return run()
        finally:
            with self.lock:
                self.log.append((f"{op}-end", name))

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        return self._call("get", name, lambda: self.inner.get(namespace, name))  # type: ignore[no-any-return]

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("create", body["metadata"]["name"], lambda: self.inner.create(body))  # type: ignore[no-any-return]


def checkpoint_kind(data: bytes) -> str:
    """``pending`` / ``uids`` / ``ready`` for a checkpoint holding the consumer's claim."""
    claims = json.loads(data)["data"]["claims"]
    bindings = [d["managedBinding"] for c in claims.values() for d in c["devices"] if "managedBinding" in d]
    if not bindings:
        return "empty"
    if all(b["phase"] == "Ready" for b in bindings):
        return "ready"
    return "uids" if all(b["shadowUID"] for b in bindings) else "pending"


def recording(node: mn.ManagedNode, *, gated: str, parties: int) -> list[tuple[str, str]]:
    log: list[tuple[str, str]] = []
    gate = GatedNads(node.attach.nads, log, gated=gated, parties=parties)  # type: ignore[arg-type]
    node.attach.nads = gate  # type: ignore[assignment]
    node.on_write = lambda data: log.append(("checkpoint", checkpoint_kind(data)))
    return log


def test_shadow_creates_run_concurrently_after_the_pending_write_and_before_the_uid_write(
    node: mn.ManagedNode,
) -> None:
    ref = node.add_consumer(THREE_VFS)
    log = recording(node, gated="create", parties=3)
    assert isinstance(node.prepare(ref), messages.Prepared)
    pending = log.index(("checkpoint", "pending"))
    uids = log.index(("checkpoint", "uids"))
    creates = [i for i, (event, _) in enumerate(log) if event.startswith("create-")]
    assert len(creates) == 6  # three starts, three ends, all three in flight at once (the barrier)
    assert pending < min(creates) and max(creates) < uids
    assert [e for e in log if e[0] == "checkpoint"] == [
        ("checkpoint", "pending"),
        ("checkpoint", "uids"),
        ("checkpoint", "ready"),
    ]
    assert mn.convergence_problems(node) == []


def test_source_reads_run_concurrently_and_finish_before_the_pending_write(node: mn.ManagedNode) -> None:
    ref = node.add_consumer(THREE_VFS)  # two distinct sources: rail-a-net (twice) and rail-b-net
    log = recording(node, gated="get", parties=2)
    assert isinstance(node.prepare(ref), messages.Prepared)
    reads = [i for i, (event, _) in enumerate(log) if event.startswith("get-")]
    assert sorted(name for event, name in log if event == "get-start") == ["rail-a-net", "rail-b-net"]
    assert max(reads) < log.index(("checkpoint", "pending"))


def test_a_failed_source_read_is_reported_after_every_read_finished_and_nothing_is_written(
    node: mn.ManagedNode,
) -> None:
    ref = node.add_consumer(THREE_VFS)
    log = recording(node, gated="get", parties=2)
    node.kube.nads.pop((mn.NS, "rail-b-net"))
    outcome = node.prepare(ref)
    assert isinstance(outcome, messages.ClaimError) and "MissingNetworkTemplate" in outcome.message
    assert ("get-end", "rail-a-net") in log and ("get-end", "rail-b-net") in log
    assert [e for e in log if e[0] == "checkpoint"] == [] and node.kube.shadows() == []


@pytest.mark.parametrize("vfs", [1, 3], ids=["one-vf-runs-inline", "three-vfs-fan-out"])
def test_the_happy_path_request_count_is_unchanged_by_the_fan_out(node: mn.ManagedNode, vfs: int) -> None:
    ref = node.add_consumer(THREE_VFS[:vfs])
    assert isinstance(node.prepare(ref), messages.Prepared)
    ops = sorted(op for op, _ in node.kube.calls)
    sources = len({mn.DEV_A0, mn.DEV_B0} & {d for _, d in THREE_VFS[:vfs]})
    assert ops == sorted(["pods.get", "pods.patch"] + ["nads.get"] * sources + ["nads.create"] * vfs)
    assert node.claims.gets == 1
