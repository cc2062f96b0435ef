"""How sriov-cni decodes a config into its NetConf: the keys it reads, in any case, and the types they must hold.

sriov-cni (v2.10.0, the release the realvf tier runs) reads the config the runtime hands it (for a
conflist, the sriov entry with the list's ``name`` and ``cniVersion``, which libcni sets) with Go's
``encoding/json`` into its ``NetConf``. Go matches a JSON key to a field by its exact name or
case-insensitively (``VLAN`` sets ``vlan``, ``mac`` sets ``MAC``), so every key that names a
field in any case must hold what the field decodes, or every CNI ADD fails: a string, a boolean,
a whole number in range (no fraction or exponent), a string list, a boolean map, an object (the
fields of nested objects likewise); ``null`` decodes into any field. Two keys naming one field are
refused (which one wins depends on key order), and so is ``deviceID`` spelt in another case (it
would compete with the ``deviceID`` the driver sets).

:func:`read` returns those problems and the value each field gets, by sriov-cni's field name, for
the value rules of :mod:`~sriov_dra.core.sriov_cni_fields`. Pure; never edits its input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from sriov_dra_rules import strict_json
from sriov_dra_rules.strict_json import JsonValue

Problem = tuple[str, str]
"""(JSON path of the key, what is wrong and what to do)."""

_INT64 = (-(2**63), 2**63 - 1)
_UINT32 = (0, 2**32 - 1)


@dataclass(frozen=True)
class Kind:
    """What one Go field type decodes: ``name`` for messages; ``check(value, path)`` yields its problems."""

    name: str
    check: Callable[[JsonValue, str], Iterator[Problem]]


def _scalar(name: str, accepts: Callable[[JsonValue], bool]) -> Kind:
    def check(value: JsonValue, path: str) -> Iterator[Problem]:
        if value is not None and not accepts(value):
            yield path, f"sriov-cni cannot read {_preview(value)} as {name}"

    return Kind(name, check)


def _integer(low: int, high: int) -> Callable[[JsonValue], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


STRING: Final = _scalar("a string", lambda v: isinstance(v, str))
BOOL: Final = _scalar("a boolean", lambda v: isinstance(v, bool))
INT: Final = _scalar("a whole number (64-bit, no fraction or exponent)", _integer(*_INT64))
UINT32: Final = _scalar("a whole number 0-4294967295", _integer(*_UINT32))
OBJECT: Final = _scalar("an object", lambda v: isinstance(v, dict))
STRINGS: Final = _scalar(
    "a list of strings", lambda v: isinstance(v, list) and all(e is None or isinstance(e, str) for e in v)
)
BOOL_MAP: Final = _scalar(
    "an object of booleans",
    lambda v: isinstance(v, dict) and all(e is None or isinstance(e, bool) for e in v.values()),
)


def _struct(fields: Mapping[str, Kind]) -> Kind:
    def check(value: JsonValue, path: str) -> Iterator[Problem]:
        if value is None:
            return
        if not isinstance(value, dict):
            yield path, f"sriov-cni cannot read {_preview(value)} as an object"
            return
        yield from _fields(value, path, fields)

    return Kind("an object", check)


def _list_of(item: Kind) -> Kind:
    def check(value: JsonValue, path: str) -> Iterator[Problem]:
        if value is None:
            return
        if not isinstance(value, list):
            yield path, f"sriov-cni cannot read {_preview(value)} as a list"
            return
        for index, element in enumerate(value):
            yield from item.check(element, f"{path}[{index}]")

    return Kind("a list", check)


VF_STATE: Final = _struct(
    {
        "HostIFName": STRING,
        "SpoofChk": BOOL,
        "Trust": BOOL,
        "AdminMAC": STRING,
        "EffectiveMAC": STRING,
        "Vlan": INT,
        "VlanQoS": INT,
        "VlanProto": INT,
        "MinTxRate": INT,
        "MaxTxRate": INT,
        "LinkState": UINT32,
        "MTU": INT,
    }
)

NETCONF: Final[Mapping[str, Kind]] = {
    # libcni's PluginConf (containernetworking/cni v1.3.0)
    "cniVersion": STRING,
    "name": STRING,
    "type": STRING,
    "capabilities": BOOL_MAP,
    "ipam": _struct({"type": STRING}),
    "dns": _struct({"nameservers": STRINGS, "domain": STRING, "search": STRINGS, "options": STRINGS}),
    "prevResult": OBJECT,
    "cni.dev/valid-attachments": _list_of(_struct({"containerID": STRING, "ifname": STRING})),
    # sriov-cni's SriovNetConf (DPDKMode is never decoded)
    "OrigVfState": VF_STATE,
    "Master": STRING,
    "MAC": STRING,
    "MTU": INT,
    "vlan": INT,
    "vlanQoS": INT,
    "vlanProto": STRING,
    "deviceID": STRING,
    "VFID": INT,
    "min_tx_rate": INT,
    "max_tx_rate": INT,
    "spoofchk": STRING,
    "trust": STRING,
    "link_state": STRING,
    "runtimeConfig": _struct({"mac": STRING}),
    "logLevel": STRING,
    "logFile": STRING,
}
"""Every JSON field of sriov-cni v2.10.0's ``NetConf`` and what Go decodes into it."""

DEVICE_ID: Final = "deviceID"
_FOLDED_ASCII: Final = {"\u017f": "S", "\u212a": "K"}
"""Non-ASCII runes whose Unicode fold set holds an ASCII letter (long s, Kelvin sign): Go's
``encoding/json`` matches them to ``S``/``K`` in field names."""


def fold(key: str) -> str:
    """``key`` as Go's ``encoding/json`` compares it case-insensitively with field names."""
    return "".join(_FOLDED_ASCII.get(c, c.upper() if c.isascii() else c) for c in key)


def _fields(value: Mapping[str, JsonValue], path: str, fields: Mapping[str, Kind]) -> Iterator[Problem]:
    by_fold = {fold(name): name for name in fields}
    seen: dict[str, list[str]] = {}
    for key in value:
        name = by_fold.get(fold(key))
        if name is not None:
            seen.setdefault(name, []).append(key)
            yield from fields[name].check(value[key], strict_json.key_path(path, key))
    for name, keys in seen.items():
        if len(keys) > 1:
            yield (
                strict_json.key_path(path, keys[1]),
                f"sriov-cni reads {', '.join(repr(k) for k in keys)} all as its field {name!r}; keep only {name!r}",
            )


@dataclass(frozen=True)
class Decoded:
    """What :func:`read` found: ``problems`` as (path, message), and each field's (key path, value)."""

    problems: list[Problem]
    fields: dict[str, tuple[str, JsonValue]]


def read(config: Mapping[str, JsonValue], path: str) -> Decoded:
    """Decode ``config`` (the config as sriov-cni gets it, at ``path``) as sriov-cni's NetConf does."""
    problems = list(_fields(config, path, NETCONF))
    by_fold = {fold(name): name for name in NETCONF}
    fields: dict[str, tuple[str, JsonValue]] = {}
    for key, value in config.items():
        name = by_fold.get(fold(key))
        if name is not None:
            fields.setdefault(name, (strict_json.key_path(path, key), value))
        if name == DEVICE_ID and key != DEVICE_ID:
            problems.append(
                (
                    strict_json.key_path(path, key),
                    f"sriov-cni reads {key!r} as deviceID; remove it (the driver sets deviceID)",
                )
            )
    return Decoded(problems, fields)


def _preview(value: JsonValue) -> str:
    text = strict_json.encode(value)
    return text if len(text) <= 60 else text[:57] + "..."
