"""Network-template reference resolution: which source NAD an allocated VF uses.

The precedence of docs/design.md#template-resolution: a per-device
``netAttachDefName``/``netAttachDefNamespace`` pair against the effective VfConfig reference, the
symbolic "Pod namespace" where no Pod is known (the policy controller), and the one concrete
resolution against the verified Pod namespace at prepare. A disagreement is a ``Conflict``, never
a silent override. Never fetches the NAD, defaults a namespace from anything but the verified
Pod, or falls back to the VfConfig past a malformed device reference.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sriov_dra.core import attributes, vf_config
from sriov_dra_rules import errors, names


class ReferenceOrigin(enum.StrEnum):
    """Which input supplied the chosen source reference."""

    DEVICE_ATTRIBUTES = "DeviceAttributes"
    VF_CONFIG = "VfConfig"


@dataclass(frozen=True)
class SourceTemplate:
    """The concrete source NAD selected for one allocated device.

    Shapes: ``namespace`` is a nonempty DNS-1123 label, ``name`` a DNS-1123 subdomain.
    """

    namespace: str
    name: str
    origin: ReferenceOrigin

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def device_reference(
    device_attributes: Mapping[str, object], *, device: str
) -> attributes.NadReference | None:
    """Read the symbolic NAD reference published for ``device``.

    ``device_attributes`` maps qualified names to :class:`~sriov_dra.core.attributes.AttributeValue`
    or their JSON form; only the two reference keys are read.
    Raises: InvalidSpec(InvalidAttribute) when the pair is malformed (namespace without name,
    empty name, wrong type); the caller must not fall back to the VfConfig then.
    Source: docs/design.md#device-attributes, docs/design.md#template-resolution.
    """
    path = f"device {device!r} attributes"
    values: dict[str, attributes.AttributeValue] = {}
    problems: list[errors.FieldError] = []
    ref: attributes.NadReference | None = None
    for key in sorted(attributes.NAD_REFERENCE_KEYS):
        if key in device_attributes:
            value, value_problems = attributes.parse_attribute_value(
                device_attributes[key], f'{path}["{key}"]'
            )
            problems.extend(value_problems)
            if value is not None:
                values[key] = value
    if not problems:
        ref, ref_problems = attributes.nad_reference(values, path)
        problems.extend(ref_problems)
    if problems:
        raise errors.InvalidSpec(
            f"network reference attributes of device {device!r} are malformed; fix the DeviceAttributes "
            "that publish them (no VfConfig fallback is used)",
            reason=errors.Reason.INVALID_ATTRIBUTE,
            errors=problems,
        )
    return ref


def resolve_template(
    device_attributes: Mapping[str, object],
    config: vf_config.VfConfig,
    pod_namespace: str,
    *,
    device: str,
    attribute_sources: Sequence[str] = (),
) -> SourceTemplate:
    """Choose the source NAD for one allocated device; resolve its namespace exactly once.

    A valid device reference wins; if the effective VfConfig also names a NAD, both resolved
    ``(namespace, name)`` pairs must agree. Without a device reference the VfConfig reference is
    used. An omitted or empty namespace means ``pod_namespace`` (the verified consumer's).
    Shapes: ``attribute_sources`` names the DeviceAttributes objects that published the device
    reference, for messages only.
    Raises: InvalidSpec(InvalidConsumer) for a bad ``pod_namespace``; InvalidSpec(InvalidAttribute)
    for a malformed device reference; InvalidSpec(InvalidVfConfig) for a VfConfig namespace
    without a name; Conflict(ConflictingNetworkReference) when the two references differ;
    InvalidSpec(MissingNetworkTemplate) when neither exists.
    Source: docs/design.md#template-resolution, docs/design.md#pure-helpers.
    """
    if not names.is_dns1123_label(pod_namespace):
        raise errors.InvalidSpec(
            f"consumer Pod namespace {pod_namespace!r} is not a DNS-1123 label",
            reason=errors.Reason.INVALID_CONSUMER,
        )
    from_device = device_reference(device_attributes, device=device)
    if config.net_attach_def_namespace and not config.net_attach_def_name:
        raise errors.InvalidSpec(
            f"effective VfConfig for device {device!r} sets netAttachDefNamespace="
            f"{config.net_attach_def_namespace!r} without netAttachDefName; set the name in the same "
            "config (a later name replaces the namespace too)",
            reason=errors.Reason.INVALID_VF_CONFIG,
        )
    from_config = config.reference()
    if from_device is not None:
        namespace, name = from_device.resolve(pod_namespace)
        if from_config is not None and from_config.resolve(pod_namespace) != (namespace, name):
            cfg_ns, cfg_name = from_config.resolve(pod_namespace)
            sources = f" (from DeviceAttributes {', '.join(attribute_sources)})" if attribute_sources else ""
            raise errors.Conflict(
                f"device {device!r} is mapped to NAD {namespace}/{name}{sources} but its effective VfConfig "
                f"names NAD {cfg_ns}/{cfg_name}; remove netAttachDefName from the claim/class config or "
                "make it match the administrator mapping",
                reason=errors.Reason.CONFLICTING_NETWORK_REFERENCE,
            )
        return SourceTemplate(namespace, name, ReferenceOrigin.DEVICE_ATTRIBUTES)
    if from_config is not None:
        namespace, name = from_config.resolve(pod_namespace)
        return SourceTemplate(namespace, name, ReferenceOrigin.VF_CONFIG)
    raise errors.InvalidSpec(
        f"no network template for device {device!r}: it has no netAttachDefName attribute and the "
        "effective VfConfig sets no netAttachDefName; map the VF with DeviceAttributes or set "
        "netAttachDefName in the DeviceClass or claim config",
        reason=errors.Reason.MISSING_NETWORK_TEMPLATE,
    )


def merge_references(
    supplied: Sequence[tuple[str, attributes.NadReference]],
) -> attributes.NadReference | None:
    """Combine the references of several matching DeviceAttributes objects, without a Pod.

    Each entry is ``(object name, its own complete reference)``. All must be equal in the
    symbolic form: same name, and the same explicit namespace or all defaulted. A defaulted and
    an explicit namespace are refused even if they might agree for some Pod.
    Raises: Conflict(ConflictingNetworkReference) naming every object and its reference.
    Source: docs/design.md#policy-precedence.
    """
    if not supplied:
        return None
    distinct = {ref for _, ref in supplied}
    if len(distinct) > 1:
        listing = ", ".join(sorted({f"{obj} -> {ref}" for obj, ref in supplied}))
        raise errors.Conflict(
            f"matching DeviceAttributes objects publish different network references ({listing}); "
            "make them identical (same name and the same explicit or omitted namespace) or make their "
            "labels disjoint",
            reason=errors.Reason.CONFLICTING_NETWORK_REFERENCE,
        )
    return supplied[0][1]
