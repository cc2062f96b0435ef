"""EnsureManagedBindings: shadows, persisted UIDs, one Pod patch, then ``Ready``.

The forward sequence every path shares (first prepare after the ``Pending`` record, a repeated
prepare, the repair worker) for one Pod, with the caller holding the claim and Pod locks
(docs/design.md#prepare, docs/design.md#repair): :func:`ensure_shadows`, then :func:`publish`. An error on one
claim is reported for that claim and never undoes another claim's work or any hardware; the next
prepare or repair pass continues forward. Never rolls back hardware, releases a binding, or
publishes a claim whose shadows are missing.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import NoReturn

from sriov_dra.core import identities
from sriov_dra.core.plugin import checkpoint_lifecycle
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import pod_selections, seams, shadow_lifecycle
from sriov_dra.kube import views
from sriov_dra.servicekit import fanout
from sriov_dra_rules import errors

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class EnsureResult:
    """Per-claim outcome of one ensure pass for a Pod.

    Shapes: ``ready`` claim UIDs now durably ``Ready``; ``failed`` claim UID → the error that
    stopped it (its state is kept for the next attempt); ``created`` shadow names created now.
    """

    ready: tuple[identities.ClaimUid, ...] = ()
    failed: Mapping[identities.ClaimUid, Exception] = field(default_factory=dict)
    created: tuple[str, ...] = ()
    patched: bool = False


def forward_records(store: seams.Store, pod_uid: str) -> list[model.ClaimRecord]:
    """The Pod's records with managed bindings that are not being released, by claim UID."""
    return [
        r
        for r in store.snapshot_pod(pod_uid).values()
        if r.managed_bindings() and not checkpoint_lifecycle.release_in_progress(r)
    ]


def _ensure_target(
    target: shadow_lifecycle.Target,
    *,
    pod_name: str,
    store: seams.Store,
    nads: seams.NadApi,
    clock: seams.Clock,
    backoff: pod_selections.Backoff,
) -> tuple[shadow_lifecycle.Target, shadow_lifecycle.Ensured, str]:
    """Ensure one shadow (a truly missing one: clear its UID durably first, then recreate)."""
    outcome, uid = shadow_lifecycle.ensure_shadow(
        target, pod_name=pod_name, nads=nads, clock=clock, backoff=backoff
    )
    if outcome is shadow_lifecycle.Ensured.MISSING:
        cleared = replace(target.binding, phase=model.Phase.PENDING, shadow_uid="")
        record = store.update_managed_bindings(target.record.claim_uid, {cleared.attachment_id: cleared})
        LOG.warning(
            "shadow missing: recreating from frozen config",
            extra={"nad": target.ref, "claim_uid": record.claim_uid, "op": "repair"},
        )
        target = shadow_lifecycle.Target(record, target.device, cleared)
        outcome, uid = shadow_lifecycle.ensure_shadow(
            target, pod_name=pod_name, nads=nads, clock=clock, backoff=backoff
        )
    return target, outcome, uid


