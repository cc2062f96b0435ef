"""One shadow NAD: create or verify it (EnsureShadow), and finalize it after release.

:func:`ensure_shadow` creates the complete object in one call (ownerReference with
``blockOwnerDeletion: false``, protection finalizer, binding annotation) or accepts a taken name
only when it is exactly this binding's shadow (a lost create response); a terminating shadow is
never recreated; a missing finalizer is restored by a tested patch. :func:`resolve_for_release`
and :func:`finalize_released` verify provenance, request deletion under a UID precondition and
remove only our finalizer (docs/design.md#prepare, docs/design.md#release); a lost node's
recovery ends with the same :func:`finalize_shadow` (docs/operations.md). Expected objects come
from the checkpoint's frozen bytes; never overwrites, adopts or edits another object.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from sriov_dra.core import binding_annotation, identities, render, template_layout
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.core.plugin import json_patch, shadow_object
from sriov_dra.driver.managed import pod_selections, seams
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import views
from sriov_dra_rules import errors, names

LOG = logging.getLogger(__name__)
_FINALIZER = names.FINALIZER_ATTACHMENT_PROTECTION


@dataclass(frozen=True)
class Target:
    """One binding's shadow: the claim record, its device and the frozen binding."""

    record: model.ClaimRecord
    device: model.PreparedDevice
    binding: model.ManagedBinding

    @property
    def ref(self) -> str:
        """``NAD ns/name`` for messages."""
        return f"NAD {self.binding.shadow_namespace}/{self.binding.shadow_name}"


def targets(record: model.ClaimRecord) -> list[Target]:
    """Every managed binding of ``record`` as a :class:`Target`, in device order."""
    return [Target(record, d, d.managed) for d in record.devices if d.managed is not None]


def expected_shadow(target: Target, *, pod_name: str) -> dict[str, object]:
    """The object this binding's create call sends, rebuilt from the checkpoint (frozen bytes).

    Raises: ContractViolation when the record is inconsistent (see ``core.plugin.shadow_object``).
    """
    b, dev, rec = target.binding, target.device, target.record
    identity = identities.build_binding_identity(
        node_uid=b.node_uid, pod_uid=rec.pod_uid, claim_uid=rec.claim_uid, pool=dev.pool, device=dev.device
    )
    annotation = binding_annotation.Binding(
        attachment_id=b.attachment_id,
        pod_uid=rec.pod_uid,
        claim_uid=rec.claim_uid,
        node_name=b.node_name,
        node_uid=b.node_uid,
        source=binding_annotation.SourceRef(
            b.source.namespace, b.source.name, b.source.uid, b.source.resource_version
        ),
        pci_address=dev.pci_address,
        interface=b.interface,
        config_sha256=b.config_sha256,
    )
    frozen = render.RenderedConfig(  # only the bytes, hash and PCI address are used by the builder
        config_bytes=b.rendered_config.encode("utf-8"),
        config_sha256=b.config_sha256,
        cni_name="",
        cni_version="",
        is_conflist=False,
        plugin_index=None,
        plugin_type=template_layout.SRIOV_PLUGIN_TYPE,
        pci_address=dev.pci_address,
    )
    return shadow_object.build_shadow_nad(
        identity=identity,
        binding=annotation,
        rendered=frozen,
        pod_namespace=b.shadow_namespace,
        pod_name=pod_name,
    )


def _meta(obj: Mapping[str, object]) -> Mapping[str, object]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _finalizers(obj: Mapping[str, object]) -> list[str]:
    found = _meta(obj).get("finalizers")
    return [str(f) for f in found] if isinstance(found, list) else []


def owner_pod_name(live: Mapping[str, object], pod_uid: str) -> str | None:
    """The name in the live object's Pod ownerReference with ``pod_uid``, if there is one."""
    for ref in views.decode_meta(live).owners:
        if ref.kind == "Pod" and ref.uid == pod_uid:
            return ref.name
    return None


