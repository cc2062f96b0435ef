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
reason). Each object a node finds a problem in also gets that node's entry in ``status.nodes``
(``core.plugin.policy_status``; skipped where the CRD has no status subresource, as upstream's
has none). While the watched namespace holds no SriovResourcePolicy and others do, a
``PolicyNamespaceEmpty`` Warning on the Node names both. Never decides eligibility, never raises
into publication.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from sriov_dra.core import policy_findings
from sriov_dra.core.plugin import policy_status
from sriov_dra.driver import metrics, policy_controller
from sriov_dra.driver.managed import seams
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import objects as kube_objects
from sriov_dra.kube import plugin_events
from sriov_dra_rules import errors, names, preflight_rules

LOG = logging.getLogger(__name__)

ACTION: Final = "EvaluatePolicies"
API_VERSION: Final = f"{names.DOMAIN}/v1alpha1"
KINDS: Final = frozenset({"SriovResourcePolicy", "DeviceAttributes"})

RESOURCES: Final = {
    "SriovResourcePolicy": kube_objects.RESOURCE_POLICY,
    "DeviceAttributes": kube_objects.DEVICE_ATTRIBUTES,
}
FIELD_MANAGER_LIMIT: Final = 128


class PolicyLister(Protocol):
    """Lists SriovResourcePolicies of every namespace (``kube.objects.Objects``)."""

    def list(
        self,
        res: kube_objects.Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> kube_objects.Listing:
        """LIST ``res`` (all namespaces for ``None``). Raises: ``kube.errors`` classes."""
        ...


class StatusWriter(Protocol):
    """Applies this node's ``status.nodes`` entry of one object (``kube.objects.Objects``)."""

    def apply_status(
        self, res: kube_objects.Resource, name: str, namespace: str | None, status: Mapping[str, Any]
    ) -> kube_objects.JsonObject:
        """Server-side apply on the status subresource. Raises: ``kube.errors`` classes."""
        ...


def field_manager(node: str) -> str:
    """This node's field manager for status entries: ``sriov-dra-plugin/<node>``, or a digest of
    the node name when that exceeds the API's 128 characters."""
    name = f"sriov-dra-plugin/{node}"
    if len(name) <= FIELD_MANAGER_LIMIT:
        return name
    return f"sriov-dra-plugin/{hashlib.sha256(node.encode()).hexdigest()[:32]}"


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
        status: StatusWriter | None = None,
        policies: PolicyLister | None = None,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] = LOG,
    ) -> None:
        self.node_name = node_name
        self.namespace = namespace
        self.gauges = gauges
        self.events = events
        self.status = status
        self.policies = policies
        self._log = log
        self._elsewhere: tuple[tuple[str, int], ...] = ()
        self._reported: set[_Key] = set()
        self._no_status: set[tuple[str, str, int]] = set()

    def report(
        self,
        snapshot: policy_controller.DeviceSnapshot,
        cached: Iterable[tuple[str, Mapping[str, Any]]],
    ) -> None:
        """Update the gauges, emit an Event for each finding not reported in its current form, and
        apply the status entries that differ from what the objects say.

        Shapes: ``cached`` the (kind, object) pairs of the policy namespace's watch caches.
        """
        objects = {(kind, str(obj.get("metadata", {}).get("name"))): obj for kind, obj in cached}
        self._events(snapshot, objects)
        self._empty_namespace(snapshot, any(kind == "SriovResourcePolicy" for kind, _ in objects))
        if self.status is not None:
            self._statuses(snapshot.evaluation.diagnostics, objects)

    def _events(
        self,
        snapshot: policy_controller.DeviceSnapshot,
        objects: Mapping[tuple[str, str], Mapping[str, Any]],
    ) -> None:
        diagnostics = snapshot.evaluation.diagnostics
        self.gauges.set(
            self.node_name,
            withheld_by_reason(snapshot),
            dict(Counter(d.reason.value for d in diagnostics)),
        )
        current: set[_Key] = set()
        for d in diagnostics:
            kind, _, name = d.source.partition("/")
            obj = objects.get((kind, name)) if kind in KINDS else None
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

    def _empty_namespace(self, snapshot: policy_controller.DeviceSnapshot, watched: bool) -> None:
        """While the watched namespace holds no policy, list every namespace's (one LIST per
        evaluation) and emit ``PolicyNamespaceEmpty`` on the Node when the namespaces holding
        policies change; nothing while the watched namespace holds one."""
        if watched or self.policies is None or self.events is None or snapshot.node_uid is None:
            self._elsewhere = ()
            return
        try:
            listed = self.policies.list(kube_objects.RESOURCE_POLICY).items
        except kube_errors.ApiError as exc:
            self._log.warning(
                "policies of other namespaces not listed", extra={"op": "policy", "error": str(exc)}
            )
            return
        counts = preflight_rules.policy_namespaces(listed)
        elsewhere = tuple((ns, n) for ns, n in counts.items() if ns != self.namespace)
        if not elsewhere or elsewhere == self._elsewhere:
            self._elsewhere = elsewhere
            return
        where = ", ".join(f"{ns} ({n})" for ns, n in elsewhere)
        note = (
            f"node {self.node_name}: the plugin watches {self.namespace}, which holds no SriovResourcePolicy, "
            f"so this node publishes no device; SriovResourcePolicies exist in: {where}; create them in "
            f"{self.namespace} or set the plugin's policy namespace to where they are"
        )
        ref = plugin_events.ObjectRef("v1", "Node", "", self.node_name, snapshot.node_uid)
        reason = errors.Reason.POLICY_NAMESPACE_EMPTY.value
        try:
            self.events.emit(ref, reason=reason, note=note, warning=True, action=ACTION)
        except kube_errors.ApiError as exc:
            self._log.warning(
                "policy namespace event not recorded", extra={"op": "policy", "error": str(exc)}
            )
            return
        self._elsewhere = elsewhere

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

    def _statuses(
        self,
        diagnostics: Iterable[policy_findings.Diagnostic],
        objects: Mapping[tuple[str, str], Mapping[str, Any]],
    ) -> None:
        by_source: defaultdict[str, list[policy_findings.Diagnostic]] = defaultdict(list)
        for d in diagnostics:
            by_source[d.source].append(d)
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for (kind, name), obj in sorted(objects.items()):
            meta = obj.get("metadata") or {}
            generation = int(meta.get("generation") or 0)
            key = (str(meta.get("uid") or ""), kind, generation)
            entry = policy_status.node_entry(
                self.node_name,
                generation,
                by_source.get(f"{kind}/{name}", []),
                policy_status.entry_of(obj, self.node_name),
                now,
            )
            if entry is None or key in self._no_status or self.status is None:
                continue
            try:
                self.status.apply_status(RESOURCES[kind], name, self.namespace, {"nodes": [entry]})
            except kube_errors.NotFound:
                # No status subresource (upstream's CRD) or the object is gone: nothing to write.
                self._no_status.add(key)
            except kube_errors.ApiError as exc:
                self._log.warning(
                    "policy status not written",
                    extra={"op": "policy", "outcome": f"{kind}/{name}", "error": str(exc)},
                )
