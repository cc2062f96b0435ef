"""SriovNetwork → source NetworkAttachmentDefinition, rendered exactly as the upstream operator does.

This module owns the one renderer that both operator controllers use, so that the network
controller (the sole writer of the source NAD) and the node-policy controller (which only reads
it) cannot drift (spec §12.2.3 "reuse RenderNetAttDef ... so the two controllers cannot drift"):

* the target: ``name`` = SriovNetwork name, ``namespace`` = ``spec.networkNamespace`` when set,
  else the SriovNetwork's own namespace; ``networkNamespace`` may only be set on networks that
  live in the operator namespace;
* the CNI JSON: keys in upstream's template order, optional keys omitted, ints as ints,
  ``"ipam":{}`` when unset, the ipam text with every Go ``unicode.IsSpace`` character removed,
  ``metaPlugins`` turning the config into a ``plugins`` conflist, then re-indented the way Go's
  ``json.Indent(…, "", "    ")`` does (byte equality avoids update loops);
* the metadata: exactly the legacy ``k8s.v1.cni.cncf.io/resourceName`` annotation and the
  ``sriovnetwork.openshift.io/owner-ref`` marker, no labels, and a plain ownerReference only when
  the NAD lives in the SriovNetwork's namespace;
* :func:`resolve_source`: whether a live SriovNetwork and NAD form a usable source for a node
  policy's reference (current-generation ``Ready=True``, NAD not deleting, content and marker
  equal to the rendering, a same-namespace ownerReference naming the current UID).

It must never do I/O, default a namespace to anything but the rules above, or accept a Ready
condition from an earlier generation.

Source: reference sriov-network-operator.md §1.2, §2, §3; spec §12.2.3.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from sriov_dra.core import conditions
from sriov_dra_rules import errors

GROUP: Final = "sriovnetwork.openshift.io"
API_VERSION: Final = f"{GROUP}/v1"
KIND: Final = "SriovNetwork"
PLURAL: Final = "sriovnetworks"
OWNER_REF_ANNOTATION: Final = f"{GROUP}/owner-ref"
"""Marker naming the SriovNetwork that renders a NAD (upstream ``consts.OwnerRefAnnotation``)."""
RESOURCE_NAME_ANNOTATION: Final = "k8s.v1.cni.cncf.io/resourceName"
LEGACY_FINALIZER: Final = "netattdef.finalizers.sriovnetwork.openshift.io"
"""Upstream's NAD-cleanup finalizer; this operator never adds it and removes it when found."""
NAD_API_VERSION: Final = "k8s.cni.cncf.io/v1"
NAD_KIND: Final = "NetworkAttachmentDefinition"
DEFAULT_RESOURCE_PREFIX: Final = "openshift.io"
CNI_VERSION: Final = "1.0.0"
READY: Final = "Ready"