def _deletion_pending(target: Target, live: Mapping[str, object]) -> errors.LifecycleBlocked:
    return errors.LifecycleBlocked(
        f"{target.ref} of Pod {target.record.pod_uid} is terminating (deletionTimestamp "
        f"{_meta(live).get('deletionTimestamp')}); it is not recreated and no network is published from it. "
        "Recreate the workload; the binding is released when the kubelet unprepares the claim",
        reason=errors.Reason.SHADOW_DELETION_PENDING,
    )


def _conflict(target: Target, problems: list[errors.FieldError], what: str) -> errors.Conflict:
    return errors.Conflict(
        f"{target.ref} {what}; it is left untouched. Inspect it ('sriov-dra orphans'), do not remove "
        "its finalizer while the VF is in use",
        reason=errors.Reason.SHADOW_CONFLICT,
        errors=problems,
    )


def _check_live(
    target: Target, live: Mapping[str, object], expected: Mapping[str, object]
) -> list[errors.FieldError]:
    """Problems of a live object that should be our shadow, ignoring only a missing finalizer."""
    if _meta(live).get("deletionTimestamp"):
        raise _deletion_pending(target, live)
    problems = shadow_object.verify_shadow_matches(live, expected)
    return [p for p in problems if p.path != "metadata.finalizers"]


class Ensured(enum.StrEnum):
    """What :func:`ensure_shadow` found."""

    CREATED = "Created"
    ADOPTED = "Adopted"
    PRESENT = "Present"
    MISSING = "Missing"


def ensure_shadow(
    target: Target,
    *,
    pod_name: str,
    nads: seams.NadApi,
    clock: seams.Clock,
    backoff: pod_selections.Backoff = pod_selections.DEFAULT_BACKOFF,
) -> tuple[Ensured, str]:
    """Make this binding's protected shadow exist; return what happened and its UID.

    With a recorded UID the object is read and verified (``MISSING`` with ``""`` when it is truly
    gone: the caller persists the cleared UID before calling again to recreate). Without one it
    is created; ``AlreadyExists`` is resolved by a GET and a full identity/content check.
    Raises: LifecycleBlocked(ShadowDeletionPending) for a terminating shadow; Conflict
    (ShadowConflict) for another UID or any content/identity/owner difference; ``kube.errors``
    classes (Forbidden, timeout, 5xx, 422 of a refused create).
    Source: docs/design.md#prepare, docs/design.md#repair, docs/design.md#pure-helpers.
    """
    expected = expected_shadow(target, pod_name=pod_name)
    b = target.binding
    if b.shadow_uid:
        try:
            live = nads.get(b.shadow_namespace, b.shadow_name)
        except kube_errors.NotFound:
            return Ensured.MISSING, ""
        return Ensured.PRESENT, _verify_present(
            target, live, expected, nads=nads, clock=clock, backoff=backoff
        )
    for _ in range(2):
        try:
            created = nads.create(expected)
            return Ensured.CREATED, str(_meta(created).get("uid") or "")
        except kube_errors.Conflict as exc:
            if not exc.already_exists:
                raise
        try:
            live = nads.get(b.shadow_namespace, b.shadow_name)
        except kube_errors.NotFound:
            continue  # deleted between create and get: create again
        return Ensured.ADOPTED, _verify_present(
            target, live, expected, nads=nads, clock=clock, backoff=backoff
        )
    raise errors.Conflict(
        f"{target.ref} appeared and disappeared twice while it was created; retried later",
        reason=errors.Reason.SHADOW_CONFLICT,
    )


