"""The consumer-side interfaces of the auto-attach path, and the node identity it works for.

Every orchestration function in ``driver.managed`` receives these as keyword-only arguments, so
tests inject each failure of docs/design.md#fault-injection (Forbidden, NotFound, timeout, 409,
422, a failed checkpoint write, a crash) with fakes from ``tests/fakes/`` and no patching.
Production implementations are the ``sriov_dra.kube`` clients, the checkpoint store and the
policy controller's snapshot; API failures are ``kube.errors`` classes. No state, no work.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from sriov_dra.core import attributes, identities
from sriov_dra.core.plugin import checkpoint_lifecycle
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import multus_layout
from sriov_dra.host import discovery
from sriov_dra.kube import claims as kube_claims
from sriov_dra.kube import plugin_events

JsonObject = dict[str, object]


@dataclass(frozen=True)
class NodeIdentity:
    """The node this plugin serves, recorded once at startup.

    Shapes: ``name`` the Node name (also the pool name); ``uid`` the Node's lowercase UUID;
    ``multus`` where the node's Multus delegate layout is read (Multus's defaults unless the
    plugin settings say otherwise).
    The Node's current UID must equal ``uid``, the identity this process recorded
    (docs/design.md#consumer); ``multus`` feeds docs/design.md#interface-names.
    """

    name: str
    uid: identities.NodeUid
    multus: multus_layout.LayoutSource = multus_layout.DEFAULT_SOURCE


class PodApi(Protocol):
    """Live Pod reads and the conditional annotation patch (``kube.pod_patch.PodClient``)."""

    def get(self, namespace: str, name: str) -> JsonObject:
        """Live GET. Raises: ``kube.errors`` classes (NotFound, Forbidden, ServerError, ...)."""
        ...

    def json_patch(self, namespace: str, name: str, ops: Sequence[Mapping[str, object]]) -> JsonObject:
        """RFC 6902 patch. Raises: ``kube.errors.Invalid`` for a failed ``test``, and the rest."""
        ...


class NadApi(Protocol):
    """NAD reads and shadow writes (``kube.nad_client.NadClient``)."""

    def get(self, namespace: str, name: str) -> JsonObject:
        """Live GET. Raises: ``kube.errors`` classes."""
        ...

    def create(self, body: Mapping[str, object]) -> JsonObject:
        """Create the complete object. Raises: ``kube.errors.Conflict`` (already exists), ..."""
        ...

    def delete(self, namespace: str, name: str, *, uid: str) -> None:
        """Delete with a UID precondition. Raises: NotFound; Conflict when the UID differs."""
        ...

    def json_patch(self, namespace: str, name: str, ops: Sequence[Mapping[str, object]]) -> JsonObject:
        """RFC 6902 patch on the main endpoint. Raises: ``kube.errors.Invalid`` for a failed test."""
        ...

    def list_all(self, *, label_selector: str) -> list[JsonObject]:
        """One all-namespace LIST narrowed by labels. Raises: ``kube.errors`` classes."""
        ...


class ClaimApi(Protocol):
    """Live ResourceClaim reads (``kube.claims.ClaimClient``)."""

    def get(self, namespace: str, name: str) -> JsonObject:
        """Live GET. Raises: ``kube.errors`` classes."""
        ...


class ClaimStatusApi(ClaimApi, Protocol):
    """Live ResourceClaim reads and this driver's ``status.devices`` writes (``kube.claims.ClaimClient``)."""

    def update_device_status(
        self,
        namespace: str,
        name: str,
        *,
        uid: str,
        compute: kube_claims.StatusCompute,
        current: Mapping[str, object] | None = None,
    ) -> bool:
        """Conflict-safe write of ``compute(status.devices)``; True when it wrote."""
        ...


class Store(Protocol):
    """The checkpoint mutations and snapshots the auto-attach path uses (``host.checkpoint``)."""

    def snapshot_claim(self, claim_uid: str) -> model.ClaimRecord | None:
        """A copy of the claim's record, or ``None``."""
        ...

    def snapshot_pod(self, pod_uid: str) -> dict[identities.ClaimUid, model.ClaimRecord]:
        """Copies of every record of the Pod, by claim UID."""
        ...

    def all_claims(self) -> dict[identities.ClaimUid, model.ClaimRecord]:
        """Copies of every record, by claim UID."""
        ...

    def set_claim(self, record: model.ClaimRecord) -> model.ClaimRecord:
        """Persist a record (claim-UID uniqueness enforced). Raises: LifecycleBlocked, OSError."""
        ...

    def update_managed_bindings(
        self, claim_uid: str, update: checkpoint_lifecycle.BindingUpdate
    ) -> model.ClaimRecord:
        """Persist a narrow update (phase Pending↔Ready, shadow UID), durably. Raises: OSError, ..."""
        ...

    def mark_managed_deleting(self, claim_uid: str) -> model.ClaimRecord:
        """Persist ``Deleting``. Raises: OSError (memory unchanged)."""
        ...

    def mark_managed_release_complete(self, claim_uid: str) -> model.ClaimRecord:
        """Persist ``ReleaseComplete``. Raises: OSError (bindings stay ``Deleting``)."""
        ...

    def delete_claim(self, claim_uid: str) -> bool:
        """Remove the record (only when every binding is ``ReleaseComplete``)."""
        ...


class Clock(Protocol):
    """Monotonic time and waiting (a fake clock in tests: no real sleeps)."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""
        ...


class SystemClock:
    """The real :class:`Clock`."""

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """``time.sleep(seconds)``."""
        time.sleep(seconds)


class DeviceView(Protocol):
    """One immutable device snapshot: eligibility and attributes read together
    (docs/design.md#eligibility)."""

    @property
    def inventory(self) -> Mapping[str, discovery.DiscoveredVf]:
        """Every discovered VF by device name (never shrinks with policy)."""
        ...

    def is_eligible(self, device: str) -> bool:
        """True when the device is advertised now (the first-prepare gate)."""
        ...

    def attributes_of(self, device: str) -> Mapping[str, attributes.AttributeValue] | None:
        """Published attributes of an advertised device, ``None`` otherwise."""
        ...


class DeviceSource(Protocol):
    """Hands out the current :class:`DeviceView` (``PolicyController``/``Publisher``)."""

    def snapshot(self) -> DeviceView:
        """The current snapshot; one call is one atomic read."""
        ...


class EventSink(Protocol):
    """Creates Kubernetes Events (``kube.plugin_events.EventRecorder``); best effort."""

    def emit(
        self, ref: plugin_events.ObjectRef, *, reason: str, note: str, warning: bool, action: str
    ) -> None:
        """Create one Event. Raises: ``kube.errors`` classes (callers log and continue)."""
        ...
