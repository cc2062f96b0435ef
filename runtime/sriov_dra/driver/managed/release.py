"""ReleaseManagedClaim: release one claim's bindings in the order of docs/design.md#release.

Called by the unprepare handler (the kubelet's NodeUnprepareResources is the authority to
release) or by the repair worker resuming a release already authorized (``Deleting`` or
``ReleaseComplete`` persisted), either holding the claim lock, then the Pod lock. Each step is
idempotent and every failure leaves recoverable state (:func:`release_managed_claim`). Never
releases hardware for a record it was not asked to release, edits an object whose identity does
not match, or removes a finalizer before ``ReleaseComplete`` is durable.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from sriov_dra.core.plugin import checkpoint_lifecycle
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import pod_selections, seams, shadow_lifecycle
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import views as kube_views
from sriov_dra.servicekit import fanout
from sriov_dra_rules import errors

LOG = logging.getLogger(__name__)

HostRelease = Callable[[model.ClaimRecord], None]
"""Restores the record's VF drivers, removes its claim CDI spec and rebuilds (or removes) the
Pod CDI spec without it; idempotent (``driver.unprepare.release_host``)."""

StatusClear = Callable[[model.ClaimRecord], None]
"""Removes this driver's ``status.devices`` entries from the record's claim; best-effort and
idempotent, never raises (``driver.unprepare.clear_status``)."""


@dataclass(frozen=True)
class ReleaseResult:
    """What one release did: shadows whose finalizer obligation is complete, foreign finalizers
    still holding some of them (reported, never waited for), and whether hardware was released
    in this call."""

    finalized: tuple[str, ...]
    foreign: Mapping[str, tuple[str, ...]]
    released_host: bool


def _pod_name(
    record: model.ClaimRecord, views: list[shadow_lifecycle.ReleaseView], claims: seams.ClaimApi
) -> str | None:
    """The consumer Pod's name: from a shadow's ownerReference, else the claim's reservation."""
    for view in views:
        if view.pod_name:
            return view.pod_name
    try:
        claim = claims.get(record.namespace, record.name)
    except kube_errors.NotFound:
        return None
    found = kube_views.decode_claim(claim)
    if found.meta.uid != record.claim_uid:
        return None
    return next((r.name for r in found.reserved_for if r.uid == record.pod_uid), None)


def _api_cleanup(
    record: model.ClaimRecord,
    *,
    store: seams.Store,
    nads: seams.NadApi,
    pods: seams.PodApi,
    claims: seams.ClaimApi,
    clock: seams.Clock,
    backoff: pod_selections.Backoff,
    max_in_flight: int,
) -> tuple[model.ClaimRecord, dict[str, str]]:
    """Steps 1–3; returns the record (with adopted UIDs) and shadow name → UID to finalize.

    Step 1's reads, then step 2's deletions, each run concurrently (``fanout``); every call of a
    step finishes before the next step starts, and the first failure in device order is raised.
    """
    targets = shadow_lifecycle.targets(record)
    views = fanout.values(
        [functools.partial(shadow_lifecycle.resolve_for_release, t, nads=nads) for t in targets],
        max_in_flight=max_in_flight,
    )
    adopted: dict[str, model.ManagedBinding] = {
        t.binding.attachment_id: replace(t.binding, shadow_uid=v.uid)
        for t, v in zip(targets, views, strict=True)
        if v.live is not None and not t.binding.shadow_uid
    }
    if adopted:
        record = store.update_managed_bindings(record.claim_uid, adopted)
    fanout.values(
        [
            functools.partial(shadow_lifecycle.request_deletion, t, v, nads=nads)
            for t, v in zip(shadow_lifecycle.targets(record), views, strict=True)
        ],
        max_in_flight=max_in_flight,
    )
    pod_name = _pod_name(record, views, claims)
    if pod_name is not None:
        pod_selections.remove_claim_selections(
            pods=pods,
            namespace=record.namespace,
            name=pod_name,
            pod_uid=record.pod_uid,
            claim_uid=record.claim_uid,
            clock=clock,
            backoff=backoff,
        )
    uids = {
        t.binding.shadow_name: v.uid for t, v in zip(shadow_lifecycle.targets(record), views, strict=True)
    }
    return record, uids


