"""The guard's Prometheus metrics (served by ``sriov_dra.servicekit.probes.HttpServer``).

``sriov_dra_guard_decisions_total{reason, kind}``, ``sriov_dra_guard_add_duration_seconds{part}``
(``guard``, ``multus``, ``total``), ``sriov_dra_guard_api_reads_total{resource, outcome}`` and
``sriov_dra_guard_multus_runs_total{command, outcome}`` and
``sriov_dra_guard_device_metadata_total{outcome}`` (``written``, ``unchanged``, ``error``). A private registry per instance (tests
create several); labels are bounded (reasons from ``guard.decisions.Reason``), never a Pod or NAD.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from sriov_dra.guard import decisions

ADD_BUCKETS_S: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class GuardMetrics:
    """The guard's metric families in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.decisions = Counter(
            "sriov_dra_guard_decisions_total",
            "Finished CNI requests by decision reason",
            ["reason", "kind"],
            registry=self.registry,
        )
        self.add_seconds = Histogram(
            "sriov_dra_guard_add_duration_seconds",
            "ADD latency split into guard and Multus time",
            ["part"],
            buckets=ADD_BUCKETS_S,
            registry=self.registry,
        )
        self.api_reads = Counter(
            "sriov_dra_guard_api_reads_total",
            "Live API reads by resource and outcome",
            ["resource", "outcome"],
            registry=self.registry,
        )
        self.multus_runs = Counter(
            "sriov_dra_guard_multus_runs_total",
            "Multus runs by CNI command and outcome",
            ["command", "outcome"],
            registry=self.registry,
        )
        self.device_metadata = Counter(
            "sriov_dra_guard_device_metadata_total",
            "Device metadata files after a verified ADD, by outcome (an error never fails the ADD)",
            ["outcome"],
            registry=self.registry,
        )

    def decided(self, reason: decisions.Reason) -> None:
        """Count one finished request."""
        self.decisions.labels(reason=reason.value, kind=decisions.kind(reason).value).inc()

    def add_timing(self, *, guard_s: float, multus_s: float) -> None:
        """Record one ADD's guard and Multus seconds (and their sum)."""
        self.add_seconds.labels(part="guard").observe(guard_s)
        self.add_seconds.labels(part="multus").observe(multus_s)
        self.add_seconds.labels(part="total").observe(guard_s + multus_s)

    def render(self) -> bytes:
        """The text exposition of every metric."""
        return bytes(generate_latest(self.registry))
