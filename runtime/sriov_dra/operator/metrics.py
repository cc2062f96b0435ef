"""The operator's Prometheus metrics (served by ``sriov_dra.servicekit.probes.HttpServer``).

Each operator instance owns its own registry (tests run several in one process). Label values
are bounded: controller names, outcome words, API verbs, resource names and condition reasons.

It must never block reconciliation: counting is a lock-free increment.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sriov_dra.kube import objects


class Metrics:
    """The operator's metrics on a private registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.reconciles = Counter(
            "sriov_dra_operator_reconcile_total",
            "Reconcile passes by controller and outcome.",
            ["controller", "outcome"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "sriov_dra_operator_reconcile_duration_seconds",
            "Duration of reconcile passes.",
            ["controller"],
            registry=self.registry,
        )
        self.writes = Counter(
            "sriov_dra_operator_api_writes_total",
            "Successful API writes by verb and resource.",
            ["verb", "resource"],
            registry=self.registry,
        )
        self.handler_errors = Counter(
            "sriov_dra_operator_watch_handler_errors_total",
            "Watch handler exceptions contained by the watch.",
            ["watch"],
            registry=self.registry,
        )
        self.leader = Gauge(
            "sriov_dra_operator_leader", "1 while this instance holds the Lease.", registry=self.registry
        )
        self.policies = Gauge(
            "sriov_dra_operator_dra_policies",
            "Node policies with a dra block, by DRAConfigurationReady reason.",
            ["reason"],
            registry=self.registry,
        )
        self._policy_reasons: set[str] = set()

    def count_write(self, verb: str, res: objects.Resource, _name: str) -> None:
        """``Objects.on_write`` hook."""
        self.writes.labels(verb, str(res)).inc()

    def set_policy_reasons(self, reasons: Iterable[str]) -> None:
        """Publish how many DRA policies report each reason (reasons seen before drop to 0)."""
        counts: dict[str, int] = {}
        for reason in reasons:
            counts[reason] = counts.get(reason, 0) + 1
        self._policy_reasons |= set(counts)
        for reason in self._policy_reasons:
            self.policies.labels(reason).set(counts.get(reason, 0))
