"""How Multus v4.3.0 reads one network-selection element of the JSON form, field by field.

Go's ``encoding/json`` decodes the element into Multus's ``NetworkSelectionElement``: a key
matches a field by its JSON name, else case-insensitively; a key matching no field is ignored
(``ipam-claim-reference`` included); each occurrence of a repeated key is decoded and the last
one wins; ``null`` leaves a text field as it was and empties a list or object field; a value of
the wrong JSON type fails the whole annotation, and so does an integer field given a fraction,
an exponent or a boolean. Multus then checks ``mac`` and ``infiniband-guid`` (``net.ParseMAC``)
and each of ``ips`` (``net.ParseIP``, or ``ParseCIDR`` with a ``/``), and reads the deprecated
``interfaceRequest`` when ``interface`` is empty (multus-cni #360). :func:`multus_fields` applies
exactly that (docs/design.md#selections). Pure; :mod:`core.networks` calls it per element.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

from sriov_dra_rules import strict_json

TEXT_FIELDS: Final = (
    "name",
    "namespace",
    "mac",
    "infiniband-guid",
    "interface",
    "interfaceRequest",
    "deviceID",
)
"""Go ``string`` fields of ``NetworkSelectionElement`` (JSON names)."""
FIELDS: Final = frozenset({*TEXT_FIELDS, "ips", "portMappings", "bandwidth", "cni-args", "default-route"})
"""Every JSON name Multus v4.3.0 decodes a selection element into; any other key is ignored."""

_PORT_MAPPING_FIELDS: Final[dict[str, type]] = {
    "hostPort": int,
    "containerPort": int,
    "protocol": str,
    "hostIP": str,
}
_BANDWIDTH_FIELDS: Final[dict[str, type]] = {
    k: int for k in ("ingressRate", "ingressBurst", "egressRate", "egressBurst")
}
_INT64: Final = range(-(2**63), 2**63)
_MAC_COLON_RE: Final = re.compile(r"[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2})*")
_MAC_DOT_RE: Final = re.compile(r"[0-9A-Fa-f]{4}(?:\.[0-9A-Fa-f]{4})*")
_MAC_BYTES: Final = (6, 8, 20)

Pairs = Sequence[tuple[str, Any]]
"""A decoded JSON object as its ``(key, value)`` pairs in source order, repeats included."""


def _field_of(key: str, fields: frozenset[str] | Sequence[str]) -> str | None:
    """The field Go's decoder assigns ``key`` to: its exact JSON name, else a case-insensitive match."""
    if key in fields:
        return key
    folded = key.casefold()
    return next((f for f in fields if f.casefold() == folded), None)


def _text(value: Any) -> str | None:
    return (
        None if value is None or isinstance(value, str) else f"expected string, got {strict_json.kind(value)}"
    )


def _integer(value: Any) -> str | None:
    """Go's ``int``: an integer literal that fits 64 bits (no fraction, exponent or boolean), or null."""
    if value is None or (type(value) is int and value in _INT64):
        return None
    if type(value) is int:
        return f"{value} does not fit a 64-bit integer"
    return f"expected integer, got {strict_json.kind(value)}{' with a fraction or exponent' if type(value) is float else ''}"


