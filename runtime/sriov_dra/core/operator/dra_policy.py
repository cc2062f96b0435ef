"""BuildDRAPolicyPlan: node policies + resolved networks + nodes → generated DRA objects and conditions.

One plan per reconciliation, shared by attribute and node-config generation, so a policy is never
resolved twice into inconsistent state (docs/design.md#operator-attributes). Each ``spec.dra``
policy gets one complete ``dra-policy-<UID>-attrs`` DeviceAttributes; others keep upstream's
per-pool object; each selected node one SriovResourcePolicy; each resource name one DeviceClass
serving ``<prefix>/<resourceName>`` as an extended resource. An unresolved policy's attributes are
withheld but its filter kept, so its devices stay claimed and unavailable
(docs/design.md#eligibility). Pure, order-independent; adopts nothing it did not generate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sriov_dra.core import attributes, device_facts
from sriov_dra.core.operator import network_refs, node_policy, sriov_network
from sriov_dra.core.operator.dra_nodes import node_policies
from sriov_dra.core.operator.dra_objects import (
    ATTRIBUTES_KIND,
    DEVICE_CLASS_KIND,
    GENERATED_BY_LABEL,
    GENERATED_BY_VALUE,
    POLICY_UID_LABEL,
    RESOURCE_POOL_LABEL,
    attributes_name,
    attributes_object,
    device_class_object,
    object_name,
)
from sriov_dra.core.operator.dra_verdicts import WITHHOLDING, Issues, PolicyOutcome, outcomes
from sriov_dra_rules import errors, extended_resources, names

_R = errors.Reason


@dataclass(frozen=True)
class PlanSettings:
    """What the plan needs from the operator's configuration.

    ``namespace`` is the operator/driver policy namespace holding every generated object;
    ``resource_prefix`` the ``RESOURCE_PREFIX`` of the compatibility resourceName; with
    ``dra_enabled`` false nothing is generated and DRA policies report ``DRAInactive``.
    """

    namespace: str
    resource_prefix: str = sriov_network.DEFAULT_RESOURCE_PREFIX
    dra_enabled: bool = True
    nic_ids: tuple[node_policy.NicId, ...] = ()


@dataclass(frozen=True)
class DraPolicyPlan:
    """Desired generated objects (sorted by name) and per-policy outcomes.

    ``device_classes`` are cluster-scoped, one per resource name (docs/design.md#operator-attributes).

    ``withheld`` names per-policy DeviceAttributes of current policies that must not exist
    (delete them first); every other existing managed object outside the desired names is obsolete.
    """

    device_attributes: tuple[Mapping[str, object], ...]
    resource_policies: tuple[Mapping[str, object], ...]
    withheld: frozenset[str]
    outcomes: Mapping[str, PolicyOutcome]
    diagnostics: tuple[str, ...]
    device_classes: tuple[Mapping[str, object], ...] = ()

    def names(self, kind: str) -> frozenset[str]:
        """Desired object names of ``kind`` (``DeviceAttributes``, ``SriovResourcePolicy`` or ``DeviceClass``)."""
        objs = {
            ATTRIBUTES_KIND: self.device_attributes,
            DEVICE_CLASS_KIND: self.device_classes,
        }.get(kind, self.resource_policies)
        return frozenset(object_name(o) for o in objs)


def references(
    policy_objects: Sequence[Mapping[str, object]], *, prefix: str = ""
) -> frozenset[network_refs.ObjectRef]:
    """Every valid SriovNetwork reference of the DRA policies (what the controller must resolve)."""
    out: set[network_refs.ObjectRef] = set()
    for obj in policy_objects:
        parsed = node_policy.parse_policy(obj, prefix=prefix, nic_ids=())
        if parsed.dra is not None and parsed.dra.network is not None:
            out.add(parsed.dra.network)
    return frozenset(out)


def build_dra_policy_plan(
    policy_objects: Sequence[Mapping[str, object]],
    nodes: Sequence[Mapping[str, object]],
    resolutions: Mapping[network_refs.ObjectRef, sriov_network.SourceResolution],
    settings: PlanSettings,
    *,
    inventory: Mapping[str, Sequence[device_facts.DeviceFacts]] | None = None,
) -> DraPolicyPlan:
    """Plan every generated DeviceAttributes and SriovResourcePolicy, and each DRA policy's verdict.

    ``policy_objects`` are the SriovNetworkNodePolicies of the operator namespace (deleting ones
    and the ``default`` bootstrap policy take no part in generation); ``resolutions`` map each
    reference of :func:`references` to its live resolution (a missing entry counts as not yet
    resolved); ``inventory`` optionally lists each node's discovered VFs for the overlap check.
    Shapes: outputs sorted by name; configs per node ordered by priority (smaller number first,
    so the higher-priority policy wins the driver's first match), then policy name.
    Source: docs/design.md#operator-validation, docs/design.md#operator-networks,
    docs/design.md#operator-attributes, docs/design.md#eligibility, docs/design.md#operator-status.
    """
    diagnostics: list[str] = []
    parsed = _parse_all(policy_objects, settings, diagnostics)
    issues: dict[str, Issues] = {p.name: Issues() for p in parsed if p.has_dra}
    if not settings.dra_enabled:
        for p in parsed:
            if p.has_dra:
                issues[p.name].add(
                    _R.DRA_INACTIVE, "the DRA provider is disabled; spec.dra is stored, not applied"
                )
        return DraPolicyPlan((), (), frozenset(), outcomes(parsed, issues, {}, {}), tuple(diagnostics))
    generated = [p for p in parsed if p.name != node_policy.DEFAULT_POLICY_NAME]
    for p in parsed:
        if p.name == node_policy.DEFAULT_POLICY_NAME and p.has_dra:
            issues[p.name].add(
                _R.INVALID_DRA_ATTRIBUTE,
                "spec.dra must not be set on the default bootstrap policy; move it to a separately named policy",
            )
    attrs, withheld, published = _attribute_objects(generated, resolutions, settings, issues, diagnostics)
    pools = _pools(generated, settings, diagnostics)
    attrs.extend(obj for _, obj in pools.values())
    srps, policy_nodes = node_policies(
        generated, nodes, pools, settings.namespace, issues, inventory, diagnostics
    )
    classes = _device_classes(generated, settings, diagnostics)
    return DraPolicyPlan(
        device_attributes=tuple(sorted(attrs, key=object_name)),
        resource_policies=tuple(sorted(srps, key=object_name)),
        withheld=frozenset(withheld),
        outcomes=outcomes(parsed, issues, published, policy_nodes),
        diagnostics=tuple(sorted(set(diagnostics))),
        device_classes=tuple(classes),
    )


def _parse_all(
    policy_objects: Sequence[Mapping[str, object]], settings: PlanSettings, diagnostics: list[str]
) -> list[node_policy.NodePolicy]:
    out: dict[str, node_policy.NodePolicy] = {}
    for obj in policy_objects:
        meta = obj.get("metadata")
        if isinstance(meta, Mapping) and meta.get("deletionTimestamp"):
            continue
        p = node_policy.parse_policy(obj, prefix=settings.resource_prefix, nic_ids=settings.nic_ids)
        if not p.name or names.uuid_problem(p.uid) is not None or p.name in out:
            diagnostics.append(f"{node_policy.KIND} {p.name!r}: missing or duplicate name/uid; skipped")
            continue
        out[p.name] = p
    return [out[name] for name in sorted(out)]


def _attribute_objects(
    generated: Sequence[node_policy.NodePolicy],
    resolutions: Mapping[network_refs.ObjectRef, sriov_network.SourceResolution],
    settings: PlanSettings,
    issues: dict[str, Issues],
    diagnostics: list[str],
) -> tuple[list[Mapping[str, object]], set[str], dict[str, str]]:
    objects: list[Mapping[str, object]] = []
    withheld: set[str] = set()
    published: dict[str, str] = {}
    for p in generated:
        if not p.has_dra or p.dra is None:
            continue
        name = attributes_name(p.uid)
        for problem in p.dra.problems:
            issues[p.name].add(_R.INVALID_DRA_ATTRIBUTE, str(problem))
        values: dict[str, attributes.AttributeValue] = {
            node_policy.RESOURCE_NAME_ATTRIBUTE: attributes.string_value(
                node_policy.compat_resource_name(p.resource_name, settings.resource_prefix)
            ),
            **p.dra.custom,
        }
        if p.dra.network is not None and not p.dra.problems:
            resolution = resolutions.get(p.dra.network) or sriov_network.unresolved(
                p.dra.network,
                _R.DRA_CONFIGURATION_SYNC_FAILED,
                f"SriovNetwork {p.dra.network} was not read yet",
            )
            if resolution.ready and resolution.nad is not None:
                values.update(
                    attributes.reference_attributes(
                        attributes.NadReference(resolution.nad.name, resolution.nad.namespace)
                    )
                )
            else:
                issues[p.name].add(resolution.reason or _R.SRIOV_NETWORK_NOT_READY, resolution.message)
        if any(r in WITHHOLDING for r in issues[p.name].by_reason):
            withheld.add(name)
            continue
        published[p.name] = name
        labels = {GENERATED_BY_LABEL: GENERATED_BY_VALUE, POLICY_UID_LABEL: p.uid}
        objects.append(attributes_object(name, labels, values, settings.namespace))
    return objects, withheld, published


def _pools(
    generated: Sequence[node_policy.NodePolicy], settings: PlanSettings, diagnostics: list[str]
) -> dict[str, tuple[str, Mapping[str, object]]]:
    """Upstream's per-pool objects, only for resource names still used by policies without ``dra``."""
    by_pool: dict[str, str] = {}
    for rn in sorted({p.resource_name for p in generated if not p.has_dra and p.resource_name}):
        pool = extended_resources.device_class_name(rn)
        if pool in by_pool:
            diagnostics.append(
                f"resourceName {rn!r} normalises to pool {pool!r} of {by_pool[pool]!r}; skipped"
            )
            continue
        value = node_policy.compat_resource_name(rn, settings.resource_prefix)
        if len(value.encode("utf-8")) > attributes.MAX_VALUE_BYTES:
            diagnostics.append(
                f"resourceName {rn!r}: {value!r} exceeds {attributes.MAX_VALUE_BYTES} bytes; skipped"
            )
            continue
        by_pool[pool] = rn
    out: dict[str, tuple[str, Mapping[str, object]]] = {}
    for pool, rn in by_pool.items():
        value = node_policy.compat_resource_name(rn, settings.resource_prefix)
        labels = {GENERATED_BY_LABEL: GENERATED_BY_VALUE, RESOURCE_POOL_LABEL: pool}
        values = {node_policy.RESOURCE_NAME_ATTRIBUTE: attributes.string_value(value)}
        out[rn] = (pool, attributes_object(f"{pool}-attrs", labels, values, settings.namespace))
    return out


def _device_classes(
    generated: Sequence[node_policy.NodePolicy], settings: PlanSettings, diagnostics: list[str]
) -> list[Mapping[str, object]]:
    """One DeviceClass per resource name of the policies, sorted by name; a name Kubernetes refuses
    as an extended resource, or a second name normalising to a taken class name, gets none."""
    out: dict[str, Mapping[str, object]] = {}
    owner: dict[str, str] = {}
    for rn in sorted({p.resource_name for p in generated if p.resource_name}):
        try:
            obj = device_class_object(rn, settings.resource_prefix, settings.namespace)
        except ValueError as exc:
            diagnostics.append(f"resourceName {rn!r}: no DeviceClass: {exc}")
            continue
        name = object_name(obj)
        if name in out:
            diagnostics.append(
                f"resourceName {rn!r} normalises to DeviceClass {name!r} of {owner[name]!r}; skipped"
            )
            continue
        out[name], owner[name] = obj, rn
    return [out[name] for name in sorted(out)]
