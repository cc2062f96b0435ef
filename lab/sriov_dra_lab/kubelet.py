"""The kubelet's DRA manager, simulated: registered plugins, the claim cache, per-Pod calls.

Owns the kubelet's decisions about *which* claims go to *which* plugin and *when*, so the lab and
the tests drive a plugin exactly as a 1.36 kubelet does:

- Prepare (before the Pod sandbox): every driver of every claim must be registered; a cached
  claim with the same namespace/name but another UID fails the Pod; the Pod's UID is added to
  each claim's cache entry; claims already marked prepared are skipped; then one
  NodePrepareResources call per driver, sorted by driver name, carrying only that Pod's
  not-yet-prepared claims with results from that driver. Processing stops at the first failure
  (gRPC error, contract breach, or any claim's ``error``); claims are marked prepared only when
  every call succeeded. A claim without drivers is marked prepared without a call.
- Unprepare (after the sandbox stopped): a claim still used by another Pod only loses this Pod's
  reference; the others are sent, one call per driver, and leave the cache after every call
  succeeded. Claims the cache does not know are skipped.

Failures are returned as typed :class:`KubeletFailure` values (what the kubelet would put in a
``FailedPrepareDynamicResources`` event), not raised, because the kubelet just retries the Pod
sync. Resolving claims from the API server (names, allocation, reservedFor) is the caller's job;
this module works on :class:`PodClaim` values. The ``prepared`` flag lives only in memory, as in
the kubelet: a new manager (a kubelet restart) prepares again.

Upstream: kubernetes ``pkg/kubelet/cm/dra`` (v1.36).
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from sriov_dra.kubeletapi import messages
from sriov_dra_lab import kubelet_plugins
from sriov_dra_rules import errors


@dataclass(frozen=True)
class PodClaim:
    """One resolved claim of a Pod: its reference and the drivers that have allocation results in it.

    Shapes: ``drivers`` are the distinct ``status.allocation.devices.results[].driver`` values.
    """

    claim: messages.ClaimRef
    drivers: tuple[str, ...]


class FailureKind(enum.StrEnum):
    """Why a Pod's prepare or unprepare failed; the values are stable names for logs and tests."""

    DRIVER_NOT_REGISTERED = "DriverNotRegistered"
    CLAIM_REPLACED = "ClaimReplaced"
    RPC_FAILED = "RpcFailed"
    CONTRACT_VIOLATION = "ContractViolation"
    CLAIM_FAILED = "ClaimFailed"


@dataclass(frozen=True)
class KubeletFailure:
    """A failed Pod prepare/unprepare, worded like the kubelet's event message."""

    kind: FailureKind
    message: str
    driver: str = ""
    claim: messages.ClaimRef | None = None


@dataclass(frozen=True)
class DriverCall:
    """One RPC the manager made: the driver and the claim UIDs it carried, in order."""

    driver: str
    claim_uids: tuple[str, ...]


@dataclass(frozen=True)
class PodPrepareResult:
    """Outcome of :meth:`KubeletDraManager.prepare_pod`.

    Shapes: ``devices`` maps each claim of the Pod to ``{driver: devices}`` as cached (for a
    failure, only what earlier successful calls returned); ``calls`` lists the RPCs made.
    """

    devices: Mapping[messages.ClaimRef, Mapping[str, tuple[messages.Device, ...]]]
    calls: tuple[DriverCall, ...]
    failure: KubeletFailure | None

    @property
    def ok(self) -> bool:
        """True when the Pod's claims are all prepared."""
        return self.failure is None


@dataclass(frozen=True)
class PodUnprepareResult:
    """Outcome of :meth:`KubeletDraManager.unprepare_pod`: claims released (removed from the cache)."""

    released: tuple[messages.ClaimRef, ...]
    calls: tuple[DriverCall, ...]
    failure: KubeletFailure | None

    @property
    def ok(self) -> bool:
        """True when every claim of the Pod was released or handed to its other Pods."""
        return self.failure is None


@dataclass
class _ClaimEntry:
    claim: messages.ClaimRef
    drivers: tuple[str, ...]
    pod_uids: set[str] = field(default_factory=set)
    prepared: bool = False
    devices: dict[str, tuple[messages.Device, ...]] = field(default_factory=dict)


def _key(claim: messages.ClaimRef) -> tuple[str, str]:
    return (claim.namespace, claim.name)


