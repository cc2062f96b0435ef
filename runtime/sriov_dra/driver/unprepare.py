"""NodeUnprepareResources for SR-IOV VF claims, in manual and auto-attach mode.

Called through ``driver.prepare.DraHandler`` after the Pod's containers stopped (45 s per call,
repeated until it succeeds, also for claims no longer prepared). The claim may be gone:
:func:`unprepare_claim` works from the checkpoint record, keyed by claim UID, and deletes the
record last, so a kill leaves it for the next call to finish; every step is idempotent
(docs/plugin.md, "What prepare does"; docs/design.md#release). Never releases hardware of a claim
it has no record of, or touches another claim's record.
"""

from __future__ import annotations

from collections.abc import Mapping

from sriov_dra.core.plugin import checkpoint_lifecycle, claim_plan
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver import claim_context, claim_metadata
from sriov_dra.host import vf_driver_binding
from sriov_dra.kubeletapi import messages
from sriov_dra.servicekit import fanout
from sriov_dra_rules import errors


def unprepare_claim(ctx: claim_context.ClaimContext, ref: messages.ClaimRef) -> None:
    """Release one claim; an unknown claim succeeds.

    1. Lock the claim UID; read its record (none: nothing to do).
    2. Lock the record's Pod UID (claim lock first, never the reverse).
    3. *Auto-attach only*: a record with managed bindings goes through ``ctx.managed.release``
       (docs/design.md#release), which calls steps 4 and 5 in its place; without auto-attach it
       is refused rather than half-released.
    4. **Host** (:func:`release_host`): restore each VF's original driver (where one was
       requested), remove the claim CDI spec and the device metadata files, rebuild or remove
       the Pod CDI spec.
    5. Remove this driver's ``status.devices`` entries (best effort), before the record goes, so
       a kill cannot leave entries no later call would remove. Without auto-attach it runs on a
       worker beside step 4 (neither reads what the other writes) and is joined before step 6.
    6. **Forget**: delete this claim's record only, then unlock.

    A driver that cannot be restored keeps the record and the CDI files and fails the claim, so
    nothing is forgotten while the host still differs.

    Raises: LifecycleBlocked for a record with managed bindings when auto-attach is off;
    ``vf_driver_binding.DriverBindError`` when a driver cannot be restored (record kept);
    ``OSError`` from CDI or checkpoint writes (record kept).
    """
    with ctx.claim_locks.hold(ref.uid):
        overtaken = ctx.tickets.overtake(ref.uid)  # a prepare still reading this claim must stop
        record = ctx.store.snapshot_claim(ref.uid)
        if record is None:
            ctx.log.info(
                "unprepare: claim not prepared",
                extra={"claim_uid": ref.uid, "op": "unprepare", "reason": f"overtook {overtaken} prepares"},
            )
            return
        if (record.namespace, record.name) != (ref.namespace, ref.name):
            ctx.log.warning(
                "unprepare: claim name differs from the record; the UID decides",
                extra={
                    "claim_uid": ref.uid,
                    "op": "unprepare",
                    "reason": f"{record.namespace}/{record.name}",
                },
            )
        if record.managed_bindings() and ctx.managed is not None:
            with ctx.pod_locks.hold(record.pod_uid):  # release order: docs/design.md#release
                ctx.managed.release(
                    record,
                    release_host=lambda r: release_host(ctx, r),
                    clear_status=lambda r: clear_then_fault(ctx, r),
                )
                ctx.fault("unprepare:forgotten")
            return
        if record.managed_bindings():
            raise errors.LifecycleBlocked(
                f"ResourceClaim {record.namespace}/{record.name} ({record.claim_uid}) has auto-attached "
                "network bindings, which only auto-attach mode can release; run the plugin with "
                "--multus-auto-attach",
                reason=errors.Reason.CLAIM_RELEASE_IN_PROGRESS,
            )
        with ctx.pod_locks.hold(record.pod_uid):
            bound = ctx.managed.max_in_flight if ctx.managed is not None else fanout.DEFAULT_MAX_IN_FLIGHT
            beside = fanout.start([lambda: clear_status(ctx, record)], max_in_flight=bound)
            try:  # the host steps here, the status request on a worker meanwhile
                release_host(ctx, record)
            finally:  # joined on every path: no status write outlives the locks
                beside.wait()
            ctx.fault("unprepare:status")
            ctx.store.delete_claim(record.claim_uid)
            ctx.fault("unprepare:forgotten")


def release_host(ctx: claim_context.ClaimContext, record: model.ClaimRecord) -> None:
    """Step 4: original drivers back, claim CDI spec and device metadata removed, Pod CDI spec
    rebuilt or removed.

    Idempotent. Every driver is tried; if any cannot be restored nothing else is removed.
    Raises: ``vf_driver_binding.DriverBindError`` (all failures in one message); ``OSError``.
    """
    failures: list[str] = []
    for device in record.devices:
        requested = device.vf_config.get("driver")
        try:
            ctx.binder.restore(
                device.pci_address,
                requested=requested if isinstance(requested, str) else "",
                original_driver=device.original_driver or None,
            )
        except vf_driver_binding.DriverBindError as exc:
            failures.append(str(exc))
    if failures:
        raise vf_driver_binding.DriverBindError(
            f"ResourceClaim {record.namespace}/{record.name} ({record.claim_uid}): cannot restore the "
            f"original VF drivers ({'; '.join(failures)}); the claim stays recorded and is retried"
        )
    ctx.fault("unprepare:restored")
    ctx.cdi.remove_claim_spec(record.claim_uid)
    claim_metadata.remove_claim_metadata(ctx, record)
    ctx.fault("unprepare:claim-cdi")
    others = ctx.store.snapshot_pod(record.pod_uid).values()
    ctx.cdi.sync_pod_spec(
        record.pod_uid,
        checkpoint_lifecycle.pod_cdi_pci_addresses(others, record.pod_uid, releasing=record.claim_uid),
    )
    ctx.fault("unprepare:pod-cdi")


def clear_then_fault(ctx: claim_context.ClaimContext, record: model.ClaimRecord) -> None:
    """Step 5 of a managed release (its step 9, before the record goes), then the fault point."""
    clear_status(ctx, record)
    ctx.fault("unprepare:status")


def clear_status(ctx: claim_context.ClaimContext, record: model.ClaimRecord) -> None:
    """Best-effort removal of this driver's ``status.devices`` entries; other drivers' stay."""
    write_status(ctx, record, [], current=None, failure="claim status not cleared")


def write_status(
    ctx: claim_context.ClaimContext,
    record: model.ClaimRecord,
    ours: list[dict[str, object]],
    *,
    current: Mapping[str, object] | None,
    failure: str,
) -> None:
    """Best-effort write of ``ours`` as this driver's ``status.devices`` entries of the claim.

    Other drivers' entries stay (``claim_plan.merged_status_devices``); ``ours`` empty clears ours.
    ``current`` is the claim already read, or None to GET it. Never raises: any failure is logged
    as the warning ``failure`` with the claim and the reason (diagnostic status is best effort,
    docs/design.md#prepare). Used by prepare (set) and unprepare (clear).
    """
    try:
        ctx.claims.update_device_status(
            record.namespace,
            record.name,
            uid=record.claim_uid,
            compute=lambda existing: claim_plan.merged_status_devices(
                existing, ours, driver_name=ctx.driver_name
            ),
            current=current,
        )
    except Exception as exc:
        ctx.log.warning(
            failure,
            extra={"claim": f"{record.namespace}/{record.name}", "op": "status", "reason": str(exc)},
        )
