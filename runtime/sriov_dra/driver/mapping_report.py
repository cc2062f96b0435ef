"""Mapping problems made visible where an administrator looks: Events on the object, and gauges.

Every finding of a policy evaluation (``core.policy_findings.Diagnostic``: a selector that
matches nothing, conflicting network references, a reserved key, an attribute-budget overflow,
a filter that selects nothing here) becomes one ``Warning`` Event regarding the
SriovResourcePolicy or DeviceAttributes named in the finding, from this node. Once per change,
not per resync: a finding is keyed by the object's UID and ``metadata.generation`` with the
finding itself, emitted when the key first appears, and forgotten when it disappears (so a
problem that comes back is reported again). A failed create is retried at the next evaluation.
The gauges count, per node, the devices a policy claims but withholds (by reason; a failed
evaluation withholds every discovered device as ``InvalidSpec``) and the current findings (by
reason). Never decides eligibility, never raises into publication.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Final

from sriov_dra.core import policy_findings
from sriov_dra.driver import metrics, policy_controller
from sriov_dra.driver.managed import seams
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import plugin_events
from sriov_dra_rules import errors, names

LOG = logging.getLogger(__name__)

ACTION: Final = "EvaluatePolicies"
API_VERSION: Final = f"{names.DOMAIN}/v1alpha1"
KINDS: Final = frozenset({"SriovResourcePolicy", "DeviceAttributes"})

ObjectLookup = Callable[[str, str], Mapping[str, object] | None]
"""``(kind, name)`` to the cached object of the policy namespace, ``None`` when not cached."""

_Key = tuple[str, str, str, str, str, str]


def withheld_by_reason(snapshot: policy_controller.DeviceSnapshot) -> dict[str, int]:
    """Devices claimed but not advertised, counted under each of their reasons.

    Shapes: reason value to count; a failed evaluation counts the whole inventory under
    ``InvalidSpec`` (nothing is advertised until it is fixed).
    """
    if snapshot.error is not None:
        return {errors.Reason.INVALID_SPEC.value: len(snapshot.inventory)}
    counts: Counter[str] = Counter()
    for outcome in snapshot.evaluation.outcomes.values():
        if not outcome.eligible:
            counts.update(r.value for r in outcome.reasons)
    return dict(counts)


class MappingReporter:
    """Reports one node's evaluation results: Events (``events``, optional) and ``gauges``."""

    def __init__(
        self,
        *,
        node_name: str,
        namespace: str,
        gauges: metrics.MappingGauges,
        events: seams.EventSink | None,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] = LOG,
    ) -> None:
        self.node_name = node_name
        self.namespace = namespace
        self.gauges = gauges
        self.events = events
        self._log = log
        self._reported: set[_Key] = set()

    def report(self, snapshot: policy_controller.DeviceSnapshot, lookup: ObjectLookup) -> None:
        """Update the gauges, then emit an Event for each finding not reported in its current form."""
        diagnostics = snapshot.evaluation.diagnostics
        self.gauges.set(
            self.node_name,
            withheld_by_reason(snapshot),
            dict(Counter(d.reason.value for d in diagnostics)),
        )
        current: set[_Key] = set()
        for d in diagnostics:
            kind, _, name = d.source.partition("/")
            obj = lookup(kind, name) if kind in KINDS else None
            if obj is None:
                continue
            meta = obj.get("metadata")
            meta = meta if isinstance(meta, Mapping) else {}
            uid = str(meta.get("uid") or "")
            key = (d.source, uid, str(meta.get("generation") or ""), d.reason.value, d.path, d.message)
            current.add(key)
            if key not in self._reported and self._emit(kind, name, uid, d):
                self._reported.add(key)
        self._reported &= current

    def _emit(self, kind: str, name: str, uid: str, d: policy_findings.Diagnostic) -> bool:
        if self.events is None:
            return True
        ref = plugin_events.ObjectRef(API_VERSION, kind, self.namespace, name, uid)
        effect = "devices withheld" if d.blocking else "devices still published"
        note = f"node {self.node_name}: {d.path}: {d.message} ({effect})"
        try:
            self.events.emit(ref, reason=d.reason.value, note=note, warning=True, action=ACTION)
        except kube_errors.ApiError as exc:
            self._log.warning(
                "policy finding event not recorded",
                extra={"op": "policy", "reason": d.reason.value, "error": str(exc)},
            )
            return False
        return True