def _ensure_claim(
    record: model.ClaimRecord,
    *,
    pod_name: str,
    node: seams.NodeIdentity,
    store: seams.Store,
    nads: seams.NadApi,
    clock: seams.Clock,
    backoff: pod_selections.Backoff,
    created: list[str],
    max_in_flight: int,
) -> model.ClaimRecord:
    """Ensure every shadow of one claim and persist the UIDs observed; return the new record.

    The shadows are ensured concurrently (``fanout``, at most ``max_in_flight`` requests) and
    all of them finish before anything is decided: the UIDs of those that exist are persisted in
    one narrow write even when another failed (no create is left untracked), then the first
    failure in device order is raised; each further failure is logged and noted on it.
    """
    wrong_node = [b.attachment_id for b in record.managed_bindings() if b.node_uid != node.uid]
    if wrong_node:
        raise errors.Conflict(
            f"claim {record.namespace}/{record.name} ({record.claim_uid}) has bindings recorded for node UID "
            f"{record.managed_bindings()[0].node_uid}, but this node is {node.uid}; forward repair stops "
            "(the node was replaced): drain and clean the node",
            reason=errors.Reason.SHADOW_CONFLICT,
        )
    targets = shadow_lifecycle.targets(record)
    outcomes = fanout.run_all(
        [
            functools.partial(
                _ensure_target, t, pod_name=pod_name, store=store, nads=nads, clock=clock, backoff=backoff
            )
            for t in targets
        ],
        max_in_flight=max_in_flight,
    )
    observed: dict[str, model.ManagedBinding] = {}
    failures: list[tuple[shadow_lifecycle.Target, Exception]] = []
    rewritten = False
    for original, result in zip(targets, outcomes, strict=True):
        if result.error is not None:
            failures.append((original, result.error))
            continue
        assert result.value is not None
        target, outcome, uid = result.value
        rewritten = rewritten or target.binding is not original.binding
        if outcome is shadow_lifecycle.Ensured.CREATED:
            created.append(target.binding.shadow_name)
        if uid and uid != target.binding.shadow_uid:
            observed[target.binding.attachment_id] = replace(target.binding, shadow_uid=uid)
    if failures:
        _raise_first(record, failures, store=store, observed=observed)
    if observed:  # atomic and durable before the Pod patch: see _persist_observed
        return _persist_observed(store, record.claim_uid, observed)
    return (store.snapshot_claim(record.claim_uid) or record) if rewritten else record


def _persist_observed(
    store: seams.Store, claim_uid: str, observed: Mapping[str, model.ManagedBinding]
) -> model.ClaimRecord:
    """Record the shadow UIDs observed, as a narrow checkpoint mutation (docs/design.md#prepare).

    The write is atomic and durable before the Pod patch, like every checkpoint write (one
    in-place flush of the slot file, ``host.checkpoint_files``).
    """
    return store.update_managed_bindings(claim_uid, observed)


def _raise_first(
    record: model.ClaimRecord,
    failures: list[tuple[shadow_lifecycle.Target, Exception]],
    *,
    store: seams.Store,
    observed: Mapping[str, model.ManagedBinding],
) -> NoReturn:
    """Persist the UIDs observed next to failed shadows, then raise the first failure."""
    first = failures[0][1]
    for target, exc in failures[1:]:
        LOG.warning(
            "shadow not ensured",
            extra={"nad": target.ref, "claim_uid": record.claim_uid, "op": "ensure", "reason": str(exc)},
        )
        first.add_note(f"also failed: {target.ref}: {exc}")
    if observed:
        try:
            _persist_observed(store, record.claim_uid, observed)
        except Exception as exc:  # the shadow failure stays the claim's error; the next pass adopts
            LOG.warning(
                "shadow UIDs not persisted",
                extra={"claim_uid": record.claim_uid, "op": "ensure", "reason": str(exc)},
            )
            first.add_note(f"the UIDs of the shadows that exist were not persisted: {exc}")
    raise first


@dataclass(frozen=True)
class Shadowed:
    """Steps 1–2 of an ensure pass for one Pod, what :func:`publish` then publishes.

    Shapes: ``ok`` the records whose shadows all exist, in forward order (their UIDs durable);
    ``forward`` (namespace, name) of every forward record the pass took; ``failed`` claim UID →
    error so far; ``created`` shadow names created now.
    """

    pod: Mapping[str, object]
    ok: tuple[model.ClaimRecord, ...]
    forward: tuple[tuple[str, str], ...]
    failed: Mapping[identities.ClaimUid, Exception]
    created: tuple[str, ...]

    def publishes(self, claim_uid: str) -> bool:
        """True when ``claim_uid``'s shadows all exist, so the Pod patch will name them."""
        return any(r.claim_uid == claim_uid for r in self.ok)


