"""NodeUnprepareResources for SR-IOV VF claims (manual MULTUS mode).

Caller: ``driver.prepare.DraHandler`` on the kubelet's call after the Pod's containers stopped
(45 s deadline; repeated until it succeeds, also for claims that are no longer prepared). The
claim may already be deleted: everything is done from the checkpoint record, keyed by claim UID.

Unpreparing one claim (:func:`unprepare_claim`), in this order:

1. Lock the claim UID; read its record. No record: success, nothing to do (unknown claim).
2. Lock the record's Pod UID (claim lock first, never the reverse).
3. *Auto-attach only*: a record with managed bindings goes through ``ctx.managed.release``
   (spec §8.4: ``Deleting`` first, shadows, Pod selections, this module's host step,
   ``ReleaseComplete``, finalizers, this module's status step, record last). Without
   auto-attach such a record is refused rather than half-released.
4. **Host** (:func:`release_host`): restore each VF's original driver (only where a driver was
   requested), remove the claim CDI spec, rebuild the Pod CDI spec from the Pod's other locally
   unreleased claims or remove it after the last one.
5. Remove this driver's ``status.devices`` entries from the claim (best-effort; a deleted or
   replaced claim needs nothing). This runs before the record goes, so a kill cannot leave
   stale entries behind that no later call would remove.
6. **Forget**: delete this claim's record only (the Pod's other claims stay), then unlock.

Crash safety: the record is deleted last, so a kill before step 6 leaves it, and the kubelet's
next unprepare repeats steps 4-5, every part of which is idempotent (a driver already restored, a
file already gone, entries already removed, are no-ops). A driver that cannot be restored keeps the record and the CDI
files and fails the claim, so nothing is forgotten while the host still differs.

It must never release hardware for a claim it has no record of, nor touch another claim's record.
Source: spec §6.3, §8.4 steps 4, 5, 9; reference ``dra-protocol.md`` §3.4, §9.3.
"""

from __future__ import annotations

from collections.abc import Mapping

from sriov_dra.core.plugin import checkpoint_lifecycle, claim_plan
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver import claim_context
from sriov_dra.host import vf_driver_binding
from sriov_dra.kubeletapi import messages
from sriov_dra_rules import errors


def unprepare_claim(ctx: claim_context.ClaimContext, ref: messages.ClaimRef) -> None:
    """Release one claim as the module docstring describes; an unknown claim succeeds.

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
            with ctx.pod_locks.hold(record.pod_uid):  # spec §8.4: Deleting first, record deleted last
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
            release_host(ctx, record)
            clear_status(ctx, record)
            ctx.fault("unprepare:status")
            ctx.store.delete_claim(record.claim_uid)
            ctx.fault("unprepare:forgotten")


def release_host(ctx: claim_context.ClaimContext, record: model.ClaimRecord) -> None:
    """Step 4: original drivers back, claim CDI spec removed, Pod CDI spec rebuilt or removed.

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
    as the warning ``failure`` with the claim and the reason (diagnostic status is best-effort,
    spec §6.3 and §8.1 step 5). Used by prepare (set) and unprepare (clear).
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