def release_managed_claim(
    record: model.ClaimRecord,
    *,
    store: seams.Store,
    nads: seams.NadApi,
    pods: seams.PodApi,
    claims: seams.ClaimApi,
    release_host: HostRelease | None,
    clock: seams.Clock,
    clear_status: StatusClear | None = None,
    backoff: pod_selections.Backoff = pod_selections.DEFAULT_BACKOFF,
    max_in_flight: int = fanout.DEFAULT_MAX_IN_FLIGHT,
) -> ReleaseResult:
    """Release ``record`` (which has managed bindings), in order.

    0. Persist ``Deleting`` (``ReleaseComplete`` is never downgraded).
    1. Find each shadow under its deterministic name and verify its provenance (an empty UID
       from a lost create is adopted only on an exact match, and persisted).
    2. Request its deletion under a UID precondition (terminating or missing is fine).
    3. Remove only this claim's selections and registry entries from the same Pod UID.
    4. Release the host (``release_host``: original drivers, claim CDI spec, Pod CDI spec
       without this claim); skipped on a ``ReleaseComplete`` retry.
    5. Persist ``ReleaseComplete`` (a failed write keeps ``Deleting``; step 4 is replayed).
    6. Remove only our finalizer with a tested JSON Patch on the NAD's main endpoint.
    7. Clear this driver's ``status.devices`` entries (``clear_status``, best effort), then
       delete the record last; only then may a new Pod use the claim UID.

    Steps 1, 2 and 6 each issue their shadows' requests concurrently, at most ``max_in_flight``
    at once (``fanout``, the process-wide bound of ``--api-max-in-flight``); every request of a
    step finishes before the next step begins, so the order above holds between steps, and the
    first failure in device order is raised (the record stays; the release is retried).
    ``release_host`` is ``None`` only for a worker resuming a record that is already
    ``ReleaseComplete`` (the worker never releases hardware on its own authority: it passes the
    handler's function only for a ``Deleting`` record the kubelet authorized). ``clear_status``
    runs on every completed release, first or resumed, just before the record is deleted.
    Raises: Conflict(ShadowConflict) when a shadow is not exactly ours (release waits, nothing is
    edited); ContractViolation when the host must still be released but ``release_host`` is
    ``None``; the host's errors (record stays ``Deleting``); ``OSError`` for checkpoint writes;
    ``kube.errors`` classes. Source: docs/design.md#release, docs/design.md#pure-helpers.
    """
    label = f"ResourceClaim {record.namespace}/{record.name} ({record.claim_uid})"
    if not record.managed_bindings():
        raise errors.ContractViolation(f"{label} has no managed bindings; release it as a plain claim")
    host_done = checkpoint_lifecycle.locally_released(record)
    if not host_done:
        record = store.mark_managed_deleting(record.claim_uid)
    record, uids = _api_cleanup(
        record,
        store=store,
        nads=nads,
        pods=pods,
        claims=claims,
        clock=clock,
        backoff=backoff,
        max_in_flight=max_in_flight,
    )
    released = False
    if not host_done:
        if release_host is None:
            raise errors.ContractViolation(
                f"{label} is Deleting but no host release was supplied; only the unprepare path may release it"
            )
        release_host(record)
        released = True
        record = store.mark_managed_release_complete(record.claim_uid)
    finalized: list[str] = []
    foreign: dict[str, tuple[str, ...]] = {}
    targets = shadow_lifecycle.targets(record)
    outcomes = fanout.values(
        [
            functools.partial(
                shadow_lifecycle.finalize_released,
                t,
                uids.get(t.binding.shadow_name, ""),
                nads=nads,
                clock=clock,
                backoff=backoff,
            )
            for t in targets
        ],
        max_in_flight=max_in_flight,
    )
    for target, outcome in zip(targets, outcomes, strict=True):
        finalized.append(target.binding.shadow_name)
        if outcome.foreign:
            foreign[target.binding.shadow_name] = outcome.foreign
            LOG.info(
                "shadow held by other finalizers after release",
                extra={"nad": target.ref, "reason": ",".join(outcome.foreign), "op": "release"},
            )
    if clear_status is not None:
        clear_status(record)  # before the record goes: a crash here is retried from the record
    store.delete_claim(record.claim_uid)
    return ReleaseResult(tuple(finalized), foreign, released)


def discard_unpublished(store: seams.Store, claim_uid: str) -> None:
    """Forget a new record whose bindings never reached the API (rollback before any shadow write).

    For a first prepare whose hardware step failed: its ``Pending`` bindings were persisted but
    no shadow create or Pod patch was attempted, so the record goes through the two release
    phases (the store only deletes ``ReleaseComplete`` records) and is then deleted.
    Raises: ``OSError`` for checkpoint writes (the record stays; unprepare finishes it).
    """
    record = store.snapshot_claim(claim_uid)
    if record is None:
        return
    if record.managed_bindings():
        store.mark_managed_deleting(claim_uid)
        store.mark_managed_release_complete(claim_uid)
    store.delete_claim(claim_uid)