def _verify_present(
    target: Target,
    live: Mapping[str, object],
    expected: Mapping[str, object],
    *,
    nads: seams.NadApi,
    clock: seams.Clock,
    backoff: pod_selections.Backoff,
) -> str:
    uid = str(_meta(live).get("uid") or "")
    b = target.binding
    if b.shadow_uid and uid != b.shadow_uid:
        raise _conflict(
            target, [], f"has UID {uid}, but the checkpoint recorded {b.shadow_uid} (it was replaced)"
        )
    problems = _check_live(target, live, expected)
    if problems:
        raise _conflict(target, problems, "exists but is not exactly this binding's shadow")
    if _FINALIZER not in _finalizers(live):
        _restore_finalizer(target, live, nads=nads, clock=clock, backoff=backoff)
    return uid


def _restore_finalizer(
    target: Target,
    live: Mapping[str, object],
    *,
    nads: seams.NadApi,
    clock: seams.Clock,
    backoff: pod_selections.Backoff,
) -> None:
    """Add the protection finalizer back with a UID/resourceVersion-tested patch (docs/design.md#repair)."""
    b = target.binding
    for attempt in range(1, backoff.attempts + 1):
        meta = _meta(live)
        ops = json_patch.metadata_preconditions(str(meta.get("uid")), str(meta.get("resourceVersion")))
        if isinstance(meta.get("finalizers"), list):
            ops.append(json_patch.add_op("/metadata/finalizers/-", _FINALIZER))
        else:
            ops.append(json_patch.add_op("/metadata/finalizers", [_FINALIZER]))
        try:
            nads.json_patch(b.shadow_namespace, b.shadow_name, ops)
            LOG.warning("shadow finalizer restored", extra={"nad": target.ref, "op": "repair"})
            return
        except (kube_errors.Invalid, kube_errors.Conflict):
            live = nads.get(b.shadow_namespace, b.shadow_name)
            if _meta(live).get("uid") != b.shadow_uid and b.shadow_uid:
                raise _conflict(target, [], "was replaced while its finalizer was restored") from None
            if _meta(live).get("deletionTimestamp"):
                raise _deletion_pending(target, live) from None
            if _FINALIZER in _finalizers(live):
                return
            if attempt < backoff.attempts:
                clock.sleep(backoff.delay(attempt))
    raise errors.Conflict(
        f"{target.ref}: its protection finalizer could not be restored ({backoff.attempts} attempts); retried later",
        reason=errors.Reason.SHADOW_CONFLICT,
    )


@dataclass(frozen=True)
class ReleaseView:
    """What release found under the deterministic name: the live object (``None`` = gone)."""

    live: Mapping[str, object] | None
    uid: str
    pod_name: str | None


def resolve_for_release(target: Target, *, nads: seams.NadApi) -> ReleaseView:
    """Find this binding's shadow and verify its provenance for release (docs/design.md#release).

    An empty recorded UID (a lost create response) is accepted only for an exact identity and
    frozen-config match (the caller persists the UID); an absent ownerReference is allowed.
    Raises: Conflict(ShadowConflict) for a replacement UID, a conflicting owner or a content
    mismatch (release then waits: another object is never edited); ``kube.errors`` classes.
    """
    b = target.binding
    try:
        live = nads.get(b.shadow_namespace, b.shadow_name)
    except kube_errors.NotFound:
        return ReleaseView(None, b.shadow_uid, None)
    uid = str(_meta(live).get("uid") or "")
    if b.shadow_uid and uid != b.shadow_uid:
        raise _conflict(target, [], f"has UID {uid}, but the released binding recorded {b.shadow_uid}")
    pod_name = owner_pod_name(live, target.record.pod_uid)
    expected = expected_shadow(target, pod_name=pod_name or "unknown-pod")
    problems = shadow_object.verify_shadow_matches(live, expected, releasing=True)
    if problems:
        raise _conflict(target, problems, "does not match the binding being released")
    return ReleaseView(live, uid, pod_name)


