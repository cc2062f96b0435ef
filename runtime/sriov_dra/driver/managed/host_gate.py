"""The host-stage gate: no binding is published or made ``Ready`` before its claim's host stage.

The first prepare persists ``Pending`` bindings *before* it binds drivers and writes CDI specs, so
a process that dies in between leaves bindings whose host stage never ran
(docs/design.md#prepare). For the two publishers of a Pod's bindings (the prepare's ensure pass,
siblings included, and the repair worker), :func:`host_stages_due` names the forward records with
a ``Pending`` binding whose idempotent host step is re-run from its frozen state (by the prepare
itself; by :func:`complete_host_stages` for the repair worker), and
:class:`GatedStore` hides the records whose host step failed from publication only. Never
releases hardware or changes a record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from sriov_dra.core import identities
from sriov_dra.core.plugin import checkpoint_lifecycle
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import ensure, seams

LOG = logging.getLogger(__name__)

HostStage = Callable[[model.ClaimRecord], None]
"""Make the host (VF drivers, claim and Pod CDI specs) match a record; idempotent.

The repair worker's seam; production: ``driver.prepare.ensure_host`` with the handler's context
(``driver.managed_wiring``). Raises: whatever the host step raises (``vf_driver_binding`` errors, ContractViolation, ``OSError``).
"""


def needs_host_stage(record: model.ClaimRecord) -> bool:
    """True when a binding of ``record`` is ``Pending`` (its host stage may not have completed)."""
    return any(b.phase is model.Phase.PENDING for b in record.managed_bindings())


def host_stages_due(
    store: seams.Store, pod_uid: str, *, done: frozenset[str] = frozenset()
) -> list[model.ClaimRecord]:
    """The Pod's forward records with a ``Pending`` binding, whose host step must run before they
    are published; ``done`` names claims whose host step the caller has just completed."""
    return [
        r for r in ensure.forward_records(store, pod_uid) if r.claim_uid not in done and needs_host_stage(r)
    ]


def hold(record: model.ClaimRecord, exc: Exception) -> Exception:
    """Note that ``record``'s host step failed (it stays ``Pending`` and unpublished); return ``exc``."""
    LOG.warning(
        "host stage incomplete: binding not published",
        extra={"claim_uid": record.claim_uid, "pod_uid": record.pod_uid, "op": "host", "reason": str(exc)},
    )
    return exc


def complete_host_stages(
    store: seams.Store, pod_uid: str, host: HostStage
) -> dict[identities.ClaimUid, Exception]:
    """Run ``host`` for each record :func:`host_stages_due` names; return the failures.

    The caller holds the claim and Pod operation locks. Shapes: claim UID → the host step's error.
    """
    failed: dict[identities.ClaimUid, Exception] = {}
    for record in host_stages_due(store, pod_uid):
        try:
            host(record)
        except Exception as exc:  # kept for this claim: it stays Pending and unpublished
            failed[record.claim_uid] = hold(record, exc)
    return failed


class GatedStore:
    """A :class:`seams.Store` that hides ``held`` claims from the per-Pod snapshot it hands out.

    Only ``snapshot_pod`` (what EnsureManagedBindings publishes from) is filtered; every other
    read and every mutation goes to ``store`` unchanged.
    """

    def __init__(self, store: seams.Store, held: Mapping[identities.ClaimUid, Exception]) -> None:
        self._store = store
        self._held = frozenset(held)

    def snapshot_claim(self, claim_uid: str) -> model.ClaimRecord | None:
        """See :meth:`seams.Store.snapshot_claim`."""
        return self._store.snapshot_claim(claim_uid)

    def snapshot_pod(self, pod_uid: str) -> dict[identities.ClaimUid, model.ClaimRecord]:
        """The Pod's records without the held claims."""
        return {u: r for u, r in self._store.snapshot_pod(pod_uid).items() if u not in self._held}

    def all_claims(self) -> dict[identities.ClaimUid, model.ClaimRecord]:
        """See :meth:`seams.Store.all_claims`."""
        return self._store.all_claims()

    def set_claim(self, record: model.ClaimRecord) -> model.ClaimRecord:
        """See :meth:`seams.Store.set_claim`."""
        return self._store.set_claim(record)

    def update_managed_bindings(
        self, claim_uid: str, update: checkpoint_lifecycle.BindingUpdate
    ) -> model.ClaimRecord:
        """See :meth:`seams.Store.update_managed_bindings`."""
        return self._store.update_managed_bindings(claim_uid, update)

    def mark_managed_deleting(self, claim_uid: str) -> model.ClaimRecord:
        """See :meth:`seams.Store.mark_managed_deleting`."""
        return self._store.mark_managed_deleting(claim_uid)

    def mark_managed_release_complete(self, claim_uid: str) -> model.ClaimRecord:
        """See :meth:`seams.Store.mark_managed_release_complete`."""
        return self._store.mark_managed_release_complete(claim_uid)

    def delete_claim(self, claim_uid: str) -> bool:
        """See :meth:`seams.Store.delete_claim`."""
        return self._store.delete_claim(claim_uid)
