"""The Multus config keys that shape a Pod's delegate list, read into an ``interface_naming.MultusLayout``.

Multus names an unnamed secondary interface ``net<position in the full delegate list>``, a list
that starts with the cluster network and ``defaultNetworks`` (not for ``systemNamespaces``) and
may end with the auxiliary chain. The guard and the plugin must count those delegates alike, so
this is the one reading of those keys and of a Multus config file (:func:`decode_config`,
:func:`layout_from_keys`, :func:`auxiliary_chain_name`). Every key Multus v4.3.0 decodes is
type-checked as Go would; a malformed key is an error naming file and key, never a guess. Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias

from sriov_dra.core import interface_naming
from sriov_dra_rules import errors, strict_json

DEFAULT_SYSTEM_NAMESPACES: Final = ("kube-system",)
"""Multus's ``systemNamespaces`` when the key is absent (``GetDefaultNetConf``)."""

MULTUS_PLUGIN_TYPES: Final = frozenset({"multus", "multus-shim"})
"""``type`` of the Multus entry in a thin ``00-multus.conflist`` (or a thick shim conflist)."""

_LIST_KEYS: Final = ("defaultNetworks", "systemNamespaces")
_INT64: Final = range(-(2**63), 2**63)


class Kind(enum.Enum):
    """The JSON shape Go's decoder needs for one Multus key; the value is the phrase for messages."""

    STRING = "a string"
    BOOL = "a boolean"
    INT = "an integer"
    STRINGS = "a list of strings"
    BOOL_MAP = "an object of booleans"
    OBJECT = "an object"
    OBJECTS = "a list of objects"


@dataclass(frozen=True)
class Nested:
    """An object (``many``: a list of objects) whose own keys are typed by ``keys``."""

    keys: Mapping[str, Kind | Nested]
    many: bool = False


Schema: TypeAlias = Mapping[str, Kind | Nested]
"""Exact key spelling to the shape Multus v4.3.0 decodes it into."""

_S, _B, _I, _SS = Kind.STRING, Kind.BOOL, Kind.INT, Kind.STRINGS
_LOG_OPTIONS: Final = Nested({"maxAge": _I, "maxSize": _I, "maxBackups": _I, "compress": _B})
_RUNTIME_CONFIG: Final = Nested(
    {
        "portMappings": Nested(
            {"hostPort": _I, "containerPort": _I, "protocol": _S, "hostIP": _S}, many=True
        ),
        "bandwidth": Nested({"ingressRate": _I, "ingressBurst": _I, "egressRate": _I, "egressBurst": _I}),
        "ips": _SS,
        "mac": _S,
        "infinibandGUID": _S,
        "deviceID": _S,
        "CNIDeviceInfoFile": _S,
    }
)
NETCONF_KEYS: Final[Schema] = {
    # libcni v1.3.0 PluginConf, embedded in Multus's NetConf
    "cniVersion": _S,
    "name": _S,
    "type": _S,
    "capabilities": Kind.BOOL_MAP,
    "ipam": Nested({"type": _S}),
    "dns": Nested({"nameservers": _SS, "domain": _S, "search": _SS, "options": _SS}),
    "cni.dev/valid-attachments": Nested({"containerID": _S, "ifname": _S}, many=True),
    # Multus pkg/types NetConf (thin plugin, and every request the thick daemon serves)
    "prevResult": Kind.OBJECT,
    "confDir": _S,
    "cniDir": _S,
    "binDir": _S,
    "delegates": Kind.OBJECTS,
    "clusterNetwork": _S,
    "defaultNetworks": _SS,
    "kubeconfig": _S,
    "logFile": _S,
    "logLevel": _S,
    "logToStderr": _B,
    "logOptions": _LOG_OPTIONS,
    "runtimeConfig": _RUNTIME_CONFIG,
    "readinessindicatorfile": _S,
    "namespaceIsolation": _B,
    "globalNamespaces": _S,  # one comma-separated string, unlike the two list keys
    "auxiliaryCNIChainName": _S,
    "systemNamespaces": _SS,
    "multusNamespace": _S,
    "retryDeleteOnError": _B,
    # thick daemon-config.json: pkg/server ControllerNetConf and pkg/server/config MultusConf
    "chrootDir": _S,
    "perNodeCertificate": Nested(
        {"enabled": _B, "bootstrapKubeconfig": _S, "certDir": _S, "certDuration": _S}
    ),
    "connectionLimit": _I,
    "metricsPort": _I,
    "enablePprof": _B,
    "socketDir": _S,
    "cniConfigDir": _S,
    "daemonSocketDir": _S,
    "multusConfigFile": _S,
    "multusMasterCNI": _S,
    "multusAutoconfigDir": _S,
    "forceCNIVersion": _B,
    "overrideNetworkName": _B,
}
"""Every key Multus v4.3.0 decodes from a NetConf object or ``daemon-config.json``, with its shape.

Source: multus-cni v4.3.0 ``pkg/types/types.go`` (NetConf), ``pkg/server/types.go``
(ControllerNetConf), ``pkg/server/config/generator.go`` (MultusConf), ``pkg/logging`` (LogOptions);
containernetworking/cni v1.3.0 ``pkg/types/types.go`` (PluginConf, IPAM, DNS).
"""

