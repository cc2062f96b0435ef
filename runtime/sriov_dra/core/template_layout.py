"""Where a network template's sriov entry is, and which plugins may sit around it.

A root ``type`` selects the single-plugin form, which must be ``"sriov"`` without ``plugins``; no
root ``type`` selects a conflist whose nonempty ``plugins`` starts with the one sriov entry,
followed only by :data:`METAPLUGIN_ALLOWLIST` types (docs/design.md#render). Both at the root,
nested Multus, a second sriov entry, device-creating plugins, other types, and a
``deviceID``/``pciBusID`` outside the sriov entry are refused. Never edits the template or checks
the sriov entry's own fields (``template_fields``).
"""

from __future__ import annotations

from typing import Final

from sriov_dra.core.template_findings import CONFIG_PATH, TemplateFindings
from sriov_dra_rules import strict_json
from sriov_dra_rules.strict_json import JsonValue

SRIOV_PLUGIN_TYPE: Final = "sriov"
"""The one device-consuming plugin type a managed template may contain."""

METAPLUGIN_ALLOWLIST: Final[frozenset[str]] = frozenset({"tuning"})
"""Plugin types allowed after the sriov entry of a conflist.

Extend only together with a plugin-specific rendering test and a CNI-tier test.
"""

NESTED_MULTUS_TYPES: Final[frozenset[str]] = frozenset({"multus", "multus-shim"})
DEVICE_CREATING_TYPES: Final[frozenset[str]] = frozenset(
    {
        "host-device", "macvlan", "ipvlan", "bridge", "vlan", "ptp", "dummy", "tap", "vrf",
        "ib-sriov", "ovs", "bond", "accelerated-bridge", "dpdk",
    }
)  # fmt: skip
"""Plugin types known to create or move a network device; named in errors (they need another
binding model)."""

DEVICE_KEYS: Final = ("deviceID", "pciBusID")
"""The keys that name a device; set by the driver at the sriov entry only, never broadcast into
metaplugins."""


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


def locate_sriov_entry(
    doc: dict[str, JsonValue], found: TemplateFindings
) -> tuple[dict[str, JsonValue] | None, int | None]:
    """Return the sriov entry and its index (``None`` for the single-plugin root).

    Shapes: ``doc`` the decoded template root; returns ``(None, None)`` after recording why no
    usable entry exists. A conflist's misplaced sriov entry is still returned with its index,
    so that its own fields are checked in the same pass.
    """
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
            found.invalid(path, f"must be a string, got {strict_json.kind(plugin_type)}")
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
    doc: dict[str, JsonValue], found: TemplateFindings
) -> tuple[dict[str, JsonValue] | None, int | None]:
    path = f"{CONFIG_PATH}.plugins"
    plugins = doc["plugins"]
    if not isinstance(plugins, list) or not plugins:
        what = "an empty array" if isinstance(plugins, list) else strict_json.kind(plugins)
        found.invalid(path, f"must be a nonempty array of plugin objects starting with sriov, got {what}")
        return None, None
    _check_no_device_keys(doc, CONFIG_PATH, found)
    sriov_at: list[int] = []
    for index, entry in enumerate(plugins):
        entry_path = f"{path}[{index}]"
        if not isinstance(entry, dict):
            found.invalid(entry_path, f"must be a plugin object, got {strict_json.kind(entry)}")
            continue
        plugin_type = entry.get("type")
        if not isinstance(plugin_type, str) or not plugin_type:
            found.invalid(
                f"{entry_path}.type", f"must be a nonempty string, got {strict_json.kind(plugin_type)}"
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


def _check_no_device_keys(obj: dict[str, JsonValue], path: str, found: TemplateFindings) -> None:
    for key in DEVICE_KEYS:
        if obj.get(key) not in (None, ""):
            found.unsupported(
                strict_json.key_path(path, key),
                f"{key} is set outside the sriov entry; remove it (the driver sets the allocated VF "
                "on the sriov entry only)",
            )
