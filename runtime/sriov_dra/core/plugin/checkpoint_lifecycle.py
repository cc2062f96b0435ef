"""Lifecycle rules of managed bindings: phase transitions, narrow updates, CDI consumers.

Phases move ``Pending`` → ``Ready`` → ``Deleting`` → ``ReleaseComplete`` → record removed, each
persisted before the external effect it permits (docs/design.md#checkpoint). The pure rules the
checkpoint store applies: which phase moves a narrow update may make, which fields are frozen at
first prepare, when a record blocks reuse of its claim UID, and which records still consume the
Pod-global CDI spec. No I/O, no state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Final, TypeAlias

from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra_rules import errors


def release_in_progress(record: model.ClaimRecord) -> bool:
    """Return whether any managed binding of ``record`` is ``Deleting`` or ``ReleaseComplete``."""
    return any(b.phase in model.RELEASE_PHASES for b in record.managed_bindings())


def locally_released(record: model.ClaimRecord) -> bool:
    """Return whether ``record`` finished local cleanup: it has managed bindings, all ReleaseComplete.

    Such a record is retained only for API/finalizer work and is no longer a CDI consumer
    (docs/design.md#release).
    """
    bindings = record.managed_bindings()
    return bool(bindings) and all(b.phase is model.Phase.RELEASE_COMPLETE for b in bindings)


def pod_cdi_pci_addresses(
    records: Iterable[model.ClaimRecord], pod_uid: str, *, releasing: str | None = None
) -> tuple[str, ...]:
    """Return the PCI addresses the Pod-global CDI spec of ``pod_uid`` must still list.

    A claim counts while it is locally unreleased; ``releasing`` names a claim whose local cleanup
    is running now and must no longer count. An empty result means: delete the Pod spec.

    The Pod-global spec is kept while any other locally unreleased claim of the Pod needs it and
    deleted after the last one (docs/design.md#release).
    Shapes: sorted, de-duplicated plain BDFs.
    """
    found = {
        d.pci_address
        for r in records
        if r.pod_uid == pod_uid and r.claim_uid != releasing and not locally_released(r)
        for d in r.devices
    }
    return tuple(sorted(found))


def _with_phases(record: model.ClaimRecord, change: Mapping[model.Phase, model.Phase]) -> model.ClaimRecord:
    devices = tuple(
        replace(d, managed=replace(d.managed, phase=change.get(d.managed.phase, d.managed.phase)))
        if d.managed is not None
        else d
        for d in record.devices
    )
    return replace(record, devices=devices)


def mark_deleting(record: model.ClaimRecord) -> model.ClaimRecord:
    """Return ``record`` with ``Pending``/``Ready`` bindings moved to ``Deleting``.

    ``Deleting`` stays; ``ReleaseComplete`` is never downgraded (its API-only path resumes).
    Source: docs/design.md#release.
    """
    return _with_phases(
        record, {model.Phase.PENDING: model.Phase.DELETING, model.Phase.READY: model.Phase.DELETING}
    )


def mark_release_complete(record: model.ClaimRecord) -> model.ClaimRecord:
    """Return ``record`` with ``Deleting`` bindings moved to ``ReleaseComplete``.

    Raises: ``ContractViolation`` if a binding is still ``Pending``/``Ready``: release must be
    authorized (``Deleting`` persisted) before local cleanup can be recorded complete; protection
    is removed only after this is durable (docs/design.md#release).
    """
    early = [b.attachment_id for b in record.managed_bindings() if b.phase in model.FORWARD_PHASES]
    if early:
        raise errors.ContractViolation(
            f"claim {record.namespace}/{record.name} ({record.claim_uid}) has bindings that were never "
            f"marked Deleting ({', '.join(early)}); persist Deleting before recording ReleaseComplete"
        )
    return _with_phases(record, {model.Phase.DELETING: model.Phase.RELEASE_COMPLETE})


_P = model.Phase
NARROW_MOVES: Final = frozenset(
    {(_P.PENDING, _P.PENDING), (_P.PENDING, _P.READY), (_P.READY, _P.READY), (_P.READY, _P.PENDING)}
    | {(_P.DELETING, _P.DELETING), (_P.RELEASE_COMPLETE, _P.RELEASE_COMPLETE)}
)
"""(old, new) phase pairs a narrow update may make; release moves need the ``mark_*`` functions."""

FROZEN_FIELDS: Final = (
    "attachment_id",
    "shadow_namespace",
    "shadow_name",
    "source",
    "rendered_config",
    "config_sha256",
    "interface",
    "node_name",
    "node_uid",
)
"""ManagedBinding fields fixed at first prepare: a frozen snapshot that source changes do not
touch, so DEL uses the same network (docs/design.md#source-changes, docs/design.md#ipam)."""


def check_binding_update(old: model.ManagedBinding, new: model.ManagedBinding, *, claim: str) -> None:
    """Check that ``new`` is an allowed narrow update of ``old`` (only phase and shadow UID move).

    Allowed: Pending↔Ready and same-phase updates (use :func:`mark_deleting` /
    :func:`mark_release_complete` for release); shadow UID ``""``→UID (observed) and UID→``""``
    (shadow truly gone, repair will recreate). Every field of :data:`FROZEN_FIELDS` is fixed.

    Raises: ``ContractViolation`` for a changed frozen field or a disallowed phase move;
    ``Conflict`` (reason ``ShadowConflict``) when a recorded non-empty shadow UID would be replaced
    by a different one. Source: docs/design.md#checkpoint, docs/design.md#repair.
    """
    where = f"claim {claim} binding {old.attachment_id}"
    frozen = [f for f in FROZEN_FIELDS if getattr(old, f) != getattr(new, f)]
    if frozen:
        raise errors.ContractViolation(
            f"{where}: fields {', '.join(frozen)} are frozen at first prepare and cannot be updated; "
            "recreate the workload to change them"
        )
    if (old.phase, new.phase) not in NARROW_MOVES:
        raise errors.ContractViolation(
            f"{where}: phase {old.phase} → {new.phase} is not a narrow update; use mark_managed_deleting "
            "or mark_managed_release_complete for release transitions"
        )
    if old.shadow_uid and new.shadow_uid and old.shadow_uid != new.shadow_uid:
        raise errors.Conflict(
            f"{where}: recorded shadow UID {old.shadow_uid} differs from {new.shadow_uid}; the object "
            f"{old.shadow_namespace}/{old.shadow_name} was replaced: inspect it, do not adopt it",
            reason=errors.Reason.SHADOW_CONFLICT,
        )


BindingUpdate: TypeAlias = (
    "Callable[[model.ManagedBinding], model.ManagedBinding] | Mapping[str, model.ManagedBinding]"
)
"""A function applied to every managed binding of a claim, or replacements keyed by attachmentID."""


def _label(record: model.ClaimRecord) -> str:
    return f"{record.namespace}/{record.name} ({record.claim_uid})"


def apply_binding_update(record: model.ClaimRecord, update: BindingUpdate) -> model.ClaimRecord:
    """Return ``record`` with its managed bindings narrowly updated (see :func:`check_binding_update`).

    ``update`` is either a function called once per managed binding (in device order) or a mapping
    from attachmentID to the replacement binding; a mapping may name a subset of the bindings.

    Raises: ``ContractViolation`` for a mapping key that names no binding of this claim or differs
    from its value's attachmentID, a non-binding result, or any disallowed change; ``Conflict``
    (``ShadowConflict``) for a replaced shadow UID.
    """
    label = _label(record)
    if isinstance(update, Mapping):
        known = {b.attachment_id for b in record.managed_bindings()}
        unknown = sorted(set(update) - known)
        if unknown:
            raise errors.ContractViolation(
                f"claim {label} has no managed binding {', '.join(unknown)}; snapshot the claim and update "
                "only its recorded bindings"
            )
        for key, value in update.items():
            if value.attachment_id != key:
                raise errors.ContractViolation(
                    f"claim {label}: update keyed {key} carries {value.attachment_id}"
                )
    devices: list[model.PreparedDevice] = []
    for dev in record.devices:
        old = dev.managed
        if old is None:
            devices.append(dev)
            continue
        new = update.get(old.attachment_id, old) if isinstance(update, Mapping) else update(old)
        if not isinstance(new, model.ManagedBinding):
            raise errors.ContractViolation(f"claim {label}: binding update returned {type(new).__name__}")
        check_binding_update(old, new, claim=label)
        devices.append(replace(dev, managed=new))
    return replace(record, devices=tuple(devices))


def check_set_claim(existing: model.ClaimRecord | None, new: model.ClaimRecord) -> None:
    """Check that ``new`` may be stored where ``existing`` (the record for its claim UID) is.

    A claim UID has one record: a different Pod must wait until the old record (any phase,
    including ``ReleaseComplete``) is removed, and a record whose release has started cannot be
    replaced. Re-storing a record for the same Pod must keep the same managed bindings and only
    make narrow changes; managed bindings cannot be added to a record written without them (an
    enabled node with such a record must be drained first, docs/design.md#prepare).

    Raises: ``LifecycleBlocked`` (reason ``ClaimReleaseInProgress``) for another Pod's record or a
    release in progress; ``ContractViolation`` / ``Conflict`` for a disallowed change.
    Claim-UID uniqueness is enforced atomically where the store sets a record.
    Source: docs/design.md#checkpoint.
    """
    if existing is None:
        return
    if existing.pod_uid != new.pod_uid:
        phases = sorted({str(b.phase) for b in existing.managed_bindings()}) or ["prepared"]
        raise errors.LifecycleBlocked(
            f"claim {_label(new)} is still recorded for Pod {existing.pod_uid} ({', '.join(phases)}); "
            f"Pod {new.pod_uid} must wait until that Pod's release finishes and its record is removed",
            reason=errors.Reason.CLAIM_RELEASE_IN_PROGRESS,
        )
    if release_in_progress(existing):
        raise errors.LifecycleBlocked(
            f"claim {_label(new)} is being released; it cannot be prepared again until the release finishes",
            reason=errors.Reason.CLAIM_RELEASE_IN_PROGRESS,
        )
    old_ids = [b.attachment_id for b in existing.managed_bindings()]
    new_bindings = {b.attachment_id: b for b in new.managed_bindings()}
    if sorted(old_ids) != sorted(new_bindings):
        raise errors.ContractViolation(
            f"claim {_label(new)}: re-storing the record must keep its managed bindings "
            f"({', '.join(sorted(old_ids)) or 'none'}); got {', '.join(sorted(new_bindings)) or 'none'}"
        )
    for old in existing.managed_bindings():
        check_binding_update(old, new_bindings[old.attachment_id], claim=_label(new))
