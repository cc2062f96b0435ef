"""SriovResourcePolicy evaluation: which discovered VFs are advertised, and with which attributes.

The driver side of docs/design.md#policy-precedence and docs/design.md#eligibility, compatible
with upstream dra-driver-sriov: opt-in advertisement, policies in name order and configs in list
order, the first matching (policy, config) claims a device, and each device's outcome (eligible,
or claimed and blocked with its reasons). Sub-concerns live in ``label_selectors``,
``resource_filters`` (shared with the preflight), ``device_facts``, ``device_attributes`` and
``policy_findings``. Never reads the API, drops a discovered device, or merges across configs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sriov_dra.core import attributes
from sriov_dra.core.device_attributes import AttrObject, parse_attribute_objects, resolve_selector
from sriov_dra.core.device_facts import DeviceFacts, discovered_attributes
from sriov_dra.core.policy_findings import Diagnostic, Findings, index_by_name, or_default
from sriov_dra_rules import errors, label_selectors, resource_filters
from sriov_dra_rules.resource_filters import ResourceFilter

_POLICY = "SriovResourcePolicy"


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
class _Config:
    policy: str
    index: int
    filters: tuple[ResourceFilter, ...]
    reasons: frozenset[errors.Reason]
    reference: attributes.NadReference | None
    values: Mapping[str, attributes.AttributeValue]
    sources: tuple[str, ...]


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
    ``managed`` selects the auto-attach rules (docs/design.md#eligibility): a selector that
    matches nothing, an invalid map, a reserved key or conflicting network references leave the
    config unresolved, so its devices are claimed and blocked rather than falling through to a
    later config; filters and node selectors the driver cannot honour exactly (``drivers``,
    ``pfName#range``, ``matchFields``, ...) are ``UnsupportedResourceFilter`` and block every
    device they might cover. Otherwise upstream behaviour is kept (nil/invalid/zero-match
    selectors give no attributes, reserved keys are skipped and ``drivers``/unknown filter
    fields ignored, each with a non-blocking diagnostic). In both
    modes an invalid attribute value or an over-budget device is blocked rather than published.
    Shapes: devices are keyed by :attr:`DeviceFacts.name`; all outputs are sorted or sets.
    Raises: InvalidSpec for shapes the CRD schema forbids (missing or duplicate names, wrong
    JSON types), listing every one.
    Source: docs/design.md#policy-precedence, docs/design.md#eligibility; upstream
    dra-driver-sriov's policy controller.
    """
    ctx = Findings(managed)
    objects = parse_attribute_objects(device_attributes, ctx)
    configs = _parse_policies(policies, objects, node_labels, ctx)
    by_name = {d.name: d for d in devices}
    if len(by_name) != len(devices):
        ctx.structural.append(errors.FieldError("devices", "two discovered devices share one PCI address"))
    errors.raise_if_any(ctx.structural, "SriovResourcePolicy/DeviceAttributes objects are malformed")
    _note_empty_selections(configs, devices, ctx)
    outcomes: dict[str, DeviceOutcome] = {}
    for config in configs:
        for name in sorted(by_name):
            facts = by_name[name]
            if name in outcomes or (config.filters and not any(f.matches(facts) for f in config.filters)):
                continue
            outcomes[name] = _outcome(facts, config, ctx)
    return PolicyEvaluation(outcomes, tuple(sorted(ctx.diagnostics, key=_diag_key)))


