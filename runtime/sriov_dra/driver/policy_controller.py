"""Policy controller: watches policies, DeviceAttributes and the Node, and keeps the device snapshot.

Per node: three namespaced watches (SriovResourcePolicy, DeviceAttributes, this Node's labels and
UID), their evaluation against the discovered inventory (``core.policies.evaluate_policies``), and
the immutable :class:`DeviceSnapshot` that publication and prepare read, swapped atomically under
the discovery/state lock. Unlike upstream, Node label changes re-evaluate (heartbeats do not).
When evaluation fails, nothing is advertised until it is fixed: a stale mapping could send a VF
to the wrong network (docs/design.md#eligibility). Never writes to the API or drops a device.
"""

from __future__ import annotations

import logging
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from sriov_dra.core import attributes, policies, policy_findings
from sriov_dra.core.plugin import slices
from sriov_dra.host import discovery
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import watches
from sriov_dra_rules import errors, names

LOG = logging.getLogger(__name__)

GROUP_PATH: Final = f"/apis/{names.DOMAIN}/v1alpha1"
POLICY_PLURAL: Final = "sriovresourcepolicies"
ATTRIBUTES_PLURAL: Final = "deviceattributes"


class PolicyNamespaceMissing(errors.InvalidSpec):
    """The configured policy namespace does not exist; nothing could ever be advertised."""


class PolicyCrdMissing(errors.InvalidSpec):
    """A CRD the plugin reads is not installed."""


@dataclass(frozen=True)
class DeviceSnapshot:
    """What the node advertises right now, as one immutable value.

    Shapes: ``inventory`` is every discovered VF by device name (never shrinks with policy);
    ``evaluation`` the policy result; ``published`` the advertised devices by name, each with
    its discovery plus policy attributes; ``node_uid`` ``None`` until the Node was seen;
    ``error`` the evaluation failure when nothing is advertised because of one; ``revision``
    increases with every swap.
    """

    revision: int
    inventory: Mapping[str, discovery.DiscoveredVf]
    evaluation: policies.PolicyEvaluation
    published: Mapping[str, slices.PublishedDevice]
    node_uid: str | None
    node_labels: Mapping[str, str]
    error: str | None = None

    @property
    def eligible(self) -> frozenset[str]:
        """Advertised device names (the eligible policy membership, docs/design.md#eligibility)."""
        return frozenset(self.published)

    @property
    def devices(self) -> tuple[slices.PublishedDevice, ...]:
        """Advertised devices sorted by name."""
        return tuple(self.published[n] for n in sorted(self.published))

    def is_eligible(self, device: str) -> bool:
        """True when ``device`` is advertised now: a first managed prepare refuses any other
        device before a VfConfig fallback or a hardware change (docs/design.md#eligibility)."""
        return device in self.published

    def attributes_of(self, device: str) -> Mapping[str, attributes.AttributeValue] | None:
        """Published attributes of an advertised device, ``None`` when it is not advertised."""
        found = self.published.get(device)
        return None if found is None else found.attributes


_V = TypeVar("_V")


def _frozen(mapping: Mapping[str, _V]) -> Mapping[str, _V]:
    return types.MappingProxyType(dict(mapping))


def empty_snapshot(inventory: Sequence[discovery.DiscoveredVf]) -> DeviceSnapshot:
    """The snapshot before any evaluation: full inventory, nothing advertised."""
    return DeviceSnapshot(
        revision=0,
        inventory=_frozen({vf.name: vf for vf in inventory}),
        evaluation=policies.PolicyEvaluation({}, ()),
        published=_frozen({}),
        node_uid=None,
        node_labels=_frozen({}),
    )


