"""driver.managed.pod_selections: the conditional Pod patch, its bounded re-read loop, registry UID refresh."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest
from tests.fakes import kube_objects as ko

from sriov_dra.core import registry
from sriov_dra.driver.managed import pod_selections
from sriov_dra_rules import errors, names

from .conftest import NS, POD_UID, record

REC = record("0000-03-02-0", "0000-03-02-1")


def pod(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "consumer", "namespace": NS, "uid": POD_UID}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": "node-a"}}


def setup() -> tuple[ko.FakeKube, ko.PodView, ko.FakeClock, dict[str, Any]]:
    kube = ko.FakeKube()
    live = kube.add_pod(pod())
    return kube, ko.PodView(kube), ko.FakeClock(), live


def ensure(
    pods: ko.PodView,
    pod: dict[str, Any],
    clock: ko.FakeClock,
    records: tuple[Any, ...] = (REC,),
    **options: Any,
) -> bool:
    """``pod_selections.ensure_selections`` for the intended entries of ``records``; no re-verify unless ``options`` give one."""
    options.setdefault("reverify", lambda _p: None)
    return pod_selections.ensure_selections(
        pods=pods, pod=pod, entries=pod_selections.intended_entries(list(records)), clock=clock, **options
    )


def test_entries_are_in_natural_interface_order() -> None:
    rec = record(*(f"0000-03-02-{i}" for i in range(3)))
    devices = list(rec.devices)
    devices[0] = replace(
        devices[0], interface_name="dra10", managed=replace(devices[0].managed, interface="dra10")
    )
    rec = replace(rec, devices=tuple(devices))
    assert [e.entry.interface for e in pod_selections.intended_entries([rec])] == ["dra1", "dra2", "dra10"]


def test_one_patch_publishes_selections_and_registry_then_repeats_write_nothing() -> None:
    kube, pods, clock, live = setup()
    assert ensure(pods, live, clock)
    stored = kube.pod(NS, "consumer")["metadata"]["annotations"]
    assert [s["interface"] for s in json.loads(stored[names.NETWORKS_ANNOTATION])] == ["dra0", "dra1"]
    again = kube.pod(NS, "consumer")
    assert not ensure(pods, again, clock)
    assert [op for op, _ in kube.calls] == ["pods.patch"]


def test_a_stale_read_is_recomputed_from_the_live_pod_and_keeps_the_other_writer() -> None:
    kube, pods, clock, live = setup()
    kube.edit_pod(NS, "consumer", lambda p: p["metadata"].setdefault("annotations", {}).update(other="kept"))
    checked: list[str] = []
    ensure(pods, live, clock, reverify=lambda p: checked.append(p["metadata"]["resourceVersion"]))
    stored = kube.pod(NS, "consumer")["metadata"]["annotations"]
    assert stored["other"] == "kept" and names.MANAGED_NETWORKS_ANNOTATION in stored
    assert len(checked) == 1 and clock.slept == [0.05]  # one re-read, re-verified, one backoff


def test_a_422_without_any_change_is_a_real_error_not_a_retry_loop() -> None:
    kube, pods, clock, live = setup()
    kube.fail("pods.patch", ko.invalid)
    with pytest.raises(ko.kube_errors.Invalid):
        ensure(pods, live, clock)
    assert [op for op, _ in kube.calls] == ["pods.patch", "pods.get"]


def test_conflicts_stop_after_the_bounded_attempts() -> None:
    kube, pods, clock, live = setup()
    kube.fail("pods.patch", ko.conflict, times=10)
    with pytest.raises(errors.Conflict, match="kept changing"):
        ensure(
            pods,
            live,
            clock,
            backoff=pod_selections.Backoff(attempts=3, first_s=0.1, max_s=0.15),
        )
    assert clock.slept == [0.1, 0.15]


def test_reverify_stops_writing_to_a_replaced_pod() -> None:
    kube, pods, clock, live = setup()
    kube.edit_pod(NS, "consumer", lambda p: p["metadata"].update(deletionTimestamp="2026-11-30T00:00:00Z"))

    def refuse(p: dict[str, Any]) -> None:
        if p["metadata"].get("deletionTimestamp"):
            raise errors.LifecycleBlocked("terminating")

    with pytest.raises(errors.LifecycleBlocked):
        ensure(pods, live, clock, reverify=refuse)
    assert "annotations" not in kube.pod(NS, "consumer")["metadata"]


def test_a_registry_uid_replaced_by_repair_is_rewritten_in_the_same_patch() -> None:
    kube, pods, clock, live = setup()
    ensure(pods, live, clock)
    devices = list(REC.devices)
    devices[1] = replace(
        devices[1], managed=replace(devices[1].managed, shadow_uid="77777777-0000-4000-8000-000000000000")
    )
    recreated = replace(REC, devices=tuple(devices))
    before = copy.deepcopy(kube.pod(NS, "consumer")["metadata"]["annotations"][names.NETWORKS_ANNOTATION])
    assert ensure(pods, kube.pod(NS, "consumer"), clock, (recreated,))
    stored = kube.pod(NS, "consumer")["metadata"]["annotations"]
    assert stored[names.NETWORKS_ANNOTATION] == before
    uids = [e.uid for e in registry.decode_registry(stored[names.MANAGED_NETWORKS_ANNOTATION]).entries]
    assert uids[1] == "77777777-0000-4000-8000-000000000000"


def test_removal_touches_only_this_claim_and_ignores_a_missing_or_replaced_pod() -> None:
    kube, pods, clock, live = setup()
    other = record("0000-03-02-5", claim_uid="c1a1c1a1-0000-4000-8000-000000000002", first_interface=2)
    ensure(pods, live, clock, (REC, other))
    assert pod_selections.remove_claim_selections(
        pods=pods, namespace=NS, name="consumer", pod_uid=POD_UID, claim_uid=REC.claim_uid, clock=clock
    )
    stored = kube.pod(NS, "consumer")["metadata"]["annotations"]
    assert [
        e.claim_uid for e in registry.decode_registry(stored[names.MANAGED_NETWORKS_ANNOTATION]).entries
    ] == [other.claim_uid]
    assert not pod_selections.remove_claim_selections(
        pods=pods,
        namespace=NS,
        name="consumer",
        pod_uid="22222222-3333-4444-5555-666666666666",
        claim_uid=other.claim_uid,
        clock=clock,
    )
    assert not pod_selections.remove_claim_selections(
        pods=pods, namespace=NS, name="gone", pod_uid=POD_UID, claim_uid=other.claim_uid, clock=clock
    )