def request_deletion(target: Target, view: ReleaseView, *, nads: seams.NadApi) -> None:
    """Request the shadow's deletion under its UID precondition, unless deletion already started.

    Raises: Conflict(ShadowConflict) when the precondition fails (replaced); ``kube.errors``
    classes other than NotFound.
    """
    if view.live is None or _meta(view.live).get("deletionTimestamp"):
        return
    b = target.binding
    try:
        nads.delete(b.shadow_namespace, b.shadow_name, uid=view.uid)
    except kube_errors.NotFound:
        return
    except kube_errors.Conflict as exc:
        raise _conflict(target, [], f"was replaced before deletion ({exc})") from exc


@dataclass(frozen=True)
class Finalized:
    """Outcome of :func:`finalize_released`: ``gone`` when the object no longer exists; other
    controllers' finalizers still holding it are listed in ``foreign``."""

    gone: bool
    foreign: tuple[str, ...]


def finalize_released(
    target: Target,
    uid: str,
    *,
    nads: seams.NadApi,
    clock: seams.Clock,
    backoff: pod_selections.Backoff = pod_selections.DEFAULT_BACKOFF,
) -> Finalized:
    """After ``ReleaseComplete``: :func:`finalize_shadow` for ``target``'s shadow (FinalizeReleasedShadow)."""
    b = target.binding
    return finalize_shadow(b.shadow_namespace, b.shadow_name, uid, nads=nads, clock=clock, backoff=backoff)


def finalize_shadow(
    namespace: str,
    name: str,
    uid: str,
    *,
    nads: seams.NadApi,
    clock: seams.Clock,
    backoff: pod_selections.Backoff = pod_selections.DEFAULT_BACKOFF,
) -> Finalized:
    """Request deletion of the shadow ``namespace/name`` with ``uid``, then remove our finalizer.

    Only ``.../attachment-protection`` is removed, with ``test`` ops on UID, resourceVersion and
    the finalizer's position; a 422/409 re-reads and rebuilds; a lost response (timeout) is
    resolved by re-reading. NotFound, a changed UID, or a terminating object without our key all
    complete the obligation; unrelated finalizers are never waited for. The release of a claim
    and the recovery of a lost node (docs/operations.md) both end here.
    Raises: Conflict(ShadowConflict) after ``backoff.attempts`` rebuilds; ``kube.errors``
    classes (Forbidden, ...).
    """
    ref = f"NAD {namespace}/{name}"
    deleted = False
    for attempt in range(1, backoff.attempts + 1):
        try:
            live = nads.get(namespace, name)
        except kube_errors.NotFound:
            return Finalized(True, ())
        meta = _meta(live)
        if uid and meta.get("uid") != uid:
            LOG.warning("shadow replaced during release; not touched", extra={"nad": ref, "op": "release"})
            return Finalized(True, ())
        current = _finalizers(live)
        foreign = tuple(f for f in current if f != _FINALIZER)
        if not meta.get("deletionTimestamp") and not deleted:
            try:
                nads.delete(namespace, name, uid=str(meta.get("uid")))
            except kube_errors.NotFound:
                return Finalized(True, ())
            deleted = True
            continue
        if _FINALIZER not in current:
            return Finalized(False, foreign)
        index = current.index(_FINALIZER)
        ops = [
            *json_patch.metadata_preconditions(str(meta.get("uid")), str(meta.get("resourceVersion"))),
            json_patch.test_op(f"/metadata/finalizers/{index}", _FINALIZER),
            json_patch.remove_op(f"/metadata/finalizers/{index}"),
        ]
        try:
            nads.json_patch(namespace, name, ops)
            return Finalized(not foreign, foreign)
        except kube_errors.NotFound:
            return Finalized(True, ())
        except (kube_errors.Invalid, kube_errors.Conflict, kube_errors.ServerError):
            if attempt < backoff.attempts:
                clock.sleep(backoff.delay(attempt))
    raise errors.Conflict(
        f"{ref}: the protection finalizer could not be removed after {backoff.attempts} attempts; "
        "the claim stays recorded and release is retried",
        reason=errors.Reason.SHADOW_CONFLICT,
    )
