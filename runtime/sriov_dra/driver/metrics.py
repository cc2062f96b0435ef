"""Prometheus metrics of the plugin, served with ``/healthz`` and ``/readyz`` (``servicekit.probes``).

The plugin's metric names, in a registry of this process only. Label values are bounded:
operations, outcomes, ``sriov_dra_rules.errors.Reason`` values or error class names. Never blocks
a request on the API server or the kubelet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import prometheus_client

from sriov_dra.kubeletapi import dra_service, messages

LOG = logging.getLogger(__name__)

_PREFIX: Final = "sriov_dra_plugin"


class PluginMetrics:
    """The plugin's metrics in their own registry (implements ``ClaimMetrics``)."""

    def __init__(self) -> None:
        self.registry = prometheus_client.CollectorRegistry()
        self.claim_operations = prometheus_client.Counter(
            f"{_PREFIX}_claim_operations",
            "Claim prepare/unprepare operations by outcome and reason.",
            ["operation", "outcome", "reason"],
            registry=self.registry,
        )
        self.claim_seconds = prometheus_client.Histogram(
            f"{_PREFIX}_claim_operation_seconds",
            "Wall time of one claim prepare/unprepare.",
            ["operation"],
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 45),
            registry=self.registry,
        )
        self.registered = prometheus_client.Gauge(
            f"{_PREFIX}_kubelet_registered",
            "1 once the kubelet accepted the plugin's registration.",
            registry=self.registry,
        )
        self.discovered_vfs = prometheus_client.Gauge(
            f"{_PREFIX}_discovered_vfs", "VFs found by discovery at startup.", registry=self.registry
        )
        self.prepared_claims = prometheus_client.Gauge(
            f"{_PREFIX}_prepared_claims", "Claims recorded in the checkpoint.", registry=self.registry
        )
        self.mapping = MappingGauges(self.registry)

    def observe_claim(self, operation: str, outcome: str, reason: str, seconds: float) -> None:
        """Count one claim operation and its duration (``ClaimMetrics``). Units: seconds."""
        self.claim_operations.labels(operation, outcome, reason).inc()
        self.claim_seconds.labels(operation).observe(seconds)

    def render(self) -> bytes:
        """The registry in Prometheus text format."""
        return bytes(prometheus_client.generate_latest(self.registry))


class MappingGauges:
    """The two per-node gauges, registered in the plugin's registry."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self.withheld = prometheus_client.Gauge(
            f"{_PREFIX}_withheld_devices",
            "Discovered VFs a policy claims but withholds from the ResourceSlices, by node and reason.",
            ["node", "reason"],
            registry=registry,
        )
        self.findings = prometheus_client.Gauge(
            f"{_PREFIX}_policy_findings",
            "Current SriovResourcePolicy/DeviceAttributes findings on this node, by reason.",
            ["node", "reason"],
            registry=registry,
        )
        self._shown: dict[str, set[str]] = {"withheld": set(), "findings": set()}

    def set(self, node: str, withheld: Mapping[str, int], findings: Mapping[str, int]) -> None:
        """Set both gauges to these counts; a reason no longer present goes back to 0."""
        for name, gauge, counts in (
            ("withheld", self.withheld, withheld),
            ("findings", self.findings, findings),
        ):
            for reason in self._shown[name] | set(counts):
                gauge.labels(node, reason).set(counts.get(reason, 0))
            self._shown[name] |= set(counts)


class CountingHandler:
    """Wraps a claim handler to call ``refresh`` (the prepared-claims gauge) after each call."""

    def __init__(self, inner: dra_service.ClaimHandler, refresh: Callable[[], None]) -> None:
        self._inner = inner
        self._refresh = refresh

    def prepare_resources(
        self, claims: Sequence[messages.ClaimRef]
    ) -> Mapping[str, dra_service.PrepareValue]:
        try:
            return self._inner.prepare_resources(claims)
        finally:
            self._refresh()

    def unprepare_resources(
        self, claims: Sequence[messages.ClaimRef]
    ) -> Mapping[str, dra_service.UnprepareValue]:
        try:
            return self._inner.unprepare_resources(claims)
        finally:
            self._refresh()
