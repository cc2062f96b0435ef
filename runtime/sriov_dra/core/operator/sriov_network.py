"""SriovNetwork → source NetworkAttachmentDefinition, rendered exactly as the upstream operator does.

The one renderer both operator controllers use, so the network controller (the NAD's sole writer)
and the node-policy controller (a reader) cannot drift (docs/design.md#operator-networks): the
target (``network_refs``), the CNI config (``network_config``), the metadata (the legacy
``resourceName`` annotation and the ``owner-ref`` marker, no labels, a plain ownerReference only in
the network's own namespace), and :func:`resolve_source`. It re-exports the names its callers use.
Pure; never accepts a Ready condition from an earlier generation.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sriov_dra.core.operator import conditions
from sriov_dra.core.operator.network_config import INVALID_SPEC_REASON, render_config
from sriov_dra.core.operator.network_refs import (
    API_VERSION,
    GROUP,
    KIND,
    OWNER_REF_ANNOTATION,
    ObjectRef,
    mapping,
    namespace_rule_problem,
    owner_marker,
    ref_of,
    target,
)
from sriov_dra_rules import errors

RESOURCE_NAME_ANNOTATION: Final = "k8s.v1.cni.cncf.io/resourceName"
LEGACY_FINALIZER: Final = "netattdef.finalizers.sriovnetwork.openshift.io"
"""Upstream's NAD-cleanup finalizer; this operator never adds it and removes it when found."""
NAD_API_VERSION: Final = "k8s.cni.cncf.io/v1"
NAD_KIND: Final = "NetworkAttachmentDefinition"
DEFAULT_RESOURCE_PREFIX: Final = "openshift.io"
READY: Final = "Ready"


class ReadyReason(enum.StrEnum):
    """Reasons of the SriovNetwork ``Ready`` condition (upstream ``api/v1/conditions.go``)."""

    NETWORK_READY = "NetworkReady"
    NAD_NOT_FOUND = "NetworkAttachmentDefinitionNotFound"
    NAD_INVALID = "NetworkAttachmentDefinitionInvalid"
    NAMESPACE_NOT_FOUND = "NamespaceNotFound"


def render_nad(network: Mapping[str, object], *, resource_prefix: str) -> dict[str, object]:
    """The complete source NAD manifest for ``network`` (what the network controller writes).

    Shapes: ``metadata`` has name, namespace, exactly the two operator annotations, and
    ``ownerReferences`` = [{apiVersion, kind, name, uid}] only when the NAD is in the network's
    namespace; ``spec.config`` from :func:`render_config`.
    Raises: InvalidSpec (reason ``InvalidNetworkSpec``) from :func:`render_config`, or when
    ``spec.resourceName`` is missing.
    Source: upstream sriov-network-operator's ``RenderNetAttDef`` (NAD metadata).
    """
    own = ref_of(network)
    where = target(network)
    spec = mapping(network.get("spec"))
    resource_name = spec.get("resourceName")
    if not isinstance(resource_name, str) or not resource_name:
        raise errors.InvalidSpec(
            f"SriovNetwork {own} cannot be rendered",
            reason=INVALID_SPEC_REASON,
            errors=[errors.FieldError("spec.resourceName", "is required; set it")],
        )
    meta: dict[str, object] = {
        "name": where.name,
        "namespace": where.namespace,
        "annotations": {
            RESOURCE_NAME_ANNOTATION: f"{resource_prefix}/{resource_name}",
            OWNER_REF_ANNOTATION: owner_marker(own),
        },
    }
    if where.namespace == own.namespace:
        uid = mapping(network.get("metadata")).get("uid")
        meta["ownerReferences"] = [{"apiVersion": API_VERSION, "kind": KIND, "name": own.name, "uid": uid}]
    return {
        "apiVersion": NAD_API_VERSION,
        "kind": NAD_KIND,
        "metadata": meta,
        "spec": {"config": render_config(network)},
    }


def nad_differences(expected: Mapping[str, object], actual: Mapping[str, object]) -> list[str]:
    """The managed fields of ``actual`` that differ from ``expected`` (empty: no write needed).

    Shapes: a sorted subset of ``spec``, ``metadata.annotations``, ``metadata.ownerReferences``;
    annotations and owner references compare as whole values (an update replaces them, as
    upstream's full ``Update`` does).
    """
    e_meta, a_meta = mapping(expected.get("metadata")), mapping(actual.get("metadata"))
    out = []
    if mapping(expected.get("spec")) != mapping(actual.get("spec")):
        out.append("spec")
    if mapping(e_meta.get("annotations")) != mapping(a_meta.get("annotations")):
        out.append("metadata.annotations")
    if list(_seq(e_meta.get("ownerReferences"))) != [
        {k: r.get(k) for k in ("apiVersion", "kind", "name", "uid")}
        for r in _seq(a_meta.get("ownerReferences"))
        if isinstance(r, Mapping)
    ]:
        out.append("metadata.ownerReferences")
    return out


