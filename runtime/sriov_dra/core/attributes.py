"""DRA device attributes: qualified names, scalar values, reserved keys and the NAD reference pair.

The rules an attribute map must satisfy before the driver publishes it in a ResourceSlice or
reads it as a network-template reference (docs/design.md#device-attributes): the Kubernetes
``QualifiedName`` grammar, the scalar value union with its limits, the 32-attribute device
budget, the discovery-owned keys, and the ``netAttachDefName``/``netAttachDefNamespace`` pair.
Never truncates a value, drops a key silently, or defaults a reference namespace (only template
resolution does, against the verified Pod namespace). Pure.
"""

from __future__ import annotations

import difflib
import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass

from sriov_dra.core import limits
from sriov_dra_rules import errors, names, strict_json

DRIVER_DOMAIN = names.DOMAIN
"""Driver name and attribute domain of upstream dra-driver-sriov."""

NAD_NAME_KEY = names.ATTR_NET_ATTACH_DEF_NAME
NAD_NAMESPACE_KEY = names.ATTR_NET_ATTACH_DEF_NAMESPACE
NAD_REFERENCE_KEYS = frozenset({NAD_NAME_KEY, NAD_NAMESPACE_KEY})

RESERVED_ATTRIBUTES = frozenset(
    {
        f"{DRIVER_DOMAIN}/vendor",
        f"{DRIVER_DOMAIN}/deviceID",
        f"{DRIVER_DOMAIN}/pfDeviceID",
        f"{DRIVER_DOMAIN}/pciAddress",
        "k8s.cni.cncf.io/deviceID",
        f"{DRIVER_DOMAIN}/PFName",
        f"{DRIVER_DOMAIN}/EswitchMode",
        f"{DRIVER_DOMAIN}/vfID",
        "resource.kubernetes.io/pcieRoot",
        f"{DRIVER_DOMAIN}/pfPciAddress",
        "resource.kubernetes.io/pciBusID",
        f"{DRIVER_DOMAIN}/linkType",
        f"{DRIVER_DOMAIN}/rdmaCapable",
        "dra.net/numaNode",
        "resource.kubernetes.io/numaNode",
    }
)
"""The discovery-owned keys: the 14 of upstream dra-driver-sriov's ``consts.ReservedAttributes``
and the standard ``resource.kubernetes.io/numaNode`` (KEP-6072) beside ``dra.net/numaNode``."""

MAX_ATTRIBUTES_PER_DEVICE = 32
MAX_VALUE_BYTES = 64
MAX_DOMAIN_LENGTH = 63
MAX_ID_LENGTH = 32
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

_C_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUM = r"(?:0|[1-9][0-9]*)"
_PRE = r"(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
SEMVER_RE = re.compile(rf"{_NUM}\.{_NUM}\.{_NUM}(?:-{_PRE}(?:\.{_PRE})*)?(?:\+{_BUILD}(?:\.{_BUILD})*)?")
"""Kubernetes ``semverRe`` (semver.org 2.0.0), ASCII digits only; use with ``fullmatch``."""


class AttributeType(enum.StrEnum):
    """The scalar members of ``resource.k8s.io/v1 DeviceAttribute`` that this project accepts."""

    INT = "int"
    BOOL = "bool"
    STRING = "string"
    VERSION = "version"


_LIST_MEMBERS = frozenset({"ints", "bools", "strings", "versions"})


@dataclass(frozen=True)
class AttributeValue:
    """One scalar device attribute value.

    Shapes: JSON form is a one-key object, e.g. ``{"string": "rail-a-net"}`` or ``{"int": -1}``.
    """

    type: AttributeType
    value: int | bool | str

    def to_json(self) -> dict[str, int | bool | str]:
        """Return the API form ``{<type>: <value>}``."""
        return {self.type.value: self.value}

    def __str__(self) -> str:
        return f"{self.type.value}:{self.value!r}"


def string_value(value: str) -> AttributeValue:
    """Build a ``string`` attribute value (not validated; see :func:`parse_attribute_value`)."""
    return AttributeValue(AttributeType.STRING, value)


def int_value(value: int) -> AttributeValue:
    """Build an ``int`` attribute value (not validated; see :func:`parse_attribute_value`)."""
    return AttributeValue(AttributeType.INT, value)


def bool_value(value: bool) -> AttributeValue:
    """Build a ``bool`` attribute value."""
    return AttributeValue(AttributeType.BOOL, value)


