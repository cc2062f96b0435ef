"""Observability of the auto-attach path: Events with reason names, and metrics.

:class:`ManagedMetrics` (bounded labels: phases, operations, ``errors.Reason`` values or error
class names; never a Pod, claim or binding ID) and :class:`Reporter`, which turns an outcome into
one log line and, on a change only, one Event on the Pod, claim or NAD (docs/design.md#errors),
so a periodic failure is reported once. Notes carry identities and reasons, never configs or
credentials. Never fails the operation it reports on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Final

import prometheus_client

from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import seams
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import plugin_events
from sriov_dra_rules import errors

LOG = logging.getLogger(__name__)
_PREFIX: Final = "sriov_dra_plugin_managed"

POD = ("v1", "Pod")
CLAIM = ("resource.k8s.io/v1", "ResourceClaim")
NAD = ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition")

REASON_READY: Final = "ManagedNetworksReady"
REASON_RELEASED: Final = "ManagedNetworksReleased"
REASON_ORPHAN: Final = "OrphanedShadow"
REASON_REPAIRED: Final = "ShadowRepaired"


def reason_of(exc: BaseException) -> str:
    """A bounded label for ``exc``: its ``sriov_dra_rules.errors.Reason`` value, else its class name."""
    if isinstance(exc, errors.SriovDraError):
        return str(exc.reason)
    if isinstance(exc, kube_errors.ApiError):
        return f"Api{type(exc).__name__}"
    return type(exc).__name__


class ManagedMetrics:
    """Metric families of the auto-attach path, in ``registry`` (the plugin's own by default)."""

    def __init__(self, registry: prometheus_client.CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else prometheus_client.CollectorRegistry()
        self.bindings = prometheus_client.Gauge(
            f"{_PREFIX}_bindings",
            "Managed bindings in the checkpoint by phase.",
            ["phase"],
            registry=self.registry,
        )
        self.failures = prometheus_client.Counter(
            f"{_PREFIX}_failures",
            "Failed managed operations by operation and bounded reason.",
            ["operation", "reason"],
            registry=self.registry,
        )
        self.repair_seconds = prometheus_client.Histogram(
            f"{_PREFIX}_repair_seconds",
            "Time from detecting a missing shadow or selection to its repair.",
            buckets=(0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300),
            registry=self.registry,
        )
        self.orphans = prometheus_client.Gauge(
            f"{_PREFIX}_orphaned_shadows",
            "Shadows of this node with no matching checkpoint record.",
            registry=self.registry,
        )
        for phase in model.Phase:
            self.bindings.labels(phase=phase.value).set(0)

    def count_phases(self, records: Iterable[model.ClaimRecord]) -> None:
        """Set the per-phase gauge from a checkpoint snapshot."""
        counts = {p: 0 for p in model.Phase}
        for record in records:
            for binding in record.managed_bindings():
                counts[binding.phase] += 1
        for phase, value in counts.items():
            self.bindings.labels(phase=phase.value).set(value)

    def failed(self, operation: str, exc: BaseException) -> None:
        """Count one failed ``operation`` (``prepare``, ``ensure``, ``release``, ``repair``, ``orphans``)."""
        self.failures.labels(operation=operation, reason=reason_of(exc)).inc()


class Reporter:
    """Logs every outcome and emits an Event when an object's (reason, note) changes."""

    def __init__(self, events: seams.EventSink | None, metrics: ManagedMetrics) -> None:
        self._events = events
        self.metrics = metrics
        self._last: dict[tuple[str, str, str], str] = {}
        self._lock = threading.Lock()

    def event(
        self,
        kind: tuple[str, str],
        namespace: str,
        name: str,
        uid: str,
        *,
        reason: str,
        note: str,
        warning: bool,
        action: str,
    ) -> None:
        """Emit one Event about the object unless the same reason and note were emitted last time."""
        key = (kind[1], namespace, name)
        with self._lock:
            if self._last.get(key) == f"{reason}\n{note}":
                return
            self._last[key] = f"{reason}\n{note}"
            if len(self._last) > 10000:  # bounded memory: forget the oldest transitions
                self._last.pop(next(iter(self._last)))
        if self._events is None:
            return
        ref = plugin_events.ObjectRef(kind[0], kind[1], namespace, name, uid)
        try:
            self._events.emit(ref, reason=reason, note=note, warning=warning, action=action)
        except Exception as exc:
            LOG.warning(
                "event not recorded", extra={"reason": reason, "op": "event", "outcome": str(exc)[:200]}
            )

    def failure(
        self,
        operation: str,
        exc: BaseException,
        *,
        kind: tuple[str, str],
        namespace: str,
        name: str,
        uid: str,
    ) -> None:
        """Log, count and (on change) emit a Warning Event for a failed operation."""
        reason = reason_of(exc)
        self.metrics.failed(operation, exc)
        LOG.warning(
            f"{operation} failed",
            extra={"op": operation, "reason": reason, "object": f"{namespace}/{name}", "uid": uid},
        )
        self.event(kind, namespace, name, uid, reason=reason, note=str(exc), warning=True, action=operation)
