"""Claim ``status.devices[].networkData`` of a Pod's published managed VFs.

The repair worker calls :meth:`NetworkDataWriter.write` with a Pod it verified on this node, every
full pass and, between passes, when the Pod's ``network-status`` changed. For each record whose
bindings are all ``Ready``, the recorded shadow and interface of each device are correlated with
network-status (``core.plugin.claim_network_data``) and merged into this driver's existing
entries through the UID/resourceVersion-checked update; nothing is written when nothing changed.
Diagnostic: failures are logged once per change and swallowed; no entry is added or removed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.core.plugin import claim_network_data
from sriov_dra.driver.managed import observe, seams
from sriov_dra.kube import api_time, views
from sriov_dra_rules import errors, names

LOG = logging.getLogger(__name__)


@dataclass
class WriteReport:
    """What one :meth:`NetworkDataWriter.write` did, by claim UID (for tests and logs)."""

    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    """Records not published yet (a binding not ``Ready``) or of another Pod."""


def network_status_of(pod: Mapping[str, object]) -> str | None:
    """The Pod's network-status annotation value, or ``None`` when it has none."""
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    value = annotations.get(names.NETWORK_STATUS_ANNOTATION) if isinstance(annotations, Mapping) else None
    return value if isinstance(value, str) else None


def attachments(record: model.ClaimRecord) -> list[claim_network_data.Attachment]:
    """The record's managed VFs as ``core.plugin.claim_network_data`` attachments (shadow, interface, subnets)."""
    return [
        claim_network_data.Attachment(
            pool=d.pool,
            device=d.device,
            network=f"{d.managed.shadow_namespace}/{d.managed.shadow_name}",
            interface=d.managed.interface,
            subnets=claim_network_data.ipam_subnets(d.managed.rendered_config),
        )
        for d in record.devices
        if d.managed is not None
    ]


def published(record: model.ClaimRecord) -> bool:
    """True when the record has managed bindings and every one is ``Ready``."""
    bindings = record.managed_bindings()
    return bool(bindings) and all(b.phase is model.Phase.READY for b in bindings)


class NetworkDataWriter:
    """Fills ``networkData`` from network-status for the claims of one Pod at a time.

    Thread-safety: called from the repair worker's thread only (it holds the claim and Pod
    operation locks around each call).
    """

    def __init__(self, *, claims: seams.ClaimStatusApi, driver_name: str = names.DRIVER_NAME) -> None:
        self.claims = claims
        self.driver_name = driver_name
        self._noted: dict[str, str] = {}
        """Last problem logged per claim UID (or ``pod/<uid>``), so a pass repeats no warning."""

    def write(
        self,
        pod: Mapping[str, object],
        records: Sequence[model.ClaimRecord],
        *,
        current: Mapping[str, Mapping[str, object]] | None = None,
    ) -> WriteReport:
        """Merge the Pod's network-status into each published record's claim; never raises.

        ``current`` maps a claim UID to a claim object already read (saves its GET).
        Shapes: ``pod`` the Pod JSON (live or from the Pod watch); ``records`` its checkpoint
        records (others are skipped).
        """
        report = WriteReport()
        meta = views.decode_meta(pod)
        pod_uid, label = meta.uid, f"Pod {meta.ref}"
        mine = [r for r in records if r.pod_uid == pod_uid and published(r)]
        report.skipped = [r.claim_uid for r in records if r not in mine]
        if not mine:
            return report
        try:
            ours = {a.network for r in mine for a in attachments(r)}
            entries = claim_network_data.decode_network_status(network_status_of(pod), pod=label, ours=ours)
        except errors.SriovDraError as exc:
            self._note(f"pod/{pod_uid}", str(exc), pod_uid=pod_uid)
            report.failed.update({r.claim_uid: str(exc.reason) for r in mine})
            return report
        self._noted.pop(f"pod/{pod_uid}", None)
        for record in mine:
            self._write_claim(record, entries, (current or {}).get(record.claim_uid), report)
        return report

    def _write_claim(
        self,
        record: model.ClaimRecord,
        entries: Sequence[claim_network_data.StatusEntry],
        current: Mapping[str, object] | None,
        report: WriteReport,
    ) -> None:
        claim = f"{record.namespace}/{record.name}"
        try:
            results = claim_network_data.correlate(entries, attachments(record))
            problems = [
                f"{key[1]}: {r.problem}" for key, r in sorted(results.items()) if r.problem is not None
            ]
            missing = [f"{ip} ({key[1]})" for key, r in sorted(results.items()) for ip in r.unprefixed]
            note = "; ".join(problems)
            if missing:
                note += ("; " if note else "") + (
                    f"addresses left out of networkData.ips (no subnet in the shadow's IPAM config contains "
                    f"them, and network-status carries no prefix): {', '.join(missing)}"
                )
            if note:
                self._note(record.claim_uid, note, pod_uid=record.pod_uid, claim=claim)
            else:
                self._noted.pop(record.claim_uid, None)

            now = api_time.rfc3339()

            def compute(existing: object) -> list[dict[str, object]] | None:
                return claim_network_data.merged_network_data(
                    existing, results, driver_name=self.driver_name, now=now
                )

            wrote = self.claims.update_device_status(
                record.namespace, record.name, uid=record.claim_uid, compute=compute, current=current
            )
        except Exception as exc:  # diagnostic only (docs/design.md#ownership): log, never raise
            report.failed[record.claim_uid] = observe.reason_of(exc)
            LOG.warning(
                "claim networkData not updated",
                extra={
                    "claim": claim,
                    "claim_uid": record.claim_uid,
                    "pod_uid": record.pod_uid,
                    "op": "networkData",
                    "reason": str(exc)[:512],
                },
            )
            return
        (report.written if wrote else report.unchanged).append(record.claim_uid)
        if wrote:
            LOG.info(
                "claim networkData updated",
                extra={
                    "claim": claim,
                    "claim_uid": record.claim_uid,
                    "pod_uid": record.pod_uid,
                    "op": "networkData",
                },
            )

    def _note(self, key: str, text: str, *, pod_uid: str, claim: str = "") -> None:
        if self._noted.get(key) == text:
            return
        self._noted[key] = text
        LOG.warning(
            "network-status not usable for claim networkData",
            extra={"claim": claim, "pod_uid": pod_uid, "op": "networkData", "reason": text[:1024]},
        )

    def forget(self, keep_claim_uids: AbstractSet[str], keep_pod_uids: AbstractSet[str]) -> None:
        """Drop remembered problems of claims and Pods no longer recorded (bounds the memory)."""
        for key in list(self._noted):
            uid = key.removeprefix("pod/")
            if uid not in (keep_pod_uids if key.startswith("pod/") else keep_claim_uids):
                del self._noted[key]