@dataclass(frozen=True)
class NadReference:
    """A symbolic source-NAD reference as published on a device or written in a VfConfig.

    Shapes: ``name`` is a nonempty DNS-1123 subdomain; ``namespace`` is a DNS-1123 label or
    ``None``, which means "the verified consuming Pod's namespace" and is resolved only by
    template resolution (docs/design.md#template-resolution).
    """

    name: str
    namespace: str | None = None

    def resolve(self, pod_namespace: str) -> tuple[str, str]:
        """Return the concrete ``(namespace, name)`` for a Pod in ``pod_namespace``."""
        return (self.namespace if self.namespace is not None else pod_namespace, self.name)

    def __str__(self) -> str:
        return f"{self.namespace if self.namespace is not None else '<pod namespace>'}/{self.name}"


def is_c_identifier(value: str) -> bool:
    """True if ``value`` is a C identifier (``[A-Za-z_][A-Za-z0-9_]*``)."""
    return _C_IDENTIFIER_RE.fullmatch(value) is not None


def qualified_name_problems(name: str, *, require_domain: bool = False) -> list[str]:
    """Return why ``name`` is not a DRA ``QualifiedName`` (empty list when valid).

    Shapes: ``<id>`` or ``<domain>/<id>``; domain a lowercase DNS-1123 subdomain of at most 63
    characters; id a C identifier of at most 32 characters. ``require_domain`` demands the
    domain (the operator's fully qualified keys, docs/design.md#operator-validation).
    Source: Kubernetes ``validateQualifiedName`` (v1.36).
    """
    problems: list[str] = []
    parts = name.split("/")
    if len(parts) > 2:
        return [f"qualified name {name!r} must not contain more than one '/'"]
    if len(parts) == 2:
        domain, ident = parts
        if not domain:
            problems.append(f"qualified name {name!r} has an empty domain before '/'")
        elif len(domain) > MAX_DOMAIN_LENGTH:
            problems.append(f"domain {domain!r} is {len(domain)} characters, max {MAX_DOMAIN_LENGTH}")
        elif not names.is_dns1123_subdomain(domain):
            problems.append(f"domain {domain!r} must be a lowercase DNS subdomain such as 'example.com'")
    else:
        ident = parts[0]
        if require_domain:
            problems.append(f"qualified name {name!r} needs a domain prefix, e.g. 'example.com/{name}'")
    if not ident:
        problems.append(f"qualified name {name!r} has an empty identifier")
    else:
        if len(ident) > MAX_ID_LENGTH:
            problems.append(f"identifier {ident!r} is {len(ident)} characters, max {MAX_ID_LENGTH}")
        if not is_c_identifier(ident):
            problems.append(f"identifier {ident!r} must be a C identifier ([A-Za-z_][A-Za-z0-9_]*)")
    return problems


