"""DeviceAttributes objects: parsing them, and merging the ones a policy config selects.

Each object's ``spec.attributes`` is validated, reserved keys refused (managed) or skipped
(compatibility), the NAD reference read (managed only); a config's ``deviceAttributesSelector``
is matched against the objects' labels and the selected maps merged in name order, last key
winning, as upstream dra-driver-sriov merges them. In managed mode an unresolved selection blocks
the config (docs/design.md#eligibility). Never decides which config claims a device, never
merges across configs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sriov_dra.core import attributes, templates
from sriov_dra.core.policy_findings import Findings, index_by_name, or_default
from sriov_dra_rules import errors, label_selectors

_ATTRS = "DeviceAttributes"


@dataclass(frozen=True)
class AttrObject:
    """One parsed DeviceAttributes object.

    Shapes: ``values`` the valid attributes (reserved keys left out); ``invalid`` true when the
    map or its NAD reference had a problem; ``reserved`` the reserved keys it tried to set;
    ``reference`` its symbolic NAD reference (managed mode only, else ``None``).
    """

    name: str
    labels: Mapping[str, str]
    values: Mapping[str, attributes.AttributeValue]
    invalid: bool
    reserved: tuple[str, ...]
    reference: attributes.NadReference | None


def parse_attribute_objects(raw: Sequence[Mapping[str, object]], ctx: Findings) -> list[AttrObject]:
    """Parse the namespace's DeviceAttributes objects, in name order.

    Shapes: ``raw`` plain dicts as the API returns them; an object with malformed labels or no
    ``spec`` object is left out after a structural error in ``ctx``; value, reserved-key and
    reference problems become diagnostics (blocking in managed mode) and mark it ``invalid``.
    """
    out: list[AttrObject] = []
    named = index_by_name(raw, _ATTRS, ctx)
    for name in sorted(named):
        source = f"{_ATTRS}/{name}"
        meta = named[name].get("metadata")
        labels = or_default(meta.get("labels") if isinstance(meta, Mapping) else None, {})
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
        out.append(AttrObject(name, dict(labels), result.values, invalid, result.reserved, reference))
    return out


def resolve_selector(
    raw: Mapping[str, object],
    source: str,
    path: str,
    objects: Sequence[AttrObject],
    ctx: Findings,
    reasons: set[errors.Reason],
) -> tuple[dict[str, attributes.AttributeValue], attributes.NadReference | None, tuple[str, ...]]:
    """Merge the DeviceAttributes a config selects (docs/design.md#eligibility).

    A config without a selector keeps the uniform VfConfig fallback; in managed mode a selector
    that matches nothing, an invalid map, a reserved key or conflicting network references leave
    the selection unresolved, which blocks the config.

    Shapes: ``raw`` one ``spec.configs[]`` entry, ``path`` its field path; returns the merged
    attributes (sorted by key; in managed mode the NAD reference keys come from the one merged
    reference), that reference (managed only) and the selected object names in name order.
    What blocks the config is added to ``reasons``; nothing is raised.
    """
    raw_selector = raw.get("deviceAttributesSelector")
    if raw_selector is None:
        return {}, None, ()
    where = f"{path}.deviceAttributesSelector"
    selector, problems = label_selectors.parse_label_selector(raw_selector, where)
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
