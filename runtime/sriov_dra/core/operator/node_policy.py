"""SriovNetworkNodePolicy as the operator reads it: fields, ``spec.dra`` validation, filter translation.

The reconcile-time checks of the node-policy API extension (docs/design.md#operator-api,
docs/design.md#operator-validation), repeated here because a disabled webhook or an older stored
object must not produce unsafe output (:func:`validate_dra`); the translation of the hardware
selection into one dra-driver-sriov ``resourceFilter`` (:func:`translate_filter`), untranslatable
rather than match-all when it cannot be exact; upstream's pool-name normalisation. Node and NIC
selection come from ``sriov_dra_rules.node_policies``. Pure; never widens a filter silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sriov_dra.core import attributes, limits
from sriov_dra.core.operator import network_refs
from sriov_dra_rules import errors, names, node_policies, resource_filters, strict_json

GROUP: Final = "sriovnetwork.openshift.io"
KIND: Final = "SriovNetworkNodePolicy"
PLURAL: Final = "sriovnetworknodepolicies"
DEFAULT_POLICY_NAME: Final = "default"
DEFAULT_PRIORITY: Final = node_policies.DEFAULT_PRIORITY
NETWORK_NAME_KEY: Final = f"{GROUP}/sriovNetworkName"
NETWORK_NAMESPACE_KEY: Final = f"{GROUP}/sriovNetworkNamespace"
NETWORK_KEYS: Final = frozenset({NETWORK_NAME_KEY, NETWORK_NAMESPACE_KEY})
RESOURCE_NAME_ATTRIBUTE: Final = "k8s.cni.cncf.io/resourceName"
GENERATED_KEYS_WITH_REFERENCE: Final = 3
"""resourceName plus the netAttachDefName/netAttachDefNamespace pair."""
DISCOVERED_KEYS_MAX: Final = len(attributes.RESERVED_ATTRIBUTES)
_ATTRS_PATH: Final = "spec.dra.attributes"


@dataclass(frozen=True)
class NicId:
    """One supported-NIC entry: PF vendor, PF device ID and the ID its VFs report (lowercase hex)."""

    vendor: str
    pf_device: str
    vf_device: str


@dataclass(frozen=True)
class DraInput:
    """A validated ``spec.dra`` block.

    ``custom`` holds the ordinary custom attributes (reference keys consumed, never exported);
    ``network`` the referenced SriovNetwork; ``problems`` every refusal with its field path.
    """

    custom: Mapping[str, attributes.AttributeValue]
    network: network_refs.ObjectRef | None
    problems: tuple[errors.FieldError, ...]


@dataclass(frozen=True)
class Translation:
    """The resourceFilter of a policy: API form plus the parsed matcher, or why there is none."""

    filter: Mapping[str, object] | None
    matcher: resource_filters.ResourceFilter | None
    problem: str | None


@dataclass(frozen=True)
class NodePolicy:
    """The fields of one SriovNetworkNodePolicy that the DRA plan reads."""

    name: str
    uid: str
    generation: int
    priority: int
    resource_name: str
    node_selector: Mapping[str, str]
    has_dra: bool
    dra: DraInput | None
    translation: Translation

    def selects(self, node_labels: Mapping[str, str]) -> bool:
        """Upstream ``Selected()``: every nodeSelector pair equals the node's label.

        The one rule of ``sriov_dra_rules.node_policies.node_selected`` (the collection's
        ``sriov_vf_plan`` filter uses it too).
        """
        return node_policies.node_selected(self.node_selector, node_labels)


def compat_resource_name(resource_name: str, prefix: str) -> str:
    """The compatibility ``k8s.cni.cncf.io/resourceName`` value: ``<prefix>/<resourceName>``."""
    return f"{prefix}/{resource_name}" if prefix else resource_name


def parse_policy(obj: Mapping[str, object], *, prefix: str, nic_ids: Sequence[NicId]) -> NodePolicy:
    """Read one policy dict; shape problems become translation or DRA problems, never exceptions.

    Source: upstream sriov-network-operator's ``SriovNetworkNodePolicy`` type.
    """
    meta = _map(obj.get("metadata"))
    spec = _map(obj.get("spec"))
    selector = _map(spec.get("nodeSelector"))
    generation = meta.get("generation")
    resource_name = spec.get("resourceName")
    rn = resource_name if isinstance(resource_name, str) else ""
    has_dra = spec.get("dra") is not None
    return NodePolicy(
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        generation=generation if isinstance(generation, int) else 0,
        priority=node_policies.priority_of(spec),
        resource_name=rn,
        node_selector={str(k): str(v) for k, v in selector.items()},
        has_dra=has_dra,
        dra=validate_dra(spec.get("dra"), compat_value=compat_resource_name(rn, prefix)) if has_dra else None,
        translation=translate_filter(spec, nic_ids),
    )


def validate_dra(raw: object, *, compat_value: str) -> DraInput:
    """Validate a ``spec.dra`` block at reconcile time and split its reference from its attributes.

    Shapes: ``{"attributes": {qualifiedName: {int|bool|string|version: value}}}``; ``{}`` is valid
    (generated base attributes only). Checked: fully qualified DRA keys; scalar values with
    exactly one member (``false`` and ``0`` count as present); strings and versions ≤ 64 bytes,
    semver syntax; at most 32 inputs and a device budget that still fits 32 after discovery and
    generated keys; discovery-owned keys, ``k8s.cni.cncf.io/resourceName`` and the driver's
    ``netAttachDefName``/``netAttachDefNamespace`` refused as inputs; the operator reference keys
    ``sriovnetwork.openshift.io/sriovNetworkName``/``sriovNetworkNamespace`` both present or both
    absent, strings, valid object name and namespace (never defaulted).
    Source: docs/design.md#operator-api, docs/design.md#operator-validation; upstream
    dra-driver-sriov's ``consts.ReservedAttributes``.
    """
    problems: list[errors.FieldError] = []
    block = raw if isinstance(raw, Mapping) else {}
    if not isinstance(raw, Mapping):
        problems.append(errors.FieldError("spec.dra", f"must be an object, got {type(raw).__name__}"))
    for key in sorted(set(map(str, block)) - {"attributes"}):
        problems.append(errors.FieldError(f"spec.dra.{key}", "unknown field; only attributes is supported"))
    raw_attrs = block.get("attributes")
    result = attributes.validate_attribute_map(raw_attrs, _ATTRS_PATH, require_domain=True)
    problems.extend(result.problems)
    problems.extend(attributes.reserved_problems(result.reserved, _ATTRS_PATH))
    present = set(raw_attrs) if isinstance(raw_attrs, Mapping) else set()
    for key in sorted(present & (attributes.NAD_REFERENCE_KEYS | {RESOURCE_NAME_ATTRIBUTE})):
        fix = (
            "the operator generates it from spec.resourceName; remove it"
            if key == RESOURCE_NAME_ATTRIBUTE
            else f"it is generated output; reference a SriovNetwork with {NETWORK_NAME_KEY} and "
            f"{NETWORK_NAMESPACE_KEY} instead"
        )
        problems.append(errors.FieldError(f'{_ATTRS_PATH}["{key}"]', f"cannot be set: {fix}"))
    network = _network_reference(present, result.values, problems)
    custom = {
        k: v
        for k, v in result.values.items()
        if k not in NETWORK_KEYS and k not in attributes.NAD_REFERENCE_KEYS and k != RESOURCE_NAME_ATTRIBUTE
    }
    generated = 1 + (2 if network is not None else 0)
    total = DISCOVERED_KEYS_MAX + generated + len(custom)
    if total > attributes.MAX_ATTRIBUTES_PER_DEVICE:
        problems.append(
            errors.FieldError(
                _ATTRS_PATH,
                f"{len(custom)} custom attributes plus {generated} generated and up to {DISCOVERED_KEYS_MAX} "
                f"discovered ones make {total} per device, max {attributes.MAX_ATTRIBUTES_PER_DEVICE}; "
                f"remove {total - attributes.MAX_ATTRIBUTES_PER_DEVICE}",
            )
        )
    size = limits.byte_len(compat_value)
    if not strict_json.has_utf8_form(compat_value):
        problems.append(
            errors.FieldError(
                "spec.resourceName",
                "contains a lone UTF-16 surrogate, which has no UTF-8 form and cannot be published as the "
                f"generated {RESOURCE_NAME_ATTRIBUTE} value; use valid characters",
            )
        )
    elif size > attributes.MAX_VALUE_BYTES:
        problems.append(
            errors.FieldError(
                "spec.resourceName",
                f"the generated {RESOURCE_NAME_ATTRIBUTE} value {compat_value!r} is {size} bytes, max "
                f"{attributes.MAX_VALUE_BYTES}; use a shorter resourceName",
            )
        )
    return DraInput(dict(sorted(custom.items())), network, tuple(problems))


def _network_reference(
    present: set[object],
    values: Mapping[str, attributes.AttributeValue],
    problems: list[errors.FieldError],
) -> network_refs.ObjectRef | None:
    """The operator reference pair: both or neither, strings, valid object name and namespace."""
    has_name, has_ns = NETWORK_NAME_KEY in present, NETWORK_NAMESPACE_KEY in present
    if not has_name and not has_ns:
        return None
    if has_name != has_ns:
        missing = NETWORK_NAMESPACE_KEY if has_name else NETWORK_NAME_KEY
        given = NETWORK_NAME_KEY if has_name else NETWORK_NAMESPACE_KEY
        problems.append(
            errors.FieldError(
                f'{_ATTRS_PATH}["{missing}"]',
                f"is required because {given} is set; set both or neither (the namespace is never defaulted)",
            )
        )
        return None
    parts: list[str] = []
    for key, check in ((NETWORK_NAMESPACE_KEY, names.dns1123_label_problem), (NETWORK_NAME_KEY, None)):
        value = values.get(key)
        where = f'{_ATTRS_PATH}["{key}"]'
        if value is None:
            return None  # invalid value already reported by validate_attribute_map
        if value.type is not attributes.AttributeType.STRING or not isinstance(value.value, str):
            problems.append(errors.FieldError(where, f"must be a string attribute, got {value.type.value}"))
            return None
        problem = (check or names.dns1123_subdomain_problem)(value.value)
        if problem is not None:
            kind = "namespace (DNS-1123 label)" if check else "SriovNetwork name (DNS-1123 subdomain)"
            problems.append(errors.FieldError(where, f"is not a valid {kind}: {problem}"))
            return None
        parts.append(value.value)
    return network_refs.ObjectRef(parts[0], parts[1])


def translate_filter(spec: Mapping[str, object], nic_ids: Sequence[NicId]) -> Translation:
    """Translate a policy's hardware selection into one dra-driver-sriov ``resourceFilter``.

    Shapes: keys among ``vendors``, ``devices``, ``pfNames``, ``pfPciAddresses``, ``linkType``;
    lists sorted and deduplicated. ``deviceType: vfio-pci`` adds no ``drivers`` field (the
    driver does not implement it; VF driver binding comes from VfConfig at prepare). A selection
    that cannot be expressed exactly (``netFilter``, ``pf#first-last`` VF ranges, a PF
    ``deviceID`` without a known VF ID, or nothing at all) is untranslatable, never an empty,
    match-all filter (docs/design.md#operator-attributes).
    """
    nic = node_policies.read_nic_selector(spec)
    if nic.has_net_filter:
        return _untranslatable("nicSelector.netFilter has no resourceFilter equivalent")
    if nic.problems:  # the words of the collection's VF plan too (node_policies, device_selectors)
        return _untranslatable("; ".join(f"{p.path}: {p.message}" for p in nic.problems))
    out: dict[str, object] = {}
    vendor, device = nic.vendor, nic.device_id
    if vendor:
        out["vendors"] = [vendor]
    if device:
        if spec.get("numVfs") == 0:
            out["devices"] = [device]
        else:
            vf_ids = sorted(
                {n.vf_device for n in nic_ids if n.pf_device == device and (not vendor or n.vendor == vendor)}
            )
            if not vf_ids:
                return _untranslatable(
                    f"nicSelector.deviceID {device!r} has no VF device ID in the supported NIC table; add "
                    f"'{vendor or '<vendor>'} {device} <vf device>' to the supported-nic-ids ConfigMap "
                    "(--supported-nic-ids) or select by pfNames/rootDevices"
                )
            out["devices"] = vf_ids
    pf_names = nic.pf_names
    ranged = list(nic.ranged_pf_names)
    if ranged:
        return _untranslatable(f"nicSelector.pfNames VF ranges {ranged} cannot be selected; list whole PFs")
    if pf_names:
        out["pfNames"] = sorted(set(pf_names))
    roots = nic.root_devices
    if roots:
        out["pfPciAddresses"] = sorted(set(roots))
    link = spec.get("linkType")
    if isinstance(link, str) and link and spec.get("deviceType") != "vfio-pci":
        out["linkType"] = "ib" if link.lower() == "ib" else "eth"
    if not out:
        return _untranslatable("nicSelector translates to an empty filter, which would match every VF")
    matcher = resource_filters.ResourceFilter(
        vendors=frozenset(_strings(out.get("vendors"))),
        devices=frozenset(_strings(out.get("devices"))),
        pf_names=frozenset(_strings(out.get("pfNames"))),
        pf_pci_addresses=frozenset(_strings(out.get("pfPciAddresses"))),
        link_type={"eth": "ethernet", "ib": "infiniband"}.get(str(out.get("linkType", "")), ""),
    )
    return Translation(dict(sorted(out.items())), matcher, None)


def _untranslatable(problem: str) -> Translation:
    return Translation(None, None, problem)


def _strings(value: object) -> list[str]:
    return [v for v in value if isinstance(v, str) and v] if isinstance(value, list) else []


def _map(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def parse_nic_ids(data: Mapping[str, object]) -> tuple[NicId, ...]:
    """Read upstream's ``supported-nic-ids`` ConfigMap data: ``{name: "<vendor> <pf id> <vf id>"}``.

    Shapes: IDs lowercase hex without ``0x``; result sorted and deduplicated.
    Raises: InvalidSpec naming every malformed entry.
    Source: upstream sriov-network-operator's ConfigMap ``supported-nic-ids``.
    """
    out: set[NicId] = set()
    problems: list[errors.FieldError] = []
    for name in sorted(data, key=str):
        value = data[name]
        parts = value.split() if isinstance(value, str) else []
        if len(parts) != 3 or not all(_is_hex(p) for p in parts):
            problems.append(
                errors.FieldError(
                    f"data.{name}", f"{value!r} must be '<vendor> <pf device> <vf device>' in hex"
                )
            )
            continue
        vendor, pf, vf = (p.lower().removeprefix("0x") for p in parts)
        out.add(NicId(vendor, pf, vf))
    errors.raise_if_any(problems, "supported NIC table is malformed")
    return tuple(sorted(out, key=lambda n: (n.vendor, n.pf_device, n.vf_device)))


def _is_hex(text: str) -> bool:
    digits = text.lower().removeprefix("0x")
    return bool(digits) and all(c in "0123456789abcdef" for c in digits)
