"""driver.managed.observe: bounded metric labels, Events only on transitions, Event failures contained."""

from __future__ import annotations

import prometheus_client
import pytest
from tests.fakes import kube_objects as ko

from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import observe
from sriov_dra_rules import errors

from .conftest import record, with_phase


@pytest.mark.parametrize(
    ("exc", "label"),
    [
        pytest.param(
            errors.LifecycleBlocked("x", reason=errors.Reason.SHADOW_DELETION_PENDING),
            "ShadowDeletionPending",
            id="our-reason",
        ),
        pytest.param(ko.forbidden("create nads"), "ApiForbidden", id="api-class"),
        pytest.param(OSError(28, "full"), "OSError", id="other-class"),
    ],
)
def test_failure_labels_are_bounded_names_never_objects(exc, label) -> None:
    metrics = observe.ManagedMetrics(prometheus_client.CollectorRegistry())
    metrics.failed("repair", exc)
    samples = {
        (s.labels["operation"], s.labels["reason"])
        for s in metrics.failures.collect()[0].samples
        if s.name.endswith("_total")
    }
    assert samples == {("repair", label)}


def test_phase_gauge_counts_every_binding_by_phase() -> None:
    metrics = observe.ManagedMetrics(prometheus_client.CollectorRegistry())
    metrics.count_phases(
        [
            record("0000-03-02-0", "0000-03-02-1"),
            with_phase(
                record("0000-03-02-2", claim_uid="c1a1c1a1-0000-4000-8000-000000000002"), model.Phase.DELETING
            ),
        ]
    )
    values = {s.labels["phase"]: s.value for s in metrics.bindings.collect()[0].samples}
    assert values == {"Pending": 0, "Ready": 2, "Deleting": 1, "ReleaseComplete": 0}


def test_an_event_is_emitted_once_per_transition_and_its_failure_is_contained() -> None:
    events = ko.RecordedEvents()
    reporter = observe.Reporter(events, observe.ManagedMetrics(prometheus_client.CollectorRegistry()))
    for _ in range(3):
        reporter.event(
            observe.POD,
            "ns",
            "p",
            "u",
            reason="ShadowDeletionPending",
            note="same",
            warning=True,
            action="Repair",
        )
    reporter.event(
        observe.POD, "ns", "p", "u", reason="ManagedNetworksReady", note="ok", warning=False, action="Prepare"
    )
    assert events.reasons() == ["ShadowDeletionPending", "ManagedNetworksReady"]
    events.fail = ko.forbidden("create events")
    reporter.event(
        observe.POD, "ns", "p", "u", reason="ShadowRepaired", note="n", warning=True, action="Repair"
    )
    assert events.reasons() == ["ShadowDeletionPending", "ManagedNetworksReady"]
