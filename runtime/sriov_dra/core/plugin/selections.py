"""Merge and removal of driver-managed selections in a Pod's networks annotation.

:func:`merge_managed_selections` (prepare and repair) and :func:`remove_managed_selections`
(release) compute, from a snapshot of the live Pod, the new ``k8s.v1.cni.cncf.io/networks`` and
managed-networks registry values and the JSON Patch publishing both under UID and
resourceVersion preconditions, or refuse with a typed error (docs/design.md#selections). Every
check runs on the complete result first, so nothing is published partially. Never guesses past
malformed ownership data; never drops or rewrites an entry it does not own. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from sriov_dra.core import interface_naming, limits, networks, registry
from sriov_dra.core.plugin.selection_ownership import (
    ManagedBinding,
    check_bindings,
    check_interfaces,
    check_manual_templates,
    describe,
    is_exact,
    managed_selection,
    ownership_problems,
    reconcile_registry,
)
from sriov_dra.core.plugin.selection_update import (
    PodSnapshot,
    SelectionUpdate,
    decode_registry,
    set_registry,
    unchanged,
    update,
)
from sriov_dra_rules import errors, names


def merge_managed_selections(
    pod: PodSnapshot,
    bindings: Sequence[ManagedBinding],
    *,
    layout: interface_naming.MultusLayout = interface_naming.DEFAULT_LAYOUT,
) -> SelectionUpdate:
    """Ensure the Pod selects every binding exactly once, recorded in the registry.

    ``bindings`` are the checkpointed managed bindings to ensure (one claim, or every claim of the
    Pod during repair) in deterministic order. Registry entries of other claims are kept; an
    entry of a claim named in ``bindings`` must equal its binding. ``layout`` describes the
    Multus delegates around the annotation's (primary interface, ``defaultNetworks``, auxiliary
    chain) for the final interface-name check, which is :mod:`core.interface_naming`'s rule.

    Shapes: see :class:`SelectionUpdate`; appended selections are ``{"name","namespace",
    "interface"}`` in compact JSON.
    Raises: InvalidSpec (``InvalidNetworksAnnotation``) for a malformed networks annotation;
    ContractViolation for a malformed/unknown-version registry or an invalid binding; Conflict
    (``OwnershipConflict``) for a registry of another Pod UID, a registry/checkpoint mismatch, an
    edited, duplicated or unrecorded managed selection; Conflict
    (``ManualSelectionConflictsWithManagedTemplate``) for a manual selection of a managed source;
    Conflict (``DuplicateInterfaceName``) for a managed interface name already in use; InvalidSpec
    (``AnnotationTooLarge``) when the result exceeds the metadata limit.

    Ownership: a ``dra-sriov-`` name alone proves nothing; a recorded selection that was edited
    (options added, interface or namespace changed, comma form) is never adopted or rewritten.
    Writing: unrelated entries keep their exact JSON text and order; missing managed entries are
    appended once, in registry order (existing entries first, then new bindings in the order
    given, the deterministic interface order). When something must change, the annotation is
    written as a JSON list even if it was in comma notation (``ns/net@if`` becomes
    ``{"name":"net","namespace":"ns","interface":"if"}``; omitted parts stay omitted). When
    nothing changes the original strings are returned and the patch is empty, so repair never
    rewrites a running Pod.
    Source: docs/design.md#selections, docs/design.md#prepare.
    """
    before = dict(pod.annotations or {})
    parsed = networks.parse_networks(
        before.get(names.NETWORKS_ANNOTATION), pod_namespace=pod.namespace, pod=pod.ref
    )
    current = decode_registry(pod, before)
    check_bindings(pod, bindings)
    entries = reconcile_registry(pod, current, bindings)
    recorded = {(e.namespace, e.name) for e in (current.entries if current else ())}
    wanted = {(e.namespace, e.name): e for e in entries}

    present: set[tuple[str, str]] = set()
    ownership: list[errors.FieldError] = []
    for sel in parsed:
        entry = wanted.get(sel.target)
        if entry is None:
            continue
        ownership.extend(ownership_problems(sel, entry, recorded=sel.target in recorded, seen=present))
        present.add(sel.target)
    errors.raise_if_any(
        ownership,
        f"{pod.ref}: managed network selections were changed by someone else; nothing was written. "
        "Restore the entries exactly as the registry records them, or delete the Pod",
        cls=errors.Conflict,
        reason=errors.Reason.OWNERSHIP_CONFLICT,
    )
    check_manual_templates(pod, parsed, bindings, wanted)

    missing = [e for e in entries if (e.namespace, e.name) not in present]
    final = list(parsed) + [managed_selection(len(parsed) + i, e) for i, e in enumerate(missing)]
    check_interfaces(pod, final, {s.index for s in final if s.target in wanted}, layout)

    registry_changed = entries != (current.entries if current else ())
    if not missing and not registry_changed:
        return unchanged(pod)
    after = dict(before)
    if missing:
        after[names.NETWORKS_ANNOTATION] = networks.render_networks([s.raw_text for s in final])
    set_registry(after, pod, current, entries, registry_changed)
    limits.check_annotations_size(after, obj=pod.ref)
    return update(pod, after, added=tuple(describe(e) for e in missing))


def remove_managed_selections(pod: PodSnapshot, claim_uid: str) -> SelectionUpdate:
    """Drop exactly the selections and registry entries owned by ``claim_uid``.

    Only selections that are exactly a recorded tuple of this claim are removed; manual entries
    and other claims' entries stay byte for byte. A recorded selection that was edited is not ours
    any more: it is left in place and reported in ``kept`` (release must still make progress). No
    registry, or no entry of this claim, returns the Pod unchanged.

    Raises: InvalidSpec (``InvalidNetworksAnnotation``) for a malformed networks annotation;
    ContractViolation for a malformed/unknown-version registry; Conflict (``OwnershipConflict``)
    for a registry recorded for another Pod UID. A networks list that becomes empty is removed
    (absent means empty to Multus); so is an empty registry.
    Source: docs/design.md#selections, docs/design.md#release.
    """
    before = dict(pod.annotations or {})
    parsed = networks.parse_networks(
        before.get(names.NETWORKS_ANNOTATION), pod_namespace=pod.namespace, pod=pod.ref
    )
    current = decode_registry(pod, before)
    owned = registry.entries_for_claim(current, claim_uid) if current else ()
    if current is None or not owned:
        return unchanged(pod)
    by_target = {(e.namespace, e.name): e for e in owned}
    keep: list[networks.Selection] = []
    kept: list[errors.FieldError] = []
    dropped: list[str] = []
    for sel in parsed:
        entry = by_target.get(sel.target)
        if entry is not None and is_exact(sel, entry):
            dropped.append(describe(entry))
            continue
        if entry is not None:
            kept.append(
                errors.FieldError(
                    networks.field_path(sel.index),
                    f"selection of released shadow {entry.namespace}/{entry.name} was edited and is no longer "
                    "exactly the managed entry; it was left in place, remove it by hand",
                )
            )
        keep.append(sel)
    after = dict(before)
    if dropped:
        if keep:
            after[names.NETWORKS_ANNOTATION] = networks.render_networks([s.raw_text for s in keep])
        else:
            del after[names.NETWORKS_ANNOTATION]
    set_registry(after, pod, current, registry.without_claim(current, claim_uid).entries, True)
    return update(pod, after, removed=tuple(dropped), kept=tuple(kept))