_CONFLIST_KEYS: Final[Mapping[str, Kind]] = {"cniVersion": _S, "cniVersions": _SS, "name": _S}
"""Keys libcni v1.3.0 ``NetworkConfFromBytes`` type-checks at the root of a ``.conflist``."""
_CONFLIST_FLAGS: Final = ("disableCheck", "disableGC", "loadOnlyInlinedPlugins")
"""Root flags libcni accepts as a boolean or the string ``"true"``/``"false"`` (any case)."""


def decode_config(data: bytes, *, source: str) -> dict[str, object]:
    """Decode one Multus config file into the NetConf object whose keys Multus reads.

    ``source`` names the file in messages. A plain object (``00-multus.conf``,
    ``daemon-config.json``) is returned as is; an object with ``plugins`` (``00-multus.conflist``)
    yields its first plugin whose ``type`` is ``multus`` or ``multus-shim``.

    Shapes: values as :func:`strict_json.decode_file` gives them (the one strict reader of files a
    person wrote: a number with a fraction is a ``float``); error paths start at ``$``
    (``$.plugins[0].defaultNetworks``).
    Raises: ``InvalidSpec`` naming ``source`` and carrying a FieldError per problem: bytes that
    are not UTF-8 strict JSON (a repeated key, ``NaN``, malformed text), a root that is not an
    object, ``plugins`` that is not a list of objects or a plugin ``type`` that is not a
    non-empty string, a conflist without a Multus plugin, and every key of :data:`NETCONF_KEYS`
    (in the returned object) or of the conflist root whose value Multus cannot decode.
    Source: Multus v4.3.0 config loading; libcni v1.3.0 ``NetworkConfFromBytes``.
    """
    summary = f"Multus config {source} cannot be read as Multus v4.3.0 reads it; fix the file"
    document = strict_json.decode_file(data, what="Multus config", source=source)
    if not isinstance(document, dict):
        raise errors.InvalidSpec(
            summary,
            errors=[
                errors.FieldError(
                    "$",
                    f"the JSON root is {strict_json.kind(document)}, not an object; point the setting at "
                    "daemon-config.json or 00-multus.conf[list]",
                )
            ],
        )
    if "plugins" not in document:
        errors.raise_if_any(netconf_problems(document, path="$"), summary)
        return dict(document)
    problems: list[errors.FieldError] = []
    plugin = _multus_plugin(document, problems)
    errors.raise_if_any(problems, summary)
    if plugin is None:
        plugins = document["plugins"]
        assert isinstance(plugins, list)
        types = [p.get("type") for p in plugins if isinstance(p, dict)]
        raise errors.InvalidSpec(
            f"Multus config {source} is a conflist without a Multus plugin (plugin types {types!r}); "
            f"name the file whose plugin type is one of {sorted(MULTUS_PLUGIN_TYPES)}"
        )
    return dict(plugin)


