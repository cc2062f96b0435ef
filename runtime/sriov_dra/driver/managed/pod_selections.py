"""Publishing managed selections on the live Pod: one conditional patch, re-read and recompute.

The API half of docs/design.md#selections (the pure half is ``core.plugin.selections``): the
deterministic intended selections of checkpointed bindings, the JSON Patch under ``test`` ops on
UID and resourceVersion, and, when the Pod changed meanwhile (409, or the 422 of a failed
``test``), a fresh read, re-verification and recomputation within a bounded backoff. A registry
entry whose shadow repair recreated gets the checkpoint's UID in the same patch. Never replaces
another writer's data, loops on an invalid patch, or writes to a Pod with another UID.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from sriov_dra.core import identities, interface_naming, registry
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.core.plugin import json_patch, selection_ownership, selection_update, selections
from sriov_dra.driver.managed import seams
from sriov_dra.kube import errors as kube_errors
from sriov_dra_rules import errors, names

PLACEHOLDER_UID: Final = "00000000-0000-4000-8000-000000000000"
"""Stands for a shadow UID not known yet when the annotation is checked before hardware changes
(a UUID has a fixed length, so the size check is exact)."""

_NATURAL = re.compile(r"(\d+)")


@dataclass(frozen=True)
class Backoff:
    """Bounded retry of a conditional write.

    Units: ``first_s`` seconds before the second attempt, doubled each time up to ``max_s``.
    """

    attempts: int = 5
    first_s: float = 0.05
    max_s: float = 1.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return float(min(self.max_s, self.first_s * (2 ** (attempt - 1))))


DEFAULT_BACKOFF: Final = Backoff()
"""Five attempts, 50 ms doubling to 1 s: a few seconds at most inside a 45 s prepare."""


def _natural(text: str) -> tuple[object, ...]:
    return tuple(int(p) if p.isdigit() else p for p in _NATURAL.split(text))


def entry_for(
    record: model.ClaimRecord, binding: model.ManagedBinding, *, uid: str = ""
) -> selection_ownership.ManagedBinding:
    """The intended selection of one checkpointed binding (``uid`` overrides an unknown UID)."""
    return selection_ownership.ManagedBinding(
        entry=registry.RegistryEntry(
            attachment_id=binding.attachment_id,
            claim_uid=record.claim_uid,
            namespace=binding.shadow_namespace,
            name=binding.shadow_name,
            uid=identities.ObjectUid(binding.shadow_uid or uid),
            interface=binding.interface,
            config_sha256=binding.config_sha256,
        ),
        source_namespace=binding.source.namespace,
        source_name=binding.source.name,
    )


def intended_entries(
    records: Iterable[model.ClaimRecord], *, placeholder: bool = False
) -> list[selection_ownership.ManagedBinding]:
    """Every managed binding of ``records`` as intended selections, in deterministic order.

    Shapes: ordered by interface name in natural order (``dra2`` before ``dra10``), the order of
    generated names (docs/design.md#interface-names); ties by attachmentID. With
    ``placeholder``, an unknown shadow UID becomes :data:`PLACEHOLDER_UID` (pre-hardware checks
    only).
    """
    out = [
        entry_for(r, b, uid=PLACEHOLDER_UID if placeholder else "")
        for r in records
        for b in r.managed_bindings()
    ]
    return sorted(out, key=lambda e: (_natural(e.entry.interface), e.entry.attachment_id))


def _refresh_registry(
    snapshot: selection_update.PodSnapshot, entries: Sequence[selection_ownership.ManagedBinding]
) -> selection_update.PodSnapshot:
    """Return ``snapshot`` with registry entries' UIDs set to the checkpoint's where only that differs."""
    text = (snapshot.annotations or {}).get(names.MANAGED_NETWORKS_ANNOTATION)
    if text is None:
        return snapshot
    current = registry.decode_registry(text, owner=snapshot.ref)
    wanted = {e.entry.attachment_id: e.entry for e in entries}
    fixed = tuple(
        wanted[e.attachment_id]
        if e.attachment_id in wanted
        and replace(e, uid=wanted[e.attachment_id].uid) == wanted[e.attachment_id]
        else e
        for e in current.entries
    )
    if fixed == current.entries:
        return snapshot
    annotations = dict(snapshot.annotations or {})
    annotations[names.MANAGED_NETWORKS_ANNOTATION] = registry.encode_registry(replace(current, entries=fixed))
    return replace(snapshot, annotations=annotations)


def plan_merge(
    pod: Mapping[str, object],
    entries: Sequence[selection_ownership.ManagedBinding],
    *,
    layout: interface_naming.MultusLayout = interface_naming.DEFAULT_LAYOUT,
) -> tuple[json_patch.PatchOp, ...]:
    """The patch that makes the live ``pod`` select exactly ``entries`` (``()`` when it already does).

    ``layout`` is the node's Multus delegate layout the interface names are checked against.
    Raises: the ``core.plugin.selections.merge_managed_selections`` errors (ownership conflicts, manual
    selection of a managed template, interface collisions, annotation too large, malformed input).
    """
    snapshot = selection_update.pod_snapshot(pod)
    refreshed = _refresh_registry(snapshot, entries)
    update = selections.merge_managed_selections(refreshed, entries, layout=layout)
    final = update.annotations if update.changed else refreshed.annotations or {}
    return tuple(
        json_patch.annotations_patch(
            uid=snapshot.uid,
            resource_version=snapshot.resource_version,
            before=snapshot.annotations,
            after=final,
        )
    )


def _write(
    *,
    pods: seams.PodApi,
    namespace: str,
    name: str,
    first: Mapping[str, object] | None,
    compute: Callable[[Mapping[str, object]], Sequence[json_patch.PatchOp]],
    verify: Callable[[Mapping[str, object]], bool],
    clock: seams.Clock,
    backoff: Backoff,
) -> bool:
    """Read (or use ``first``), verify, compute, patch; on 409/422 re-read and repeat. True if written.

    ``verify`` returns False to stop without writing. Raises: ``kube.errors.NotFound`` when the Pod
    is gone (callers decide), the errors of ``compute``/``verify``, ``errors.Conflict`` when the
    attempts run out, and a 422 that a re-read shows was not caused by a change.
    """
    pod = first
    last: kube_errors.ApiError | None = None
    for attempt in range(1, backoff.attempts + 1):
        if pod is None:
            pod = pods.get(namespace, name)
        if not verify(pod):
            return False
        ops = compute(pod)
        if not ops:
            return False
        try:
            pods.json_patch(namespace, name, ops)
            return True
        except (kube_errors.Invalid, kube_errors.Conflict) as exc:
            last = exc
            seen = str(_meta(pod).get("resourceVersion"))
            pod = None
            if isinstance(exc, kube_errors.Invalid):
                pod = pods.get(namespace, name)
                if str(_meta(pod).get("resourceVersion")) == seen:
                    raise  # nothing changed: the patch itself is invalid (admission, a bug)
            if attempt < backoff.attempts:
                clock.sleep(backoff.delay(attempt))
    raise errors.Conflict(
        f"Pod {namespace}/{name} kept changing while its network annotations were written "
        f"({backoff.attempts} attempts, last: {last}); the write is retried later and no other "
        "writer's data was replaced",
        reason=errors.Reason.OWNERSHIP_CONFLICT,
    )


def _meta(obj: Mapping[str, object]) -> Mapping[str, object]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def ensure_selections(
    *,
    pods: seams.PodApi,
    pod: Mapping[str, object],
    entries: Sequence[selection_ownership.ManagedBinding],
    reverify: Callable[[Mapping[str, object]], None],
    clock: seams.Clock,
    backoff: Backoff = DEFAULT_BACKOFF,
    layout: interface_naming.MultusLayout = interface_naming.DEFAULT_LAYOUT,
) -> bool:
    """Make the Pod select every entry exactly once (docs/design.md#prepare); True if patched.

    ``pod`` is the live Pod already read and verified by the caller (saves a GET); after a
    conflict the Pod is read again and ``reverify`` must accept it (it raises otherwise: another
    UID, node, a terminating Pod, a lost reservation). ``layout`` is the node's Multus layout.
    Raises: the errors of :func:`plan_merge` and of ``reverify``; ``errors.Conflict`` when the
    Pod kept changing for ``backoff.attempts`` attempts; ``kube.errors`` classes (Forbidden,
    NotFound, timeout, an invalid patch).
    """
    meta = _meta(pod)
    namespace, name = str(meta.get("namespace")), str(meta.get("name"))

    def verify(live: Mapping[str, object]) -> bool:
        if live is not pod:
            reverify(live)
        return True

    return _write(
        pods=pods,
        namespace=namespace,
        name=name,
        first=pod,
        compute=lambda live: plan_merge(live, entries, layout=layout),
        verify=verify,
        clock=clock,
        backoff=backoff,
    )


def remove_claim_selections(
    *,
    pods: seams.PodApi,
    namespace: str,
    name: str,
    pod_uid: str,
    claim_uid: str,
    clock: seams.Clock,
    backoff: Backoff = DEFAULT_BACKOFF,
) -> bool:
    """Drop exactly this claim's owned selections and registry entries (docs/design.md#release).

    A missing Pod, or a Pod with another UID (a replacement), is left alone: there is nothing of
    ours on it. Returns True when a patch was sent.
    Raises: the ``core.plugin.selections.remove_managed_selections`` errors; ``errors.Conflict`` after
    ``backoff.attempts`` conflicts; ``kube.errors`` classes other than NotFound.
    """

    def compute(live: Mapping[str, object]) -> Sequence[json_patch.PatchOp]:
        return selections.remove_managed_selections(selection_update.pod_snapshot(live), claim_uid).patch

    try:
        return _write(
            pods=pods,
            namespace=namespace,
            name=name,
            first=None,
            compute=compute,
            verify=lambda live: _meta(live).get("uid") == pod_uid,
            clock=clock,
            backoff=backoff,
        )
    except kube_errors.NotFound:
        return False
