"""The kubelet's side of DRA plugin discovery, registration and calls, for the lab and tests.

Owns what the kubelet's plugin watcher and DRA plugin client do on the wire: find registration
sockets in the registry directory (unix sockets only, names starting with ``.`` ignored, walked
recursively), the registration handshake (``GetInfo``, validation, then
``NotifyRegistrationStatus``), the choice of DRA service version (the first entry of the plugin's
list that the kubelet supports, so v1 when the plugin lists it first), and one long-lived
connection per plugin for NodePrepare/NodeUnprepare with the kubelet's 45 s deadline and its
response checks (no unknown claim UID, no missing claim). Which claims to send, and when, is
:mod:`sriov_dra_lab.kubelet`'s job. Never starts a plugin and never writes in the registry.

Upstream: kubernetes ``pkg/kubelet/pluginmanager`` and ``pkg/kubelet/cm/dra`` (v1.36).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from sriov_dra.kubeletapi import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    drahealth_v1alpha1_pb2,
    drahealth_v1alpha1_pb2_grpc,
    endpoints,
    messages,
    pluginregistration_v1_pb2,
    pluginregistration_v1_pb2_grpc,
)
from sriov_dra_rules import errors


@dataclass(frozen=True)
class KubeletTimeouts:
    """The kubelet's deadlines, in seconds; the defaults are the 1.36 kubelet's.

    Units: every field is seconds.
    """

    dial_s: float = endpoints.REGISTRATION_DIAL_TIMEOUT_S
    """Connecting to a new registration socket."""
    get_info_s: float = endpoints.GET_INFO_TIMEOUT_S
    """The ``GetInfo`` call."""
    notify_s: float = endpoints.NOTIFY_TIMEOUT_S
    """The ``NotifyRegistrationStatus`` call."""
    call_s: float = endpoints.PREPARE_CALL_TIMEOUT_S
    """Each NodePrepareResources / NodeUnprepareResources call."""


@dataclass(frozen=True)
class RegisteredPlugin:
    """A DRA plugin the kubelet accepted.

    Shapes: ``endpoint`` is the DRA socket to dial (the registration socket when the plugin left
    ``endpoint`` empty); ``service`` is the chosen DRA version; ``supported_versions`` is the
    plugin's list as sent.
    """

    driver_name: str
    endpoint: Path
    service: endpoints.DraService
    supported_versions: tuple[str, ...]
    registration_socket: Path


@dataclass(frozen=True)
class HealthReport:
    """One device's entry in a health stream message.

    Units: ``last_updated_s`` is Unix seconds; ``timeout_s`` seconds (0 = kubelet default).
    Shapes: ``health`` is the enum name, ``"UNKNOWN"``, ``"HEALTHY"`` or ``"UNHEALTHY"``.
    """

    device: messages.DeviceId
    health: str
    last_updated_s: int
    timeout_s: int
    message: str


def scan_registry(registry_dir: Path) -> list[Path]:
    """Every registration socket under ``registry_dir``, as the kubelet's plugin watcher sees them.

    Shapes: sorted absolute paths; unix sockets only; entries whose name starts with ``.`` (files
    and directories) are skipped; a missing directory gives ``[]``.
    Source: kubelet ``pluginmanager/pluginwatcher`` (walk at start, inotify after).
    """
    found: list[Path] = []
    for root, dirs, files in os.walk(registry_dir):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.startswith("."):
                continue
            path = Path(root) / name
            try:
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    found.append(path)
            except FileNotFoundError:
                continue
    return sorted(found)


def wait_for_new_socket(
    registry_dir: Path,
    *,
    known: Collection[Path] = (),
    timeout_s: float,
    poll_s: float = 0.02,
    stop: threading.Event | None = None,
) -> Path | None:
    """Poll ``registry_dir`` until a registration socket not in ``known`` appears.

    Units: ``timeout_s`` and ``poll_s`` seconds.
    Shapes: the first new socket (sorted order), or ``None`` on timeout or when ``stop`` is set.
    """
    waiter = stop if stop is not None else threading.Event()
    deadline = time.monotonic() + timeout_s
    while True:
        for path in scan_registry(registry_dir):
            if path not in known:
                return path
        remaining = deadline - time.monotonic()
        if remaining <= 0 or waiter.wait(min(poll_s, remaining)):
            return None


def select_service(driver_name: str, supported_versions: Sequence[str]) -> endpoints.DraService:
    """Pick the DRA service the kubelet will call: the plugin's first entry that the kubelet supports.

    Raises: ``ContractViolation`` (reason ``UnsupportedVersion``) if no entry is supported,
    including an empty list.
    Source: kubelet ``pkg/kubelet/cm/dra/plugin`` ``validateSupportedServices``.
    """
    known = {service.value: service for service in endpoints.DraService}
    for version in supported_versions:
        if version in known:
            return known[version]
    raise errors.ContractViolation(
        f"DRA plugin {driver_name!r}: none of the advertised services {list(supported_versions)} "
        f"(PluginInfo.supported_versions) is supported by the kubelet, which supports "
        f"{[s.value for s in endpoints.DraService]}; advertise 'v1.DRAPlugin' first",
        reason=errors.Reason.UNSUPPORTED_VERSION,
    )


def _validate(info: pluginregistration_v1_pb2.PluginInfo, registration_socket: Path) -> RegisteredPlugin:
    if info.type != endpoints.PLUGIN_TYPE_DRA:
        raise errors.ContractViolation(
            f"plugin at {registration_socket}: PluginInfo.type is {info.type!r}, the kubelet has no "
            f"handler for it; a DRA plugin must send {endpoints.PLUGIN_TYPE_DRA!r}"
        )
    if not info.name:
        raise errors.ContractViolation(
            f"plugin at {registration_socket}: PluginInfo.name is empty; send the DRA driver name"
        )
    service = select_service(info.name, list(info.supported_versions))
    return RegisteredPlugin(
        driver_name=info.name,
        endpoint=Path(info.endpoint) if info.endpoint else registration_socket,
        service=service,
        supported_versions=tuple(info.supported_versions),
        registration_socket=registration_socket,
    )


def register_plugin(
    registration_socket: Path, *, timeouts: KubeletTimeouts | None = None
) -> RegisteredPlugin:
    """Run the kubelet's registration handshake against one registration socket.

    Order: connect, ``GetInfo``, validate (type, name, service version), then
    ``NotifyRegistrationStatus(plugin_registered=True)``; on a validation failure the plugin is
    told ``plugin_registered=False`` with the reason before this raises.

    Raises: ``ContractViolation`` if the plugin's answer is not acceptable (reason
    ``UnsupportedVersion`` for the service list); ``grpc.FutureTimeoutError`` if the socket does
    not accept a connection within the dial timeout; ``grpc.RpcError`` if a call fails.
    """
    timeouts = timeouts if timeouts is not None else KubeletTimeouts()
    channel = grpc.insecure_channel(endpoints.grpc_target(registration_socket))
    try:
        grpc.channel_ready_future(channel).result(timeout=timeouts.dial_s)
        stub = pluginregistration_v1_pb2_grpc.RegistrationStub(channel)
        info = stub.GetInfo(pluginregistration_v1_pb2.InfoRequest(), timeout=timeouts.get_info_s)
        try:
            plugin = _validate(info, registration_socket)
        except errors.SriovDraError as exc:
            status = pluginregistration_v1_pb2.RegistrationStatus(plugin_registered=False, error=str(exc))
            # A plugin answers a rejection with an error; the rejection is what matters here.
            with contextlib.suppress(grpc.RpcError):
                stub.NotifyRegistrationStatus(status, timeout=timeouts.notify_s)
            raise
        stub.NotifyRegistrationStatus(
            pluginregistration_v1_pb2.RegistrationStatus(plugin_registered=True), timeout=timeouts.notify_s
        )
        return plugin
    finally:
        channel.close()


def _check_entries(
    method: str, plugin: RegisteredPlugin, claims: Sequence[messages.ClaimRef], keys: Collection[str]
) -> None:
    requested = {c.uid for c in claims}
    unknown = sorted(set(keys) - requested)
    if unknown:
        raise errors.ContractViolation(
            f"{method} of DRA driver {plugin.driver_name} returned results for unknown claim UIDs "
            f"{unknown}; the response map must be keyed by the requested claim UIDs only"
        )
    missing = sorted(requested - set(keys))
    if missing:
        raise errors.ContractViolation(
            f"{method} of DRA driver {plugin.driver_name} skipped {len(missing)} claims {missing}; "
            "the response map needs one entry per requested claim, even an empty one"
        )


def unregistered(
    driver_name: str,
    sockets: endpoints.PluginSockets,
    supported_versions: Sequence[str],
    service: endpoints.DraService = endpoints.DraService.V1,
) -> RegisteredPlugin:
    """The plugin served at ``sockets`` as if the kubelet had registered it (for a direct client)."""
    return RegisteredPlugin(
        driver_name=driver_name,
        endpoint=sockets.dra,
        service=service,
        supported_versions=tuple(supported_versions),
        registration_socket=sockets.registration,
    )


class DraPluginClient:
    """One long-lived connection to a registered plugin's DRA socket, using its chosen version.

    Units: ``call_timeout_s`` is the per-call deadline in seconds (kubelet: 45).
    """

    def __init__(self, plugin: RegisteredPlugin, *, call_timeout_s: float = endpoints.PREPARE_CALL_TIMEOUT_S):
        self.plugin = plugin
        self._call_timeout_s = call_timeout_s
        self._channel = grpc.insecure_channel(endpoints.grpc_target(plugin.endpoint))
        self._v1 = plugin.service is endpoints.DraService.V1
        stub_class = dra_v1_pb2_grpc.DRAPluginStub if self._v1 else dra_v1beta1_pb2_grpc.DRAPluginStub
        self._stub = stub_class(self._channel)

    def node_prepare_resources(
        self, claims: Sequence[messages.ClaimRef]
    ) -> dict[str, messages.PrepareOutcome]:
        """Call NodePrepareResources with ``claims``; return the outcome per claim UID.

        Raises: ``grpc.RpcError`` if the call fails (the kubelet then ignores the response);
        ``ContractViolation`` if the response names an unknown claim UID or skips a claim.
        """
        request: dra_v1_pb2.NodePrepareResourcesRequest | dra_v1beta1_pb2.NodePrepareResourcesRequest
        if self._v1:
            request = dra_v1_pb2.NodePrepareResourcesRequest(claims=[messages.claim_to_v1(c) for c in claims])
        else:
            request = dra_v1beta1_pb2.NodePrepareResourcesRequest(
                claims=[messages.claim_to_v1beta1(c) for c in claims]
            )
        response = self._stub.NodePrepareResources(request, timeout=self._call_timeout_s)
        outcomes = messages.prepare_outcomes_from_wire(response)
        _check_entries("NodePrepareResources", self.plugin, claims, outcomes.keys())
        return outcomes

    def node_unprepare_resources(
        self, claims: Sequence[messages.ClaimRef]
    ) -> dict[str, messages.UnprepareOutcome]:
        """Call NodeUnprepareResources with ``claims``; return ``None`` or the error per claim UID.

        Raises: as :meth:`node_prepare_resources`.
        """
        request: dra_v1_pb2.NodeUnprepareResourcesRequest | dra_v1beta1_pb2.NodeUnprepareResourcesRequest
        if self._v1:
            request = dra_v1_pb2.NodeUnprepareResourcesRequest(
                claims=[messages.claim_to_v1(c) for c in claims]
            )
        else:
            request = dra_v1beta1_pb2.NodeUnprepareResourcesRequest(
                claims=[messages.claim_to_v1beta1(c) for c in claims]
            )
        response = self._stub.NodeUnprepareResources(request, timeout=self._call_timeout_s)
        outcomes = messages.unprepare_outcomes_from_wire(response)
        _check_entries("NodeUnprepareResources", self.plugin, claims, outcomes.keys())
        return outcomes

    def watch_health(self, *, reports: int, timeout_s: float) -> list[tuple[HealthReport, ...]]:
        """Open the health stream, read ``reports`` messages, then cancel it.

        Units: ``timeout_s`` seconds for the whole stream.
        Shapes: one tuple of device reports per message; fewer than ``reports`` if the plugin
        ended the stream first.
        Raises: ``grpc.RpcError`` if the stream fails (its deadline included).
        """
        stub = drahealth_v1alpha1_pb2_grpc.DRAResourceHealthStub(self._channel)
        call = stub.NodeWatchResources(drahealth_v1alpha1_pb2.NodeWatchResourcesRequest(), timeout=timeout_s)
        received: list[tuple[HealthReport, ...]] = []
        try:
            for response in call:
                received.append(tuple(_health_report(d) for d in response.devices))
                if len(received) >= reports:
                    break
        finally:
            call.cancel()
        return received

    def close(self) -> None:
        """Close the connection."""
        self._channel.close()


def _health_report(entry: drahealth_v1alpha1_pb2.DeviceHealth) -> HealthReport:
    return HealthReport(
        device=messages.DeviceId(pool_name=entry.device.pool_name, device_name=entry.device.device_name),
        health=drahealth_v1alpha1_pb2.HealthStatus.Name(entry.health),
        last_updated_s=entry.last_updated_time,
        timeout_s=entry.health_check_timeout_seconds,
        message=entry.message,
    )
