"""Render a source NetworkAttachmentDefinition into the frozen CNI config of one shadow (spec §7, §7.1).

``render_shadow_config`` is the spec's ``RenderShadowConfig(sourceNAD, allocatedPCI)``: it validates
the administrator's template, binds it to one allocated VF and returns the exact bytes that the
shadow's ``spec.config`` carries, the checkpoint freezes and ``configSHA256`` hashes.

Decisions (each is a contract shared with the Multus guard and the tests):

* **Input.** Only inline ``spec.config`` is supported; absent, empty or whitespace-only config
  (Multus would load a file from its conf directory) is ``InvalidNetworkTemplate``.
* **Strict JSON** (:mod:`sriov_dra_rules.strictjson`): malformed text, a non-object root, a duplicate
  key anywhere, NaN/Infinity and lone surrogates are ``InvalidNetworkTemplate``. Integers are
  exact; a number with a fraction or exponent (``1e3``) is kept exactly as written, and is
  rejected only where sriov-cni needs an integer (``vlan``, ``vlanQoS``, ``min_tx_rate``,
  ``max_tx_rate``), because Go cannot decode it into an ``int`` either.
* **CNI name** (spec §7 step 3, §7.1 step 1): a nonempty name is kept verbatim and must match the
  CNI spec's pattern (an invalid one is an error, never silently replaced: it keys IPAM pools);
  a missing or empty name becomes the source NAD's ``metadata.name``, inserted right after
  ``cniVersion``. The shadow's own object name never enters the JSON.
* **Layout** (steps 4-6): a root ``type`` selects the single-plugin form, which must be
  ``"sriov"`` without ``plugins``; no root ``type`` selects a conflist whose nonempty ``plugins``
  starts with the one sriov entry, followed only by :data:`METAPLUGIN_ALLOWLIST` types. Both
  keys at the root is ambiguous. Nested Multus, a second sriov entry, device-creating plugins
  and any other type are ``UnsupportedNetworkTemplate``.
* **Device identity** (step 7): the BDF is normalised (:func:`sriov_dra.core.pci.normalize`).
  ``deviceID`` is set at the sriov entry only (inserted after ``type`` if absent; an existing key
  keeps its position). ``pciBusID`` is rewritten there only if the template already has the key
  (sriov-cni reads only ``deviceID``). A nonempty preexisting value naming another device is an
  error; one naming the same device is kept (written in canonical form). A nonempty
  ``deviceID``/``pciBusID`` anywhere else (conflist root, metaplugins) is an error.
* **CNI versions** (step 8): ``cniVersion`` is required and must be in
  :data:`SUPPORTED_CNI_VERSIONS`; an optional ``cniVersions`` list must hold only those values.
* **IPAM** (§7.1): the ``ipam`` subtree is never edited, so key order, omitted versus empty fields
  and ``network_name`` survive; it must be an object. Whereabouts with a nonempty
  ``node_slice_size`` (fast node-slice mode) is ``UnsupportedNetworkTemplate``.
* **Output** (step 9): compact canonical JSON in UTF-8, source key order, so rendering the same
  source twice (or re-rendering a rendered config) gives identical bytes. ``plugin_index`` is
  ``None`` for the single-plugin form and ``0`` for a conflist.

Every rejection lists all problems found, each as a FieldError with a path such as
``spec.config.plugins[1].type``. This module never performs I/O, never reads the shadow's name,
and never mutates the caller's objects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, NoReturn

from sriov_dra.core import bindings
from sriov_dra.core import pci as pci_addresses
from sriov_dra_rules import errors, strictjson
from sriov_dra_rules.strictjson import JsonValue

SRIOV_PLUGIN_TYPE: Final = "sriov"
"""The one device-consuming plugin type a managed template may contain."""

METAPLUGIN_ALLOWLIST: Final[frozenset[str]] = frozenset({"tuning"})
"""Plugin types allowed after the sriov entry of a conflist (spec §7 step 5).

Extend only together with a plugin-specific rendering test and a CNI-tier test.
"""

SUPPORTED_CNI_VERSIONS: Final[tuple[str, ...]] = ("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
"""CNI spec versions a template may declare.

