"""The kubelet simulator's checkpoint: prepared claims and Pod sandboxes that survive its restarts.

A real kubelet keeps its DRA claim cache in a checkpoint file (``dra_manager_state``) and finds
its Pod sandboxes again through the container runtime after a restart, so a restarted kubelet
neither prepares a claim twice nor loses track of a running Pod. The simulator has no runtime to
ask, so this module persists both:

- **claims**: every claim in the DRA manager's cache (namespace, name, UID, drivers, the Pod UIDs
  using it, whether it is prepared), restored into a fresh :class:`CheckpointedDraManager`;
- **sandboxes**: one record per Pod with a network namespace (container ID, netns path, the CNI
  config file used and the ADD result that DEL gets as ``prevResult``, like libcni's cache).

Order rule (callers follow it): the checkpoint is written after the manager's cache changed and
before anything that depends on the change is made visible (a Pod status, a deletion). Writes are
atomic (``host.atomic_file``); an unreadable file is an error, never silently reset.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from sriov_dra.host import atomic_file
from sriov_dra.kubeletapi import messages
from sriov_dra_lab import kubelet

VERSION: Final = 1


class StateCorrupt(ValueError):
    """The simulator's checkpoint cannot be read; the message names the file and the fix."""


@dataclass(frozen=True)
class ClaimRecord:
    """One cached claim (see :class:`sriov_dra_lab.kubelet.KubeletDraManager`)."""

    namespace: str
    name: str
    uid: str
    drivers: tuple[str, ...]
    pod_uids: tuple[str, ...]
    prepared: bool


@dataclass(frozen=True)
class SandboxRecord:
    """One Pod sandbox: its network namespace and the CNI attachment made in it.

    Shapes: ``result`` is the decoded CNI ADD result (``{}`` until ADD succeeded); ``cdi_devices``
    the CDI IDs the kubelet would pass to the runtime, by claim UID.
    """

    pod_namespace: str
    pod_name: str
    pod_uid: str
    container_id: str
    netns: str
    network_file: str
    ifname: str = "eth0"
    result: dict[str, Any] = field(default_factory=dict)
    cdi_devices: dict[str, list[str]] = field(default_factory=dict)


class CheckpointedDraManager(kubelet.KubeletDraManager):
    """The kubelet's DRA manager with an export/restore of its claim cache (the kubelet checkpoint)."""

    def export_claims(self) -> list[ClaimRecord]:
        """The claim cache as records, sorted by namespace/name."""
        with self._lock:
            entries = sorted(self._cache.values(), key=lambda e: (e.claim.namespace, e.claim.name))
            return [
                ClaimRecord(
                    namespace=e.claim.namespace,
                    name=e.claim.name,
                    uid=e.claim.uid,
                    drivers=tuple(e.drivers),
                    pod_uids=tuple(sorted(e.pod_uids)),
                    prepared=e.prepared,
                )
                for e in entries
            ]

    def restore_claims(self, records: list[ClaimRecord]) -> None:
        """Load ``records`` into an empty cache (after a simulator restart).

        Raises: ``ValueError`` if the cache already holds claims.
        """
        with self._lock:
            if self._cache:
                raise ValueError("restore_claims needs an empty claim cache (call it right after start)")
            for rec in records:
                ref = messages.ClaimRef(rec.namespace, rec.name, rec.uid)
                self._cache[(rec.namespace, rec.name)] = kubelet._ClaimEntry(
                    claim=ref, drivers=rec.drivers, pod_uids=set(rec.pod_uids), prepared=rec.prepared
                )


class SimState:
    """The persisted claims and sandboxes of one simulated kubelet (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.claims: list[ClaimRecord] = []
        self.sandboxes: dict[str, SandboxRecord] = {}

    def load(self) -> None:
        """Read the file if it exists. Raises: :class:`StateCorrupt`."""
        raw = atomic_file.read_optional(self.path)
        if raw is None:
            return
        try:
            doc = json.loads(raw)
            if doc.get("version") != VERSION:
                raise ValueError(f"version {doc.get('version')!r}, expected {VERSION}")
            claims = [
                ClaimRecord(
                    namespace=c["namespace"],
                    name=c["name"],
                    uid=c["uid"],
                    drivers=tuple(c["drivers"]),
                    pod_uids=tuple(c["pod_uids"]),
                    prepared=bool(c["prepared"]),
                )
                for c in doc["claims"]
            ]
            sandboxes = {uid: SandboxRecord(**rec) for uid, rec in doc["sandboxes"].items()}
        except (ValueError, KeyError, TypeError) as exc:
            raise StateCorrupt(
                f"kubelet simulator checkpoint {self.path} is unreadable ({exc}); remove it only if no Pod "
                "of this lab node is running (its prepared claims would be prepared again)"
            ) from exc
        with self._lock:
            self.claims, self.sandboxes = claims, sandboxes

    def save(self, claims: list[ClaimRecord] | None = None) -> None:
        """Write the state (replacing the claims when given) atomically."""
        with self._lock:
            if claims is not None:
                self.claims = list(claims)
            doc = {
                "version": VERSION,
                "claims": [asdict(c) for c in self.claims],
                "sandboxes": {uid: asdict(s) for uid, s in sorted(self.sandboxes.items())},
            }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_file.write_atomic(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())

    def put_sandbox(self, record: SandboxRecord) -> None:
        """Remember (or replace) the sandbox of ``record.pod_uid`` and save."""
        with self._lock:
            self.sandboxes[record.pod_uid] = record
        self.save()

    def drop_sandbox(self, pod_uid: str) -> None:
        """Forget the sandbox of ``pod_uid`` (absent is fine) and save."""
        with self._lock:
            self.sandboxes.pop(pod_uid, None)
        self.save()

    def sandbox(self, pod_uid: str) -> SandboxRecord | None:
        """The sandbox record of ``pod_uid``, or ``None``."""
        with self._lock:
            return self.sandboxes.get(pod_uid)

    def all_sandboxes(self) -> list[SandboxRecord]:
        """Every sandbox record, by Pod UID."""
        with self._lock:
            return [self.sandboxes[k] for k in sorted(self.sandboxes)]
