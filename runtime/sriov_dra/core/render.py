"""Render a source NetworkAttachmentDefinition into the frozen CNI config of one shadow.

:func:`render_shadow_config` validates the administrator's template, binds it to one allocated
VF and returns the exact bytes the shadow's ``spec.config`` carries, the checkpoint freezes and
``configSHA256`` hashes (docs/design.md#render, docs/design.md#ipam). Its rules are a contract
shared with the guard and the tests. Owns the input, the order of the checks and the output;
the rules live in ``template_layout``, ``template_fields`` and ``template_findings``. No I/O, never
reads the shadow's name, never mutates the caller's objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sriov_dra.core import binding_annotation
from sriov_dra.core import pci as pci_addresses
from sriov_dra.core.template_fields import (
    check_cni_version,
    check_sriov_entry,
    effective_name,
)
from sriov_dra.core.template_findings import CONFIG_PATH, TemplateFindings, raise_findings
from sriov_dra.core.template_layout import SRIOV_PLUGIN_TYPE, locate_sriov_entry
from sriov_dra_rules import errors, strict_json
from sriov_dra_rules.strict_json import JsonValue


@dataclass(frozen=True, slots=True)
class RenderedConfig:
    """The frozen CNI configuration of one shadow NAD.

    Shapes: ``config_bytes`` is compact UTF-8 JSON; ``config_sha256`` is 64 lowercase hex over
    exactly those bytes; ``plugin_index`` is ``None`` (single plugin) or ``0`` (conflist);
    ``pci_address`` is the canonical BDF written as ``deviceID``.
    Source: docs/design.md#render, docs/design.md#pure-helpers.
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