def parse_attribute_value(raw: object, path: str) -> tuple[AttributeValue | None, list[errors.FieldError]]:
    """Decode one ``DeviceAttribute`` JSON object into a scalar :class:`AttributeValue`.

    Accepts an :class:`AttributeValue` unchanged after validation. List members (``strings``
    ...) are refused: they need an alpha gate and halve the slice device limit.
    Shapes: exactly one of ``int`` (int64), ``bool``, ``string`` (≤64 UTF-8 bytes), ``version``
    (semver 2.0.0, ≤64 bytes).
    Source: Kubernetes ``validateDeviceAttribute``; docs/design.md#operator-validation.
    """
    if isinstance(raw, AttributeValue):
        raw = raw.to_json()
    if not isinstance(raw, Mapping):
        return None, [
            errors.FieldError(
                path, f"expected an object such as {{'string': 'x'}}, got {strict_json.kind(raw)}"
            )
        ]
    members = sorted(str(k) for k in raw)
    if len(members) != 1:
        return None, [
            errors.FieldError(path, f"exactly one of int, bool, string, version must be set, got {members}")
        ]
    member = members[0]
    value = raw[member]
    if member in _LIST_MEMBERS:
        return None, [
            errors.FieldError(f"{path}.{member}", "list attribute values are not supported; use a scalar")
        ]
    if member not in {t.value for t in AttributeType}:
        return None, [
            errors.FieldError(f"{path}.{member}", "unknown member; use int, bool, string or version")
        ]
    kind = AttributeType(member)
    where = f"{path}.{member}"
    if kind is AttributeType.BOOL:
        if not isinstance(value, bool):
            return None, [errors.FieldError(where, f"expected a boolean, got {strict_json.kind(value)}")]
        return AttributeValue(kind, value), []
    if kind is AttributeType.INT:
        if isinstance(value, bool) or not isinstance(value, int):
            return None, [errors.FieldError(where, f"expected an integer, got {strict_json.kind(value)}")]
        if not INT64_MIN <= value <= INT64_MAX:
            return None, [errors.FieldError(where, f"{value} does not fit a signed 64-bit integer")]
        return AttributeValue(kind, value), []
    if not isinstance(value, str):
        return None, [errors.FieldError(where, f"expected a string, got {strict_json.kind(value)}")]
    problems: list[errors.FieldError] = []
    if not strict_json.has_utf8_form(value):  # a JSON "\ud800" escape: the API server could never store it
        return None, [
            errors.FieldError(
                where, "contains a lone UTF-16 surrogate, which has no UTF-8 form; use valid characters"
            )
        ]
    size = limits.byte_len(value)
    if size > MAX_VALUE_BYTES:
        problems.append(
            errors.FieldError(
                where, f"value is {size} bytes, max {MAX_VALUE_BYTES}; shorten it (never truncated)"
            )
        )
    if kind is AttributeType.VERSION and SEMVER_RE.fullmatch(value) is None:
        problems.append(errors.FieldError(where, f"{value!r} is not a semver 2.0.0 version such as '1.2.3'"))
    if problems:
        return None, problems
    return AttributeValue(kind, value), []


@dataclass(frozen=True)
class AttributeMap:
    """Result of validating one administrator attribute map.

    ``values`` holds every valid, non-reserved entry; ``problems`` every invalid entry;
    ``reserved`` the keys that collide with discovery-owned attributes (kept apart so that the
    caller chooses between refusing them and upstream's skip-with-warning).
    """

    values: Mapping[str, AttributeValue]
    problems: tuple[errors.FieldError, ...]
    reserved: tuple[str, ...]


def validate_attribute_map(
    raw: object,
    path: str,
    *,
    reserved: frozenset[str] = RESERVED_ATTRIBUTES,
    require_domain: bool = False,
) -> AttributeMap:
    """Validate an administrator-supplied ``{qualifiedName: DeviceAttribute}`` map.

    Shapes: keys sorted in the result; at most 32 entries (a map that alone exceeds the device
    budget can never be published).
    Source: docs/design.md#device-attributes, docs/design.md#operator-validation; upstream
    dra-driver-sriov's DeviceAttributes and ``consts.ReservedAttributes``.
    """
    if raw is None:
        return AttributeMap({}, (), ())
    if not isinstance(raw, Mapping):
        return AttributeMap(
            {}, (errors.FieldError(path, f"expected an object, got {strict_json.kind(raw)}"),), ()
        )
    values: dict[str, AttributeValue] = {}
    problems: list[errors.FieldError] = []
    collisions: list[str] = []
    if len(raw) > MAX_ATTRIBUTES_PER_DEVICE:
        problems.append(
            errors.FieldError(path, f"{len(raw)} attributes, max {MAX_ATTRIBUTES_PER_DEVICE} per device")
        )
    written: dict[str, str] = {}
    for key in sorted(raw, key=str):
        where = f'{path}["{key}"]'
        if not isinstance(key, str):
            problems.append(errors.FieldError(where, "attribute names must be strings"))
            continue
        name_problems = qualified_name_problems(key, require_domain=require_domain)
        problems.extend(errors.FieldError(where, p) for p in name_problems)
        name = qualified(key) if not name_problems else key
        if name in written:
            problems.append(
                errors.FieldError(
                    where,
                    f"names the same attribute as {written[name]!r} (an unqualified name is in the driver's "
                    f"domain, {DRIVER_DOMAIN}); keep one of them",
                )
            )
            continue
        written[name] = key
        if name in reserved:
            collisions.append(name)
            continue
        unknown = driver_key_problem(name) if not name_problems else None
        if unknown is not None:
            problems.append(errors.FieldError(where, unknown))
            continue
        value, value_problems = parse_attribute_value(raw[key], where)
        problems.extend(value_problems)
        if value is not None and not name_problems:
            values[name] = value
    return AttributeMap(values, tuple(problems), tuple(collisions))


