"""A network template's header and sriov entry fields: CNI version, CNI name, device and IPAM keys.

Checks on the decoded template (docs/design.md#render, docs/design.md#ipam): ``cniVersion``
required and supported; the effective CNI name (kept verbatim when nonempty and valid, else the
source NAD's ``metadata.name``; never silently replaced, as it keys IPAM pools); at the sriov
entry, a ``deviceID``/``pciBusID`` naming another device refused, sriov-cni's fields typed as Go
decodes them, ``ipam`` an object, whereabouts' fast node-slice mode refused. Never edits the
template or decides where the sriov entry is (``template_layout``).
"""

from __future__ import annotations

import re
from typing import Final

from sriov_dra.core import ipam_ranges, sriov_cni_fields, sriov_cni_netconf
from sriov_dra.core import pci as pci_addresses
from sriov_dra.core.template_findings import CONFIG_PATH, TemplateFindings
from sriov_dra.core.template_layout import DEVICE_KEYS
from sriov_dra_rules import strict_json
from sriov_dra_rules.strict_json import JsonValue

SUPPORTED_CNI_VERSIONS: Final[tuple[str, ...]] = ("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
"""CNI spec versions a template may declare.

Multus v4.3.0 and sriov-cni both build on libcni v1.3.0, whose plugins support 0.1.0-1.1.0
(``version.All``). 0.1.0 and 0.2.0 are excluded: conflists need 0.3.0 or later and their results
carry no interface list for Multus's network-status. A missing ``cniVersion`` means 0.1.0 to a
plugin, and Multus v4.3.0 rewrites a conflist without one lossily on DEL (multus-cni #755).
"""

_CNI_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def check_cni_version(doc: dict[str, JsonValue], found: TemplateFindings) -> str:
    """Check ``cniVersion`` (and ``cniVersions``) and return the version, ``""`` when unusable."""
    path = f"{CONFIG_PATH}.cniVersion"
    supported = ", ".join(SUPPORTED_CNI_VERSIONS)
    if "cniVersion" not in doc:
        found.invalid(path, f"is required (absent means CNI 0.1.0); set one of {supported}")
        return ""
    version = doc["cniVersion"]
    if not isinstance(version, str):
        found.invalid(path, f"must be a string, got {strict_json.kind(version)}; set one of {supported}")
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
            found.invalid(list_path, f"must be an array of version strings, got {strict_json.kind(versions)}")
        elif any(v not in SUPPORTED_CNI_VERSIONS for v in versions):
            found.unsupported(list_path, f"lists {versions!r}; list only supported versions ({supported})")
    return version


def effective_name(doc: dict[str, JsonValue], metadata_name: str | None, found: TemplateFindings) -> str:
    """The CNI network name the shadow carries: the template's own, else ``metadata_name``.

    Returns ``""`` when neither is usable (a finding is then recorded).
    """
    path = f"{CONFIG_PATH}.name"
    rule = "a letter or digit followed by letters, digits, '_', '.' or '-'"
    name = doc.get("name")
    if "name" in doc and not isinstance(name, str):
        found.invalid(
            path,
            f"must be a string, got {strict_json.kind(name)}; set the CNI network name or remove the key",
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


def check_sriov_entry(
    entry: dict[str, JsonValue], path: str, pci: str, found: TemplateFindings, *, name: str, cni_version: str
) -> None:
    """Check the sriov entry at ``path`` for binding to the canonical BDF ``pci``.

    ``name`` and ``cni_version`` are the effective CNI name and version, which the runtime's libcni
    sets in the config sriov-cni gets (for a conflist too): every key of that config is checked as
    sriov-cni decodes it (:mod:`~sriov_dra.core.sriov_cni_netconf`), its VF settings by
    :mod:`~sriov_dra.core.sriov_cni_fields` whatever case their keys are written in.
    """
    for key in DEVICE_KEYS:
        if key not in entry:
            continue
        value = entry[key]
        key_path = strict_json.key_path(path, key)
        if not isinstance(value, str):
            found.invalid(key_path, f"must be a string, got {strict_json.kind(value)}")
        elif value and pci_addresses.parse(value)[0] != pci:
            found.unsupported(
                key_path,
                f"template pins {key} {value!r} but the allocated VF is {pci}; remove {key} from the "
                "template (the driver sets it per allocation)",
            )
    decoded = sriov_cni_netconf.read({**entry, "name": name, "cniVersion": cni_version}, path)
    settings = {key: decoded.fields[key] for key in sriov_cni_fields.KEYS if key in decoded.fields}
    for problem in sriov_cni_fields.problems_of(
        {key: value for key, (_, value) in settings.items()}, {key: at for key, (at, _) in settings.items()}
    ):
        found.invalid(problem.path, problem.message)
    _check_ipam(entry, path, found)
    recorded = {item.path for item in found.items}
    for key_path, message in decoded.problems:
        if key_path not in recorded:  # one problem per key: the first one found
            found.invalid(key_path, message)
            recorded.add(key_path)


def _check_ipam(entry: dict[str, JsonValue], path: str, found: TemplateFindings) -> None:
    if "ipam" not in entry:
        return
    ipam, ipam_path = entry["ipam"], f"{path}.ipam"
    if not isinstance(ipam, dict):
        found.invalid(ipam_path, f"must be an object, got {strict_json.kind(ipam)}")
        return
    ipam_type = ipam.get("type")
    if ipam_type is not None and not isinstance(ipam_type, str):
        found.invalid(f"{ipam_path}.type", f"must be a string, got {strict_json.kind(ipam_type)}")
    for problem in ipam_ranges.ipam_problems(ipam, ipam_path):
        found.invalid(problem.path, problem.message)
    if ipam_type == "whereabouts" and ipam.get("node_slice_size") not in (None, ""):
        found.unsupported(
            f"{ipam_path}.node_slice_size",
            f"Whereabouts fast node-slice mode ({_preview(ipam['node_slice_size'])}) is not supported "
            "with automatic attachment; remove node_slice_size to use the regular pool",
        )


def _preview(value: JsonValue) -> str:
    text = strict_json.encode(value)
    return text if len(text) <= 60 else text[:57] + "..."
