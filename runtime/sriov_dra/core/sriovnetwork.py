"""SriovNetwork → source NetworkAttachmentDefinition, rendered exactly as the upstream operator does.

This module owns the one renderer that both operator controllers use, so that the network
controller (the sole writer of the source NAD) and the node-policy controller (which only reads
it) cannot drift (spec §12.2.3 "reuse RenderNetAttDef ... so the two controllers cannot drift"):

* the target: ``name`` = SriovNetwork name, ``namespace`` = ``spec.networkNamespace`` when set,
  else the SriovNetwork's own namespace; ``networkNamespace`` may only be set on networks that
  live in the operator namespace;
* the CNI JSON, built as a structure and encoded (never pasted): keys in upstream's template
  order, optional keys omitted, ints as ints, strings JSON-encoded so that they round-trip
  exactly, ``"ipam":{}`` when unset; ``ipam``/``capabilities`` (one JSON object each) and
  ``metaPlugins`` (comma-separated objects) decoded strictly on their own and then emitted as
  written; ``metaPlugins`` turning the config into a ``plugins`` conflist; then re-indented the
  way Go's ``json.Indent(…, "", "    ")`` does (byte equality with upstream avoids update loops);
* the metadata: exactly the legacy ``k8s.v1.cni.cncf.io/resourceName`` annotation and the
  ``sriovnetwork.openshift.io/owner-ref`` marker, no labels, and a plain ownerReference only when
  the NAD lives in the SriovNetwork's namespace;
* :func:`resolve_source`: whether a live SriovNetwork and NAD form a usable source for a node
  policy's reference (current-generation ``Ready=True``, NAD not deleting, content and marker
  equal to the rendering, a same-namespace ownerReference naming the current UID).

It must never do I/O, paste administrator text into the config that has not been decoded
strictly on its own, default a namespace to anything but the rules above, or accept a Ready
condition from an earlier generation.

Source: reference sriov-network-operator.md §1.2, §2, §3; spec §12.2.3.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from sriov_dra.core import conditions
from sriov_dra_rules import errors, strictjson

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
INVALID_SPEC_REASON: Final = errors.Reason.INVALID_NETWORK_SPEC
"""Reason of every rendering refusal, and of the ``Ready=False`` condition and Warning Event it causes."""

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
    Raises: InvalidSpec when ``text`` is not one strict JSON value (NaN/Infinity, a repeated key).
    """
    strictjson.decode(text)
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


@dataclass(frozen=True)
class _Verbatim:
    """Administrator JSON text already decoded strictly, emitted as written (Go's ``json.RawMessage``).

    ``text`` is one JSON object, or (inside a list) comma-separated JSON objects. Emitting it
    unchanged keeps upstream's bytes: its string literals and numbers are copied as written, and
    the whitespace between its tokens disappears in :func:`go_json_indent`.
    """

    text: str


_Node = dict[str, "_Node"] | list["_Node"] | str | int | _Verbatim


def _compact(node: _Node) -> str:
    """Compact JSON of a config node; every string goes through the JSON encoder (no pasting)."""
    if isinstance(node, _Verbatim):
        return node.text
    if isinstance(node, dict):
        return "{" + ",".join(f"{strictjson.encode(k)}:{_compact(v)}" for k, v in node.items()) + "}"
    if isinstance(node, list):
        return "[" + ",".join(_compact(v) for v in node) + "]"
    return strictjson.encode(node)


def _object_text(text: str, field: str, example: str, problems: list[errors.FieldError]) -> _Verbatim | None:
    """``spec.<field>`` decoded on its own as exactly one JSON object; problems are appended."""
    path = f"spec.{field}"
    try:
        value = strictjson.decode(text, path=path)
    except errors.InvalidSpec as exc:
        problems.extend(exc.errors)
        return None
    if not isinstance(value, dict):
        problems.append(
            errors.FieldError(
                path,
                f"expected a JSON object, got {strictjson.kind(value)}; set it to one object such as {example}",
            )
        )
        return None
    if field == "ipam":
        found = _spaced_strings(text, value, path)
        if found:
            problems.extend(found)
            return None
    return _Verbatim(text)


def _spaced_strings(text: str, value: strictjson.JsonValue, path: str) -> list[errors.FieldError]:
    """Keys and strings of ``spec.ipam`` whose literal holds a Go ``unicode.IsSpace`` character.

    Upstream renders ``spec.ipam`` with every such character deleted, inside strings too, so
    ``"rail a"`` reaches the plugin as ``"raila"``. Rendering it faithfully would give another NAD
    than upstream's for the same SriovNetwork; deleting it would change the administrator's
    value. Neither is safe, so such a string is refused, with the fix (a ``\\u0020`` escape is
    not whitespace to upstream either, and survives both renderers).
    """
    spaced = {
        strictjson.decode(m.group())
        for m in _STRING.finditer(text)
        if _GO_SPACE.search(m.group()) is not None
    }
    if not spaced:
        return []
    fix = (
        "contains whitespace, which the upstream operator deletes from spec.ipam even inside strings, "
        "so the plugin would not get it as written; remove it or write it as a \\u0020 escape"
    )
    found: list[errors.FieldError] = []
    for node, node_path in strictjson.walk(value, path):
        if isinstance(node, dict):
            found.extend(
                errors.FieldError(strictjson.key_path(node_path, k), f"key {fix}")
                for k in node
                if k in spaced
            )
        elif isinstance(node, str) and node in spaced:
            found.append(errors.FieldError(node_path, f"string {fix}"))
    return found or [errors.FieldError(path, f"a string {fix}")]