def ensure_shadows(
    pod: Mapping[str, object],
    *,
    node: seams.NodeIdentity,
    store: seams.Store,
    nads: seams.NadApi,
    clock: seams.Clock,
    backoff: pod_selections.Backoff = pod_selections.DEFAULT_BACKOFF,
    max_in_flight: int = fanout.DEFAULT_MAX_IN_FLIGHT,
    failed: Mapping[identities.ClaimUid, Exception] | None = None,
) -> Shadowed:
    """Steps 1–2 for the verified live ``pod``; never raises per claim.

    1. Snapshot the Pod's claims whose bindings are ``Pending``/``Ready`` (``Deleting`` and
       ``ReleaseComplete`` records are never published again).
    2. Per claim, ensure each shadow (``shadow_lifecycle.ensure_shadow``), concurrently within
       the claim (``fanout``, at most ``max_in_flight`` requests); a shadow truly gone first gets
       its recorded UID cleared and ``Pending`` persisted, then is recreated; observed UIDs are
       persisted with one narrow write per claim, after every shadow of the claim finished.

    ``failed`` starts the per-claim errors (claims the caller already knows failed and hid from
    ``store``). Source: docs/design.md#prepare, docs/design.md#repair.
    """
    meta = views.decode_meta(pod)
    pod_uid, pod_name = meta.uid, meta.name
    errors_by_claim: dict[identities.ClaimUid, Exception] = dict(failed or {})
    created: list[str] = []
    ok: list[model.ClaimRecord] = []
    records = forward_records(store, pod_uid)
    for record in records:
        try:
            ok.append(
                _ensure_claim(
                    record,
                    pod_name=pod_name,
                    node=node,
                    store=store,
                    nads=nads,
                    clock=clock,
                    backoff=backoff,
                    created=created,
                    max_in_flight=max_in_flight,
                )
            )
        except Exception as exc:  # kept for this claim; other claims continue
            errors_by_claim[record.claim_uid] = exc
    return Shadowed(
        pod=pod,
        ok=tuple(ok),
        forward=tuple((r.namespace, r.name) for r in records),
        failed=errors_by_claim,
        created=tuple(created),
    )


def publish(
    shadowed: Shadowed,
    *,
    node: seams.NodeIdentity,
    store: seams.Store,
    pods: seams.PodApi,
    reverify: Callable[[Mapping[str, object]], None],
    clock: seams.Clock,
    backoff: pod_selections.Backoff = pod_selections.DEFAULT_BACKOFF,
) -> EnsureResult:
    """Steps 3–4 after :func:`ensure_shadows`; never raises per claim.

    3. One merge of every claim whose shadows all exist into the live Pod (``pod_selections``);
       a claim whose shadows failed is left out, so no selection names a missing shadow.
    4. Persist ``Ready`` for the published claims.

    ``reverify`` re-checks a Pod read again after a conflict (UID, node, reservation; it raises
    to stop). Errors are returned per claim in :attr:`EnsureResult.failed`; a Pod-patch failure
    is recorded for every claim that was to be published (also when the node's Multus layout,
    ``node.multus``, cannot be read for the interface-name check).
    """
    failed = dict(shadowed.failed)
    created = list(shadowed.created)
    ok = list(shadowed.ok)
    if not ok:
        return EnsureResult(failed=failed, created=tuple(created))
    try:
        patched = pod_selections.ensure_selections(
            pods=pods,
            pod=shadowed.pod,
            entries=pod_selections.intended_entries(ok),
            reverify=reverify,
            clock=clock,
            backoff=backoff,
            layout=node.multus.current(),
        )
    except Exception as exc:
        for record in ok:
            failed[record.claim_uid] = exc
        return EnsureResult(failed=failed, created=tuple(created))
    ready: list[identities.ClaimUid] = []
    for record in ok:
        try:
            store.update_managed_bindings(
                record.claim_uid,
                lambda b: replace(b, phase=model.Phase.READY) if b.phase is model.Phase.PENDING else b,
            )
            ready.append(record.claim_uid)
        except Exception as exc:
            failed[record.claim_uid] = exc
    return EnsureResult(ready=tuple(ready), failed=failed, created=tuple(created), patched=patched is True)