def _multus_plugin(
    document: Mapping[str, strict_json.JsonValue], problems: list[errors.FieldError]
) -> dict[str, object] | None:
    """The first Multus plugin of a conflist, after checking the list's own keys and every plugin type.

    libcni reads the root with exact key lookups and type assertions, so there ``null`` is refused
    and letter case is not folded.
    """
    for key, kind in _CONFLIST_KEYS.items():
        problem = _shape_problem(document[key], kind) if key in document else None
        if problem is not None:
            problems.append(errors.FieldError(strict_json.key_path("$", key), problem))
    for flag in _CONFLIST_FLAGS:
        value = document.get(flag, False)
        if not isinstance(value, bool) and not (
            isinstance(value, str) and value.lower() in ("true", "false")
        ):
            problems.append(
                errors.FieldError(
                    strict_json.key_path("$", flag),
                    f'must be a boolean (or "true"/"false"), got {_shown(value)}',
                )
            )
    plugins = document["plugins"]
    if not isinstance(plugins, list) or not plugins:
        problems.append(
            errors.FieldError("$.plugins", f"must be a non-empty list of objects, got {_shown(plugins)}")
        )
        return None
    found: tuple[str, dict[str, strict_json.JsonValue]] | None = None
    for index, plugin in enumerate(plugins):
        path = strict_json.index_path("$.plugins", index)
        if not isinstance(plugin, dict):
            problems.append(errors.FieldError(path, f"must be an object (one plugin), got {_shown(plugin)}"))
            continue
        plugin_type = plugin.get("type")
        if not isinstance(plugin_type, str) or not plugin_type:
            problems.append(
                errors.FieldError(
                    f"{path}.type",
                    f"must be a non-empty string (the plugin's type), got {_shown(plugin_type)}",
                )
            )
        elif found is None and plugin_type in MULTUS_PLUGIN_TYPES:
            found = (path, plugin)
    if found is None:
        return None
    path, plugin = found
    problems.extend(netconf_problems(plugin, path=path))
    return dict(plugin)


def netconf_problems(keys: Mapping[str, object], *, path: str = "") -> list[errors.FieldError]:
    """Every key of ``keys`` (a Multus NetConf object) whose value Multus v4.3.0 cannot decode.

    ``path`` prefixes each problem's path (``$.plugins[0]``; empty: bare key names). A key that
    differs from a known one only in letter case is a problem too (Go would read it).
    Shapes: one FieldError per problem, in key order, nested paths such as ``logOptions.maxAge``.
    A value of the wrong JSON type makes Multus refuse the whole file, so it is a problem here;
    ``null`` is accepted wherever Go accepts it; unknown keys are kept and not judged, as Multus
    ignores them.
    Source: :data:`NETCONF_KEYS`; Go ``encoding/json`` (case-insensitive field match, ``null``
    leaves a field at its default).
    """
    problems: list[errors.FieldError] = []
    _check_object(keys, NETCONF_KEYS, path, problems)
    return problems


def _child(base: str, key: str) -> str:
    path = strict_json.key_path(base, key)
    return path[1:] if not base and path.startswith(".") else path


def _fold(key: str) -> str:
    """Go's simple case folding of a key, close enough for these ASCII names (``ſ``→``s``, ``K``→``k``)."""
    return "".join(c.casefold() if len(c.casefold()) == 1 else c for c in key)


def _check_object(
    obj: Mapping[str, object], schema: Schema, base: str, problems: list[errors.FieldError]
) -> None:
    folded: dict[str, str] | None = None
    for key, value in obj.items():
        path = _child(base, key)
        kind = schema.get(key)
        if kind is not None:
            _check_value(value, kind, path, problems)
            continue
        if folded is None:
            folded = {_fold(k): k for k in schema}
        canonical = folded.get(_fold(key))
        if canonical is not None:
            problems.append(
                errors.FieldError(
                    path,
                    f"Multus reads this key as {canonical!r} (Go matches JSON keys whatever their letter "
                    f"case), but this spelling differs; spell it {canonical!r} or remove it",
                )
            )


