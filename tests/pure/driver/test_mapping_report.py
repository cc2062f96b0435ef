"""The mapping reporter's bookkeeping: once per change, retry after a failed Event, no status
subresource tolerated, gauges back to 0. The Event sink and status writer here are fakes that
record calls and inject the API's refusals (the real ones run in tests/cluster/driver)."""

from __future__ import annotations

from typing import Any

import prometheus_client

from sriov_dra.core import policies
from sriov_dra.core.policy_findings import Diagnostic
from sriov_dra.driver import mapping_report, metrics, policy_controller
from sriov_dra.kube import errors as kube_errors
from sriov_dra_rules import errors

FINDING = Diagnostic(
    errors.Reason.DEVICE_NOT_ELIGIBLE, "SriovResourcePolicy/p", "spec.configs[0]", "matches nothing", True
)


class RecordingEvents:
    """Fake Event sink: records each emit; raises ``fail`` once when set."""

    def __init__(self) -> None:
        self.notes: list[tuple[str, str]] = []
        self.fail: kube_errors.ApiError | None = None

    def emit(self, ref: Any, *, reason: str, note: str, warning: bool, action: str) -> None:
        if self.fail is not None:
            exc, self.fail = self.fail, None
            raise exc
        self.notes.append((f"{ref.kind}/{ref.name}", reason))


class NoStatusSubresource:
    """Fake status writer answering 404, as an object of upstream's CRD does."""

    def __init__(self) -> None:
        self.calls = 0

    def apply_status(self, res: Any, name: str, namespace: str | None, status: Any) -> dict[str, Any]:
        self.calls += 1
        raise kube_errors.NotFound("no status subresource", status=404)


def snapshot(*diagnostics: Diagnostic) -> policy_controller.DeviceSnapshot:
    base = policy_controller.empty_snapshot([])
    return policy_controller.DeviceSnapshot(
        revision=1,
        inventory=base.inventory,
        evaluation=policies.PolicyEvaluation({}, diagnostics),
        published=base.published,
        node_uid="u",
        node_labels={},
    )


def policy(generation: int) -> tuple[str, dict[str, Any]]:
    return "SriovResourcePolicy", {"metadata": {"name": "p", "uid": "uid-p", "generation": generation}}


def reporter(events: RecordingEvents, status: Any = None) -> tuple[mapping_report.MappingReporter, Any]:
    registry = prometheus_client.CollectorRegistry()
    gauges = metrics.MappingGauges(registry)
    r = mapping_report.MappingReporter(
        node_name="n1", namespace="ns", gauges=gauges, events=events, status=status
    )
    return r, registry


def test_a_finding_is_emitted_once_per_generation_and_again_when_it_comes_back() -> None:
    events = RecordingEvents()
    r, _ = reporter(events)
    for _ in range(3):
        r.report(snapshot(FINDING), [policy(1)])
    r.report(snapshot(FINDING), [policy(2)])
    r.report(snapshot(), [policy(2)])
    r.report(snapshot(FINDING), [policy(2)])
    assert events.notes == [("SriovResourcePolicy/p", "DeviceNotEligible")] * 3


def test_a_failed_event_is_retried_at_the_next_evaluation() -> None:
    events = RecordingEvents()
    events.fail = kube_errors.ServerError("apiserver down", status=503)
    r, _ = reporter(events)
    r.report(snapshot(FINDING), [policy(1)])
    assert events.notes == []
    r.report(snapshot(FINDING), [policy(1)])
    assert events.notes == [("SriovResourcePolicy/p", "DeviceNotEligible")]


def test_an_object_without_a_status_subresource_is_tried_once_per_generation() -> None:
    status = NoStatusSubresource()
    r, _ = reporter(RecordingEvents(), status)
    for _ in range(3):
        r.report(snapshot(FINDING), [policy(1)])
    assert status.calls == 1
    r.report(snapshot(FINDING), [policy(2)])
    assert status.calls == 2


def test_the_findings_gauge_returns_to_zero_when_the_finding_is_gone() -> None:
    r, registry = reporter(RecordingEvents())
    labels = {"node": "n1", "reason": "DeviceNotEligible"}
    r.report(snapshot(FINDING), [policy(1)])
    assert registry.get_sample_value("sriov_dra_plugin_policy_findings", labels) == 1
    r.report(snapshot(), [policy(1)])
    assert registry.get_sample_value("sriov_dra_plugin_policy_findings", labels) == 0


def test_a_long_node_name_gets_a_field_manager_within_the_api_limit() -> None:
    assert mapping_report.field_manager("n1") == "sriov-dra-plugin/n1"
    long = mapping_report.field_manager("n" * 253)
    assert len(long) <= 128 and long != mapping_report.field_manager("m" * 253)