def _object_fields(value: Any, fields: dict[str, type]) -> str | None:
    """A Go struct: an object (or null) whose matched keys have their field's type; others ignored."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"expected object, got {strict_json.kind(value)}"
    for key, item in pairs_of(value):
        field = _field_of(key, tuple(fields))
        if field is None:
            continue
        problem = _integer(item) if fields[field] is int else _text(item)
        if problem is not None:
            return f"{key}: {problem}"
    return None


def _list_of(value: Any, item_check: Callable[[Any], str | None]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, list):
        return f"expected list, got {strict_json.kind(value)}"
    for i, item in enumerate(value):
        problem = item_check(item)
        if problem is not None:
            return f"[{i}]: {problem}"
    return None


def _ip_or_cidr(item: Any) -> str | None:
    """One entry of ``ips`` as Multus checks it (``null`` decodes to ``""``, which is no address)."""
    text = "" if item is None else item
    if not isinstance(text, str):
        return f"expected string, got {strict_json.kind(item)}"
    if "/" in text:
        return None if cidr_is_valid(text) else f"{text!r} is not an IP address with a prefix length"
    return None if ip_is_valid(text) else f"{text!r} is not an IP address"


def _route_ip(item: Any) -> str | None:
    """One entry of ``default-route`` (Go ``net.IP``): null or ``""`` is no address, else ``ParseIP``."""
    if item is None or item == "":
        return None
    if not isinstance(item, str):
        return f"expected string, got {strict_json.kind(item)}"
    return None if ip_is_valid(item) else f"{item!r} is not an IP address (no prefix length here)"


_TYPE_CHECKS: Final[dict[str, Callable[[Any], str | None]]] = {
    **dict.fromkeys(TEXT_FIELDS, _text),
    "ips": lambda v: _list_of(v, _ip_or_cidr),
    "portMappings": lambda v: _list_of(v, lambda e: _object_fields(e, _PORT_MAPPING_FIELDS)),
    "bandwidth": lambda v: _object_fields(v, _BANDWIDTH_FIELDS),
    "cni-args": lambda v: (
        None if v is None or isinstance(v, dict) else f"expected object, got {strict_json.kind(v)}"
    ),
    "default-route": lambda v: _list_of(v, _route_ip),
}


def pairs_of(obj: dict[str, Any]) -> Pairs:
    """The source pairs of a decoded object (``core.networks`` keeps them), else its items."""
    pairs: Pairs | None = getattr(obj, "pairs", None)
    return pairs if pairs is not None else tuple(obj.items())


def _without_surrogates(text: str) -> str:
    """``text`` with each lone UTF-16 surrogate replaced by U+FFFD, as Go's decoder does."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def multus_fields(pairs: Pairs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The fields Multus decodes from one element, and every problem that makes Multus fail.

    Shapes: ``pairs`` as :data:`Pairs`; the fields map JSON names of :data:`FIELDS` to their last
    non-null value (text fields with lone surrogates replaced), ``interface`` already falling back
    to ``interfaceRequest``; a problem is ``(key as written, message)``.
    """
    fields: dict[str, Any] = {}
    problems: list[tuple[str, str]] = []
    for key, value in pairs:
        field = _field_of(key, FIELDS)
        if field is None:
            continue
        problem = _TYPE_CHECKS[field](value)
        if problem is not None:
            problems.append((key, problem))
        elif value is not None:
            fields[field] = _without_surrogates(value) if isinstance(value, str) else value
        elif field not in TEXT_FIELDS:
            fields.pop(field, None)
    for field in ("mac", "infiniband-guid"):
        if fields.get(field) and not mac_is_valid(fields[field]):
            problems.append((field, f"{fields[field]!r} is not a MAC/EUI-64/IPoIB address"))
    if not fields.get("interface") and fields.get("interfaceRequest"):
        fields["interface"] = fields["interfaceRequest"]
    return fields, problems


def ip_is_valid(text: str) -> bool:
    """Whether Go's ``net.ParseIP`` accepts ``text``: IPv4 dotted decimal or IPv6, no zone."""
    if "%" in text:
        return False
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def cidr_is_valid(text: str) -> bool:
    """Whether Go's ``net.ParseCIDR`` accepts ``text``: an address, ``/``, a decimal prefix length.

    Leading zeros are accepted as Go's ``dtoi`` does; a prefix of any length is read without
    converting more than its last significant digits (Go stops at its own overflow bound).
    """
    addr, _, prefix = text.partition("/")
    if not ip_is_valid(addr) or not prefix.isascii() or not prefix.isdigit():
        return False
    prefix = prefix.lstrip("0") or "0"
    if len(prefix) > 3:
        return False
    bits = 32 if ipaddress.ip_address(addr).version == 4 else 128
    return int(prefix) <= bits


def mac_is_valid(text: str) -> bool:
    """Whether Go's ``net.ParseMAC`` accepts ``text`` (6, 8 or 20 bytes; ``:``, ``-`` or ``.`` form)."""
    if _MAC_COLON_RE.fullmatch(text):
        return (len(text) + 1) // 3 in _MAC_BYTES
    if _MAC_DOT_RE.fullmatch(text):
        return 2 * (len(text) + 1) // 5 in _MAC_BYTES
    return False
