"""The network controller: SriovNetwork → source NetworkAttachmentDefinition, and its Ready condition.

Sole writer of source NADs (docs/design.md#operator-networks): :meth:`NetworkController.reconcile`
renders, creates or updates (only when different), deletes stale copies, and writes ``Ready``
with ``observedGeneration`` only when it changed. Never writes a NAD carrying another network's
marker, or deletes one without checking the marker on a live read and passing its UID as a
precondition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from sriov_dra.core.operator import conditions, network_refs, sriov_network
from sriov_dra.kube import errors as api_errors
from sriov_dra.kube import objects, views
from sriov_dra.operator import settings, status
from sriov_dra_rules import errors

log = logging.getLogger(__name__)
_RR = sriov_network.ReadyReason
READY_MESSAGE = "NetworkAttachmentDefinition is provisioned and ready"


@dataclass(frozen=True)
class Result:
    """Outcome of one reconcile: ``outcome`` is a constant word; ``retry`` asks for backoff."""

    outcome: str
    retry: bool = False
    detail: str = ""


class NetworkController:
    """Reconciles one SriovNetwork per call.

    ``marked_nads(network)`` lists the NADs (namespace, name) whose owner marker names
    ``network``, from the NAD watch's cache; each is re-read live before it is deleted.
    """

    def __init__(
        self,
        client: objects.Objects,
        config: settings.ReconcileSettings,
        writer: status.StatusWriter,
        marked_nads: Callable[[network_refs.ObjectRef], Iterable[network_refs.ObjectRef]],
    ) -> None:
        self.client = client
        self.config = config
        self.writer = writer
        self.marked_nads = marked_nads

    def reconcile(self, ref: network_refs.ObjectRef) -> Result:
        """Bring the source NAD of SriovNetwork ``ref`` and its Ready condition up to date.

        * Renders the NAD (``core.operator.sriov_network.render_nad``) and creates it, or updates
          it only when spec, annotations or owner references differ.
        * Refuses ``spec.networkNamespace`` outside the operator namespace, a missing target
          namespace, and a same-named NAD another network's marker claims, each as
          ``Ready=False`` with upstream's reason; an unmarked NAD is adopted and overwritten, as
          upstream does.
        * Refuses a spec that cannot be rendered as ``Ready=False`` (``InvalidNetworkSpec``,
          naming the network, the field and the problem) plus a Warning Event; no NAD is written
          or deleted then.
        * Deletes NADs with this network's marker elsewhere (after a ``networkNamespace``
          change) and, when the network is gone or deleting, all of them; a 404 counts as done.
        * Adds no finalizer and removes upstream's ``netattdef`` one, so deleting a SriovNetwork
          never hangs after the operator is uninstalled (sriov-network-operator #132).
        """
        network = self.client.get_or_none(objects.SRIOV_NETWORK, ref.name, ref.namespace)
        if network is None:
            removed = self._delete_marked(ref, keep=None)
            return Result("cleaned" if removed else "absent")
        meta = network.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            self._delete_marked(ref, keep=None, also=(network_refs.target(network),))
            self._drop_legacy_finalizer(network)
            return Result("deleted")
        self._drop_legacy_finalizer(network)
        rule = network_refs.namespace_rule_problem(network, self.config.namespace)
        if rule is not None:
            return self._ready(network, False, _RR.NAD_INVALID, rule, "invalid")
        try:
            expected = sriov_network.render_nad(network, resource_prefix=self.config.resource_prefix)
        except errors.InvalidSpec as exc:
            # Nothing is written or deleted: an existing NAD stays exactly as it is.
            message = exc.detail
            log.warning(
                "network spec invalid", extra={"network": str(ref), "outcome": "invalid", "problem": message}
            )
            return self._ready(network, False, exc.reason, message, "invalid", event_reason=exc.reason.value)
        where = network_refs.target(network)
        if self.client.get_or_none(objects.NAMESPACE, where.namespace) is None:
            message = f'target namespace "{where.namespace}" does not exist'
            return self._ready(network, False, _RR.NAMESPACE_NOT_FOUND, message, "waiting")
        try:
            outcome = self._ensure_nad(ref, where, expected)
        except _Claimed as exc:
            return self._ready(network, False, _RR.NAD_INVALID, str(exc), "conflict")
        except api_errors.NotFound:
            message = f'target namespace "{where.namespace}" does not exist'
            return self._ready(network, False, _RR.NAMESPACE_NOT_FOUND, message, "waiting")
        except api_errors.ApiError as exc:
            result = self._ready(network, False, _RR.NAD_INVALID, str(exc), "failed")
            return Result(result.outcome, retry=True, detail=str(exc))
        self._delete_marked(ref, keep=where)
        if outcome == "deleting":
            self._ready(
                network, False, _RR.NAD_NOT_FOUND, f"NetworkAttachmentDefinition {where} is being deleted", ""
            )
            return Result("waiting", retry=True)
        return self._ready(network, True, _RR.NETWORK_READY, READY_MESSAGE, outcome)

    def _ensure_nad(
        self, ref: network_refs.ObjectRef, where: network_refs.ObjectRef, expected: Mapping[str, object]
    ) -> str:
        existing = self.client.get_or_none(objects.NAD, where.name, where.namespace)
        if existing is None:
            try:
                self.client.create(objects.NAD, expected)
            except api_errors.Conflict as exc:
                if not exc.already_exists:
                    raise
                existing = self.client.get(objects.NAD, where.name, where.namespace)
            else:
                return "created"
        meta = views.mapping(existing.get("metadata"))
        marker = views.mapping(meta.get("annotations")).get(network_refs.OWNER_REF_ANNOTATION)
        if marker and marker != network_refs.owner_marker(ref):
            raise _Claimed(f"NetworkAttachmentDefinition '{where}' already exists and is owned by {marker}")
        if meta.get("deletionTimestamp"):
            return "deleting"
        if not sriov_network.nad_differences(expected, existing):
            return "unchanged"
        body = dict(expected)
        body["metadata"] = {
            **views.mapping(expected["metadata"]),
            "resourceVersion": meta.get("resourceVersion"),
        }
        self.client.replace(objects.NAD, body)
        return "updated"

    def _delete_marked(
        self,
        ref: network_refs.ObjectRef,
        *,
        keep: network_refs.ObjectRef | None,
        also: Iterable[network_refs.ObjectRef] = (),
    ) -> int:
        """Delete every NAD carrying ``ref``'s marker except ``keep``; 404s count as done.

        ``also`` adds candidates the watch cache may not know yet (the rendered target).
        """
        removed = 0
        for nad_ref in sorted({*self.marked_nads(ref), *also}):
            if nad_ref == keep:
                continue
            live = self.client.get_or_none(objects.NAD, nad_ref.name, nad_ref.namespace)
            if live is None:
                continue
            meta = views.mapping(live.get("metadata"))
            if views.mapping(meta.get("annotations")).get(
                network_refs.OWNER_REF_ANNOTATION
            ) != network_refs.owner_marker(ref):
                continue
            if self.client.delete(
                objects.NAD, nad_ref.name, nad_ref.namespace, uid=views.optional_text(meta.get("uid"))
            ):
                removed += 1
                log.info("source nad deleted", extra={"nad": str(nad_ref), "network": str(ref)})
        return removed

    def _drop_legacy_finalizer(self, network: Mapping[str, object]) -> None:
        meta = views.mapping(network.get("metadata"))
        finalizers = list(views.items(meta.get("finalizers")))
        if sriov_network.LEGACY_FINALIZER not in finalizers:
            return
        index = finalizers.index(sriov_network.LEGACY_FINALIZER)
        ops = [
            {"op": "test", "path": f"/metadata/finalizers/{index}", "value": sriov_network.LEGACY_FINALIZER},
            {"op": "remove", "path": f"/metadata/finalizers/{index}"},
        ]
        self.client.json_patch(
            objects.SRIOV_NETWORK, str(meta.get("name")), views.optional_text(meta.get("namespace")), ops
        )

    def _ready(
        self,
        network: Mapping[str, object],
        ok: bool,
        reason: sriov_network.ReadyReason | errors.Reason,
        message: str,
        outcome: str,
        *,
        event_reason: str | None = None,
    ) -> Result:
        meta = views.mapping(network.get("metadata"))
        generation = meta.get("generation")
        desired = conditions.Condition(
            sriov_network.READY,
            conditions.Status.TRUE if ok else conditions.Status.FALSE,
            reason.value,
            message,
            int(generation) if isinstance(generation, int) else 0,
        )
        self.writer.set(objects.SRIOV_NETWORK, network, desired, event_reason=event_reason)
        return Result(outcome or "ok", detail="" if ok else f"{reason}: {message}")


class _Claimed(Exception):
    """The target NAD carries another network's owner marker."""
