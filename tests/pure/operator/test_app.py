"""Tests for sriov_dra.operator.app.Operator wiring: resync coverage and contained reconcile failures."""

from __future__ import annotations

import threading

import pytest
from tests.fakes import operator_objects as oo
from tests.fakes.objects_api import FakeObjects

from sriov_dra.core.operator import network_refs
from sriov_dra.kube import watches as kube_watches
from sriov_dra.operator import app, metrics, queue, settings


@pytest.fixture
def operator() -> app.Operator:
    config = settings.OperatorSettings(reconcile=settings.ReconcileSettings(namespace=oo.OP_NS))
    return app.Operator(FakeObjects(), config, metrics.Metrics())  # type: ignore[arg-type]


def test_resync_requeues_every_network_including_ones_only_named_by_nad_markers(
    operator: app.Operator,
) -> None:
    operator.router.on_network(kube_watches.ADDED, oo.sriov_network("rail-a-net", uid="u-a"))
    ghost = network_refs.owner_marker(network_refs.ObjectRef(oo.OP_NS, "ghost"))
    operator.router.on_nad(
        kube_watches.ADDED,
        {
            "metadata": {
                "name": "ghost",
                "namespace": "x",
                "annotations": {network_refs.OWNER_REF_ANNOTATION: ghost},
            }
        },
    )
    stop = threading.Event()
    while operator.queue.pending():  # process (drop) what the events queued
        operator.queue.done(operator.queue.get(stop))  # type: ignore[arg-type]
    operator.resync()
    assert operator.queue.pending() == [
        queue.network_key(oo.OP_NS, "ghost"),
        queue.network_key(oo.OP_NS, "rail-a-net"),
        queue.POLICIES,
    ]


def test_a_crashing_reconcile_is_contained_and_counted(
    operator: app.Operator, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom() -> None:
        raise RuntimeError("unexpected")

    monkeypatch.setattr(operator.policies, "reconcile", boom)
    assert operator.process(queue.POLICIES) is False
    sample = operator.metrics.registry.get_sample_value(
        "sriov_dra_operator_reconcile_total", {"controller": "policies", "outcome": "error"}
    )
    assert sample == 1.0


def test_watches_cover_the_five_sources(operator: app.Operator) -> None:
    assert sorted(operator.watchers) == ["nads", "namespaces", "networks", "nodes", "policies"]


@pytest.mark.parametrize(
    ("leading", "age", "ready"),
    [(True, None, True), (False, None, False), (False, 3.0, True), (False, 15.0, True), (False, 15.1, False)],
)
def test_a_standby_is_ready_only_while_the_api_server_answers_its_lease_reads(
    leading: bool, age: float | None, ready: bool
) -> None:
    ok, why = app.standby_ready(leading, age, 15.0)
    assert ok is ready
    assert (why == "") is ready and (ready or "standby" in why)
