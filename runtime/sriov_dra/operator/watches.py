"""Which watch events wake which reconciliation (docs/design.md#operator-status).

The :class:`Router` keeps, per watched object, the projection of the fields each controller
depends on and wakes a controller only when it changed, so status writes never loop and a
re-list (which delivers MODIFIED for every moved resourceVersion) wakes nothing unchanged. Shadow
NADs of the plugin wake nothing and are not remembered. Each ``on_*`` handler says what wakes
what. Never calls the API; the ``SYNCED`` marker never reaches the router.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from sriov_dra.core.operator import conditions, network_refs, node_policy, sriov_network
from sriov_dra.kube import views
from sriov_dra.kube import watches as kube_watches
from sriov_dra.operator import queue
from sriov_dra_rules import names

Ref = network_refs.ObjectRef
Enqueue = Callable[[queue.Key], None]


def is_shadow(nad: Mapping[str, object]) -> bool:
    """True for a plugin-created shadow NAD (never a source NAD)."""
    meta = _meta(nad)
    labels = views.mapping(meta.get("labels"))
    return bool(
        str(meta.get("name") or "").startswith(names.SHADOW_NAME_PREFIX)
        or labels.get(names.LABEL_MANAGED_BY) == names.MANAGED_BY_VALUE
    )


def _meta(obj: Mapping[str, object]) -> Mapping[str, object]:
    return views.mapping(obj.get("metadata"))


def _marker(nad: Mapping[str, object] | None) -> Ref | None:
    if nad is None:
        return None
    return network_refs.parse_owner_marker(
        views.mapping(_meta(nad).get("annotations")).get(network_refs.OWNER_REF_ANNOTATION)
    )


class Router:
    """Turns watch events into queue keys; also indexes NAD owner markers for cleanup."""

    def __init__(self, enqueue: Enqueue, *, operator_namespace: str, resource_prefix: str) -> None:
        self._enqueue = enqueue
        self._namespace = operator_namespace
        self._prefix = resource_prefix
        self._lock = threading.Lock()
        self._policies: dict[Ref, tuple[object, ...]] = {}
        self._policy_refs: dict[Ref, Ref | None] = {}
        self._networks: dict[Ref, tuple[tuple[object, ...], tuple[object, ...]]] = {}
        self._targets: dict[Ref, Ref] = {}
        self._nads: dict[Ref, tuple[object, ...]] = {}
        self._nad_markers: dict[Ref, Ref] = {}
        self._nodes: dict[str, tuple[object, ...]] = {}

    # ---- queries used by the controllers and the resync loop -------------------------------
    def marked_nads(self, network: Ref) -> list[Ref]:
        """NADs whose owner marker names ``network`` (from the NAD watch)."""
        with self._lock:
            return sorted(nad for nad, owner in self._nad_markers.items() if owner == network)

    def known_networks(self) -> list[Ref]:
        """Networks seen by the watch plus networks only named by NAD markers (orphan cleanup)."""
        with self._lock:
            return sorted(set(self._networks) | set(self._nad_markers.values()))

    def _referenced(self) -> set[Ref]:
        return {r for r in self._policy_refs.values() if r is not None}

    def _networks_targeting(self, nad: Ref) -> set[Ref]:
        return {net for net, where in self._targets.items() if where == nad}

    # ---- handlers (watch threads) --------------------------------------------------------
    def on_policy(self, event: str, obj: Mapping[str, object]) -> None:
        """Node policy events (operator namespace): wake the DRA plan on generation, UID or deletion."""
        key = network_refs.ref_of(obj)
        meta = _meta(obj)
        projection = (meta.get("uid"), meta.get("generation"), bool(meta.get("deletionTimestamp")))
        parsed = node_policy.parse_policy(obj, prefix=self._prefix, nic_ids=())
        with self._lock:
            if event == kube_watches.DELETED:
                self._policies.pop(key, None)
                self._policy_refs.pop(key, None)
                changed = True
            else:
                changed = self._policies.get(key) != projection
                self._policies[key] = projection
                self._policy_refs[key] = parsed.dra.network if parsed.dra is not None else None
        if changed:
            self._enqueue(queue.POLICIES)

    def on_network(self, event: str, obj: Mapping[str, object]) -> None:
        """SriovNetwork events (all namespaces).

        Wake the network's controller when spec, UID, deletion or the legacy finalizer changed;
        wake the DRA plan when a node policy references it and its readiness (``Ready`` status,
        observedGeneration, reason, message), spec or deletion changed, so a status-only Ready
        transition recovers a policy without re-applying it.
        """
        key = network_refs.ref_of(obj)
        meta = _meta(obj)
        spec = views.mapping(obj.get("spec"))
        ready = conditions.find(obj, sriov_network.READY) or {}
        own = (
            meta.get("uid"),
            meta.get("generation"),
            bool(meta.get("deletionTimestamp")),
            sriov_network.LEGACY_FINALIZER in views.items(meta.get("finalizers")),
        )
        readiness = (
            *own[:3],
            repr(sorted(spec.items())),
            tuple(ready.get(k) for k in ("status", "observedGeneration", "reason", "message")),
        )
        with self._lock:
            old = self._networks.get(key)
            if event == kube_watches.DELETED:
                self._networks.pop(key, None)
                self._targets.pop(key, None)
                wake_self, wake_plan = True, key in self._referenced()
            else:
                self._networks[key] = (own, readiness)
                self._targets[key] = network_refs.target(obj)
                wake_self = old is None or old[0] != own
                wake_plan = key in self._referenced() and (old is None or old[1] != readiness)
        if wake_self:
            self._enqueue(queue.network_key(key.namespace, key.name))
        if wake_plan:
            self._enqueue(queue.POLICIES)

    def on_nad(self, event: str, obj: Mapping[str, object]) -> None:
        """NAD events (all namespaces); shadows are ignored entirely.

        Wake the network named by the owner marker of the old or the new object (a removed
        marker is still seen) and any network rendering to that name; wake the DRA plan only when
        the NAD is a referenced network's rendered target and its content, marker, owner
        references, UID or deletion changed.
        """
        if is_shadow(obj):
            return
        key = network_refs.ref_of(obj)
        meta = _meta(obj)
        annotations = views.mapping(meta.get("annotations"))
        projection = (
            meta.get("uid"),
            bool(meta.get("deletionTimestamp")),
            repr(obj.get("spec")),
            annotations.get(network_refs.OWNER_REF_ANNOTATION),
            annotations.get(sriov_network.RESOURCE_NAME_ANNOTATION),
            repr(meta.get("ownerReferences")),
        )
        new_marker = None if event == kube_watches.DELETED else _marker(obj)
        with self._lock:
            old = self._nads.get(key)
            old_marker = self._nad_markers.get(key)
            if event == kube_watches.DELETED:
                self._nads.pop(key, None)
                self._nad_markers.pop(key, None)
                changed = True
            else:
                self._nads[key] = projection
                if new_marker is None:
                    self._nad_markers.pop(key, None)
                else:
                    self._nad_markers[key] = new_marker
                changed = old != projection
            if not changed:
                return
            networks = {m for m in (old_marker, new_marker) if m is not None} | self._networks_targeting(key)
            wake_plan = bool(self._networks_targeting(key) & self._referenced()) or bool(
                {m for m in (old_marker, new_marker) if m is not None} & self._referenced()
            )
        for net in sorted(networks):
            self._enqueue(queue.network_key(net.namespace, net.name))
        if wake_plan:
            self._enqueue(queue.POLICIES)

    def on_namespace(self, event: str, obj: Mapping[str, object]) -> None:
        """Namespace creation or deletion wakes the networks that render into it."""
        if event == kube_watches.MODIFIED:
            return
        name = str(_meta(obj).get("name") or "")
        with self._lock:
            networks = {net for net, where in self._targets.items() if where.namespace == name}
            wake_plan = bool(networks & self._referenced())
        for net in sorted(networks):
            self._enqueue(queue.network_key(net.namespace, net.name))
        if wake_plan:
            self._enqueue(queue.POLICIES)

    def on_node(self, event: str, obj: Mapping[str, object]) -> None:
        """Node creation, deletion and label changes wake the plan."""
        meta = _meta(obj)
        name = str(meta.get("name") or "")
        projection = (meta.get("uid"), repr(sorted(views.mapping(meta.get("labels")).items())))
        with self._lock:
            if event == kube_watches.DELETED:
                self._nodes.pop(name, None)
                changed = True
            else:
                changed = self._nodes.get(name) != projection
                self._nodes[name] = projection
        if changed:
            self._enqueue(queue.POLICIES)
