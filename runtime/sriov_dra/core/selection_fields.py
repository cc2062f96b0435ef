"""Validation of the fields of one Multus network-selection element (the JSON form).

Owns the keys a selection may carry (Multus's ``NetworkSelectionElement`` plus
``ipam-claim-reference``) and each one's type and format rule, as Go's decoding accepts them
(IPs and MACs as ``net.ParseIP``/``ParseCIDR``/``ParseMAC``, integers without booleans or
fractions, ``null`` a wrong type everywhere). Any other key is refused with a hint: the removed
``interfaceRequest`` (multus-cni #360), a case variant Go would accept, or the closest key
(docs/design.md#selections). Pure; :mod:`core.networks` calls it per element.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from sriov_dra_rules import names, strict_json

KNOWN_KEYS: Final = frozenset(
    {
        "name",
        "namespace",
        "ips",
        "mac",
        "infiniband-guid",
        "interface",
        "portMappings",
        "bandwidth",
        "deviceID",
        "cni-args",
        "default-route",
        "ipam-claim-reference",
    }
)
"""Keys of Multus's ``NetworkSelectionElement`` plus ``ipam-claim-reference`` (multi-net-spec and
NAD client v1.7; Multus ignores it). ``interfaceRequest`` is deliberately absent (deprecated)."""

_PORT_MAPPING_KEYS: Final = {"hostPort": int, "containerPort": int, "protocol": str, "hostIP": str}
_BANDWIDTH_KEYS: Final = ("ingressRate", "ingressBurst", "egressRate", "egressBurst")
_MAC_COLON_RE: Final = re.compile(r"[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\1[0-9A-Fa-f]{2})*")
_MAC_DOT_RE: Final = re.compile(r"[0-9A-Fa-f]{4}(?:\.[0-9A-Fa-f]{4})*")
_MAC_BYTES: Final = (6, 8, 20)


def unknown_key_message(key: str) -> str:
    """Message for a key no selection may carry, with the most useful hint."""
    if key == "interfaceRequest":
        return (
            'unknown key "interfaceRequest" (the deprecated spelling, ignored by some Multus versions); '
            'did you mean "interface"?'
        )
    folded = [k for k in KNOWN_KEYS if k.lower() == key.lower()]
    if folded:
        return (
            f"unknown key {key!r}; keys are case-sensitive here (Go's decoder would silently read it "
            f"as {folded[0]!r}): write {folded[0]!r}"
        )
    close = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=1)
    hint = f'; did you mean "{close[0]}"?' if close else f"; known keys: {', '.join(sorted(KNOWN_KEYS))}"
    return f"unknown key {key!r} would be ignored by Multus{hint}"


def _expect_str(value: Any) -> str | None:
    if isinstance(value, str):
        return None
    return f"expected string, got {strict_json.kind(value)}"


def _check_name(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"expected non-empty string, got {strict_json.kind(value)}"
    if not value:
        return "must not be empty: the NAD name to attach"
    return names.dns1123_subdomain_problem(value)


def _check_namespace(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"expected string, got {strict_json.kind(value)}"
    return names.dns1123_label_problem(value) if value else None


def _check_interface(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"expected string, got {strict_json.kind(value)}"
    return names.ifname_problem(value) if value else None


def _check_mac(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"expected string, got {strict_json.kind(value)}"
    return None if value == "" or mac_is_valid(value) else f"{value!r} is not a MAC/EUI-64/IPoIB address"


def _check_str_list(value: Any, item_check: Callable[[str], str | None]) -> str | None:
    if not isinstance(value, list):
        return f"expected list of strings, got {strict_json.kind(value)}"
    for i, item in enumerate(value):
        if not isinstance(item, str):
            return f"[{i}]: expected string, got {strict_json.kind(item)}"
        problem = item_check(item)
        if problem is not None:
            return f"[{i}]: {problem}"
    return None


def _ip_or_cidr_problem(text: str) -> str | None:
    if "/" in text:
        return None if cidr_is_valid(text) else f"{text!r} is not an IP address with a prefix length"
    return None if ip_is_valid(text) else f"{text!r} is not an IP address"


def _ip_problem(text: str) -> str | None:
    return None if ip_is_valid(text) else f"{text!r} is not an IP address (no prefix length here)"


def _check_int(value: Any, *, maximum: int | None = None) -> str | None:
    if type(value) is not int:
        return f"expected integer, got {strict_json.kind(value)}"
    if value < 0 or (maximum is not None and value > maximum):
        return f"{value} is out of range 0..{maximum if maximum is not None else 'max'}"
    return None


def _check_port_mappings(value: Any) -> str | None:
    if not isinstance(value, list):
        return f"expected list of objects, got {strict_json.kind(value)}"
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            return f"[{i}]: expected object, got {strict_json.kind(entry)}"
        for key, item in entry.items():
            if key not in _PORT_MAPPING_KEYS:
                return f"[{i}]: unknown key {key!r}; known keys: {', '.join(_PORT_MAPPING_KEYS)}"
            problem = _check_int(item, maximum=65535) if _PORT_MAPPING_KEYS[key] is int else _expect_str(item)
            if problem is not None:
                return f"[{i}].{key}: {problem}"
    return None


def _check_bandwidth(value: Any) -> str | None:
    if not isinstance(value, dict):
        return f"expected object, got {strict_json.kind(value)}"
    for key, item in value.items():
        if key not in _BANDWIDTH_KEYS:
            return f"unknown key {key!r}; known keys: {', '.join(_BANDWIDTH_KEYS)}"
        problem = _check_int(item, maximum=2**63 - 1)
        if problem is not None:
            return f"{key}: {problem}"
    return None


def _check_object(value: Any) -> str | None:
    return None if isinstance(value, dict) else f"expected object, got {strict_json.kind(value)}"


_FIELD_CHECKS: Final[dict[str, Callable[[Any], str | None]]] = {
    "name": _check_name,
    "namespace": _check_namespace,
    "interface": _check_interface,
    "ips": lambda v: _check_str_list(v, _ip_or_cidr_problem),
    "mac": _check_mac,
    "infiniband-guid": _check_mac,
    "default-route": lambda v: _check_str_list(v, _ip_problem),
    "portMappings": _check_port_mappings,
    "bandwidth": _check_bandwidth,
    "cni-args": _check_object,
    "deviceID": _expect_str,
    "ipam-claim-reference": _expect_str,
}


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


def element_problems(element: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every problem of one decoded selection object, as ``(field, message)`` pairs.

    Shapes: ``field`` is the offending key (unknown keys included); ``[]`` when valid.
    """
    problems = [(key, unknown_key_message(key)) for key in element if key not in KNOWN_KEYS]
    if "name" not in element:
        problems.append(("name", "is required: the NAD name to attach"))
    for key, check in _FIELD_CHECKS.items():
        if key in element:
            problem = check(element[key])
            if problem is not None:
                problems.append((key, problem))
    return problems
