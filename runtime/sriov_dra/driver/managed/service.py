"""The auto-attach facade the prepare/unprepare handler and the repair worker call.

:class:`ManagedAttach` bundles the seams once and exposes the steps in the handler's order
(docs/design.md#prepare): :meth:`verify` (before the locks: the live consumer Pod), :meth:`plan`
(under the locks, a claim without a record: everything that can fail before hardware),
:meth:`host_stages_due`, :meth:`ensure_shadows`, :meth:`publish` and :meth:`conclude` (after
the record is durable: siblings' host steps, shadows, UIDs, Pod patch, ``Ready``),
:meth:`release` (docs/design.md#release) and :meth:`discard_unpublished` (forget a new record
whose hardware step failed before any API write). Takes no operation lock itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from sriov_dra.core import identities
from sriov_dra.core.plugin import checkpoint_lifecycle, claim_plan
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import consumer as consumer_mod
from sriov_dra.driver.managed import ensure as ensure_mod
from sriov_dra.driver.managed import (
    host_gate,
    lock_order,
    observe,
    planning,
    pod_selections,
    release,
    seams,
)
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import views
from sriov_dra.servicekit import fanout
from sriov_dra_rules import errors

LOG = logging.getLogger(__name__)


class ManagedAttach:
    """Auto-attach for one node; thread-safe (state lives in the store and the API).

    ``node_uid`` reads the Node's current UID for the identity check of every prepare and repair
    pass (docs/design.md#consumer); ``None`` trusts ``node.uid`` as recorded (tests, benchmarks).
    ``max_in_flight`` bounds the API requests one step issues at once (the source reads of a plan,
    the shadow ensures of a claim, the shadow reads, deletions and finalizer removals of a
    release; ``fanout``; ``--api-max-in-flight``).
    """

    def __init__(
        self,
        *,
        node: seams.NodeIdentity,
        devices: seams.DeviceSource,
        pods: seams.PodApi,
        nads: seams.NadApi,
        claims: seams.ClaimApi,
        store: seams.Store,
        locks: lock_order.OperationLocks,
        clock: seams.Clock | None = None,
        reporter: observe.Reporter | None = None,
        backoff: pod_selections.Backoff = pod_selections.DEFAULT_BACKOFF,
        node_uid: consumer_mod.NodeUidReader | None = None,
        max_in_flight: int = fanout.DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        self.node = node
        self.node_uid = node_uid
        self.max_in_flight = max_in_flight
        self.devices = devices
        self.pods = pods
        self.nads = nads
        self.claims = claims
        self.store = store
        self.locks = locks
        self.clock: seams.Clock = clock if clock is not None else seams.SystemClock()
        self.reporter = reporter if reporter is not None else observe.Reporter(None, observe.ManagedMetrics())
        self.backoff = backoff

    # ---------------------------------------------------------------- prepare
    def verify(
        self, claim: Mapping[str, object], plan: claim_plan.ClaimPlan, *, new_prepare: bool
    ) -> consumer_mod.Consumer:
        """Verify the claim's consumer Pod (see ``consumer.verify_consumer``)."""
        return consumer_mod.verify_consumer(
            claim, plan, pods=self.pods, node=self.node, new_prepare=new_prepare, node_uid=self.node_uid
        )

    def check_node(self) -> None:
        """The Node's current UID is still the recorded one (see ``consumer.check_node_identity``).

        Raises: ContractViolation when it is not; ``kube.errors`` classes for a live Node read.
        """
        if self.node_uid is not None:
            consumer_mod.check_node_identity(self.node, self.node_uid())

    def plan(
        self, claim: Mapping[str, object], plan: claim_plan.ClaimPlan, consumer: consumer_mod.Consumer
    ) -> planning.ManagedPlan:
        """Plan a first managed prepare (see ``planning.plan_bindings``); nothing is changed."""
        return planning.plan_bindings(
            claim,
            plan,
            consumer,
            node=self.node,
            devices=self.devices,
            nads=self.nads,
            claims=self.claims,
            store=self.store,
            max_in_flight=self.max_in_flight,
        )

    def reverify(
        self, pod_uid: str, claim_refs: list[tuple[str, str]]
    ) -> Callable[[Mapping[str, object]], None]:
        """A check for a Pod re-read after a conflict: same UID and node, not terminating, and each
        of ``claim_refs`` (namespace, name) still reserved for it (docs/design.md#prepare)."""

        def check(pod: Mapping[str, object]) -> None:
            view = views.decode_pod(pod)
            label = f"Pod {view.meta.ref}"
            if view.meta.uid != pod_uid or view.node_name != self.node.name:
                raise errors.InvalidSpec(
                    f"{label} was replaced or moved while its networks were published (uid "
                    f"{view.meta.uid or None}, node {view.node_name or None}); nothing more is written to it",
                    reason=errors.Reason.INVALID_CONSUMER,
                )
            if view.meta.deleting:
                raise errors.LifecycleBlocked(
                    f"{label} started terminating; its networks are not published any more",
                    reason=errors.Reason.CLAIM_RELEASE_IN_PROGRESS,
                )
            for namespace, name in claim_refs:
                claim = views.decode_claim(self.claims.get(namespace, name))
                if pod_uid not in {r.uid for r in claim.reserved_for}:
                    raise errors.InvalidSpec(
                        f"ResourceClaim {namespace}/{name} is no longer reserved for {label}; nothing more is "
                        "written to the Pod",
                        reason=errors.Reason.INVALID_CONSUMER,
                    )

        return check

    def host_stages_due(self, consumer: consumer_mod.Consumer, claim_uid: str) -> list[model.ClaimRecord]:
        """Begin the ensure pass of a prepare whose host step for ``claim_uid`` just completed.

        Returns the Pod's other forward records with a ``Pending`` binding (a sibling whose
        prepare died between its checkpoint and its host step): the caller runs their host step
        next and hands the failures to :meth:`ensure_shadows` as ``held``.
        Raises: LifecycleBlocked(ClaimReleaseInProgress) when the claim's record is being
        released; ContractViolation when the claim has no managed record (an old checkpoint on
        an enabled node: drain and recreate, docs/design.md#prepare).
        """
        record = self.store.snapshot_claim(claim_uid)
        if record is None or not record.managed_bindings():
            raise errors.ContractViolation(
                f"claim {claim_uid} has no managed bindings in the checkpoint; a record from before "
                "--multus-auto-attach was enabled cannot be attached: drain the node and recreate the Pod"
            )
        if checkpoint_lifecycle.release_in_progress(record):
            raise errors.LifecycleBlocked(
                f"claim {record.namespace}/{record.name} ({claim_uid}) is being released; retry after it finishes",
                reason=errors.Reason.CLAIM_RELEASE_IN_PROGRESS,
            )
        return host_gate.host_stages_due(
            self.store, views.decode_meta(consumer.pod).uid, done=frozenset({claim_uid})
        )

    def ensure_shadows(
        self,
        pod: Mapping[str, object],
        *,
        held: Mapping[identities.ClaimUid, Exception],
        nads: seams.NadApi | None = None,
    ) -> ensure_mod.Shadowed:
        """Steps 1–2 of the ensure pass for the verified live ``pod`` (``ensure.ensure_shadows``).

        ``held`` are the claims whose host step failed: not published, reported failed
        (``host_gate``). ``nads`` replaces the attach's NAD API for this call (the repair pass's
        one-LIST view, ``listed_shadows``). The caller holds the claim and Pod operation locks.
        Never raises per claim.
        """
        return ensure_mod.ensure_shadows(
            pod,
            node=self.node,
            store=host_gate.GatedStore(self.store, held) if held else self.store,
            nads=nads if nads is not None else self.nads,
            clock=self.clock,
            backoff=self.backoff,
            max_in_flight=self.max_in_flight,
            failed=held,
        )

    def publish(self, shadowed: ensure_mod.Shadowed) -> ensure_mod.EnsureResult:
        """Steps 3–4 of the ensure pass: the Pod patch, then ``Ready`` (``ensure.publish``)."""
        return ensure_mod.publish(
            shadowed,
            node=self.node,
            store=self.store,
            pods=self.pods,
            reverify=self.reverify(views.decode_meta(shadowed.pod).uid, list(shadowed.forward)),
            clock=self.clock,
            backoff=self.backoff,
        )

    def conclude(
        self, result: ensure_mod.EnsureResult, consumer: consumer_mod.Consumer, claim_uid: str
    ) -> ensure_mod.EnsureResult:
        """Report a prepare's ensure pass on its Pod (:meth:`note`); raise ``claim_uid``'s failure.

        Raises: the claim's own failure from the pass (its state kept for the retry).
        """
        self.note(result, namespace=consumer.namespace, name=consumer.name, uid=consumer.uid)
        failure = result.failed.get(identities.ClaimUid(claim_uid))
        if failure is not None:
            raise failure
        return result

    def ensure_pod(
        self,
        pod: Mapping[str, object],
        *,
        host: host_gate.HostStage,
        nads: seams.NadApi | None = None,
    ) -> ensure_mod.EnsureResult:
        """The repair worker's host-gated ensure pass for the verified live ``pod``.

        Completes the host stage of the Pod's ``Pending`` records (``host``), then ensures and
        publishes only those whose host stage is complete; the others are reported failed. The
        caller holds the claim and Pod operation locks. Never raises per claim.
        """
        held = host_gate.complete_host_stages(self.store, views.decode_meta(pod).uid, host)
        return self.publish(self.ensure_shadows(pod, held=held, nads=nads))

    def note(self, result: ensure_mod.EnsureResult, *, namespace: str, name: str, uid: str) -> None:
        """Report an ensure pass: a Warning Event per failure, a Normal Event when claims got Ready."""
        for _claim_uid, exc in sorted(result.failed.items()):
            self.reporter.failure("ensure", exc, kind=observe.POD, namespace=namespace, name=name, uid=uid)
        if result.ready and (result.created or result.patched):
            self.reporter.event(
                observe.POD,
                namespace,
                name,
                uid,
                reason=observe.REASON_READY,
                note=f"managed networks published for claims {', '.join(result.ready)}"
                + (f"; shadows created: {', '.join(result.created)}" if result.created else ""),
                warning=False,
                action="Prepare",
            )

    # ---------------------------------------------------------------- release
    def release(
        self,
        record: model.ClaimRecord,
        *,
        release_host: release.HostRelease | None,
        clear_status: release.StatusClear | None = None,
    ) -> release.ReleaseResult:
        """ReleaseManagedClaim for ``record`` (see ``release.release_managed_claim``)."""
        try:
            result = release.release_managed_claim(
                record,
                store=self.store,
                nads=self.nads,
                pods=self.pods,
                claims=self.claims,
                release_host=release_host,
                clear_status=clear_status,
                clock=self.clock,
                backoff=self.backoff,
                max_in_flight=self.max_in_flight,
            )
        except (errors.SriovDraError, kube_errors.ApiError, OSError) as exc:
            self.reporter.failure(
                "release",
                exc,
                kind=observe.CLAIM,
                namespace=record.namespace,
                name=record.name,
                uid=record.claim_uid,
            )
            raise
        self.reporter.event(
            observe.CLAIM,
            record.namespace,
            record.name,
            record.claim_uid,
            reason=observe.REASON_RELEASED,
            note=f"managed networks of Pod {record.pod_uid} released; shadows finalized: {', '.join(result.finalized)}",
            warning=False,
            action="Unprepare",
        )
        return result

    def discard_unpublished(self, claim_uid: str) -> None:
        """Forget a new record whose hardware step failed (see ``release.discard_unpublished``)."""
        release.discard_unpublished(self.store, claim_uid)
