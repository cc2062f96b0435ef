"""The writes that turn the existing generated DRA objects into a plan's desired set, in a safe order.

Order (docs/design.md#eligibility): delete withheld per-policy DeviceAttributes first (a stale
mapping stops being published); create or update desired DeviceAttributes before any selector
needs them; create or update SriovResourcePolicies (empty ``configs`` on withdrawn nodes); create or
update the DeviceClasses and delete obsolete ones; delete undesired SriovResourcePolicies; then the
remaining obsolete DeviceAttributes. Only objects with
the generated-by label are updated or deleted, against the complete desired name set; an
unchanged plan writes nothing. Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sriov_dra.core.operator import dra_objects, dra_policy


class Op(enum.StrEnum):
    """Kinds of write."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True)
class Write:
    """One planned write.

    ``body`` is the full desired object for create/update (with the existing resourceVersion for
    an update); ``uid``/``resource_version`` are the delete/update preconditions; ``policies``
    names the DRA node policies whose readiness depends on this write succeeding.
    """

    op: Op
    kind: str
    name: str
    body: Mapping[str, object] | None
    uid: str
    resource_version: str
    policies: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.op} {self.kind} {self.name}"


def is_managed(obj: Mapping[str, object]) -> bool:
    """True when ``obj`` carries ``sriovnetwork.openshift.io/generated-by=sriov-network-operator``."""
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return (
        isinstance(labels, Mapping)
        and labels.get(dra_objects.GENERATED_BY_LABEL) == dra_objects.GENERATED_BY_VALUE
    )


def needs_update(desired: Mapping[str, object], existing: Mapping[str, object]) -> bool:
    """True when the labels (exactly) or the spec of ``existing`` differ from ``desired``."""
    return _labels(desired) != _labels(existing) or desired.get("spec") != existing.get("spec")


def plan_writes(
    plan: dra_policy.DraPolicyPlan,
    existing_attributes: Sequence[Mapping[str, object]],
    existing_policies: Sequence[Mapping[str, object]],
    existing_classes: Sequence[Mapping[str, object]] = (),
) -> tuple[Write, ...]:
    """Order the writes from the existing managed objects to ``plan`` (see module docstring).

    Shapes: within each step, writes are sorted by object name.
    """
    by_uid = {o.uid: o.policy for o in plan.outcomes.values()}
    by_node: dict[str, list[str]] = {}
    for outcome in plan.outcomes.values():
        for node in outcome.nodes:
            by_node.setdefault(node, []).append(outcome.policy)

    def owners_attrs(obj: Mapping[str, object]) -> tuple[str, ...]:
        uid = _labels(obj).get(dra_objects.POLICY_UID_LABEL)
        return (by_uid[uid],) if uid in by_uid else ()

    def owners_srp(name: str) -> tuple[str, ...]:
        return tuple(sorted(by_node.get(name, ())))

    attrs = _index(existing_attributes)
    srps = _index(existing_policies)
    writes: list[Write] = []
    for name in sorted(plan.withheld & attrs.keys()):
        writes.append(_delete(dra_objects.ATTRIBUTES_KIND, attrs[name], owners_attrs(attrs[name])))
    writes.extend(_upserts(dra_objects.ATTRIBUTES_KIND, plan.device_attributes, attrs, owners_attrs))
    writes.extend(
        _upserts(dra_objects.POLICY_KIND, plan.resource_policies, srps, lambda o: owners_srp(_name(o)))
    )
    classes = _index(existing_classes)
    writes.extend(_upserts(dra_objects.DEVICE_CLASS_KIND, plan.device_classes, classes, lambda o: ()))
    for name in sorted(classes.keys() - plan.names(dra_objects.DEVICE_CLASS_KIND)):
        writes.append(_delete(dra_objects.DEVICE_CLASS_KIND, classes[name], ()))
    desired_srps = plan.names(dra_objects.POLICY_KIND)
    for name in sorted(srps.keys() - desired_srps):
        writes.append(_delete(dra_objects.POLICY_KIND, srps[name], ()))
    desired_attrs = plan.names(dra_objects.ATTRIBUTES_KIND)
    for name in sorted(attrs.keys() - desired_attrs - plan.withheld):
        writes.append(_delete(dra_objects.ATTRIBUTES_KIND, attrs[name], ()))
    return tuple(writes)


def _upserts(
    kind: str,
    desired: Sequence[Mapping[str, object]],
    existing: Mapping[str, Mapping[str, object]],
    owners: Callable[[Mapping[str, object]], tuple[str, ...]],
) -> list[Write]:
    out = []
    for obj in sorted(desired, key=_name):
        name = _name(obj)
        current = existing.get(name)
        if current is None:
            out.append(Write(Op.CREATE, kind, name, obj, "", "", owners(obj)))
        elif needs_update(obj, current):
            cur_meta = current.get("metadata")
            assert isinstance(cur_meta, Mapping)
            new_meta = obj.get("metadata")
            meta: dict[str, object] = dict(new_meta) if isinstance(new_meta, Mapping) else {}
            rv = str(cur_meta.get("resourceVersion") or "")
            meta["resourceVersion"] = rv
            body = {**obj, "metadata": meta}
            out.append(Write(Op.UPDATE, kind, name, body, str(cur_meta.get("uid") or ""), rv, owners(obj)))
    return out


def _delete(kind: str, obj: Mapping[str, object], owners: tuple[str, ...]) -> Write:
    meta = obj.get("metadata")
    assert isinstance(meta, Mapping)
    return Write(
        Op.DELETE,
        kind,
        _name(obj),
        None,
        str(meta.get("uid") or ""),
        str(meta.get("resourceVersion") or ""),
        owners,
    )


def _index(objs: Sequence[Mapping[str, object]]) -> dict[str, Mapping[str, object]]:
    return {_name(o): o for o in objs if is_managed(o)}


def _name(obj: Mapping[str, object]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


def _labels(obj: Mapping[str, object]) -> Mapping[str, object]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return dict(labels) if isinstance(labels, Mapping) else {}