Multus v4.3.0 and sriov-cni both build on libcni v1.3.0, whose plugins support 0.1.0-1.1.0
(``version.All``). 0.1.0 and 0.2.0 are excluded: conflists need 0.3.0 or later and their results
carry no interface list for Multus's network-status. A missing ``cniVersion`` means 0.1.0 to a
plugin, and Multus v4.3.0 rewrites a conflist without one lossily on DEL (reference multus.md §9).
"""

NESTED_MULTUS_TYPES: Final[frozenset[str]] = frozenset({"multus", "multus-shim"})
DEVICE_CREATING_TYPES: Final[frozenset[str]] = frozenset(
    {
        "host-device", "macvlan", "ipvlan", "bridge", "vlan", "ptp", "dummy", "tap", "vrf",
        "ib-sriov", "ovs", "bond", "accelerated-bridge", "dpdk",
    }
)  # fmt: skip
"""Plugin types known to create or move a network device; named in errors (spec §7 step 6)."""

CONFIG_PATH: Final = "spec.config"
_CNI_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_DEVICE_KEYS: Final = ("deviceID", "pciBusID")
_SRIOV_INT_FIELDS: Final = ("vlan", "vlanQoS", "min_tx_rate", "max_tx_rate")
_SRIOV_STR_FIELDS: Final = ("vlanProto", "mac", "spoofchk", "trust", "link_state", "logLevel", "logFile")


@dataclass(frozen=True, slots=True)
class RenderedConfig:
    """The frozen CNI configuration of one shadow NAD.

    Shapes: ``config_bytes`` is compact UTF-8 JSON; ``config_sha256`` is 64 lowercase hex over
    exactly those bytes; ``plugin_index`` is ``None`` (single plugin) or ``0`` (conflist);
    ``pci_address`` is the canonical BDF written as ``deviceID``.
    Source: spec §7 step 9, §16.1 (RenderShadowConfig output).
    """

    config_bytes: bytes
    config_sha256: str
    cni_name: str
    cni_version: str
    is_conflist: bool
    plugin_index: int | None
    plugin_type: str
    pci_address: str

    @property
    def config_text(self) -> str:
        """The config as the ``str`` stored in ``spec.config`` (same bytes, decoded)."""
        return self.config_bytes.decode("utf-8")


@dataclass
class _Findings:
    """Problems collected during one render; any ``invalid`` one makes the reason Invalid."""

    items: list[errors.FieldError] = field(default_factory=list)
    any_invalid: bool = False

    def invalid(self, path: str, message: str) -> None:
        self.items.append(errors.FieldError(path, message))
        self.any_invalid = True

    def unsupported(self, path: str, message: str) -> None:
        self.items.append(errors.FieldError(path, message))


def render_shadow_config(source_nad: Mapping[str, object], pci_address: str) -> RenderedConfig:
    """Bind the source NAD's CNI config to one allocated VF and return the frozen result.

    The caller's objects are not modified. See the module docstring for every rule.
    Shapes: ``source_nad`` is the NAD as read from the API (``metadata.name``/``namespace``,
    ``spec.config`` as a string); ``pci_address`` is the allocated VF's BDF from discovery.
    Raises: errors.InvalidSpec with reason ``InvalidPciAddress`` for a bad BDF (checked first),
    ``InvalidNetworkTemplate`` when the template is malformed (absent/empty config, bad JSON,
    wrong types, missing fields), else ``UnsupportedNetworkTemplate`` for valid shapes this mode
    cannot bind safely; each carries every FieldError found.
    Source: spec §7 steps 1-9, §7.1; handed cases C08, C09, C10, C24.
    """
    pci = pci_addresses.normalize(pci_address, path="pciAddress")
    found = _Findings()
    metadata_name, ref = _source_identity(source_nad, found)
    summary = f"network template {ref} cannot be used for automatic SR-IOV attachment"
    text = _inline_config(source_nad, found)
    if text is None:
        _raise(found, summary)
    try:
        doc = strictjson.decode(text, path=CONFIG_PATH)
    except errors.InvalidSpec as exc:
        found.items.extend(exc.errors)
        found.any_invalid = True
        _raise(found, summary, cause=exc)
    if not isinstance(doc, dict):
        found.invalid(
            CONFIG_PATH,
            f"the JSON root is {strictjson.kind(doc)}; spec.config must be one JSON object "
            "(a single sriov plugin or a conflist)",
        )
        _raise(found, summary)

    cni_version = _check_cni_version(doc, found)
    cni_name = _effective_name(doc, metadata_name, found)
    entry, plugin_index = _locate_sriov_entry(doc, found)
    if entry is not None:
        entry_path = CONFIG_PATH if plugin_index is None else f"{CONFIG_PATH}.plugins[{plugin_index}]"
        _check_sriov_entry(entry, entry_path, pci, found)
    if found.items:
        _raise(found, summary)
    assert entry is not None  # every path that leaves it None records a finding

    rendered = _materialise(doc, entry, plugin_index, cni_name, pci)
    try:
        config_bytes = strictjson.encode_bytes(rendered, path=CONFIG_PATH)
    except errors.InvalidSpec as exc:  # unreachable after decode's surrogate check; kept total
        found.items.extend(exc.errors)
        found.any_invalid = True
        _raise(found, summary, cause=exc)
    return RenderedConfig(
        config_bytes=config_bytes,
        config_sha256=bindings.config_sha256(config_bytes),
        cni_name=cni_name,
        cni_version=cni_version,
        is_conflist=plugin_index is not None,
        plugin_index=plugin_index,
        plugin_type=SRIOV_PLUGIN_TYPE,
        pci_address=pci,
    )


def _raise(found: _Findings, summary: str, *, cause: BaseException | None = None) -> NoReturn:
    reason = (
        errors.Reason.INVALID_NETWORK_TEMPLATE
        if found.any_invalid
        else errors.Reason.UNSUPPORTED_NETWORK_TEMPLATE
    )
    raise errors.InvalidSpec(summary, reason=reason, errors=found.items) from cause


def _source_identity(source_nad: Mapping[str, object], found: _Findings) -> tuple[str | None, str]:
    """Return the source ``metadata.name`` (None if unusable) and ``namespace/name`` for messages."""
    metadata = source_nad.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    ref = f"{namespace if isinstance(namespace, str) and namespace else '<no namespace>'}/"
    if isinstance(name, str) and name:
        return name, ref + name
    found.invalid("metadata.name", "the source NAD has no name; pass the NAD object as read from the API")
    return None, ref + "<no name>"


def _inline_config(source_nad: Mapping[str, object], found: _Findings) -> str | None:
    spec = source_nad.get("spec")
    config = spec.get("config") if isinstance(spec, Mapping) else None
    if spec is not None and not isinstance(spec, Mapping):
        found.invalid("spec", f"must be an object, got {strictjson.kind(spec)}")
    elif config is None or (isinstance(config, str) and not config.strip()):
        found.invalid(
            CONFIG_PATH,
            "is empty or absent: file-backed NAD configuration (Multus loads it from its conf "
            "directory) is not supported in automatic attachment mode; put the complete CNI JSON "
            "inline in spec.config",
        )
    elif not isinstance(config, str):
        found.invalid(CONFIG_PATH, f"must be a string holding CNI JSON, got {strictjson.kind(config)}")
    else:
        return config
    return None


def _check_cni_version(doc: dict[str, JsonValue], found: _Findings) -> str:
    path = f"{CONFIG_PATH}.cniVersion"
    supported = ", ".join(SUPPORTED_CNI_VERSIONS)
    if "cniVersion" not in doc:
        found.invalid(path, f"is required (absent means CNI 0.1.0); set one of {supported}")
        return ""
    version = doc["cniVersion"]
    if not isinstance(version, str):
        found.invalid(path, f"must be a string, got {strictjson.kind(version)}; set one of {supported}")
        return ""
    if version not in SUPPORTED_CNI_VERSIONS:
        found.unsupported(
            path,
            f"CNI version {version!r} is not supported by Multus and sriov-cni here; use one of {supported}",
        )
    if "cniVersions" in doc:
        versions = doc["cniVersions"]
        list_path = f"{CONFIG_PATH}.cniVersions"
        if not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
            found.invalid(list_path, f"must be an array of version strings, got {strictjson.kind(versions)}")
        elif any(v not in SUPPORTED_CNI_VERSIONS for v in versions):
            found.unsupported(list_path, f"lists {versions!r}; list only supported versions ({supported})")
    return version


def _effective_name(doc: dict[str, JsonValue], metadata_name: str | None, found: _Findings) -> str:
    path = f"{CONFIG_PATH}.name"
    rule = "a letter or digit followed by letters, digits, '_', '.' or '-'"
    name = doc.get("name")
    if "name" in doc and not isinstance(name, str):
        found.invalid(
            path, f"must be a string, got {strictjson.kind(name)}; set the CNI network name or remove the key"
        )
        return ""
    if isinstance(name, str) and name:
        if _CNI_NAME.fullmatch(name) is None:
            found.invalid(
                path,
                f"CNI network name {name!r} is not valid ({rule}); rename it once: IPAM pools are keyed on it",
            )
        return name
    if metadata_name is None:
        return ""
    if _CNI_NAME.fullmatch(metadata_name) is None:
        found.invalid(
            path,
            f"is missing and metadata.name {metadata_name!r} is not a valid CNI network name "
            f"({rule}); set an explicit name",
        )
    return metadata_name


def _type_problem(plugin_type: str) -> str:
    allowed = ", ".join(sorted(METAPLUGIN_ALLOWLIST))
    if plugin_type in NESTED_MULTUS_TYPES:
        return f"nested Multus ({plugin_type!r}) is not supported; reference the sriov configuration directly"
    if plugin_type in DEVICE_CREATING_TYPES:
        return (
            f"plugin {plugin_type!r} creates or moves its own network device, which needs another "
            "binding model than one allocated VF; use a template whose device plugin is sriov"
        )
    return (
        f"plugin type {plugin_type!r} is not supported in automatic attachment mode; a conflist is "
        f"one sriov entry followed only by the metaplugins {allowed}"
    )


def _locate_sriov_entry(
    doc: dict[str, JsonValue], found: _Findings
) -> tuple[dict[str, JsonValue] | None, int | None]:
    """Return the sriov entry and its index (``None`` for the single-plugin root)."""
    if "delegates" in doc:
        found.unsupported(
            f"{CONFIG_PATH}.delegates",
            "nested Multus (delegates) is not supported; use one sriov configuration",
        )
    has_type, has_plugins = "type" in doc, "plugins" in doc
    if has_type and has_plugins:
        found.invalid(
            CONFIG_PATH,
            'has both type and plugins, which is ambiguous; keep type "sriov" for a single plugin '
            "or plugins (without a root type) for a conflist",
        )
        return None, None
    if has_type:
        plugin_type = doc["type"]
        path = f"{CONFIG_PATH}.type"
        if not isinstance(plugin_type, str):
            found.invalid(path, f"must be a string, got {strictjson.kind(plugin_type)}")
        elif plugin_type != SRIOV_PLUGIN_TYPE:
            found.unsupported(path, f'single-plugin form requires type "sriov"; {_type_problem(plugin_type)}')
        else:
            return doc, None
        return None, None
    if not has_plugins:
        found.invalid(
            CONFIG_PATH, 'has neither type (single plugin) nor plugins (conflist); set type "sriov"'
        )
        return None, None
    return _locate_in_conflist(doc, found)


def _locate_in_conflist(
    doc: dict[str, JsonValue], found: _Findings
) -> tuple[dict[str, JsonValue] | None, int | None]:
    path = f"{CONFIG_PATH}.plugins"
    plugins = doc["plugins"]
    if not isinstance(plugins, list) or not plugins:
        what = "an empty array" if isinstance(plugins, list) else strictjson.kind(plugins)
        found.invalid(path, f"must be a nonempty array of plugin objects starting with sriov, got {what}")
        return None, None
    _check_no_device_keys(doc, CONFIG_PATH, found)
    sriov_at: list[int] = []
    for index, entry in enumerate(plugins):
        entry_path = f"{path}[{index}]"
        if not isinstance(entry, dict):
            found.invalid(entry_path, f"must be a plugin object, got {strictjson.kind(entry)}")
            continue
        plugin_type = entry.get("type")
        if not isinstance(plugin_type, str) or not plugin_type:
            found.invalid(
                f"{entry_path}.type", f"must be a nonempty string, got {strictjson.kind(plugin_type)}"
            )
            continue
        if "delegates" in entry or "plugins" in entry:
            found.unsupported(
                entry_path, "nested plugin lists (Multus delegates or plugins) are not supported"
            )
        if plugin_type == SRIOV_PLUGIN_TYPE:
            if sriov_at:
                found.unsupported(
                    f"{entry_path}.type",
                    f"second sriov entry (first at plugins[{sriov_at[0]}]); a shadow binds exactly one "
                    "VF, so use one template per VF",
                )
            sriov_at.append(index)
            continue
        _check_no_device_keys(entry, entry_path, found)
        if plugin_type not in METAPLUGIN_ALLOWLIST:
            found.unsupported(f"{entry_path}.type", _type_problem(plugin_type))
    if not sriov_at:
        found.unsupported(path, "has no sriov entry; put exactly one sriov plugin first")
        return None, None
    if sriov_at[0] != 0:
        found.unsupported(
            f"{path}[{sriov_at[0]}].type",
            f"the sriov entry must be the first plugin but is at index {sriov_at[0]}; move it to "
            "plugins[0] and list metaplugins such as tuning after it",
        )
    # Returned even when misplaced so that its own fields are checked in the same pass.
    first = plugins[sriov_at[0]]
    assert isinstance(first, dict)
    return first, sriov_at[0]


def _check_no_device_keys(obj: dict[str, JsonValue], path: str, found: _Findings) -> None:
    for key in _DEVICE_KEYS:
        if obj.get(key) not in (None, ""):
            found.unsupported(
                strictjson.key_path(path, key),
                f"{key} is set outside the sriov entry; remove it (the driver sets the allocated VF "
                "on the sriov entry only)",
            )


def _check_sriov_entry(entry: dict[str, JsonValue], path: str, pci: str, found: _Findings) -> None:
    for key in _DEVICE_KEYS:
        if key not in entry:
            continue
        value = entry[key]
        key_path = strictjson.key_path(path, key)
        if not isinstance(value, str):
            found.invalid(key_path, f"must be a string, got {strictjson.kind(value)}")
        elif value and pci_addresses.parse(value)[0] != pci:
            found.unsupported(
                key_path,
                f"template pins {key} {value!r} but the allocated VF is {pci}; remove {key} from the "
                "template (the driver sets it per allocation)",
            )
    for key in _SRIOV_INT_FIELDS:
        value = entry.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            found.invalid(strictjson.key_path(path, key), f"must be an integer, got {_preview(value)}")
    for key in _SRIOV_STR_FIELDS:
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            found.invalid(strictjson.key_path(path, key), f"must be a string, got {_preview(value)}")
    if "ipam" not in entry:
        return
    ipam, ipam_path = entry["ipam"], f"{path}.ipam"
    if not isinstance(ipam, dict):
        found.invalid(ipam_path, f"must be an object, got {strictjson.kind(ipam)}")
        return
    ipam_type = ipam.get("type")
    if ipam_type is not None and not isinstance(ipam_type, str):
        found.invalid(f"{ipam_path}.type", f"must be a string, got {strictjson.kind(ipam_type)}")
    if ipam_type == "whereabouts" and ipam.get("node_slice_size") not in (None, ""):
        found.unsupported(
            f"{ipam_path}.node_slice_size",
            f"Whereabouts fast node-slice mode ({_preview(ipam['node_slice_size'])}) is not supported "
            "with automatic attachment; remove node_slice_size to use the regular pool",
        )


def _preview(value: JsonValue) -> str:
    text = strictjson.encode(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _with_key(obj: dict[str, JsonValue], key: str, value: JsonValue, after: str) -> dict[str, JsonValue]:
    """``obj`` with ``key`` set: in place of an existing key, else right after ``after``."""
    if key in obj:
        obj[key] = value
        return obj
    out: dict[str, JsonValue] = {}
    for k, v in obj.items():
        out[k] = v
        if k == after:
            out[key] = value
    if key not in out:
        out = {key: value, **out}
    return out


def _materialise(
    doc: dict[str, JsonValue],
    entry: dict[str, JsonValue],
    plugin_index: int | None,
    cni_name: str,
    pci: str,
) -> dict[str, JsonValue]:
    """Write the effective name at the root and the device at the sriov entry.

    ``doc`` and ``entry`` are this call's private decode result, so editing them is safe.
    """
    if "pciBusID" in entry:
        entry["pciBusID"] = pci
    bound = _with_key(entry, "deviceID", pci, after="type")
    if plugin_index is None:
        return _with_key(bound, "name", cni_name, after="cniVersion")
    plugins = doc["plugins"]
    assert isinstance(plugins, list)
    plugins[plugin_index] = bound
    return _with_key(doc, "name", cni_name, after="cniVersion")
