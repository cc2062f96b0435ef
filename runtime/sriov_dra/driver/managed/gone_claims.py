"""Records whose claim no longer exists: released by the repair worker after a grace period.

A ``Pending``/``Ready`` record normally goes through the kubelet's unprepare; if that call was
lost, the record would hold its VF for good. A claim is deleted only after no Pod holds it, so a
record whose claim UID the API no longer serves on every pass for :attr:`GoneClaims.grace_s` is
released as the kubelet's unprepare would, with a Warning Event on the claim
(docs/design.md#repair). The grace covers a force-deleted Pod whose containers still run; the
first sighting lives in memory. Never releases a record whose claim was seen since.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sriov_dra.core.plugin import checkpoint_lifecycle
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import observe, release, service

REASON_CLAIM_GONE = "ClaimGoneReleased"
"""Event reason of a release the repair worker made because the record's claim no longer exists."""


@dataclass
class GoneClaims:
    """When each record's claim was first seen gone, by claim UID (monotonic seconds)."""

    grace_s: float
    since: dict[str, float] = field(default_factory=dict)

    def seen_gone(self, claim_uid: str, now: float) -> bool:
        """Note that the claim of ``claim_uid`` is gone now; True once it was gone for the grace."""
        first = self.since.setdefault(claim_uid, now)
        return now - first >= self.grace_s

    def seen_present(self, claim_uid: str) -> None:
        """The claim was read with the recorded UID: its grace starts again at the next absence."""
        self.since.pop(claim_uid, None)

    def forget_except(self, recorded: set[str]) -> None:
        """Drop sightings of claims no record names any more."""
        for uid in [u for u in self.since if u not in recorded]:
            del self.since[uid]


def release_gone(
    attach: service.ManagedAttach,
    record: model.ClaimRecord,
    host_release: release.HostRelease | None,
    clear_status: release.StatusClear | None,
    gone: GoneClaims,
) -> bool:
    """Release ``record`` as the kubelet's unprepare would, under its claim-then-Pod locks.

    Returns False when nothing was released: no host release is wired (it waits), or the record
    changed meanwhile (gone, or a release already under way).
    Raises: what ``ManagedAttach.release`` raises (the record then stays, ``Deleting``).
    """
    if host_release is None:
        return False
    with attach.locks.hold(record.claim_uid, record.pod_uid):
        current = attach.store.snapshot_claim(record.claim_uid)
        if current is None or checkpoint_lifecycle.release_in_progress(current):
            return False
        attach.release(current, release_host=host_release, clear_status=clear_status)
    attach.reporter.event(
        observe.CLAIM,
        record.namespace,
        record.name,
        record.claim_uid,
        reason=REASON_CLAIM_GONE,
        note=f"ResourceClaim {record.namespace}/{record.name} no longer exists, but its record for Pod "
        f"{record.pod_uid} was still held after {gone.grace_s:g} s (its NodeUnprepareResources never came); "
        "its VFs, shadows and selections were released as an unprepare would, so the VFs can be allocated again",
        warning=True,
        action="Release",
    )
    return True
