"""A SriovNetwork's CNI config, rendered as the upstream operator's template does.

The source NAD's ``spec.config`` (docs/design.md#operator-networks): built as a structure and
encoded, never pasted; keys in upstream's template order, optional keys omitted, ints as ints,
``"ipam":{}`` when unset; ``ipam``, ``capabilities`` and ``metaPlugins`` decoded strictly on their
own and emitted as written (``metaPlugins`` makes it a conflist); re-indented by
:func:`~sriov_dra.core.operator.go_json.go_json_indent`. A value upstream would render differently
is refused, never rendered otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sriov_dra.core import ipam_ranges, sriov_cni_fields
from sriov_dra.core.operator.go_json import STRING_LITERAL, go_json_indent
from sriov_dra.core.operator.network_refs import mapping, ref_of
from sriov_dra_rules import errors, strict_json

CNI_VERSION: Final = "1.0.0"
INVALID_SPEC_REASON: Final = errors.Reason.INVALID_NETWORK_SPEC
"""Reason of every rendering refusal, and of the ``Ready=False`` condition and Warning Event it causes."""

# Go unicode.IsSpace: the ASCII/Latin-1 set plus the Unicode White_Space property.
_GO_SPACE: Final = re.compile("[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
_SRIOV_CNI_FIELDS: Final = {
    "vlan": "vlan",
    "vlanQoS": "vlanQoS",
    "vlanProto": "vlanProto",
    "spoofchk": "spoofChk",
    "trust": "trust",
    "link_state": "linkState",
    "min_tx_rate": "minTxRate",
    "max_tx_rate": "maxTxRate",
}
"""sriov-cni's key -> the SriovNetwork ``spec`` field it is rendered from."""


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_empty(value: object) -> str:
    return value if isinstance(value, str) else ""


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
        return "{" + ",".join(f"{strict_json.encode(k)}:{_compact(v)}" for k, v in node.items()) + "}"
    if isinstance(node, list):
        return "[" + ",".join(_compact(v) for v in node) + "]"
    return strict_json.encode(node)


def _object_text(text: str, field: str, example: str, problems: list[errors.FieldError]) -> _Verbatim | None:
    """``spec.<field>`` decoded on its own as exactly one JSON object; problems are appended."""
    path = f"spec.{field}"
    try:
        value = strict_json.decode(text, path=path)
    except errors.InvalidSpec as exc:
        problems.extend(exc.errors)
        return None
    if not isinstance(value, dict):
        problems.append(
            errors.FieldError(
                path,
                f"expected a JSON object, got {strict_json.kind(value)}; set it to one object such as {example}",
            )
        )
        return None
    if field == "ipam":
        found = _spaced_strings(text, value, path)
        if not found:
            found = ipam_ranges.ipam_problems(value, path)
        if found:
            problems.extend(found)
            return None
    return _Verbatim(text)


def _spaced_strings(text: str, value: strict_json.JsonValue, path: str) -> list[errors.FieldError]:
    """Keys and strings of ``spec.ipam`` whose literal holds a Go ``unicode.IsSpace`` character.

    Upstream renders ``spec.ipam`` with every such character deleted, inside strings too, so
    ``"rail a"`` reaches the plugin as ``"raila"``. Rendering it faithfully would give another NAD
    than upstream's for the same SriovNetwork; deleting it would change the administrator's
    value. Neither is safe, so such a string is refused, with the fix (a ``\\u0020`` escape is
    not whitespace to upstream either, and survives both renderers).
    """
    spaced = {
        strict_json.decode(m.group())
        for m in STRING_LITERAL.finditer(text)
        if _GO_SPACE.search(m.group()) is not None
    }
    if not spaced:
        return []
    fix = (
        "contains whitespace, which the upstream operator deletes from spec.ipam even inside strings, "
        "so the plugin would not get it as written; remove it or write it as a \\u0020 escape"
    )
    found: list[errors.FieldError] = []
    for node, node_path in strict_json.walk(value, path):
        if isinstance(node, dict):
            found.extend(
                errors.FieldError(strict_json.key_path(node_path, k), f"key {fix}")
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
        values = strict_json.decode_sequence(text, path=path)
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
            strict_json.index_path(path, i),
            f"expected a JSON object (one CNI plugin config), got {strict_json.kind(v)}",
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
    one strict JSON object, a ``spec.metaPlugins`` entry that is not, a ``spec.ipam`` string
    holding whitespace (upstream would delete it, see :func:`_spaced_strings`), or a host-local
    ``spec.ipam`` whose pool host-local or whereabouts would refuse at CNI ADD (:mod:`~sriov_dra.core.ipam_ranges`).
    Source: upstream sriov-network-operator's template ``sriov-cni-config.yaml``.
    """
    ref = ref_of(network)
    spec = mapping(network.get("spec"))
    problems: list[errors.FieldError] = []

    def text(key: str) -> str:
        value = spec.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            problems.append(errors.FieldError(f"spec.{key}", f"must be a string, got {value!r}"))
            return ""
        return value

    # An empty string is unset here: upstream's template leaves such a field out.
    raw = {key: None if spec.get(f) == "" else spec.get(f) for key, f in _SRIOV_CNI_FIELDS.items()}
    raw["vlan"] = 0 if raw["vlan"] is None else raw["vlan"]  # upstream always renders vlan
    vf_problems = sriov_cni_fields.problems_of(raw, {k: f"spec.{f}" for k, f in _SRIOV_CNI_FIELDS.items()})
    problems.extend(vf_problems)
    bad = {p.path.removeprefix("spec.") for p in vf_problems}
    vlan = _int_or_none(raw["vlan"]) if "vlan" not in bad else None
    qos = _int_or_none(raw["vlanQoS"])
    min_rate, max_rate = _int_or_none(raw["min_tx_rate"]), _int_or_none(raw["max_tx_rate"])
    spoof, trust, link = (_str_or_empty(raw[k]) for k in ("spoofchk", "trust", "link_state"))
    proto, caps_text, ipam_text = _str_or_empty(raw["vlanProto"]), text("capabilities"), text("ipam")
    meta_text, log_level, log_file = text("metaPlugins"), text("logLevel"), text("logFile")
    caps = _object_text(caps_text, "capabilities", '{"mac":true}', problems) if caps_text else None
    ipam = (
        _object_text(ipam_text, "ipam", '{"type":"host-local","subnet":"10.0.0.0/24"}', problems)
        if ipam_text
        else None
    )
    meta = _meta_plugins(meta_text, problems) if meta_text else None
    errors.raise_if_any(problems, f"SriovNetwork {ref} cannot be rendered", reason=INVALID_SPEC_REASON)
    # Every value reaching here was accepted by sriov_cni_fields, so nothing is dropped silently.
    sriov: dict[str, _Node] = {"type": "sriov", "vlan": vlan or 0}
    if spoof:
        sriov["spoofchk"] = spoof
    if trust:
        sriov["trust"] = trust
    sriov["vlanQoS"] = qos or 0
    if proto:
        sriov["vlanProto"] = proto
    if min_rate is not None:
        sriov["min_tx_rate"] = min_rate
    if max_rate is not None:
        sriov["max_tx_rate"] = max_rate
    if caps is not None:
        sriov["capabilities"] = caps
    if link:
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