# Go unicode.IsSpace: the ASCII/Latin-1 set plus the Unicode White_Space property.
_GO_SPACE: Final = re.compile("[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
_STRING: Final = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_ON_OFF: Final = frozenset({"on", "off"})
_LINK_STATES: Final = frozenset({"enable", "disable", "auto"})


class ReadyReason(enum.StrEnum):
    """Reasons of the SriovNetwork ``Ready`` condition (upstream ``api/v1/conditions.go``)."""

    NETWORK_READY = "NetworkReady"
    NAD_NOT_FOUND = "NetworkAttachmentDefinitionNotFound"
    NAD_INVALID = "NetworkAttachmentDefinitionInvalid"
    NAMESPACE_NOT_FOUND = "NamespaceNotFound"


class ObjectRef(NamedTuple):
    """A namespaced object identity ``(namespace, name)``; ``str()`` gives ``ns/name``."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def ref_of(obj: Mapping[str, object]) -> ObjectRef:
    """``(metadata.namespace, metadata.name)`` of an object dict (empty strings when absent)."""
    meta = _mapping(obj.get("metadata"))
    return ObjectRef(str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def target(network: Mapping[str, object]) -> ObjectRef:
    """Where the source NAD of ``network`` lives: ``spec.networkNamespace`` or its own namespace.

    Source: upstream ``RenderNetAttDef``; spec §12.2.3 (CR and NAD namespaces are distinct).
    """
    own = ref_of(network)
    spec = _mapping(network.get("spec"))
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
    spec = _mapping(network.get("spec"))
    if spec.get("networkNamespace") and ref_of(network).namespace != operator_namespace:
        return (
            "spec.networkNamespace cannot be set when the resource is not in the operator namespace "
            f"({operator_namespace}); remove it or move the SriovNetwork to {operator_namespace}"
        )
    return None


def go_json_indent(text: str, indent: str = "    ") -> str:
    """Re-indent JSON text the way Go's ``json.Indent(dst, src, "", indent)`` does.

    Shapes: one element per line, ``"key": value``, empty ``{}``/``[]`` kept compact, string and
    number literals copied byte for byte (no re-escaping, no number normalisation).
    Raises: InvalidSpec when ``text`` is not one JSON value (NaN/Infinity included).
    """
    _validate_json(text)
    out: list[str] = []
    depth = 0
    need_indent = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
            continue
        if need_indent and c not in "]}":
            need_indent = False
            depth += 1
            out.append("\n" + indent * depth)
        if c == '"':
            match = _STRING.match(text, i)
            assert match is not None  # validated above
            out.append(match.group())
            i = match.end()
            continue
        if c in "{[":
            out.append(c)
            need_indent = True
        elif c == ",":
            out.append(",\n" + indent * depth)
        elif c == ":":
            out.append(": ")
        elif c in "}]":
            if need_indent:
                need_indent = False
            else:
                depth -= 1
                out.append("\n" + indent * depth)
            out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _validate_json(text: str) -> None:
    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError as exc:
        raise errors.InvalidSpec(
            f"rendered CNI config is not valid JSON ({exc}); text: {text[:200]}"
        ) from exc


def render_config(network: Mapping[str, object]) -> str:
    """The source NAD's ``spec.config`` for ``network``, byte-identical to upstream's.

    Shapes: 4-space-indented JSON; keys ``cniVersion``, ``name``, [``plugins``: [{], ``type``,
    ``vlan``, ``spoofchk``, ``trust``, ``vlanQoS``, ``vlanProto``, ``min_tx_rate``, ``max_tx_rate``,
    ``capabilities``, ``link_state``, ``logLevel``, ``logFile``, ``ipam`` [}, metaPlugins]].
    Raises: InvalidSpec naming the field when a value has the wrong type or the result (raw
    ``ipam``/``capabilities``/``metaPlugins`` text inserted verbatim) is not JSON.
    Source: reference sriov-network-operator.md §2 (template ``sriov-cni-config.yaml``).
    """
    ref = ref_of(network)
    spec = _mapping(network.get("spec"))
    problems: list[errors.FieldError] = []

    def text(key: str) -> str:
        value = spec.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            problems.append(errors.FieldError(f"spec.{key}", f"must be a string, got {value!r}"))
            return ""
        return value

    def integer(key: str) -> int | None:
        value = spec.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(errors.FieldError(f"spec.{key}", f"must be an integer, got {value!r}"))
            return None
        return value

    vlan = integer("vlan")
    qos = integer("vlanQoS")
    min_rate, max_rate = integer("minTxRate"), integer("maxTxRate")
    spoof, trust, link = text("spoofChk"), text("trust"), text("linkState")
    proto, caps, ipam, meta = text("vlanProto"), text("capabilities"), text("ipam"), text("metaPlugins")
    log_level, log_file = text("logLevel"), text("logFile")
    errors.raise_if_any(problems, f"SriovNetwork {ref} cannot be rendered")
    parts = ["{", f'"cniVersion":"{CNI_VERSION}",', f'"name":"{ref.name}",']
    if meta:
        parts.append('"plugins":[{')
    parts.append('"type":"sriov",')
    parts.append(f'"vlan":{vlan or 0},')
    if spoof in _ON_OFF:
        parts.append(f'"spoofchk":"{spoof}",')
    if trust in _ON_OFF:
        parts.append(f'"trust":"{trust}",')
    if 0 <= (qos or 0) <= 7:
        parts.append(f'"vlanQoS":{qos or 0},')
    if proto:
        parts.append(f'"vlanProto":"{proto}",')
    if min_rate is not None and min_rate >= 0:
        parts.append(f'"min_tx_rate":{min_rate},')
    if max_rate is not None and max_rate >= 0:
        parts.append(f'"max_tx_rate":{max_rate},')
    if caps:
        parts.append(f'"capabilities":{caps},')
    if link in _LINK_STATES:
        parts.append(f'"link_state":"{link}",')
    if log_level:
        parts.append(f'"logLevel":"{log_level}",')
    if log_file:
        parts.append(f'"logFile":"{log_file}",')
    parts.append('"ipam":' + ("".join(_GO_SPACE.split(ipam)) if ipam else "{}"))
    parts.append("}")
    if meta:
        parts.append(f",{meta}]}}")
    try:
        return go_json_indent("".join(parts))
    except errors.InvalidSpec as exc:
        raise errors.InvalidSpec(
            f"SriovNetwork {ref} renders invalid CNI JSON; check spec.ipam, spec.capabilities, "
            f"spec.metaPlugins and spec.logFile ({exc.summary})"
        ) from exc


def render_nad(network: Mapping[str, object], *, resource_prefix: str) -> dict[str, object]:
    """The complete source NAD manifest for ``network`` (what the network controller writes).

    Shapes: ``metadata`` has name, namespace, exactly the two operator annotations, and
    ``ownerReferences`` = [{apiVersion, kind, name, uid}] only when the NAD is in the network's
    namespace; ``spec.config`` from :func:`render_config`.
    Raises: InvalidSpec from :func:`render_config`, or when ``spec.resourceName`` is missing.
    Source: reference sriov-network-operator.md §2 "NAD metadata".
    """
    own = ref_of(network)
    where = target(network)
    spec = _mapping(network.get("spec"))
    resource_name = spec.get("resourceName")
    if not isinstance(resource_name, str) or not resource_name:
        raise errors.InvalidSpec(f"SriovNetwork {own}: spec.resourceName is required; set it")
    meta: dict[str, object] = {
        "name": where.name,
        "namespace": where.namespace,
        "annotations": {
            RESOURCE_NAME_ANNOTATION: f"{resource_prefix}/{resource_name}",
            OWNER_REF_ANNOTATION: owner_marker(own),
        },
    }
    if where.namespace == own.namespace:
        uid = _mapping(network.get("metadata")).get("uid")
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
    e_meta, a_meta = _mapping(expected.get("metadata")), _mapping(actual.get("metadata"))
    out = []
    if _mapping(expected.get("spec")) != _mapping(actual.get("spec")):
        out.append("spec")
    if _mapping(e_meta.get("annotations")) != _mapping(a_meta.get("annotations")):
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
    Source: spec §12.2.3, §12.2.5.
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
    meta = _mapping(network.get("metadata"))
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
        return unresolved(ref, nad_not_ready, f"{label} cannot be rendered: {exc.summary}")
    where = target(network)
    nad_label = f"source NetworkAttachmentDefinition {where}"
    if nad is None:
        return unresolved(ref, nad_not_ready, f"{nad_label} does not exist yet")
    nad_meta = _mapping(nad.get("metadata"))
    if nad_meta.get("deletionTimestamp"):
        return unresolved(ref, nad_not_ready, f"{nad_label} is being deleted")
    marker = _mapping(nad_meta.get("annotations")).get(OWNER_REF_ANNOTATION)
    if marker != owner_marker(ref):
        return unresolved(
            ref, nad_not_ready, f"{nad_label} has owner marker {marker!r}, expected {owner_marker(ref)!r}"
        )
    if _mapping(nad.get("spec")) != _mapping(expected.get("spec")) or _mapping(
        nad_meta.get("annotations")
    ).get(RESOURCE_NAME_ANNOTATION) != _mapping(_mapping(expected.get("metadata")).get("annotations")).get(
        RESOURCE_NAME_ANNOTATION
    ):
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


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _seq(value: object) -> Sequence[object]:
    return value if isinstance(value, list) else []