class KubeletDraManager:
    """Registered DRA plugins plus the kubelet's claim cache; see the module docstring for the rules."""

    def __init__(self, *, timeouts: kubelet_plugins.KubeletTimeouts | None = None) -> None:
        self._timeouts = timeouts if timeouts is not None else kubelet_plugins.KubeletTimeouts()
        self._lock = threading.Lock()
        self._clients: dict[str, kubelet_plugins.DraPluginClient] = {}
        self._cache: dict[tuple[str, str], _ClaimEntry] = {}

    # -- plugins --------------------------------------------------------------------------

    def register(self, registration_socket: Path) -> kubelet_plugins.RegisteredPlugin:
        """Register the plugin behind ``registration_socket``; it replaces an earlier instance of its driver.

        Raises: as :func:`sriov_dra_lab.kubelet_plugins.register_plugin`.
        """
        plugin = kubelet_plugins.register_plugin(registration_socket, timeouts=self._timeouts)
        client = kubelet_plugins.DraPluginClient(plugin, call_timeout_s=self._timeouts.call_s)
        with self._lock:
            old = self._clients.get(plugin.driver_name)
            self._clients[plugin.driver_name] = client
        if old is not None:
            old.close()
        return plugin

    def sync_registry(self, registry_dir: Path) -> tuple[list[str], list[str]]:
        """Register plugins whose sockets are new and drop those whose socket disappeared.

        Shapes: ``(registered driver names, deregistered driver names)``.
        Raises: as :meth:`register`, for the first socket that fails.
        """
        present = set(kubelet_plugins.scan_registry(registry_dir))
        with self._lock:
            known = {c.plugin.registration_socket: name for name, c in self._clients.items()}
        removed = [name for sock, name in known.items() if sock not in present]
        for name in removed:
            self.deregister(name)
        added = [self.register(sock).driver_name for sock in sorted(present - set(known))]
        return added, removed

    def wait_for_driver(
        self, registry_dir: Path, driver_name: str, *, timeout_s: float, poll_s: float = 0.02
    ) -> bool:
        """Scan ``registry_dir`` (registering what appears) until ``driver_name`` is registered.

        Units: ``timeout_s`` and ``poll_s`` seconds.
        Shapes: ``True`` once registered, ``False`` after ``timeout_s``.
        Raises: as :meth:`register`.
        """
        pause = threading.Event()
        deadline = time.monotonic() + timeout_s
        while True:
            self.sync_registry(registry_dir)
            if self.plugin(driver_name) is not None:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            pause.wait(min(poll_s, remaining))

    def deregister(self, driver_name: str) -> None:
        """Forget ``driver_name`` and close its connection (its registration socket was deleted)."""
        with self._lock:
            client = self._clients.pop(driver_name, None)
        if client is not None:
            client.close()

    def plugin(self, driver_name: str) -> kubelet_plugins.RegisteredPlugin | None:
        """The registered plugin of ``driver_name``, or ``None``."""
        with self._lock:
            client = self._clients.get(driver_name)
        return client.plugin if client is not None else None

    def client(self, driver_name: str) -> kubelet_plugins.DraPluginClient | None:
        """The connection to ``driver_name``'s plugin (for direct calls in tests), or ``None``."""
        with self._lock:
            return self._clients.get(driver_name)

    def close(self) -> None:
        """Close every plugin connection."""
        with self._lock:
            clients = list(self._clients.values())
            self._clients.clear()
        for client in clients:
            client.close()

    # -- claims ---------------------------------------------------------------------------

    def prepare_pod(self, pod_uid: str, claims: Sequence[PodClaim]) -> PodPrepareResult:
        """Prepare the claims of one Pod, as the kubelet does before creating its sandbox.

        Order: check drivers registered, then update the cache (Pod reference, UID check), then
        one call per driver with the not-yet-prepared claims, then mark every claim prepared.
        """
        calls: list[DriverCall] = []

        def result(failure: KubeletFailure | None) -> PodPrepareResult:
            return PodPrepareResult(devices=self._devices(claims), calls=tuple(calls), failure=failure)

        unregistered = self._first_unregistered(claims)
        if unregistered is not None:
            return result(unregistered)
        batches, replaced = self._reference_claims(pod_uid, claims)
        if replaced is not None:
            return result(replaced)
        for driver in sorted(batches):
            batch = batches[driver]
            calls.append(DriverCall(driver, tuple(c.uid for c in batch)))
            outcomes, failure = self._call(driver, batch, prepare=True)
            if failure is not None:
                return result(failure)
            with self._lock:
                for claim in batch:
                    outcome = outcomes[claim.uid]
                    if isinstance(outcome, messages.Prepared):
                        self._cache[_key(claim)].devices[driver] = outcome.devices
            for claim in batch:
                outcome = outcomes[claim.uid]
                if isinstance(outcome, messages.ClaimError):
                    return result(
                        KubeletFailure(
                            FailureKind.CLAIM_FAILED,
                            f"NodePrepareResources failed for ResourceClaim {claim.namespace}/{claim.name}: "
                            f"{outcome.message}",
                            driver=driver,
                            claim=claim,
                        )
                    )
        with self._lock:
            for pod_claim in claims:
                self._cache[_key(pod_claim.claim)].prepared = True
        return result(None)

    def _first_unregistered(self, claims: Sequence[PodClaim]) -> KubeletFailure | None:
        with self._lock:
            for pod_claim in claims:
                for driver in pod_claim.drivers:
                    if driver not in self._clients:
                        return _not_registered(driver, pod_claim.claim)
        return None

    def _reference_claims(
        self, pod_uid: str, claims: Sequence[PodClaim]
    ) -> tuple[dict[str, list[messages.ClaimRef]], KubeletFailure | None]:
        """Add ``pod_uid`` to each claim's cache entry; batch the unprepared ones per driver.

        Like the kubelet, entries touched before a replaced claim is found keep the reference.
        """
        batches: dict[str, list[messages.ClaimRef]] = {}
        with self._lock:
            for pod_claim in claims:
                claim = pod_claim.claim
                entry = self._cache.get(_key(claim))
                if entry is not None and entry.claim.uid != claim.uid:
                    return batches, KubeletFailure(
                        FailureKind.CLAIM_REPLACED,
                        f"old ResourceClaim with same name {claim.namespace}/{claim.name} and different UID "
                        f"{entry.claim.uid} still exists (previous pod not terminated yet?)",
                        claim=claim,
                    )
                if entry is None:
                    entry = _ClaimEntry(claim=claim, drivers=tuple(sorted(set(pod_claim.drivers))))
                    self._cache[_key(claim)] = entry
                entry.pod_uids.add(pod_uid)
                if not entry.prepared:
                    for driver in entry.drivers:
                        batches.setdefault(driver, []).append(entry.claim)
        return batches, None

    def unprepare_pod(self, pod_uid: str) -> PodUnprepareResult:
        """Unprepare the claims of one Pod, as the kubelet does after its sandbox stopped.

        Order: drop this Pod from claims other Pods still use (no call), then one call per
        driver for the rest, then remove those claims from the cache once every call succeeded.
        """
        calls: list[DriverCall] = []
        batches: dict[str, list[messages.ClaimRef]] = {}
        releasing: list[_ClaimEntry] = []
        with self._lock:
            for entry in self._cache.values():
                if pod_uid not in entry.pod_uids:
                    continue
                if len(entry.pod_uids) > 1:
                    entry.pod_uids.discard(pod_uid)
                    continue
                releasing.append(entry)
                for driver in entry.drivers:
                    batches.setdefault(driver, []).append(entry.claim)
        for driver in sorted(batches):
            batch = batches[driver]
            calls.append(DriverCall(driver, tuple(c.uid for c in batch)))
            outcomes, failure = self._call(driver, batch, prepare=False)
            if failure is None:
                failure = next(
                    (
                        KubeletFailure(
                            FailureKind.CLAIM_FAILED,
                            f"NodeUnprepareResources failed for ResourceClaim {c.namespace}/{c.name}: {error.message}",
                            driver=driver,
                            claim=c,
                        )
                        for c in batch
                        if (error := outcomes[c.uid]) is not None and isinstance(error, messages.ClaimError)
                    ),
                    None,
                )
            if failure is not None:
                return PodUnprepareResult(released=(), calls=tuple(calls), failure=failure)
        with self._lock:
            for entry in releasing:
                self._cache.pop(_key(entry.claim), None)
        return PodUnprepareResult(
            released=tuple(e.claim for e in releasing), calls=tuple(calls), failure=None
        )

    def is_prepared(self, claim: messages.ClaimRef) -> bool:
        """Whether the cache holds ``claim`` (same UID) marked prepared."""
        with self._lock:
            entry = self._cache.get(_key(claim))
            return entry is not None and entry.claim.uid == claim.uid and entry.prepared

    def _devices(
        self, claims: Sequence[PodClaim]
    ) -> dict[messages.ClaimRef, dict[str, tuple[messages.Device, ...]]]:
        with self._lock:
            out: dict[messages.ClaimRef, dict[str, tuple[messages.Device, ...]]] = {}
            for pod_claim in claims:
                entry = self._cache.get(_key(pod_claim.claim))
                if entry is not None and entry.claim.uid == pod_claim.claim.uid:
                    out[pod_claim.claim] = dict(entry.devices)
            return out

    def _call(
        self, driver: str, batch: Sequence[messages.ClaimRef], *, prepare: bool
    ) -> tuple[Mapping[str, messages.PrepareOutcome | messages.UnprepareOutcome], KubeletFailure | None]:
        method = "NodePrepareResources" if prepare else "NodeUnprepareResources"
        with self._lock:
            client = self._clients.get(driver)
        if client is None:
            return {}, _not_registered(driver, batch[0])
        try:
            if prepare:
                return client.node_prepare_resources(batch), None
            return client.node_unprepare_resources(batch), None
        except errors.ContractViolation as exc:
            return {}, KubeletFailure(FailureKind.CONTRACT_VIOLATION, str(exc), driver=driver)
        except grpc.RpcError as exc:
            return {}, KubeletFailure(
                FailureKind.RPC_FAILED,
                f"{method} of DRA driver {driver}: {exc.code()}: {exc.details()}",
                driver=driver,
            )


def _not_registered(driver: str, claim: messages.ClaimRef) -> KubeletFailure:
    return KubeletFailure(
        FailureKind.DRIVER_NOT_REGISTERED,
        f"prepare dynamic resources: DRA driver {driver} is not registered (needed by {claim})",
        driver=driver,
        claim=claim,
    )