def qualified(name: str) -> str:
    """``name`` with its domain: Kubernetes places an unqualified attribute name in the driver's own
    domain, so ``netAttachDefName`` is ``sriovnetwork.k8snetworkplumbingwg.io/netAttachDefName``."""
    return name if "/" in name else f"{DRIVER_DOMAIN}/{name}"


DRIVER_INPUT_KEYS = NAD_REFERENCE_KEYS
"""The keys of the driver's own domain an administrator may set (the discovery-owned ones are
refused as ``ReservedAttribute``)."""


def driver_key_problem(name: str) -> str | None:
    """Why the qualified ``name`` may not be set, when it is in the driver's domain but no key of it."""
    domain, _, ident = name.partition("/")
    if domain != DRIVER_DOMAIN or name in DRIVER_INPUT_KEYS or name in RESERVED_ATTRIBUTES:
        return None
    known = sorted(k.partition("/")[2] for k in DRIVER_INPUT_KEYS)
    close = difflib.get_close_matches(ident, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"{ident!r} is not an attribute of this driver: the keys of {DRIVER_DOMAIN} an administrator sets "
        f"are {', '.join(known)}{hint} Put attributes of your own under your own domain, such as "
        f"'example.com/{ident}'"
    )


def reserved_problems(keys: tuple[str, ...], path: str) -> list[errors.FieldError]:
    """Field errors refusing discovery-owned ``keys`` as administrator input."""
    return [
        errors.FieldError(f'{path}["{k}"]', "is published by device discovery and cannot be set; remove it")
        for k in keys
    ]


def nad_reference(
    values: Mapping[str, AttributeValue], path: str
) -> tuple[NadReference | None, list[errors.FieldError]]:
    """Extract the semantic NAD reference from a validated attribute map.

    No reference key → ``(None, [])``: the map carries ordinary metadata only. A namespace
    without a name, an empty or non-string name, or a non-string namespace is an error; the
    caller must not fall back to a VfConfig reference then. An empty namespace means "the
    Pod's namespace" (``namespace=None``).
    Shapes: name a DNS-1123 subdomain (≤64 bytes by the value limit); namespace a DNS-1123 label.
    Source: docs/design.md#device-attributes, docs/design.md#policy-precedence.
    """
    name_value = values.get(NAD_NAME_KEY)
    ns_value = values.get(NAD_NAMESPACE_KEY)
    if name_value is None and ns_value is None:
        return None, []
    problems: list[errors.FieldError] = []
    name_path = f'{path}["{NAD_NAME_KEY}"]'
    ns_path = f'{path}["{NAD_NAMESPACE_KEY}"]'
    name = ""
    if name_value is None:
        problems.append(
            errors.FieldError(
                name_path, "is required when netAttachDefNamespace is set; set the NAD name too"
            )
        )
    elif name_value.type is not AttributeType.STRING or not isinstance(name_value.value, str):
        problems.append(
            errors.FieldError(name_path, f"must be a string attribute, got {name_value.type.value}")
        )
    else:
        name = name_value.value
        if not name:
            problems.append(
                errors.FieldError(name_path, "must be a nonempty NetworkAttachmentDefinition name")
            )
        elif not names.is_dns1123_subdomain(name):
            problems.append(
                errors.FieldError(name_path, f"{name!r} is not a valid NAD name (DNS-1123 subdomain)")
            )
    namespace: str | None = None
    if ns_value is not None:
        if ns_value.type is not AttributeType.STRING or not isinstance(ns_value.value, str):
            problems.append(
                errors.FieldError(ns_path, f"must be a string attribute, got {ns_value.type.value}")
            )
        elif ns_value.value:
            if names.is_dns1123_label(ns_value.value):
                namespace = ns_value.value
            else:
                problems.append(
                    errors.FieldError(
                        ns_path, f"{ns_value.value!r} is not a valid namespace (DNS-1123 label)"
                    )
                )
    if problems:
        return None, problems
    return NadReference(name, namespace), []


def reference_attributes(ref: NadReference) -> dict[str, AttributeValue]:
    """The attribute entries that publish ``ref``; a Pod-namespace reference omits the namespace key."""
    out = {NAD_NAME_KEY: string_value(ref.name)}
    if ref.namespace is not None:
        out[NAD_NAMESPACE_KEY] = string_value(ref.namespace)
    return out