def _check_value(value: object, kind: Kind | Nested, path: str, problems: list[errors.FieldError]) -> None:
    if value is None:  # Go leaves the field at its default (a list or a map: none)
        return
    if isinstance(kind, Kind):
        problem = _shape_problem(value, kind)
        if problem is not None:
            problems.append(errors.FieldError(path, problem))
        return
    if not kind.many:
        if isinstance(value, dict):
            _check_object(value, kind.keys, path, problems)
        else:
            problems.append(errors.FieldError(path, f"must be an object, got {_shown(value)}"))
        return
    if not isinstance(value, list):
        problems.append(errors.FieldError(path, f"must be a list of objects, got {_shown(value)}"))
        return
    for index, item in enumerate(value):
        where = strict_json.index_path(path, index)
        if isinstance(item, dict):
            _check_object(item, kind.keys, where, problems)
        else:
            problems.append(errors.FieldError(where, f"must be an object, got {_shown(item)}"))


def _shape_problem(value: object, kind: Kind) -> str | None:
    """Why ``value`` does not decode into ``kind`` (``null`` included), or ``None``."""
    if kind is Kind.STRING:
        ok = isinstance(value, str)
    elif kind is Kind.BOOL:
        ok = isinstance(value, bool)
    elif kind is Kind.INT:  # Go's int: an integer literal in the int64 range, no fraction or exponent
        ok = isinstance(value, int) and not isinstance(value, bool) and value in _INT64
    elif kind is Kind.OBJECT:
        ok = isinstance(value, dict)
    elif kind is Kind.STRINGS:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    elif kind is Kind.OBJECTS:
        ok = isinstance(value, list) and all(isinstance(v, dict) for v in value)
    else:  # BOOL_MAP, Go's map[string]bool
        ok = isinstance(value, dict) and all(v is None or isinstance(v, bool) for v in value.values())
    if ok:
        return None
    hint = " (Multus has no comma-separated form for it: write a JSON list)"
    hint = hint if kind is Kind.STRINGS and isinstance(value, str) else ""
    return f"must be {kind.value}{hint}, got {_shown(value)}"


def _shown(value: object) -> str:
    """``value``'s JSON kind and a short preview of its JSON text (``a list ["a",1]``)."""
    if value is None:
        return "null"
    try:
        text = strict_json.encode(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        text = repr(value)
    return f"{strict_json.kind(value)} {text if len(text) <= 60 else text[:57] + '...'}"


def layout_from_keys(
    keys: Mapping[str, object],
    *,
    source: str,
    base: interface_naming.MultusLayout = interface_naming.DEFAULT_LAYOUT,
    auxiliary_chain: bool | None = None,
) -> interface_naming.MultusLayout:
    """Overlay a Multus NetConf's ``defaultNetworks`` and ``systemNamespaces`` on ``base``.

    A key present in ``keys`` replaces the base value (``null`` and ``[]`` mean none, as in
    Multus); an absent key keeps it. ``base.primary_ifname`` is kept (the runtime's
    ``CNI_IFNAME``, not a Multus key). ``auxiliary_chain`` replaces ``base.auxiliary_chain``
    when given (only the caller can see whether the chain directory holds plugins).

    Shapes: list keys keep their order.
    Raises: ``InvalidSpec`` naming ``source`` and every key Multus v4.3.0 cannot decode
    (:func:`netconf_problems`: a comma-separated string for a list key is one; Multus decodes
    those keys as ``[]string``).
    Source: Multus v4.3.0 delegate order and ``getIfname``.
    """
    problems = netconf_problems(keys)
    errors.raise_if_any(problems, f"Multus config {source} has keys the plugin and guard cannot read")
    found = {key: _listed(keys[key]) for key in _LIST_KEYS if key in keys}
    return interface_naming.MultusLayout(
        primary_ifname=base.primary_ifname,
        default_networks=found.get("defaultNetworks", base.default_networks),
        system_namespaces=found.get("systemNamespaces", base.system_namespaces),
        auxiliary_chain=base.auxiliary_chain if auxiliary_chain is None else auxiliary_chain,
    )


def _listed(value: object) -> tuple[str, ...]:
    """A checked list key's strings (``null`` is none)."""
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def auxiliary_chain_name(keys: Mapping[str, object]) -> str | None:
    """Return ``auxiliaryCNIChainName`` when it is a non-empty string, else ``None``.

    Multus adds the auxiliary delegate only when ``<dir of clusterNetwork>/<name>/`` holds plugin
    configs; the caller looks.
    """
    chain = keys.get("auxiliaryCNIChainName")
    return chain if isinstance(chain, str) and chain else None
