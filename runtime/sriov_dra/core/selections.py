"""Merge and removal of driver-managed selections in a Pod's networks annotation.

Owns ``merge_managed_selections`` (spec §16.1 MergeManagedSelections) and its release
counterpart: given a snapshot of the live Pod, compute the new ``k8s.v1.cni.cncf.io/networks`` and
``sriovnetwork.k8snetworkplumbingwg.io/managed-networks`` values and the JSON Patch that publishes
both under UID and resourceVersion preconditions, or refuse with a typed error. Nothing is ever
published partially: every check runs on the complete result first.

Ownership (spec §9 rule 4): a selection is ours only when the registry records it (same Pod UID)
and the selection is exactly ``{"name","namespace","interface"}`` with the recorded values, as a
JSON object. A ``dra-sriov-`` name alone proves nothing: a selection of a name we are about to add
that the registry does not record, or a recorded selection that was edited (options added,
interface or namespace changed, comma form), is an ownership ``Conflict``; we never adopt or
rewrite it.

Writing (spec §9 rules 2, 5, 9): unrelated entries keep their exact JSON text and order; missing
managed entries are appended once, in registry order (existing registry entries first, then new
bindings in the order given, which is the deterministic §6.5 order). When something must change
the annotation is written as a JSON list even if it was in comma notation: each comma entry then
becomes the minimal equivalent object (``ns/net@if`` → ``{"name":"net","namespace":"ns",
"interface":"if"}``; omitted parts stay omitted). When nothing changes the original strings are
returned untouched and the patch is empty, so repair never rewrites a running Pod. A networks list
that becomes empty on release is removed (absent means empty to Multus); so is an empty registry.

It must never do I/O, never guess past malformed ownership data, and never drop or rewrite an
entry it does not own.

Source: spec §9 (rules 1–9, JSON Patch paragraph), §6.4, §6.5, §8.1 step 4, §8.4 step 3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sriov_dra.core import identities, ifnames, jsonpatch, limits, networks, registry
from sriov_dra_rules import errors, names

_TUPLE_KEYS = frozenset({"name", "namespace", "interface"})


@dataclass(frozen=True)
class PodSnapshot:
    """The parts of one live Pod that selection merging reads.

    ``annotations`` is ``None`` when the Pod has no ``metadata.annotations`` map at all (the patch
    then creates it). Build it from a plain Pod dict with :func:`pod_snapshot`.
    """

    namespace: str
    name: str
    uid: str
    resource_version: str
    annotations: Mapping[str, str] | None

    @property
    def ref(self) -> str:
        """``Pod ns/name`` for messages."""
        return f"Pod {self.namespace}/{self.name}"


def pod_snapshot(pod: Mapping[str, Any]) -> PodSnapshot:
    """Read a :class:`PodSnapshot` from a plain Pod object (the API's JSON as dicts).

    Raises: ContractViolation when namespace, name, uid or resourceVersion is missing or not a
    string, or when an annotation value is not a string.
    """
    meta = pod.get("metadata")
    if not isinstance(meta, Mapping):
        raise errors.ContractViolation("Pod object has no metadata; pass the object as read from the API")
    problems = [
        errors.FieldError(f"metadata.{key}", "must be a non-empty string")
        for key in ("namespace", "name", "uid", "resourceVersion")
        if not isinstance(meta.get(key), str) or not meta.get(key)
    ]
    annotations = meta.get("annotations")
    if annotations is not None and not (
        isinstance(annotations, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in annotations.items())
    ):
        problems.append(errors.FieldError("metadata.annotations", "must map strings to strings"))
    errors.raise_if_any(problems, "Pod object is malformed", cls=errors.ContractViolation)
    return PodSnapshot(
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta["uid"],
        resource_version=meta["resourceVersion"],
        annotations=dict(annotations) if annotations is not None else None,
    )


@dataclass(frozen=True)
class ManagedBinding:
    """One intended managed selection: its registry entry plus the source NAD it was rendered from.

    The source is needed to detect a manual selection of the same template (spec §9 rule 6).
    Shapes: ``entry.namespace`` is the Pod namespace; source namespace/name are resolved.
    """

    entry: registry.RegistryEntry
    source_namespace: str
    source_name: str


@dataclass(frozen=True)
class SelectionUpdate:
    """Result of a merge or removal.

    ``annotations`` is the complete intended annotation map (equal to the input when
    ``changed`` is false); ``networks`` and ``registry`` are the new values of the two keys
    (``None`` = key absent); ``patch`` is empty when nothing changes. ``added`` / ``removed`` name
    the managed selections (``ns/name@if``) written or dropped; ``kept`` lists edited entries of a
    released claim that were left in place because they are no longer exactly ours.
    """

    changed: bool
    annotations: Mapping[str, str]
    networks: str | None
    registry: str | None
    patch: tuple[jsonpatch.PatchOp, ...]
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    kept: tuple[errors.FieldError, ...] = ()


def merge_managed_selections(
    pod: PodSnapshot,
    bindings: Sequence[ManagedBinding],
    *,
    layout: ifnames.MultusLayout = ifnames.DEFAULT_LAYOUT,
) -> SelectionUpdate:
    """Ensure the Pod selects every binding exactly once, recorded in the registry.

    ``bindings`` are the checkpointed managed bindings to ensure (one claim, or every claim of the
    Pod during repair) in deterministic order. Registry entries of other claims are kept; an
    entry of a claim named in ``bindings`` must equal its binding. ``layout`` describes the
    Multus delegates around the annotation's (primary interface, ``defaultNetworks``, auxiliary
    chain) for the final interface-name check, which is :mod:`core.ifnames`'s rule.

    Shapes: see :class:`SelectionUpdate`; appended selections are ``{"name","namespace",
    "interface"}`` in compact JSON.
    Raises: InvalidSpec (``InvalidNetworksAnnotation``) for a malformed networks annotation;
    ContractViolation for a malformed/unknown-version registry or an invalid binding; Conflict
    (``OwnershipConflict``) for a registry of another Pod UID, a registry/checkpoint mismatch, an
    edited, duplicated or unrecorded managed selection; Conflict
    (``ManualSelectionConflictsWithManagedTemplate``) for a manual selection of a managed source;
    Conflict (``DuplicateInterfaceName``) for a managed interface name already in use; InvalidSpec
    (``AnnotationTooLarge``) when the result exceeds the metadata limit.
    Source: spec §9 rules 1–6, 8, 9; §8.1 step 4.
    """
    before = dict(pod.annotations or {})
    parsed = networks.parse_networks(
        before.get(names.NETWORKS_ANNOTATION), pod_namespace=pod.namespace, pod=pod.ref
    )
    current = _decode_registry(pod, before)
    _check_bindings(pod, bindings)
    entries = _reconcile_registry(pod, current, bindings)
    recorded = {(e.namespace, e.name) for e in (current.entries if current else ())}
    wanted = {(e.namespace, e.name): e for e in entries}

    present: set[tuple[str, str]] = set()
    ownership: list[errors.FieldError] = []
    for sel in parsed:
        entry = wanted.get(sel.target)
        if entry is None:
            continue
        ownership.extend(_ownership_problems(sel, entry, recorded=sel.target in recorded, seen=present))
        present.add(sel.target)
    errors.raise_if_any(
        ownership,
        f"{pod.ref}: managed network selections were changed by someone else; nothing was written. "
        "Restore the entries exactly as the registry records them, or delete the Pod",
        cls=errors.Conflict,
        reason=errors.Reason.OWNERSHIP_CONFLICT,
    )
    _check_manual_templates(pod, parsed, bindings, wanted)

    missing = [e for e in entries if (e.namespace, e.name) not in present]
    final = list(parsed) + [_managed_selection(len(parsed) + i, e) for i, e in enumerate(missing)]
    _check_interfaces(pod, final, {s.index for s in final if s.target in wanted}, layout)

    registry_changed = entries != (current.entries if current else ())
    if not missing and not registry_changed:
        return _unchanged(pod)
    after = dict(before)
    if missing:
        after[names.NETWORKS_ANNOTATION] = networks.render_networks([s.raw_text for s in final])
    _set_registry(after, pod, current, entries, registry_changed)
    limits.check_annotations_size(after, obj=pod.ref)
    return _update(pod, after, added=tuple(_describe(e) for e in missing))


def remove_managed_selections(pod: PodSnapshot, claim_uid: str) -> SelectionUpdate:
    """Drop exactly the selections and registry entries owned by ``claim_uid``.

    Only selections that are exactly a recorded tuple of this claim are removed; manual entries
    and other claims' entries stay byte for byte. A recorded selection that was edited is not ours
    any more: it is left in place and reported in ``kept`` (release must still make progress). No
    registry, or no entry of this claim, returns the Pod unchanged.

    Raises: InvalidSpec (``InvalidNetworksAnnotation``) for a malformed networks annotation;
    ContractViolation for a malformed/unknown-version registry; Conflict (``OwnershipConflict``)
    for a registry recorded for another Pod UID.
    Source: spec §9 rule 7; §8.4 step 3.
    """
    before = dict(pod.annotations or {})
    parsed = networks.parse_networks(
        before.get(names.NETWORKS_ANNOTATION), pod_namespace=pod.namespace, pod=pod.ref
    )
    current = _decode_registry(pod, before)
    owned = registry.entries_for_claim(current, claim_uid) if current else ()
    if current is None or not owned:
        return _unchanged(pod)
    by_target = {(e.namespace, e.name): e for e in owned}
    keep: list[networks.Selection] = []
    kept: list[errors.FieldError] = []
    dropped: list[str] = []
    for sel in parsed:
        entry = by_target.get(sel.target)
        if entry is not None and _is_exact(sel, entry):
            dropped.append(_describe(entry))
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
    _set_registry(after, pod, current, registry.without_claim(current, claim_uid).entries, True)
    return _update(pod, after, removed=tuple(dropped), kept=tuple(kept))


# --- helpers ---------------------------------------------------------------------------------


def _decode_registry(pod: PodSnapshot, annotations: Mapping[str, str]) -> registry.Registry | None:
    text = annotations.get(names.MANAGED_NETWORKS_ANNOTATION)
    if text is None:
        return None
    decoded = registry.decode_registry(text, owner=pod.ref)
    if decoded.pod_uid != pod.uid:
        raise errors.Conflict(
            f"{pod.ref}: annotation {names.MANAGED_NETWORKS_ANNOTATION} records Pod UID {decoded.pod_uid} "
            f"but this Pod is {pod.uid}; the annotations were probably copied from another Pod. Remove "
            f"that annotation and the {names.SHADOW_NAME_PREFIX}* selections it lists, then retry",
            reason=errors.Reason.OWNERSHIP_CONFLICT,
        )
    return decoded


def _check_bindings(pod: PodSnapshot, bindings: Sequence[ManagedBinding]) -> None:
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


def _reconcile_registry(
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


def _ownership_problems(
    sel: networks.Selection, entry: registry.RegistryEntry, *, recorded: bool, seen: set[tuple[str, str]]
) -> list[errors.FieldError]:
    path = networks.field_path(sel.index)
    if not recorded:
        return [
            errors.FieldError(
                path,
                f"selects {entry.namespace}/{entry.name}, the generated name of a binding being added, but the "
                "registry does not record it (no provenance); remove this entry",
            )
        ]
    if not _is_exact(sel, entry):
        return [
            errors.FieldError(
                path,
                f"managed selection {_describe(entry)} was edited (found {sel.raw_text}); managed entries must be "
                f'exactly {{"name","namespace","interface"}}: restore {_tuple_text(entry)}',
            )
        ]
    if sel.target in seen:
        return [
            errors.FieldError(
                path, f"managed selection {_describe(entry)} appears more than once; remove the copy"
            )
        ]
    return []


def _check_manual_templates(
    pod: PodSnapshot,
    selections: Sequence[networks.Selection],
    bindings: Sequence[ManagedBinding],
    wanted: Mapping[tuple[str, str], registry.RegistryEntry],
) -> None:
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


def _check_interfaces(
    pod: PodSnapshot, final: Sequence[networks.Selection], managed: set[int], layout: ifnames.MultusLayout
) -> None:
    """Refuse a managed interface name that another delegate of the Pod would also get.

    Collisions among manual entries only are left to the guard's final check (the merger never
    renames or rejects a manual selection on its own account).
    """
    collisions = ifnames.find_interface_collisions(
        [s.raw for s in final], pod_namespace=pod.namespace, layout=layout
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


def _is_exact(sel: networks.Selection, entry: registry.RegistryEntry) -> bool:
    raw = sel.raw
    return (
        sel.notation is networks.Notation.JSON
        and set(raw) == _TUPLE_KEYS
        and raw["name"] == entry.name
        and raw["namespace"] == entry.namespace
        and raw["interface"] == entry.interface
    )


def _tuple_obj(entry: registry.RegistryEntry) -> dict[str, str]:
    return {"name": entry.name, "namespace": entry.namespace, "interface": entry.interface}


def _tuple_text(entry: registry.RegistryEntry) -> str:
    return networks.compact_json(_tuple_obj(entry))


def _managed_selection(index: int, entry: registry.RegistryEntry) -> networks.Selection:
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


def _describe(entry: registry.RegistryEntry) -> str:
    return f"{entry.namespace}/{entry.name}@{entry.interface}"


def _entry_text(entry: registry.RegistryEntry) -> str:
    return f"{_describe(entry)} claim={entry.claim_uid} uid={entry.uid} configSHA256={entry.config_sha256}"


def _set_registry(
    after: dict[str, str],
    pod: PodSnapshot,
    current: registry.Registry | None,
    entries: tuple[registry.RegistryEntry, ...],
    changed: bool,
) -> None:
    if not changed:
        return
    if not entries:
        after.pop(names.MANAGED_NETWORKS_ANNOTATION, None)
        return
    pod_uid = current.pod_uid if current else identities.PodUid(pod.uid)
    after[names.MANAGED_NETWORKS_ANNOTATION] = registry.encode_registry(
        registry.Registry(pod_uid=pod_uid, entries=entries)
    )


def _unchanged(pod: PodSnapshot) -> SelectionUpdate:
    ann = dict(pod.annotations or {})
    return SelectionUpdate(
        changed=False,
        annotations=ann,
        networks=ann.get(names.NETWORKS_ANNOTATION),
        registry=ann.get(names.MANAGED_NETWORKS_ANNOTATION),
        patch=(),
    )


def _update(
    pod: PodSnapshot,
    after: dict[str, str],
    *,
    added: tuple[str, ...] = (),
    removed: tuple[str, ...] = (),
    kept: tuple[errors.FieldError, ...] = (),
) -> SelectionUpdate:
    patch = jsonpatch.annotations_patch(
        uid=pod.uid, resource_version=pod.resource_version, before=pod.annotations, after=after
    )
    return SelectionUpdate(
        changed=bool(patch),
        annotations=after,
        networks=after.get(names.NETWORKS_ANNOTATION),
        registry=after.get(names.MANAGED_NETWORKS_ANNOTATION),
        patch=tuple(patch),
        added=added,
        removed=removed,
        kept=kept,
    )
