"""SriovResourcePolicy evaluation: which discovered VFs are advertised, and with which attributes.

This module owns the driver side of spec §5.3 and §12.2.5 steps 1–2, compatible with upstream
dra-driver-sriov (reference §2.2, §3.4, §9.3): opt-in advertisement, policies in name order and
configs in list order, the first matching (policy, config) claims a device, resourceFilter
matching (AND across fields, OR within a field and across filters, ``linkType`` normalised), and
DeviceAttributes selected per config and merged in name order (last key wins). In managed mode it
adds the spec's safety rules: a selector that matches nothing, an invalid map, a reserved key or
conflicting network references leaves the config unresolved, so its devices are claimed and
blocked rather than falling through to a later config; filters and node selectors the driver
cannot honour exactly (``drivers``, ``pfName#range``, ``matchFields``, ...) are refused with
``UnsupportedResourceFilter`` and block every device they might cover.

It must never read the API, drop a device from discovered inventory, or merge across configs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sriov_dra.core import attributes, labelselectors, templates
from sriov_dra_rules import errors

_D = attributes.DRIVER_DOMAIN
_FILTER_FIELDS = ("vendors", "devices", "pciAddresses", "pfNames", "pfPciAddresses")
_LINK_TYPES = {"eth": "ethernet", "ethernet": "ethernet", "ib": "infiniband", "infiniband": "infiniband"}
_POLICY = "SriovResourcePolicy"
_ATTRS = "DeviceAttributes"


@dataclass(frozen=True)
class DeviceFacts:
    """What discovery knows about one VF; the host layer fills it, policies only read it.

    Shapes: PCI addresses ``DDDD:BB:DD.F`` lowercase; IDs lowercase hex without ``0x``
    (``vendor`` is the PF vendor, ``device_id`` the VF device); ``link_type`` ``ethernet``,
    ``infiniband`` or ``unknown``; ``eswitch_mode`` ``legacy`` or ``switchdev``; ``numa_node`` a
    node ``>= 0`` or ``None`` when the kernel reports none; ``pcie_root`` like ``pci0000:00`` or
    ``None`` when discovery failed.
    Source: reference dra-driver-sriov.md §3.1–§3.2.
    """

    pci_address: str
    vendor: str
    device_id: str
    pf_device_id: str
    pf_name: str
    pf_pci_address: str
    vf_id: int
    driver: str | None = None
    numa_node: int | None = None
    pcie_root: str | None = None
    link_type: str = "ethernet"
    eswitch_mode: str = "legacy"
    rdma_capable: bool = False

    @property
    def name(self) -> str:
        """DRA device name: the VF BDF with ``:`` and ``.`` replaced by ``-`` (``0000-3b-02-0``)."""
        return self.pci_address.replace(":", "-").replace(".", "-")


def discovered_attributes(facts: DeviceFacts) -> dict[str, attributes.AttributeValue]:
    """The discovery-owned attributes published for ``facts`` (upstream names and types).

    Shapes: the 14 reserved keys, less the unknown topology: ``resource.kubernetes.io/pcieRoot``
    is omitted, never ``""``, when unknown (the fix recommended by reference §9.4), and
    ``dra.net/numaNode`` is omitted, never ``-1``, when there is no node (``None`` or negative;
    deviation from upstream, which publishes ``-1``: "no node" must not match as a node).
    """
    s, i = attributes.string_value, attributes.int_value
    out = {
        f"{_D}/vendor": s(facts.vendor),
        f"{_D}/deviceID": s(facts.device_id),
        f"{_D}/pfDeviceID": s(facts.pf_device_id),
        f"{_D}/pciAddress": s(facts.pci_address),
        "k8s.cni.cncf.io/deviceID": s(facts.pci_address),
        f"{_D}/PFName": s(facts.pf_name),
        f"{_D}/EswitchMode": s(facts.eswitch_mode),
        f"{_D}/vfID": i(facts.vf_id),
        f"{_D}/pfPciAddress": s(facts.pf_pci_address),
        "resource.kubernetes.io/pciBusID": s(facts.pci_address),
        f"{_D}/linkType": s(facts.link_type),
        f"{_D}/rdmaCapable": attributes.bool_value(facts.rdma_capable),
    }
    if facts.numa_node is not None and facts.numa_node >= 0:
        out["dra.net/numaNode"] = i(facts.numa_node)
    if facts.pcie_root:
        out["resource.kubernetes.io/pcieRoot"] = s(facts.pcie_root)
    return out


@dataclass(frozen=True)
class Diagnostic:
    """One problem found while evaluating, attached to the object and field that caused it.

    ``blocking`` is true when the problem makes devices unavailable (claimed and blocked).
    """

    reason: errors.Reason
    source: str
    path: str
    message: str
    blocking: bool

    def __str__(self) -> str:
        return f"{self.reason}: {self.source} {self.path}: {self.message}"


@dataclass(frozen=True)
class ResourceFilter:
    """One parsed ``resourceFilters[]`` entry; ``None`` or empty fields do not constrain."""

    vendors: frozenset[str] = frozenset()
    devices: frozenset[str] = frozenset()
    pci_addresses: frozenset[str] = frozenset()
    pf_names: frozenset[str] = frozenset()
    pf_pci_addresses: frozenset[str] = frozenset()
    link_type: str = ""

    def matches(self, facts: DeviceFacts) -> bool:
        """AND across the nonempty fields, OR within each; exact, case-sensitive strings."""
        pairs = (
            (self.vendors, facts.vendor),
            (self.devices, facts.device_id),
            (self.pci_addresses, facts.pci_address),
            (self.pf_names, facts.pf_name),
            (self.pf_pci_addresses, facts.pf_pci_address),
        )
        if any(allowed and value not in allowed for allowed, value in pairs):
            return False
        return (
            not self.link_type or _LINK_TYPES.get(facts.link_type.lower(), facts.link_type) == self.link_type
        )


@dataclass(frozen=True)
class DeviceOutcome:
    """Why one device is claimed, and what it publishes when eligible.

    Shapes: ``values`` are the merged policy attributes (empty when blocked); ``reference`` the
    symbolic NAD reference among them (managed mode only); ``reasons`` why it is blocked.
    """

    device: str
    policy: str
    config_index: int
    eligible: bool
    reference: attributes.NadReference | None
    values: Mapping[str, attributes.AttributeValue]
    attribute_sources: tuple[str, ...]
    reasons: tuple[errors.Reason, ...]


@dataclass(frozen=True)
class PolicyEvaluation:
    """Result of one evaluation; independent of the input order of objects with the same names.

    Shapes: ``outcomes`` holds claimed devices only, keyed by device name; ``diagnostics`` sorted.
    """

    outcomes: Mapping[str, DeviceOutcome]
    diagnostics: tuple[Diagnostic, ...]

    @property
    def claimed(self) -> frozenset[str]:
        """Devices that a (policy, config) matched first, usable or not."""
        return frozenset(self.outcomes)

    @property
    def eligible(self) -> frozenset[str]:
        """Devices to advertise (``UpdatePolicyDevices`` input)."""
        return frozenset(d for d, o in self.outcomes.items() if o.eligible)

    @property
    def blocked(self) -> frozenset[str]:
        """Claimed devices withheld because their config is unresolved or over budget."""
        return frozenset(d for d, o in self.outcomes.items() if not o.eligible)

    def device_attributes(self) -> dict[str, Mapping[str, attributes.AttributeValue]]:
        """Merged policy attributes of every eligible device (discovery attributes excluded)."""
        return {d: o.values for d, o in sorted(self.outcomes.items()) if o.eligible}


@dataclass(frozen=True)
class _AttrObject:
    name: str
    labels: Mapping[str, str]
    values: Mapping[str, attributes.AttributeValue]
    invalid: bool
    reserved: tuple[str, ...]
    reference: attributes.NadReference | None


@dataclass(frozen=True)
class _Config:
    policy: str
    index: int
    filters: tuple[ResourceFilter, ...]
    reasons: frozenset[errors.Reason]
    reference: attributes.NadReference | None
    values: Mapping[str, attributes.AttributeValue]
    sources: tuple[str, ...]


class _Ctx:
    """Collects structural errors (raised at the end) and diagnostics (returned)."""

    def __init__(self, managed: bool) -> None:
        self.managed = managed
        self.structural: list[errors.FieldError] = []
        self.diagnostics: set[Diagnostic] = set()

    def note(self, reason: errors.Reason, source: str, path: str, message: str, blocking: bool) -> None:
        self.diagnostics.add(Diagnostic(reason, source, path, message, blocking))

    def unsupported(self, source: str, path: str, message: str, reasons: set[errors.Reason]) -> None:
        """Managed: a blocking UnsupportedResourceFilter; compatibility: a warning only."""
        self.note(errors.Reason.UNSUPPORTED_RESOURCE_FILTER, source, path, message, self.managed)
        if self.managed:
            reasons.add(errors.Reason.UNSUPPORTED_RESOURCE_FILTER)


def evaluate_policies(
    devices: Sequence[DeviceFacts],
    policies: Sequence[Mapping[str, object]],
    device_attributes: Sequence[Mapping[str, object]],
    *,
    node_labels: Mapping[str, str],
    managed: bool,
) -> PolicyEvaluation:
    """Decide, for every discovered device, which policy config claims it and whether it is usable.

    ``policies`` and ``device_attributes`` are the objects of the driver's namespace (plain dicts).
    ``managed`` selects the auto-attach rules of spec §12.2.5; otherwise upstream behaviour is
    kept (nil/invalid/zero-match selectors give no attributes, reserved keys are skipped and
    ``drivers``/unknown filter fields ignored, each with a non-blocking diagnostic). In both
    modes an invalid attribute value or an over-budget device is blocked rather than published.
    Shapes: devices are keyed by :attr:`DeviceFacts.name`; all outputs are sorted or sets.
    Raises: InvalidSpec for shapes the CRD schema forbids (missing or duplicate names, wrong
    JSON types), listing every one.
    Source: spec §5.3, §12.2.5 steps 1–2; reference dra-driver-sriov.md §2.2, §3.4, §9.3.
    """
    ctx = _Ctx(managed)
    objects = _parse_attribute_objects(device_attributes, ctx)
    configs = _parse_policies(policies, objects, node_labels, ctx)
    by_name = {d.name: d for d in devices}
    if len(by_name) != len(devices):
        ctx.structural.append(errors.FieldError("devices", "two discovered devices share one PCI address"))
    errors.raise_if_any(ctx.structural, "SriovResourcePolicy/DeviceAttributes objects are malformed")
    outcomes: dict[str, DeviceOutcome] = {}
    for config in configs:
        for name in sorted(by_name):
            facts = by_name[name]
            if name in outcomes or (config.filters and not any(f.matches(facts) for f in config.filters)):
                continue
            outcomes[name] = _outcome(facts, config, ctx)
    return PolicyEvaluation(outcomes, tuple(sorted(ctx.diagnostics, key=_diag_key)))


def _outcome(facts: DeviceFacts, config: _Config, ctx: _Ctx) -> DeviceOutcome:
    reasons = set(config.reasons)
    if not reasons:
        total = len(set(discovered_attributes(facts)) | set(config.values))
        if total > attributes.MAX_ATTRIBUTES_PER_DEVICE:
            reasons.add(errors.Reason.INVALID_ATTRIBUTE)
            ctx.note(
                errors.Reason.INVALID_ATTRIBUTE,
                f"{_POLICY}/{config.policy}",
                f"spec.configs[{config.index}]",
                f"device {facts.name} would publish {total} attributes, max "
                f"{attributes.MAX_ATTRIBUTES_PER_DEVICE}; remove custom attributes from "
                f"DeviceAttributes {', '.join(config.sources)}",
                True,
            )
    eligible = not reasons
    return DeviceOutcome(
        device=facts.name,
        policy=config.policy,
        config_index=config.index,
        eligible=eligible,
        reference=config.reference if eligible else None,
        values=config.values if eligible else {},
        attribute_sources=config.sources,
        reasons=tuple(sorted(reasons)),
    )


def _diag_key(d: Diagnostic) -> tuple[str, str, str, str, bool]:
    return (d.source, d.path, d.reason.value, d.message, d.blocking)


def _named(raw: Sequence[Mapping[str, object]], kind: str, ctx: _Ctx) -> dict[str, Mapping[str, object]]:
    """Index objects by ``metadata.name``; a missing or duplicate name is structural."""
    out: dict[str, Mapping[str, object]] = {}
    for index, obj in enumerate(raw):
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str) or not name:
            ctx.structural.append(
                errors.FieldError(f"{kind}[{index}].metadata.name", "must be a nonempty string")
            )
        elif name in out:
            ctx.structural.append(errors.FieldError(f"{kind}/{name}", "duplicate object name"))
        else:
            out[name] = obj
    return out


def _parse_attribute_objects(raw: Sequence[Mapping[str, object]], ctx: _Ctx) -> list[_AttrObject]:
    out: list[_AttrObject] = []
    named = _named(raw, _ATTRS, ctx)
    for name in sorted(named):
        source = f"{_ATTRS}/{name}"
        meta = named[name].get("metadata")
        labels = _or(meta.get("labels") if isinstance(meta, Mapping) else None, {})
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            ctx.structural.append(
                errors.FieldError(f"{source}.metadata.labels", "must map strings to strings")
            )
            continue
        spec = named[name].get("spec")
        if not isinstance(spec, Mapping):
            ctx.structural.append(errors.FieldError(f"{source}.spec", "is required and must be an object"))
            continue
        result = attributes.validate_attribute_map(spec.get("attributes"), "spec.attributes")
        for problem in result.problems:
            ctx.note(errors.Reason.INVALID_ATTRIBUTE, source, problem.path, problem.message, True)
        suffix = "" if ctx.managed else " (skipped, as upstream does)"
        for problem in attributes.reserved_problems(result.reserved, "spec.attributes"):
            ctx.note(
                errors.Reason.RESERVED_ATTRIBUTE, source, problem.path, problem.message + suffix, ctx.managed
            )
        reference, invalid = None, bool(result.problems)
        if ctx.managed:
            reference, ref_problems = attributes.nad_reference(result.values, "spec.attributes")
            invalid = invalid or bool(ref_problems)
            for problem in ref_problems:
                ctx.note(errors.Reason.INVALID_ATTRIBUTE, source, problem.path, problem.message, True)
        out.append(_AttrObject(name, dict(labels), result.values, invalid, result.reserved, reference))
    return out


def _parse_policies(
    raw: Sequence[Mapping[str, object]],
    objects: Sequence[_AttrObject],
    node_labels: Mapping[str, str],
    ctx: _Ctx,
) -> list[_Config]:
    configs: list[_Config] = []
    named = _named(raw, _POLICY, ctx)
    for name in sorted(named):
        source = f"{_POLICY}/{name}"
        spec = named[name].get("spec")
        if not isinstance(spec, Mapping):
            ctx.structural.append(errors.FieldError(f"{source}.spec", "is required and must be an object"))
            continue
        node_reasons: set[errors.Reason] = set()
        selection = labelselectors.evaluate_node_selector(
            spec.get("nodeSelector"), node_labels, "spec.nodeSelector"
        )
        ctx.structural.extend(errors.FieldError(f"{source}.{e.path}", e.message) for e in selection.malformed)
        for problem in selection.unsupported:
            ctx.unsupported(source, problem.path, problem.message, node_reasons)
        if not selection.applies and not node_reasons:
            continue
        raw_configs = _or(spec.get("configs"), [])
        if not isinstance(raw_configs, list):
            ctx.structural.append(errors.FieldError(f"{source}.spec.configs", "must be a list"))
            continue
        for index, raw_config in enumerate(raw_configs):
            config = _parse_config(raw_config, name, index, objects, ctx, set(node_reasons))
            if config is not None:
                configs.append(config)
    return configs


def _parse_config(
    raw: object,
    policy: str,
    index: int,
    objects: Sequence[_AttrObject],
    ctx: _Ctx,
    reasons: set[errors.Reason],
) -> _Config | None:
    source, path = f"{_POLICY}/{policy}", f"spec.configs[{index}]"
    if not isinstance(raw, Mapping):
        ctx.structural.append(errors.FieldError(f"{source}.{path}", "must be an object"))
        return None
    raw_filters = _or(raw.get("resourceFilters"), [])
    if not isinstance(raw_filters, list):
        ctx.structural.append(errors.FieldError(f"{source}.{path}.resourceFilters", "must be a list"))
        return None
    filters = [
        _parse_filter(f, source, f"{path}.resourceFilters[{i}]", ctx, reasons)
        for i, f in enumerate(raw_filters)
    ]
    values, reference, sources = _resolve_selector(raw, source, path, objects, ctx, reasons)
    parsed = [f for f in filters if f is not None]
    if len(parsed) != len(filters):
        return None
    return _Config(policy, index, tuple(parsed), frozenset(reasons), reference, values, sources)


def _string_list(raw: object, where: str, ctx: _Ctx) -> frozenset[str] | None:
    if raw is None:
        return frozenset()
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        ctx.structural.append(errors.FieldError(where, "must be a list of strings"))
        return None
    return frozenset(raw)


def _parse_filter(
    raw: object, source: str, path: str, ctx: _Ctx, reasons: set[errors.Reason]
) -> ResourceFilter | None:
    """Parse one filter; anything the driver cannot honour exactly is dropped from matching.

    Dropping a constraint widens the match, so in managed mode the unresolved config claims and
    blocks a superset of the intended devices instead of letting them reach a later config.
    """
    if not isinstance(raw, Mapping):
        ctx.structural.append(errors.FieldError(f"{source}.{path}", "must be an object"))
        return None
    values = {
        key: _string_list(raw.get(key), f"{source}.{path}.{key}", ctx) for key in (*_FILTER_FIELDS, "drivers")
    }
    link_raw = _or(raw.get("linkType"), "")
    if not isinstance(link_raw, str) or (link_raw and link_raw.lower() not in _LINK_TYPES):
        ctx.structural.append(
            errors.FieldError(f"{source}.{path}.linkType", "must be eth, ethernet, ib or infiniband")
        )
        return None
    checked = {k: v for k, v in values.items() if v is not None}
    if len(checked) != len(values):
        return None
    pf_names = checked["pfNames"]
    ranged = sorted(p for p in pf_names if "#" in p)
    if ranged and ctx.managed:
        ctx.unsupported(
            source, f"{path}.pfNames", f"VF-range entries {ranged} are not supported; list whole PFs", reasons
        )
        pf_names = frozenset(p.split("#", 1)[0] for p in pf_names)
    if checked["drivers"]:
        ctx.unsupported(
            source, f"{path}.drivers", "the drivers filter is not implemented (upstream ignores it)", reasons
        )
    for key in sorted(set(map(str, raw)) - {*_FILTER_FIELDS, "drivers", "linkType"}):
        ctx.unsupported(
            source,
            f"{path}.{key}",
            "is not a resourceFilter field (vendors, devices, pciAddresses, "
            "pfNames, pfPciAddresses, drivers, linkType)",
            reasons,
        )
    return ResourceFilter(
        vendors=checked["vendors"],
        devices=checked["devices"],
        pci_addresses=checked["pciAddresses"],
        pf_names=pf_names,
        pf_pci_addresses=checked["pfPciAddresses"],
        link_type=_LINK_TYPES.get(link_raw.lower(), ""),
    )


def _resolve_selector(
    raw: Mapping[str, object],
    source: str,
    path: str,
    objects: Sequence[_AttrObject],
    ctx: _Ctx,
    reasons: set[errors.Reason],
) -> tuple[dict[str, attributes.AttributeValue], attributes.NadReference | None, tuple[str, ...]]:
    """Merge the DeviceAttributes a config selects (spec §12.2.5 step 1)."""
    raw_selector = raw.get("deviceAttributesSelector")
    if raw_selector is None:
        return {}, None, ()
    where = f"{path}.deviceAttributesSelector"
    selector, problems = labelselectors.parse_label_selector(raw_selector, where)
    if selector is None:
        effect = "; its devices are blocked" if ctx.managed else "; no attributes are applied (as upstream)"
        for problem in problems:
            ctx.note(
                errors.Reason.UNSUPPORTED_MANAGED_SELECTOR,
                source,
                problem.path,
                problem.message + effect,
                ctx.managed,
            )
        if ctx.managed:
            reasons.add(errors.Reason.UNSUPPORTED_MANAGED_SELECTOR)
        return {}, None, ()
    matched = [o for o in objects if selector.matches(o.labels)]
    sources = tuple(o.name for o in matched)
    if not matched:
        if ctx.managed:
            reasons.add(errors.Reason.DEVICE_NOT_ELIGIBLE)
            ctx.note(
                errors.Reason.DEVICE_NOT_ELIGIBLE,
                source,
                where,
                "matches no DeviceAttributes; its devices stay unavailable until one matches",
                True,
            )
        return {}, None, ()
    merged: dict[str, attributes.AttributeValue] = {}
    refs: list[tuple[str, attributes.NadReference]] = []
    invalid = [o.name for o in matched if o.invalid]
    reserved = [o.name for o in matched if o.reserved and ctx.managed]
    for obj in matched:
        if ctx.managed:
            if obj.reference is not None:
                refs.append((obj.name, obj.reference))
            merged.update((k, v) for k, v in obj.values.items() if k not in attributes.NAD_REFERENCE_KEYS)
        else:
            merged.update(obj.values)
    for reason, names_ in (
        (errors.Reason.INVALID_ATTRIBUTE, invalid),
        (errors.Reason.RESERVED_ATTRIBUTE, reserved),
    ):
        if names_:
            reasons.add(reason)
            ctx.note(
                reason,
                source,
                where,
                f"selects unusable DeviceAttributes {names_}; its devices are blocked",
                True,
            )
    reference = None
    if ctx.managed:
        try:
            reference = templates.merge_references(refs)
        except errors.Conflict as exc:
            reasons.add(errors.Reason.CONFLICTING_NETWORK_REFERENCE)
            ctx.note(exc.reason, source, where, exc.summary, True)
        if reference is not None:
            merged.update(attributes.reference_attributes(reference))
    return dict(sorted(merged.items())), reference, sources


def _or(value: object, default: object) -> object:
    """``value`` unless it is absent (``None``), so a wrong-typed ``{}`` or ``0`` is still reported."""
    return default if value is None else value