def render_shadow_config(source_nad: Mapping[str, object], pci_address: str) -> RenderedConfig:
    """Bind the source NAD's CNI config to one allocated VF and return the frozen result.

    The caller's objects are not modified. Rules, in check order:

    * **Input.** Only inline ``spec.config``; absent, empty or whitespace-only config (Multus
      would load a file from its conf directory) is ``InvalidNetworkTemplate`` (multus-cni #1362).
    * **Strict JSON** (:mod:`sriov_dra_rules.strict_json`): malformed text, a non-object root, a
      duplicate key anywhere, NaN/Infinity and lone surrogates are ``InvalidNetworkTemplate``.
      Integers are exact; a number with a fraction or exponent is kept as written and rejected
      only where sriov-cni needs an integer (``vlan``, ``vlanQoS``, ``min_tx_rate``,
      ``max_tx_rate``), as Go cannot decode it into an ``int`` either.
    * **CNI name**: a nonempty name is kept verbatim and must match the CNI spec's pattern (it
      keys IPAM pools, so it is never silently replaced); a missing or empty one becomes the
      source NAD's ``metadata.name``, right after ``cniVersion``. The shadow's own object name
      never enters the JSON (multus-dynamic-networks-controller #45, whereabouts #256).
    * **Layout**: a root ``type`` selects the single-plugin form, which must be ``"sriov"``
      without ``plugins``; otherwise a conflist whose nonempty ``plugins`` starts with the one
      sriov entry, followed only by allowlisted metaplugins. Both at the root is ambiguous;
      nested Multus, a second sriov entry and device-creating plugins are unsupported.
    * **Device identity**: ``deviceID`` is set at the sriov entry only (multus-cni #289);
      ``pciBusID`` is rewritten there only if present. A preexisting value naming another
      device, or a ``deviceID``/``pciBusID`` anywhere else, is an error.
    * **CNI versions**: ``cniVersion`` is required and supported; ``cniVersions`` too.
    * **sriov-cni's loader**: what sriov-cni would refuse at every CNI ADD is refused here: a key
      naming one of its fields in any case with a value Go cannot decode into it, two keys naming
      one field, its VF settings' limits (``sriov_cni_netconf``, ``sriov_cni_fields``).
    * **IPAM**: the ``ipam`` subtree is never edited (key order, omitted versus empty fields and
      ``network_name`` survive); whereabouts' fast node-slice mode is unsupported.
    * **Output**: compact canonical UTF-8 JSON in source key order, so rendering the same source
      twice, or a rendered config again, gives identical bytes.

    Shapes: ``source_nad`` is the NAD as read from the API (``metadata.name``/``namespace``,
    ``spec.config`` as a string); ``pci_address`` is the allocated VF's BDF from discovery.
    Raises: errors.InvalidSpec with reason ``InvalidPciAddress`` for a bad BDF (checked first),
    ``InvalidNetworkTemplate`` when the template is malformed (absent/empty config, bad JSON,
    wrong types, missing fields), else ``UnsupportedNetworkTemplate`` for valid shapes this mode
    cannot bind safely; each carries every FieldError found, with a path such as
    ``spec.config.plugins[1].type``.
    Source: docs/design.md#render, docs/design.md#ipam.
    """
    pci = pci_addresses.normalize(pci_address, path="pciAddress")
    found = TemplateFindings()
    metadata_name, ref = _source_identity(source_nad, found)
    summary = f"network template {ref} cannot be used for automatic SR-IOV attachment"
    text = _inline_config(source_nad, found)
    if text is None:
        raise_findings(found, summary)
    try:
        doc = strict_json.decode(text, path=CONFIG_PATH)
    except errors.InvalidSpec as exc:
        found.items.extend(exc.errors)
        found.any_invalid = True
        raise_findings(found, summary, cause=exc)
    if not isinstance(doc, dict):
        found.invalid(
            CONFIG_PATH,
            f"the JSON root is {strict_json.kind(doc)}; spec.config must be one JSON object "
            "(a single sriov plugin or a conflist)",
        )
        raise_findings(found, summary)

    cni_version = check_cni_version(doc, found)
    cni_name = effective_name(doc, metadata_name, found)
    entry, plugin_index = locate_sriov_entry(doc, found)
    if entry is not None:
        entry_path = CONFIG_PATH if plugin_index is None else f"{CONFIG_PATH}.plugins[{plugin_index}]"
        check_sriov_entry(entry, entry_path, pci, found, name=cni_name, cni_version=cni_version)
    if found.items:
        raise_findings(found, summary)
    assert entry is not None  # every path that leaves it None records a finding

    rendered = _materialise(doc, entry, plugin_index, cni_name, pci)
    try:
        config_bytes = strict_json.encode_bytes(rendered, path=CONFIG_PATH)
    except errors.InvalidSpec as exc:  # unreachable after decode's surrogate check; kept total
        found.items.extend(exc.errors)
        found.any_invalid = True
        raise_findings(found, summary, cause=exc)
    return RenderedConfig(
        config_bytes=config_bytes,
        config_sha256=binding_annotation.config_sha256(config_bytes),
        cni_name=cni_name,
        cni_version=cni_version,
        is_conflist=plugin_index is not None,
        plugin_index=plugin_index,
        plugin_type=SRIOV_PLUGIN_TYPE,
        pci_address=pci,
    )


def _source_identity(source_nad: Mapping[str, object], found: TemplateFindings) -> tuple[str | None, str]:
    """Return the source ``metadata.name`` (None if unusable) and ``namespace/name`` for messages."""
    metadata = source_nad.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    ref = f"{namespace if isinstance(namespace, str) and namespace else '<no namespace>'}/"
    if isinstance(name, str) and name:
        return name, ref + name
    found.invalid("metadata.name", "the source NAD has no name; pass the NAD object as read from the API")
    return None, ref + "<no name>"


def _inline_config(source_nad: Mapping[str, object], found: TemplateFindings) -> str | None:
    spec = source_nad.get("spec")
    config = spec.get("config") if isinstance(spec, Mapping) else None
    if spec is not None and not isinstance(spec, Mapping):
        found.invalid("spec", f"must be an object, got {strict_json.kind(spec)}")
    elif config is None or (isinstance(config, str) and not config.strip()):
        found.invalid(
            CONFIG_PATH,
            "is empty or absent: file-backed NAD configuration (Multus loads it from its conf "
            "directory) is not supported in automatic attachment mode; put the complete CNI JSON "
            "inline in spec.config",
        )
    elif not isinstance(config, str):
        found.invalid(CONFIG_PATH, f"must be a string holding CNI JSON, got {strict_json.kind(config)}")
    else:
        return config
    return None


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