def _note_empty_selections(configs: Sequence[_Config], devices: Sequence[DeviceFacts], ctx: Findings) -> None:
    """Report every filter entry, and every ``pfNames``/``pfPciAddresses`` value, of a config
    applying to this node that selects no discovered device here (a PF-name typo publishes fewer
    devices). A report only: matching is unchanged, nothing is blocked."""
    pf_names = sorted({d.pf_name for d in devices})
    pf_addresses = {d.pf_pci_address for d in devices}
    for config in configs:
        source, base = f"{_POLICY}/{config.policy}", f"spec.configs[{config.index}].resourceFilters"
        for i, entry in enumerate(config.filters):
            path = f"{base}[{i}]"
            missing = [f"pfNames {n!r}" for n in sorted(entry.pf_names) if n not in pf_names]
            missing += [
                f"pfPciAddresses {a!r}" for a in sorted(entry.pf_pci_addresses) if a not in pf_addresses
            ]
            if missing or not any(entry.matches(d) for d in devices):
                what = ", ".join(missing) + " name no PF" if missing else "selects no device"
                ctx.note(
                    errors.Reason.SELECTOR_MATCHES_NOTHING,
                    source,
                    path,
                    f"{what} on this node, where the policy applies (its PFs: {', '.join(pf_names) or 'none'}); "
                    "check the spelling, or narrow the policy's nodeSelector",
                    False,
                )


def _outcome(facts: DeviceFacts, config: _Config, ctx: Findings) -> DeviceOutcome:
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


def _parse_policies(
    raw: Sequence[Mapping[str, object]],
    objects: Sequence[AttrObject],
    node_labels: Mapping[str, str],
    ctx: Findings,
) -> list[_Config]:
    configs: list[_Config] = []
    named = index_by_name(raw, _POLICY, ctx)
    for name in sorted(named):
        source = f"{_POLICY}/{name}"
        spec = named[name].get("spec")
        if not isinstance(spec, Mapping):
            ctx.structural.append(errors.FieldError(f"{source}.spec", "is required and must be an object"))
            continue
        node_reasons: set[errors.Reason] = set()
        selection = label_selectors.evaluate_node_selector(
            spec.get("nodeSelector"), node_labels, "spec.nodeSelector"
        )
        ctx.structural.extend(errors.FieldError(f"{source}.{e.path}", e.message) for e in selection.malformed)
        for problem in selection.unsupported:
            ctx.unsupported(source, problem.path, problem.message, node_reasons)
        if not selection.applies and not node_reasons:
            continue
        raw_configs = or_default(spec.get("configs"), [])
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
    objects: Sequence[AttrObject],
    ctx: Findings,
    reasons: set[errors.Reason],
) -> _Config | None:
    source, path = f"{_POLICY}/{policy}", f"spec.configs[{index}]"
    if not isinstance(raw, Mapping):
        ctx.structural.append(errors.FieldError(f"{source}.{path}", "must be an object"))
        return None
    raw_filters = or_default(raw.get("resourceFilters"), [])
    if not isinstance(raw_filters, list):
        ctx.structural.append(errors.FieldError(f"{source}.{path}.resourceFilters", "must be a list"))
        return None
    filters = [
        parse_filter(f, source, f"{path}.resourceFilters[{i}]", ctx, reasons)
        for i, f in enumerate(raw_filters)
    ]
    values, reference, sources = resolve_selector(raw, source, path, objects, ctx, reasons)
    parsed = [f for f in filters if f is not None]
    if len(parsed) != len(filters):
        return None
    return _Config(policy, index, tuple(parsed), frozenset(reasons), reference, values, sources)


def parse_filter(
    raw: object, source: str, path: str, ctx: Findings, reasons: set[errors.Reason]
) -> ResourceFilter | None:
    """Parse one ``resourceFilters[]`` entry; what the driver cannot honour is dropped from matching.

    The semantics are :func:`sriov_dra_rules.resource_filters.parse_filter`'s (shared with the
    preflight's overlap check); this records its findings: structural errors in ``ctx`` (then
    ``None``), and ``UnsupportedResourceFilter`` diagnostics that, in managed mode, add to
    ``reasons`` so the config claims and blocks the superset it matches (docs/design.md#eligibility).
    Shapes: ``source`` is ``SriovResourcePolicy/<name>``, ``path`` the entry's field path.
    """
    parsed = resource_filters.parse_filter(raw, path, managed=ctx.managed)
    ctx.structural.extend(errors.FieldError(f"{source}.{e.path}", e.message) for e in parsed.structural)
    for problem in parsed.unsupported:
        ctx.unsupported(source, problem.path, problem.message, reasons)
    return parsed.filter