class PolicyController:
    """Watches and evaluation for one node; call :meth:`start`, then :meth:`evaluate` on changes.

    ``on_change()`` runs on a watch thread after any event that can change the snapshot; it must
    be quick (the publisher only marks itself dirty).
    """

    def __init__(
        self,
        *,
        api: watches.ApiClient,
        node_name: str,
        namespace: str,
        inventory: Sequence[discovery.DiscoveredVf],
        managed: bool,
        stop: threading.Event,
        on_change: Callable[[], None],
        watch_timeout_s: int = 300,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] = LOG,
    ) -> None:
        self.api = api
        self.node_name = node_name
        self.namespace = namespace
        self.managed = managed
        self._facts = tuple(vf.to_device_facts() for vf in inventory)
        self._on_change = on_change
        self._log = log
        self._lock = threading.Lock()
        self._snapshot = empty_snapshot(inventory)
        self._node_key: tuple[str, tuple[tuple[str, str], ...]] | None = None
        self._last_diagnostics: tuple[policy_findings.Diagnostic, ...] = ()
        ns_path = f"{GROUP_PATH}/namespaces/{namespace}"

        def watch(target: watches.Target, handler: watches.Handler, name: str) -> watches.Watch:
            return watches.Watch(
                api, target, handler, name=name, stop=stop, timeout_s=watch_timeout_s, log=log
            )

        self.policies = watch(watches.Target(f"{ns_path}/{POLICY_PLURAL}"), self._changed, "policies")
        self.device_attributes = watch(
            watches.Target(f"{ns_path}/{ATTRIBUTES_PLURAL}"), self._changed, "deviceattributes"
        )
        self.node = watch(
            watches.Target("/api/v1/nodes", field_selector=f"metadata.name={node_name}"),
            self._node_changed,
            "node",
        )

    # ------------------------------------------------------------------ lifecycle
    def check(self) -> None:
        """Verify that the policy namespace exists and both CRDs are served.

        A namespace the plugin may not read (403) is logged, not fatal: the RBAC of some
        installations grants no namespace reads, and the watches still work.
        Raises: PolicyNamespaceMissing, PolicyCrdMissing (actionable), ``kube.errors.ApiError``.
        """
        try:
            watches.request_json(
                self.api, f"get namespace {self.namespace}", "GET", f"/api/v1/namespaces/{self.namespace}"
            )
        except kube_errors.NotFound as exc:
            raise PolicyNamespaceMissing(
                f"policy namespace {self.namespace!r} does not exist: create it "
                f"(kubectl create namespace {self.namespace}) or set --policy-namespace / NAMESPACE "
                "to the namespace that holds the SriovResourcePolicy and DeviceAttributes objects"
            ) from exc
        except kube_errors.Forbidden:
            self._log.warning(
                "policy namespace not verified: no permission to get namespaces",
                extra={"op": "policy-check", "namespace": self.namespace},
            )
        for plural, kind in ((POLICY_PLURAL, "SriovResourcePolicy"), (ATTRIBUTES_PLURAL, "DeviceAttributes")):
            path = f"{GROUP_PATH}/namespaces/{self.namespace}/{plural}"
            try:
                watches.request_json(self.api, f"list {plural}", "GET", path, query=[("limit", "1")])
            except kube_errors.NotFound as exc:
                raise PolicyCrdMissing(
                    f"the {kind} CRD ({plural}.{names.DOMAIN}) is not installed: apply "
                    f"manifests/crds/{names.DOMAIN}_{plural}.yaml from the sriov_dra package"
                ) from exc

    def start(self) -> None:
        """Start the three watches (each lists, then watches)."""
        for w in (self.policies, self.device_attributes, self.node):
            w.start()

    def close(self, *, timeout_s: float = 2.0) -> None:
        """Interrupt and join the watches."""
        for w in (self.policies, self.device_attributes, self.node):
            w.close(timeout_s=timeout_s)

    @property
    def synced(self) -> bool:
        """True once every watch finished its first list."""
        return self.policies.synced and self.device_attributes.synced and self.node.synced

    @property
    def handler_errors(self) -> int:
        """Contained exceptions of this controller's event handlers."""
        return sum(w.handler_errors for w in (self.policies, self.device_attributes, self.node))

    # ------------------------------------------------------------------ events
    def _changed(self, kind: str, obj: watches.JsonObject) -> None:
        self._on_change()

    def _node_changed(self, kind: str, obj: watches.JsonObject) -> None:
        """Only a label or UID change matters; status heartbeats do not re-evaluate."""
        node = self.node.get(self.node_name)
        key = None if node is None else _node_key(node)
        if kind == watches.SYNCED or key != self._node_key:
            self._node_key = key
            self._on_change()

    def watched_node_uid(self) -> str | None:
        """The Node's UID in the Node watch cache right now (``None`` before the first list or
        while the Node does not exist); fresher than ``snapshot().node_uid``, which changes only
        when the publisher evaluates."""
        node = self.node.get(self.node_name) if self.node.synced else None
        return str((node or {}).get("metadata", {}).get("uid") or "") or None

    def cached_objects(self) -> tuple[tuple[str, watches.JsonObject], ...]:
        """Every cached SriovResourcePolicy and DeviceAttributes, as (kind, object) pairs."""
        return tuple(("SriovResourcePolicy", o) for o in self.policies.items()) + tuple(
            ("DeviceAttributes", o) for o in self.device_attributes.items()
        )

    # ------------------------------------------------------------------ evaluation
    def snapshot(self) -> DeviceSnapshot:
        """The current snapshot (immutable; safe to keep and read without a lock)."""
        with self._lock:
            return self._snapshot

    def evaluate(self) -> DeviceSnapshot:
        """Evaluate the cached objects and swap the snapshot if the outcome changed; return it.

        Never raises for bad objects: an evaluation failure advertises nothing and is recorded
        in ``snapshot().error`` and the log.
        """
        node = self.node.get(self.node_name)
        uid = str((node or {}).get("metadata", {}).get("uid") or "") or None
        labels = dict((node or {}).get("metadata", {}).get("labels") or {})
        error = None
        try:
            evaluation = policies.evaluate_policies(
                self._facts,
                self.policies.items(),
                self.device_attributes.items(),
                node_labels=labels,
                managed=self.managed,
            )
        except errors.SriovDraError as exc:
            evaluation, error = policies.PolicyEvaluation({}, ()), str(exc)
        published = {d.name: d for d in slices.published_devices(self._facts, evaluation)}
        self._report(evaluation, error)
        with self._lock:
            old = self._snapshot
            if (
                old.published == published
                and old.node_uid == uid
                and old.error == error
                and dict(old.node_labels) == labels
                and old.evaluation == evaluation
            ):
                return old
            self._snapshot = DeviceSnapshot(
                revision=old.revision + 1,
                inventory=old.inventory,
                evaluation=evaluation,
                published=_frozen(published),
                node_uid=uid,
                node_labels=_frozen(labels),
                error=error,
            )
            return self._snapshot

    def _report(self, evaluation: policies.PolicyEvaluation, error: str | None) -> None:
        """Log diagnostics and failures once per change, not on every resync."""
        diagnostics = evaluation.diagnostics
        if error is not None and error != self.snapshot().error:
            self._log.error(
                "policy evaluation failed; nothing advertised", extra={"op": "policy", "error": error}
            )
        if diagnostics == self._last_diagnostics:
            return
        self._last_diagnostics = diagnostics
        for d in diagnostics:
            level = logging.WARNING if d.blocking else logging.INFO
            self._log.log(
                level, "policy diagnostic", extra={"op": "policy", "reason": str(d.reason), "detail": str(d)}
            )


def _node_key(node: watches.JsonObject) -> tuple[str, tuple[tuple[str, str], ...]]:
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    return str(meta.get("uid") or ""), tuple(sorted((str(k), str(v)) for k, v in labels.items()))
