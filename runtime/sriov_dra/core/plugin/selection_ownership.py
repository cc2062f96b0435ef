"""Which managed selections of a Pod are ours, and what a merge must refuse.

A selection is ours only when the registry records it and it is exactly
``{"name","namespace","interface"}`` with the recorded values, as a JSON object
(docs/design.md#selections). An unrecorded, edited or duplicated managed selection, or a registry
entry the checkpoint disagrees with, is an ``OwnershipConflict``; a manual selection of a managed
template is ``ManualSelectionConflictsWithManagedTemplate``; a managed interface name another
delegate would get is ``DuplicateInterfaceName``. Builds the managed selection a merge appends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sriov_dra.core import interface_naming, networks, registry
from sriov_dra.core.plugin.selection_update import PodSnapshot
from sriov_dra_rules import errors, names


@dataclass(frozen=True)
class ManagedBinding:
    """One intended managed selection: its registry entry plus the source NAD it was rendered from.

    The source is needed to detect a manual selection of the same template
    (docs/design.md#selections).
    Shapes: ``entry.namespace`` is the Pod namespace; source namespace/name are resolved.
    """

    entry: registry.RegistryEntry
    source_namespace: str
    source_name: str


def check_bindings(pod: PodSnapshot, bindings: Sequence[ManagedBinding]) -> None:
    """Raises: ContractViolation when a binding's shadow is outside the Pod namespace or names no source."""
    problems: list[errors.FieldError] = []
    for i, b in enumerate(bindings):
        if b.entry.namespace != pod.namespace:
            problems.append(
                errors.FieldError(
                    f"bindings[{i}].namespace",
                    f"shadow {b.entry.name} is in {b.entry.namespace!r}; shadows live in the Pod namespace "
                    f"{pod.namespace!r}",
                )
            )
        for label, value in (("source_namespace", b.source_namespace), ("source_name", b.source_name)):
            if not value:
                problems.append(errors.FieldError(f"bindings[{i}].{label}", "must be non-empty"))
    errors.raise_if_any(problems, f"{pod.ref}: invalid managed bindings", cls=errors.ContractViolation)


def reconcile_registry(
    pod: PodSnapshot, current: registry.Registry | None, bindings: Sequence[ManagedBinding]
) -> tuple[registry.RegistryEntry, ...]:
    """Registry entries after the merge: current entries in order, then new bindings in order."""
    existing = list(current.entries) if current else []
    by_aid = {e.attachment_id: e for e in existing}
    intended = {b.entry.attachment_id for b in bindings}
    claims = {b.entry.claim_uid for b in bindings}
    problems: list[errors.FieldError] = []
    for i, e in enumerate(existing):
        if e.claim_uid in claims and e.attachment_id not in intended:
            problems.append(
                errors.FieldError(
                    f"entries[{i}]",
                    f"records shadow {e.name} ({e.interface}) for claim {e.claim_uid}, which the checkpoint "
                    "does not have for this claim",
                )
            )
    appended: list[registry.RegistryEntry] = []
    for b in bindings:
        old = by_aid.get(b.entry.attachment_id)
        if old is None:
            if b.entry not in appended:
                appended.append(b.entry)
        elif old != b.entry:
            problems.append(
                errors.FieldError(
                    f"attachmentID {b.entry.attachment_id}",
                    f"registry has {_entry_text(old)}, checkpoint has {_entry_text(b.entry)}",
                )
            )
    errors.raise_if_any(
        problems,
        f"{pod.ref}: annotation {names.MANAGED_NETWORKS_ANNOTATION} disagrees with the plugin checkpoint; "
        "nothing was written. Inspect the Pod with 'sriov-dra inspect' before changing either",
        cls=errors.Conflict,
        reason=errors.Reason.OWNERSHIP_CONFLICT,
    )
    return (*existing, *appended)


def ownership_problems(
    sel: networks.Selection, entry: registry.RegistryEntry, *, recorded: bool, seen: set[tuple[str, str]]
) -> list[errors.FieldError]:
    """Why ``sel`` (selecting ``entry``'s shadow) is not ours: unrecorded, edited or a copy; ``[]`` if ours."""
    path = networks.field_path(sel.index)
    if not recorded:
        return [
            errors.FieldError(
                path,
                f"selects {entry.namespace}/{entry.name}, the generated name of a binding being added, but the "
                "registry does not record it (no provenance); remove this entry",
            )
        ]
    if not is_exact(sel, entry):
        return [
            errors.FieldError(
                path,
                f"managed selection {describe(entry)} was edited (found {sel.raw_text}); managed entries must be "
                f'exactly {{"name","namespace","interface"}}: restore {_tuple_text(entry)}',
            )
        ]
    if sel.target in seen:
        return [
            errors.FieldError(
                path, f"managed selection {describe(entry)} appears more than once; remove the copy"
            )
        ]
    return []


def check_manual_templates(
    pod: PodSnapshot,
    selections: Sequence[networks.Selection],
    bindings: Sequence[ManagedBinding],
    wanted: Mapping[tuple[str, str], registry.RegistryEntry],
) -> None:
    """Raises: Conflict (``ManualSelectionConflictsWithManagedTemplate``) for a manual selection of a
    source NAD that ``bindings`` attach automatically (``wanted``: the managed shadows by target)."""
    sources: dict[tuple[str, str], list[str]] = {}
    for b in bindings:
        sources.setdefault((b.source_namespace, b.source_name), []).append(b.entry.interface)
    problems = [
        errors.FieldError(
            networks.field_path(sel.index),
            f"manual selection of {sel.namespace}/{sel.name} selects the template that the driver attaches "
            f"automatically as {', '.join(sources[sel.target])}; remove this entry from the annotation (the "
            "DRA claim already provides the interface) or stop requesting that device automatically",
        )
        for sel in selections
        if sel.target in sources and sel.target not in wanted
    ]
    errors.raise_if_any(
        problems,
        f"{pod.ref}: a manual network selection conflicts with a managed template; nothing was written",
        cls=errors.Conflict,
        reason=errors.Reason.MANUAL_SELECTION_CONFLICTS_WITH_MANAGED_TEMPLATE,
    )


def check_interfaces(
    pod: PodSnapshot,
    final: Sequence[networks.Selection],
    managed: set[int],
    layout: interface_naming.MultusLayout,
) -> None:
    """Refuse a managed interface name that another delegate of the Pod would also get.

    Collisions among manual entries only are left to the guard's final check (the merger never
    renames or rejects a manual selection on its own account).
    """
    collisions = interface_naming.find_interface_collisions(
        [s.multus_view for s in final], pod_namespace=pod.namespace, layout=layout
    )
    problems = [
        errors.FieldError(
            networks.field_path(),
            f"interface {c.name!r} would be used by "
            + " and ".join(d.describe() for d in c.delegates)
            + "; give the manual selection another interface name (managed names never change)",
        )
        for c in collisions
        if managed.intersection(c.selection_indexes)
    ]
    errors.raise_if_any(
        problems,
        f"{pod.ref}: a managed interface name collides with another attachment; nothing was written",
        cls=errors.Conflict,
        reason=errors.Reason.DUPLICATE_INTERFACE_NAME,
    )


def is_exact(sel: networks.Selection, entry: registry.RegistryEntry) -> bool:
    """True when ``sel`` is exactly ``entry``'s tuple as a JSON object (the ownership rule)."""
    return sel.exact_tuple(entry.namespace, entry.name, entry.interface)


def _tuple_obj(entry: registry.RegistryEntry) -> dict[str, str]:
    return {"name": entry.name, "namespace": entry.namespace, "interface": entry.interface}


def _tuple_text(entry: registry.RegistryEntry) -> str:
    return networks.compact_json(_tuple_obj(entry))


def managed_selection(index: int, entry: registry.RegistryEntry) -> networks.Selection:
    """The managed selection of ``entry`` a merge appends at ``index`` (compact JSON tuple)."""
    obj = _tuple_obj(entry)
    return networks.Selection(
        index=index,
        name=entry.name,
        namespace=entry.namespace,
        written_namespace=entry.namespace,
        interface=entry.interface,
        notation=networks.Notation.JSON,
        raw=obj,
        raw_text=networks.compact_json(obj),
    )


def describe(entry: registry.RegistryEntry) -> str:
    """``ns/name@interface`` of a managed selection, for messages and update results."""
    return f"{entry.namespace}/{entry.name}@{entry.interface}"


def _entry_text(entry: registry.RegistryEntry) -> str:
    return f"{describe(entry)} claim={entry.claim_uid} uid={entry.uid} configSHA256={entry.config_sha256}"
