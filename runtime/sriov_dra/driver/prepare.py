"""NodePrepareResources for SR-IOV VF claims (manual and auto-attach modes), and the kubelet-facing handler.

:class:`DraHandler` implements ``dra_service.ClaimHandler`` for the kubelet (45 s per call,
repeated after restarts): each claim of a call is handled on its own, a failure becomes that
claim's error. :func:`prepare_claim` checks, locks, records, prepares the host and, in auto-attach
mode, hands the claim to ``driver.managed`` (docs/plugin.md, "What prepare does";
docs/design.md#prepare). The record exists before the first host change, so a kill between any
two steps leaves a state the next prepare completes or the next unprepare cleans up.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from sriov_dra.core import identities
from sriov_dra.core.plugin import cdi_spec, checkpoint_lifecycle, claim_plan, device_conditions
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver import claim_context, claim_metadata, unprepare
from sriov_dra.driver.managed import consumer as consumer_mod
from sriov_dra.driver.managed import host_gate, planning
from sriov_dra.driver.managed import service as managed_service
from sriov_dra.host import vf_edits
from sriov_dra.kube import api_time
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kubeletapi import dra_service, messages
from sriov_dra.servicekit import fanout
from sriov_dra_rules import errors

T = TypeVar("T")


def prepare_claim(ctx: claim_context.ClaimContext, ref: messages.ClaimRef) -> messages.Prepared:
    """Prepare one claim and return its devices.

    The steps of docs/design.md#prepare, grouped as they appear in this function:

    1. **Read and check** (no lock, no change): live GET of the claim, then
       ``core.plugin.claim_plan``; in release-only mode (``ctx.gate_closed``) a claim without a
       record is refused here.
    2. **Lock** the claim UID, then the consumer Pod UID (``driver.locks``; never the reverse).
    3. **Checkpoint first**: a claim without a record gets one persisted before any host change
       (frozen VfConfig, original driver, CDI IDs; in auto-attach mode the ``Pending`` bindings).
    4. **Host**: bind the VF drivers, write the claim CDI spec, rebuild the Pod CDI spec from
       every locally unreleased claim of the Pod; each step idempotent.
    5. *Auto-attach only*: the consumer Pod was verified before the locks; still under both
       locks, on the first and the retry path alike, the shadows are ensured, the Pod patched
       and ``Ready`` persisted (docs/design.md#prepare). A sibling claim with ``Pending``
       bindings is published only after its own host stage succeeded
       (``driver.managed.host_gate``).
    6. Upsert this driver's ``status.devices`` entries (best effort, other drivers' kept, still
       under the locks); in auto-attach mode beside the Pod patch
       (:func:`_ensure_managed`).
    7. Write the device metadata files and their mounts (``driver.claim_metadata``; their own
       failures leave the request without a mount and never fail the prepare). Unlock and answer.

    A claim with a record (a retry, a kubelet restart) skips step 3 and re-runs step 4 against
    the record, which changes nothing when everything is in place. Recording first keeps a crash
    from leaving an unrecorded driver change; no binding is published or ``Ready`` before its
    host stage completed, on every path that publishes. A step-4 failure
    of a *new* record is rolled back here (drivers restored, CDI removed, record deleted last);
    on the retry path the state is kept, as an earlier success may be in use.

    Shapes: one ``Device`` per prepared VF, in allocation order, with ``pool_name`` = node name,
    ``request_names`` top-level, ``cdi_device_ids`` = (claim device, Pod device), plus the
    request's device metadata ID on its first device.
    Raises: ``kube.errors.ApiError`` classes for the claim GET; InvalidSpec (InvalidClaim,
    InvalidVfConfig, DuplicateInterfaceName, ConflictingDeviceRequirements,
    UnsupportedVfDriver); LifecycleBlocked (ClaimReleaseInProgress) while another Pod's record
    for the claim UID exists; LifecycleBlocked (AutoAttachGateClosed) for a claim without a record
    in release-only mode (``ctx.gate_closed``); ``vf_driver_binding.DriverBindError``; ContractViolation for unwritable
    CDI content; ``OSError`` for checkpoint/CDI writes.
    """
    with ctx.tickets.ticket(ref.uid) as overtaken:
        return _prepare_claim(ctx, ref, overtaken)


def _prepare_claim(
    ctx: claim_context.ClaimContext, ref: messages.ClaimRef, overtaken: Callable[[], bool]
) -> messages.Prepared:
    claim = ctx.claims.get(ref.namespace, ref.name)
    plan = claim_plan.plan_claim(
        claim,
        expected_uid=ref.uid,
        driver_name=ctx.driver_name,
        pool_name=ctx.node_name,
        known_devices=ctx.inventory.vfs().keys(),
    )
    if ctx.gate_closed and ctx.store.snapshot_claim(plan.claim_uid) is None:
        raise _gate_closed(ctx, plan)
    managed = ctx.managed
    consumer = None
    if managed is not None:  # docs/design.md#consumer: the live consumer Pod, before any lock or change
        consumer = managed.verify(claim, plan, new_prepare=ctx.store.snapshot_claim(plan.claim_uid) is None)
    with ctx.claim_locks.hold(plan.claim_uid), ctx.pod_locks.hold(plan.pod_uid):
        if overtaken():
            raise errors.LifecycleBlocked(
                f"ResourceClaim {plan.namespace}/{plan.name} ({plan.claim_uid}): NodeUnprepareResources "
                "for this claim ran while this prepare was reading it; nothing was prepared; if the "
                "claim is still in use, the kubelet prepares it again",
                reason=errors.Reason.CLAIM_RELEASE_IN_PROGRESS,
            )
        record = ctx.store.snapshot_claim(plan.claim_uid)
        if record is None:
            managed_plan = managed.plan(claim, plan, consumer) if managed and consumer else None
            record = _prepare_new(ctx, plan, managed_plan)
        else:
            _check_retry(plan, record)
            ensure_host(ctx, record)
        if managed is not None and consumer is not None:  # shadows, Pod patch, Ready: first and retry alike
            _ensure_managed(ctx, managed, consumer, record, claim)
            record = ctx.store.snapshot_claim(plan.claim_uid) or record
        else:
            update_status(ctx, record, claim)
        ctx.fault("prepare:status")
        metadata_ids = claim_metadata.write_claim_metadata(ctx, record, claim)
    return prepared_result(record, metadata_ids)


def _gate_closed(ctx: claim_context.ClaimContext, plan: claim_plan.ClaimPlan) -> errors.LifecycleBlocked:
    """The refusal of a new claim in release-only mode (``core.plugin.auto_attach_gate``); once every
    recorded binding is released it also says that release-only has nothing left and how it ends."""
    drained = not any(r.managed_bindings() for r in ctx.store.all_claims().values())
    done = (
        ". Every auto-attached binding of this node is released now: run the preflight again (playbooks/preflight.yml), "
        "which restarts this plugin in manual mode, or in full auto-attach once every check passes"
    )
    return errors.LifecycleBlocked(
        f"ResourceClaim {plan.namespace}/{plan.name} ({plan.claim_uid}) of Pod {plan.namespace}/{plan.pod_name}: "
        f"this node prepares no new claim while its auto-attach gate is closed; nothing was changed. "
        f"{ctx.gate_closed}{done if drained else ''}",
        reason=errors.Reason.AUTO_ATTACH_GATE_CLOSED,
    )


def _ensure_managed(
    ctx: claim_context.ClaimContext,
    managed: managed_service.ManagedAttach,
    consumer: consumer_mod.Consumer,
    record: model.ClaimRecord,
    claim: Mapping[str, object],
) -> None:
    """Steps 5 and 6 of a managed prepare whose host step for ``record`` just completed, in order.

    1. the host step of the Pod's sibling claims with ``Pending`` bindings (a claim whose host
       step fails is held: not published, reported failed, ``driver.managed.host_gate``);
    2. the shadows of the Pod's forward claims and their durable UIDs;
    3. the Pod patch and ``Ready``, with this claim's ``status.devices`` write beside the patch
       when its shadows exist (joined before the ensure pass is reported, see below);
    4. the pass reported on the Pod; this claim's failure raised.

    Why the status write may overlap the Pod patch (claim status is diagnostic, best effort, never
    a connectivity barrier: docs/design.md#prepare):

    - *Content*: the entries come from ``record.devices`` (pool, device, frozen VfConfig), fixed
      when the record was first persisted, and from the claim read in step 1; the shadows, the
      Pod patch and ``Ready`` change only the managed bindings, so writing earlier writes the
      same entries.
    - *Truth*: it starts only for a claim whose host stage completed (this handler ran
      :func:`ensure_host` before) and whose shadows exist. After the ``Pending`` checkpoint the
      hardware is never rolled back (failures keep the state, the kubelet's unprepare is the
      cleanup: docs/design.md#prepare), so the entries describe prepared devices even when the
      Pod patch or the ``Ready`` write then fails and the prepare returns an error.
    - *Cleanup*: unprepare clears the entries before it drops the record (``unprepare``, and
      the last step of a managed release, ``release``), so an entry written by a prepare that failed
      later is removed with the record; a retry finds it in place and writes nothing.
    - *Lifetime*: it is joined after ``Ready`` is persisted (which does not wait for it) and
      before this returns, while this handler still holds the claim and Pod locks: no status
      write outlives the prepare or overtakes an unprepare. A hang is bounded by the claim
      client's request timeout. With ``--api-max-in-flight 1`` it runs after ``Ready``.
    - *Failure*: :func:`update_status` never raises; a failed write changes no outcome.
    """
    held: dict[identities.ClaimUid, Exception] = {}
    for other in managed.host_stages_due(consumer, record.claim_uid):
        try:
            ensure_host(ctx, other)
        except Exception as exc:  # kept for that claim: it stays Pending and unpublished
            held[other.claim_uid] = host_gate.hold(other, exc)
    shadowed = managed.ensure_shadows(consumer.pod, held=held)
    status = (
        [functools.partial(update_status, ctx, record, claim)] if shadowed.publishes(record.claim_uid) else []
    )
    beside = fanout.start(status, max_in_flight=managed.max_in_flight)
    try:  # the Pod patch on this thread, the status write on a worker meanwhile
        result = managed.publish(shadowed)
    finally:  # joined on every path: no status write outlives the locks
        written = beside.wait()
    for outcome in written:
        if outcome.error is not None:  # best effort by contract: noted, never the claim's failure
            ctx.log.warning(
                "claim status write beside the Pod patch failed",
                extra={"claim_uid": record.claim_uid, "op": "prepare", "reason": str(outcome.error)},
            )
    managed.conclude(result, consumer, record.claim_uid)


def prepared_result(
    record: model.ClaimRecord, metadata_ids: Mapping[str, str] | None = None
) -> messages.Prepared:
    """The kubelet answer for a recorded claim: its devices with top-level request names.

    ``metadata_ids`` (top-level request → device metadata CDI ID) go to the first device of
    each request, as the kubelet-plugin helper places them; the kubelet passes a device's IDs to
    every container using its request.
    """
    pending = dict(metadata_ids or {})
    devices: list[messages.Device] = []
    for d in record.devices:
        extra = tuple(pending.pop(r) for r in d.request_names if r in pending)
        devices.append(
            messages.Device(
                pool_name=d.pool,
                device_name=d.device,
                request_names=d.request_names,
                cdi_device_ids=d.cdi_device_ids + extra,
            )
        )
    return messages.Prepared(tuple(devices))


def _requested_driver(device: model.PreparedDevice) -> str:
    value = device.vf_config.get("driver")
    return value if isinstance(value, str) else ""


def _new_record(ctx: claim_context.ClaimContext, plan: claim_plan.ClaimPlan) -> model.ClaimRecord:
    """The record of a first prepare, with original drivers read now (before any change)."""
    inventory = ctx.inventory.vfs()
    devices: list[model.PreparedDevice] = []
    for planned in plan.devices:
        pci = inventory[planned.device].pci_address
        requested = planned.config.driver
        original = ctx.binder.current_driver(pci) if requested else None
        config: model.JsonObject = {
            k: v for k, v in planned.config.to_json().items() if isinstance(v, str | bool)
        }
        devices.append(
            model.PreparedDevice(
                request_names=planned.request_names,
                pool=planned.pool,
                device=planned.device,
                pci_address=identities.PciAddress(pci),
                original_driver=original or "",
                vf_config=config,
                interface_name=planned.config.if_name,
                cdi_device_ids=cdi_spec.prepared_device_ids(plan.claim_uid, plan.pod_uid, planned.device),
                net_attach_def_config="",
            )
        )
    return model.ClaimRecord(
        claim_uid=plan.claim_uid,
        namespace=plan.namespace,
        name=plan.name,
        pod_uid=plan.pod_uid,
        devices=tuple(devices),
    )


def _check_not_in_use(ctx: claim_context.ClaimContext, record: model.ClaimRecord) -> None:
    """Refuse a VF that another claim's record still holds (the scheduler allocates exclusively)."""
    wanted = {(d.pool, d.device) for d in record.devices}
    for other in ctx.store.all_claims().values():
        taken = sorted(f"{p}/{d}" for p, d in wanted & {(x.pool, x.device) for x in other.devices})
        if taken and other.claim_uid != record.claim_uid:
            raise errors.LifecycleBlocked(
                f"ResourceClaim {record.namespace}/{record.name}: VF {', '.join(taken)} is still prepared "
                f"for claim {other.namespace}/{other.name} ({other.claim_uid}); it becomes available once "
                "that claim is unprepared",
                reason=errors.Reason.CLAIM_RELEASE_IN_PROGRESS,
            )


def _prepare_new(
    ctx: claim_context.ClaimContext,
    plan: claim_plan.ClaimPlan,
    managed_plan: planning.ManagedPlan | None = None,
) -> model.ClaimRecord:
    """Steps 3-4 for a claim without a record: persist, then change the host; roll back on failure.

    In auto-attach mode the first record already carries the ``Pending`` bindings of
    ``managed_plan``; a rollback here happens before any shadow or Pod write.
    """
    record = _new_record(ctx, plan)
    if managed_plan is not None:
        record = managed_plan.attach(record)
    _check_not_in_use(ctx, record)
    ctx.store.set_claim(record)
    ctx.fault("prepare:checkpointed")
    try:
        ensure_host(ctx, record)
    except Exception as exc:
        rollback = _rollback_new(ctx, record)
        if rollback is None:
            raise
        reason = exc.reason if isinstance(exc, errors.SriovDraError) else None
        raise errors.SriovDraError(
            f"{exc}; rolling back failed too ({rollback}); the checkpoint record is kept and the next "
            "NodePrepareResources or NodeUnprepareResources finishes the work",
            reason=reason,
        ) from exc
    return record


def _rollback_new(ctx: claim_context.ClaimContext, record: model.ClaimRecord) -> str | None:
    """Undo a failed first prepare: drivers, then CDI files, then the record (last). Returns the
    rollback failure text, or None when the node is back as it was."""
    try:
        unprepare.release_host(ctx, record)
        if ctx.managed is not None and record.managed_bindings():
            ctx.managed.discard_unpublished(record.claim_uid)
        else:
            ctx.store.delete_claim(record.claim_uid)
    except Exception as exc:
        ctx.log.error(
            "prepare rollback failed",
            extra={
                "claim_uid": record.claim_uid,
                "pod_uid": record.pod_uid,
                "op": "prepare",
                "reason": str(exc),
            },
        )
        return str(exc)
    return None


def _check_retry(plan: claim_plan.ClaimPlan, record: model.ClaimRecord) -> None:
    """A recorded claim may be prepared again only for the same Pod and the same allocation."""
    label = f"ResourceClaim {plan.namespace}/{plan.name}"
    if record.pod_uid != plan.pod_uid:
        raise errors.LifecycleBlocked(
            f"{label} ({plan.claim_uid}) is still prepared for Pod {record.pod_uid}; Pod {plan.pod_uid} "
            "must wait until the kubelet unprepares it for the old Pod",
            reason=errors.Reason.CLAIM_RELEASE_IN_PROGRESS,
        )
    if checkpoint_lifecycle.release_in_progress(record):
        raise errors.LifecycleBlocked(
            f"{label} ({plan.claim_uid}) is being released; it cannot be prepared until that finishes",
            reason=errors.Reason.CLAIM_RELEASE_IN_PROGRESS,
        )
    recorded = sorted((d.pool, d.device) for d in record.devices)
    allocated = sorted((d.pool, d.device) for d in plan.devices)
    if recorded != allocated:
        raise errors.InvalidSpec(
            f"{label} ({plan.claim_uid}) was prepared for devices {recorded} but is now allocated "
            f"{allocated}; the kubelet must unprepare it before the new allocation can be prepared",
            reason=errors.Reason.INVALID_CLAIM,
        )


def ensure_host(ctx: claim_context.ClaimContext, record: model.ClaimRecord) -> None:
    """Step 4: make drivers and CDI specs match ``record``; idempotent, no write when in place.

    Raises: ``vf_driver_binding.UnsupportedVfDriver`` / ``vf_driver_binding.DriverBindError``; ContractViolation or
    ``OSError`` from the CDI writer.
    """
    for device in record.devices:
        bound = ctx.binder.apply(
            device.pci_address, _requested_driver(device), require_netdevice=ctx.require_netdevice
        )
        if bound.changed and (bound.original_driver or "") != device.original_driver:
            ctx.log.warning(
                "vf driver differs from the recorded original",
                extra={
                    "claim_uid": record.claim_uid,
                    "pci": device.pci_address,
                    "op": "prepare",
                    "reason": f"found {bound.original_driver}, recorded {device.original_driver or None}",
                },
            )
    ctx.fault("prepare:bound")
    edits = [
        vf_edits.vf_edits(
            ctx.sysfs,
            d.pci_address,
            device=d.device,
            net_attach_def_name=str(d.vf_config.get("netAttachDefName") or ""),
            vhost=d.vf_config.get("addVhostMount") is True,
            log=ctx.log,
        )
        for d in record.devices
    ]
    ctx.cdi.write_claim_spec(record.claim_uid, edits)
    ctx.fault("prepare:claim-cdi")
    pod_records = ctx.store.snapshot_pod(record.pod_uid).values()
    ctx.cdi.sync_pod_spec(
        record.pod_uid, checkpoint_lifecycle.pod_cdi_pci_addresses(pod_records, record.pod_uid)
    )
    ctx.fault("prepare:pod-cdi")


def status_entries(driver_name: str, record: model.ClaimRecord, now: str) -> list[dict[str, object]]:
    """This driver's ``status.devices`` entries for a prepared claim (``data`` = VfConfig,
    ``Ready=True`` at ``now`` unless it already was)."""
    ready = [device_conditions.ready(now)]
    return [
        claim_plan.status_entry(driver_name, d.pool, d.device, d.vf_config, ready) for d in record.devices
    ]


def update_status(
    ctx: claim_context.ClaimContext, record: model.ClaimRecord, claim: Mapping[str, object] | None
) -> None:
    """Best-effort upsert of this driver's ``status.devices`` entries; never fails the prepare.

    ``claim`` is the object read in step 1 (saves a GET; a conflict re-reads). Nothing is written
    when the entries are already there.
    """
    ours = status_entries(ctx.driver_name, record, api_time.rfc3339())
    unprepare.write_status(ctx, record, ours, current=claim, failure="claim status not updated")


def describe(exc: BaseException) -> tuple[str, str]:
    """``(message, reason)`` of a claim failure for the kubelet and the metrics.

    Shapes: ``reason`` is the ``sriov_dra_rules.errors.Reason`` value of our errors, else the class name.
    """
    reason = str(exc.reason) if isinstance(exc, errors.SriovDraError) else type(exc).__name__
    text = str(exc).strip() or type(exc).__name__
    return text, reason


class DraHandler:
    """The plugin's ``dra_service.ClaimHandler``: prepare/unprepare each claim on its own.

    Concurrency: calls may run in parallel (``KubeletPluginServer(serialize_calls=False)``);
    per-claim and per-Pod operation locks order the work (``driver.locks``).
    """

    def __init__(self, ctx: claim_context.ClaimContext) -> None:
        self._ctx = ctx

    @property
    def context(self) -> claim_context.ClaimContext:
        """The context this handler works with."""
        return self._ctx

    def prepare_resources(
        self, claims: Sequence[messages.ClaimRef]
    ) -> Mapping[str, dra_service.PrepareValue]:
        """Prepare every claim; a failure is that claim's ``ClaimError``, never the batch's."""
        out: dict[str, dra_service.PrepareValue] = {}
        for ref in claims:
            out[ref.uid] = self._run("prepare", ref, prepare_claim)
        return out

    def unprepare_resources(
        self, claims: Sequence[messages.ClaimRef]
    ) -> Mapping[str, dra_service.UnprepareValue]:
        """Unprepare every claim; an unknown claim succeeds; a failure stays with its claim."""
        out: dict[str, dra_service.UnprepareValue] = {}
        for ref in claims:
            result = self._run("unprepare", ref, unprepare.unprepare_claim)
            out[ref.uid] = result if isinstance(result, messages.ClaimError) else None
        return out

    def _run(
        self,
        op: str,
        ref: messages.ClaimRef,
        work: Callable[[claim_context.ClaimContext, messages.ClaimRef], T],
    ) -> T | messages.ClaimError:
        log = self._ctx.log
        started = time.monotonic()
        try:
            result = work(self._ctx, ref)
        except Exception as exc:
            message, reason = describe(exc)
            unexpected = not isinstance(exc, errors.SriovDraError | OSError | kube_errors.ApiError)
            log.log(
                logging.ERROR if unexpected else logging.WARNING,
                f"{op} failed",
                exc_info=exc if unexpected else None,
                extra={
                    "claim": f"{ref.namespace}/{ref.name}",
                    "claim_uid": ref.uid,
                    "op": op,
                    "reason": reason,
                },
            )
            self._ctx.metrics.observe_claim(op, "error", reason, time.monotonic() - started)
            return messages.ClaimError(f"{ref}: {message}")
        self._ctx.metrics.observe_claim(op, "ok", "", time.monotonic() - started)
        log.info(f"{op} done", extra={"claim": f"{ref.namespace}/{ref.name}", "claim_uid": ref.uid, "op": op})
        return result