@dataclass(frozen=True)
class SourceResolution:
    """Whether a node policy's SriovNetwork reference resolves to a usable source NAD.

    ``nad`` is the rendered target when ``reason`` is ``None``; otherwise ``reason`` is one of
    ``SriovNetworkNotFound``, ``SriovNetworkNotReady``, ``SourceNADNotReady``,
    ``SourceAccessDenied`` or ``DRAConfigurationSyncFailed`` and ``message`` says what to fix.
    """

    network: ObjectRef
    nad: ObjectRef | None
    reason: errors.Reason | None
    message: str

    @property
    def ready(self) -> bool:
        """True when the reference resolved to a ready, matching source NAD."""
        return self.reason is None and self.nad is not None


def unresolved(network: ObjectRef, reason: errors.Reason, message: str) -> SourceResolution:
    """A failed resolution of ``network`` (used for read failures decided by the caller)."""
    return SourceResolution(network, None, reason, message)


def resolve_source(
    ref: ObjectRef,
    network: Mapping[str, object] | None,
    nad: Mapping[str, object] | None,
    *,
    operator_namespace: str,
    resource_prefix: str,
) -> SourceResolution:
    """Decide whether live ``network`` and its live source ``nad`` may be published for ``ref``.

    ``network``/``nad`` are the live objects (``None`` when the GET answered 404). Requires, in
    order: the network exists and is not deleting, obeys the networkNamespace rule, has
    ``Ready=True`` with ``observedGeneration == metadata.generation``; the NAD exists, is not
    deleting, carries this network's owner marker and the rendered resourceName annotation and
    config, and any same-namespace SriovNetwork ownerReference names the current UID.
    Source: docs/design.md#operator-networks, docs/design.md#eligibility.
    """
    not_ready = errors.Reason.SRIOV_NETWORK_NOT_READY
    nad_not_ready = errors.Reason.SOURCE_NAD_NOT_READY
    label = f"SriovNetwork {ref}"
    if network is None:
        return unresolved(
            ref,
            errors.Reason.SRIOV_NETWORK_NOT_FOUND,
            f"{label} does not exist; create it or fix the reference",
        )
    meta = mapping(network.get("metadata"))
    if meta.get("deletionTimestamp"):
        return unresolved(ref, not_ready, f"{label} is being deleted")
    rule = namespace_rule_problem(network, operator_namespace)
    if rule is not None:
        return unresolved(ref, not_ready, f"{label}: {rule}")
    ok, why = conditions.current_true(network, READY)
    if not ok:
        return unresolved(ref, not_ready, f"{label} is not ready: {why}")
    try:
        expected = render_nad(network, resource_prefix=resource_prefix)
    except errors.InvalidSpec as exc:
        return unresolved(ref, nad_not_ready, exc.detail)
    where = target(network)
    nad_label = f"source NetworkAttachmentDefinition {where}"
    if nad is None:
        return unresolved(ref, nad_not_ready, f"{nad_label} does not exist yet")
    nad_meta = mapping(nad.get("metadata"))
    if nad_meta.get("deletionTimestamp"):
        return unresolved(ref, nad_not_ready, f"{nad_label} is being deleted")
    marker = mapping(nad_meta.get("annotations")).get(OWNER_REF_ANNOTATION)
    if marker != owner_marker(ref):
        return unresolved(
            ref, nad_not_ready, f"{nad_label} has owner marker {marker!r}, expected {owner_marker(ref)!r}"
        )
    if mapping(nad.get("spec")) != mapping(expected.get("spec")) or mapping(nad_meta.get("annotations")).get(
        RESOURCE_NAME_ANNOTATION
    ) != mapping(mapping(expected.get("metadata")).get("annotations")).get(RESOURCE_NAME_ANNOTATION):
        return unresolved(ref, nad_not_ready, f"{nad_label} content differs from the rendered {label}")
    if where.namespace == ref.namespace:
        for owner in _seq(nad_meta.get("ownerReferences")):
            if (
                isinstance(owner, Mapping)
                and owner.get("kind") == KIND
                and str(owner.get("apiVersion", "")).startswith(f"{GROUP}/")
                and owner.get("name") == ref.name
                and owner.get("uid") != meta.get("uid")
            ):
                return unresolved(
                    ref,
                    nad_not_ready,
                    f"{nad_label} is owned by SriovNetwork UID {owner.get('uid')}, "
                    f"current UID is {meta.get('uid')}",
                )
    return SourceResolution(ref, where, None, "")


def _seq(value: object) -> Sequence[object]:
    return value if isinstance(value, list) else []