def _meta_plugins(text: str, problems: list[errors.FieldError]) -> _Verbatim | None:
    """``spec.metaPlugins`` decoded on its own as one or more comma-separated JSON objects."""
    path = "spec.metaPlugins"
    try:
        values = strictjson.decode_sequence(text, path=path)
    except errors.InvalidSpec as exc:
        problems.extend(exc.errors)
        return None
    if not values:
        problems.append(
            errors.FieldError(
                path, "holds no plugin; set comma-separated CNI plugin objects or leave it empty"
            )
        )
        return None
    bad = [
        errors.FieldError(
            strictjson.index_path(path, i),
            f"expected a JSON object (one CNI plugin config), got {strictjson.kind(v)}",
        )
        for i, v in enumerate(values)
        if not isinstance(v, dict)
    ]
    problems.extend(bad)
    return None if bad else _Verbatim(text)


def render_config(network: Mapping[str, object]) -> str:
    """The source NAD's ``spec.config`` for ``network``, byte-identical to upstream's for valid input.

    The config is built as a structure and encoded: every string field (``name``, ``vlanProto``,
    ``logLevel``, ``logFile``) goes through the JSON encoder, so it stays one string and
    round-trips exactly. ``spec.ipam`` and ``spec.capabilities`` must each decode strictly, on their
    own, to exactly one JSON object, and ``spec.metaPlugins`` to comma-separated JSON objects (no
    repeated key, no NaN); they are then emitted as written, as upstream does (string literals
    and numbers copied byte for byte).

    Shapes: 4-space-indented JSON; keys ``cniVersion``, ``name``, [``plugins``: [{], ``type``,
    ``vlan``, ``spoofchk``, ``trust``, ``vlanQoS``, ``vlanProto``, ``min_tx_rate``, ``max_tx_rate``,
    ``capabilities``, ``link_state``, ``logLevel``, ``logFile``, ``ipam`` [}, metaPlugins]].
    Raises: InvalidSpec (reason ``InvalidNetworkSpec``) naming the SriovNetwork and carrying one
    FieldError per problem: a wrong-typed field, ``spec.ipam``/``spec.capabilities`` that is not
    one strict JSON object, a ``spec.metaPlugins`` entry that is not, or a ``spec.ipam`` string
    holding whitespace (upstream would delete it, see :func:`_spaced_strings`).
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
    proto, caps_text, ipam_text = text("vlanProto"), text("capabilities"), text("ipam")
    meta_text, log_level, log_file = text("metaPlugins"), text("logLevel"), text("logFile")
    caps = _object_text(caps_text, "capabilities", '{"mac":true}', problems) if caps_text else None
    ipam = (
        _object_text(ipam_text, "ipam", '{"type":"host-local","subnet":"10.0.0.0/24"}', problems)
        if ipam_text
        else None
    )
    meta = _meta_plugins(meta_text, problems) if meta_text else None
    errors.raise_if_any(problems, f"SriovNetwork {ref} cannot be rendered", reason=INVALID_SPEC_REASON)
    sriov: dict[str, _Node] = {"type": "sriov", "vlan": vlan or 0}
    if spoof in _ON_OFF:
        sriov["spoofchk"] = spoof
    if trust in _ON_OFF:
        sriov["trust"] = trust
    if 0 <= (qos or 0) <= 7:
        sriov["vlanQoS"] = qos or 0
    if proto:
        sriov["vlanProto"] = proto
    if min_rate is not None and min_rate >= 0:
        sriov["min_tx_rate"] = min_rate
    if max_rate is not None and max_rate >= 0:
        sriov["max_tx_rate"] = max_rate
    if caps is not None:
        sriov["capabilities"] = caps
    if link in _LINK_STATES:
        sriov["link_state"] = link
    if log_level:
        sriov["logLevel"] = log_level
    if log_file:
        sriov["logFile"] = log_file
    sriov["ipam"] = ipam if ipam is not None else {}
    config: dict[str, _Node] = {"cniVersion": CNI_VERSION, "name": ref.name}
    if meta is not None:
        config["plugins"] = [sriov, meta]
    else:
        config.update(sriov)
    return go_json_indent(_compact(config))


def render_nad(network: Mapping[str, object], *, resource_prefix: str) -> dict[str, object]:
    """The complete source NAD manifest for ``network`` (what the network controller writes).

    Shapes: ``metadata`` has name, namespace, exactly the two operator annotations, and
    ``ownerReferences`` = [{apiVersion, kind, name, uid}] only when the NAD is in the network's
    namespace; ``spec.config`` from :func:`render_config`.
    Raises: InvalidSpec (reason ``InvalidNetworkSpec``) from :func:`render_config`, or when
    ``spec.resourceName`` is missing.
    Source: reference sriov-network-operator.md §2 "NAD metadata".
    """
    own = ref_of(network)
    where = target(network)
    spec = _mapping(network.get("spec"))
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
        return unresolved(ref, nad_not_ready, exc.detail)
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
