"""Who a SriovNetwork is, where its source NAD lives, and the marker that ties the two.

A SriovNetwork's identity as both operator controllers read it (docs/design.md#operator-networks):
API group, kind and plural, :class:`ObjectRef`, the source NAD's target (``spec.networkNamespace``,
allowed only in the operator namespace, else its own namespace) and the ``owner-ref`` annotation
marker (``SriovNetwork.<group>/<ns>/<name>``, upstream ``OwnerRefToString``) with its strict
reader. Never renders a config or reads a marker of another shape as a SriovNetwork.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

GROUP: Final = "sriovnetwork.openshift.io"
API_VERSION: Final = f"{GROUP}/v1"
KIND: Final = "SriovNetwork"
PLURAL: Final = "sriovnetworks"
OWNER_REF_ANNOTATION: Final = f"{GROUP}/owner-ref"
"""Marker naming the SriovNetwork that renders a NAD (upstream ``consts.OwnerRefAnnotation``)."""


class ObjectRef(NamedTuple):
    """A namespaced object identity ``(namespace, name)``; ``str()`` gives ``ns/name``."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def ref_of(obj: Mapping[str, object]) -> ObjectRef:
    """``(metadata.namespace, metadata.name)`` of an object dict (empty strings when absent)."""
    meta = mapping(obj.get("metadata"))
    return ObjectRef(str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def target(network: Mapping[str, object]) -> ObjectRef:
    """Where the source NAD of ``network`` lives: ``spec.networkNamespace`` or its own namespace.

    Source: upstream ``RenderNetAttDef``; docs/design.md#operator-networks.
    """
    own = ref_of(network)
    spec = mapping(network.get("spec"))
    target_ns = spec.get("networkNamespace")
    return ObjectRef(target_ns if isinstance(target_ns, str) and target_ns else own.namespace, own.name)


def owner_marker(network: ObjectRef) -> str:
    """The ``owner-ref`` annotation value, e.g. ``SriovNetwork.sriovnetwork.openshift.io/ns/net1``.

    Source: upstream ``OwnerRefToString`` (``<Kind>.<group>/<namespace>/<name>``).
    """
    return f"{KIND}.{GROUP}/{network.namespace}/{network.name}"


def parse_owner_marker(value: object) -> ObjectRef | None:
    """The SriovNetwork named by an ``owner-ref`` value, or ``None`` for anything else."""
    prefix = f"{KIND}.{GROUP}/"
    if not isinstance(value, str) or not value.startswith(prefix):
        return None
    parts = value[len(prefix) :].split("/")
    if len(parts) != 2 or not all(parts):
        return None
    return ObjectRef(parts[0], parts[1])


def namespace_rule_problem(network: Mapping[str, object], operator_namespace: str) -> str | None:
    """Say why ``spec.networkNamespace`` is not allowed on ``network``, or return ``None``.

    Source: upstream ``validate_networks.go`` and the generic network reconciler's repeat of it.
    """
    spec = mapping(network.get("spec"))
    if spec.get("networkNamespace") and ref_of(network).namespace != operator_namespace:
        return (
            "spec.networkNamespace cannot be set when the resource is not in the operator namespace "
            f"({operator_namespace}); remove it or move the SriovNetwork to {operator_namespace}"
        )
    return None


def mapping(value: object) -> Mapping[str, object]:
    """``value`` when it is a mapping, else ``{}`` (absent or wrong-typed fields read as empty)."""
    return value if isinstance(value, Mapping) else {}
