"""A DRA kubelet plugin's two kubelet-facing gRPC servers and their unix sockets (any driver).

The SR-IOV plugin and the lab's GPU driver each start one :class:`KubeletPluginServer` and stop
it on SIGTERM. Ordering: stale sockets are removed, the DRA socket serves **before** the
registration socket appears (the kubelet may call at once); shutdown removes the registration
socket first (the kubelet deregisters), then stops the DRA server with a grace period and
removes its socket. Answers registration (``DRAPlugin``, driver name, socket, services) and
records the kubelet's verdict; claims go to the driver layer's ``ClaimHandler``.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import grpc

from sriov_dra.kubeletapi import (
    dra_service,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2_grpc,
    drahealth_v1alpha1_pb2_grpc,
    endpoints,
    pluginregistration_v1_pb2,
    pluginregistration_v1_pb2_grpc,
)

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class RegistrationState:
    """The kubelet's last verdict on this plugin (``NotifyRegistrationStatus``).

    Shapes: ``error`` is the kubelet's reason when ``registered`` is false, else usually empty.
    """

    registered: bool
    error: str


class _RegistrationServicer:
    """``pluginregistration.Registration``: answers ``GetInfo`` and records the verdict."""

    def __init__(
        self, info: pluginregistration_v1_pb2.PluginInfo, record: Callable[[RegistrationState], None]
    ):
        self._info = info
        self._record = record

    def GetInfo(
        self, request: pluginregistration_v1_pb2.InfoRequest, context: dra_service.RpcContext
    ) -> pluginregistration_v1_pb2.PluginInfo:
        return self._info

    def NotifyRegistrationStatus(
        self, request: pluginregistration_v1_pb2.RegistrationStatus, context: dra_service.RpcContext
    ) -> pluginregistration_v1_pb2.RegistrationStatusResponse:
        state = RegistrationState(registered=request.plugin_registered, error=request.error)
        self._record(state)
        if not state.registered:
            # Like the Go helper: answer a failed registration with an error so it shows up on
            # the kubelet side too.
            context.abort(grpc.StatusCode.UNKNOWN, f"registration failed: {state.error}")
        return pluginregistration_v1_pb2.RegistrationStatusResponse()


class KubeletPluginServer:
    """The DRA service server plus the registration server of one plugin instance.

    ``supported_versions`` advertised in ``GetInfo`` are ``["v1.DRAPlugin", "v1beta1.DRAPlugin"]``,
    plus ``"v1alpha1.DRAResourceHealth"`` when ``health_source`` is given (the health stream is
    then served on the DRA socket). Usable as a context manager (start, then stop).

    Units: ``health_interval_s`` and grace periods in seconds; ``clock`` returns Unix seconds.
    """

    def __init__(
        self,
        *,
        driver_name: str,
        handler: dra_service.ClaimHandler,
        sockets: endpoints.PluginSockets,
        health_source: dra_service.HealthSource | None = None,
        serialize_calls: bool = True,
        max_workers: int = 8,
        health_interval_s: float = 10.0,
        clock: Callable[[], float] = time.time,
        on_registration: Callable[[RegistrationState], None] | None = None,
    ) -> None:
        self.driver_name = driver_name
        self.sockets = sockets
        self._dispatcher = dra_service.ClaimDispatcher(handler, serialize=serialize_calls)
        self._health_source = health_source
        self._health_interval_s = health_interval_s
        self._clock = clock
        self._health: dra_service.HealthServicer | None = None  # one per start, closed by stop
        self.supported_versions: tuple[str, ...] = endpoints.DRA_SUPPORTED_VERSIONS + (
            (endpoints.HEALTH_SERVICE,) if health_source is not None else ()
        )
        self._max_workers = max_workers
        self._on_registration = on_registration
        self._state_lock = threading.Lock()
        self._registration: RegistrationState | None = None
        self._servers: list[tuple[str, grpc.Server, futures.ThreadPoolExecutor, Path]] = []
        self._started = False
        self._stop_lock = threading.Lock()

    # -- registration verdict -------------------------------------------------------------

    @property
    def registration(self) -> RegistrationState | None:
        """The kubelet's last verdict, or ``None`` before it has sent one."""
        with self._state_lock:
            return self._registration

    def _record_registration(self, state: RegistrationState) -> None:
        if state.registered:
            LOG.info("kubelet registered DRA driver %s", self.driver_name)
        else:
            LOG.error(
                "kubelet rejected DRA driver %s: %s", self.driver_name, state.error or "(no reason given)"
            )
        with self._state_lock:
            self._registration = state
        if self._on_registration is not None:
            self._on_registration(state)

    def notify_health(self) -> None:
        """Make every open health stream send a report now; a no-op without a health service."""
        health = self._health
        if health is not None:
            health.notify()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Remove stale sockets, serve the DRA socket, then create the registration socket.

        Raises: ``RuntimeError`` if already started or a socket cannot be bound;
        ``FileExistsError`` if a socket path is taken by something that is not a socket.
        """
        if self._started:
            raise RuntimeError(f"plugin server for {self.driver_name} is already started")
        self._started = True
        try:
            # Registration first: a stale registration socket would make the kubelet dial a dead plugin.
            _remove_stale_socket(self.sockets.registration)
            _remove_stale_socket(self.sockets.dra)
            self._serve(self.sockets.dra, self._add_dra_services, "dra")
            LOG.info(
                "serving %s for %s on %s",
                ", ".join(self.supported_versions),
                self.driver_name,
                self.sockets.dra,
            )
            self._serve(self.sockets.registration, self._add_registration_service, "reg")
            LOG.info("registration socket %s ready", self.sockets.registration)
        except BaseException:
            self.stop(grace_s=0)
            raise

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting calls, let in-flight calls finish for ``grace_s``, and remove the sockets.

        Order: registration server and socket first (the kubelet deregisters the plugin), then the
        health streams, then the DRA server after its grace period, then its socket. Idempotent.
        Returns after about ``grace_s`` even if a handler call is stuck: gRPC cancels the call
        for the kubelet, and the handler's thread is abandoned to finish in the background
        (the driver's state must tolerate that, as it tolerates a crash).

        A call made while another one drains waits for that drain to end (a hand-over and a
        SIGTERM may stop the server from two threads).

        Units: ``grace_s`` seconds.
        """
        with self._stop_lock:
            while self._servers:
                # Last started, first stopped: the registration server goes before the DRA server.
                name, server, executor, path = self._servers.pop()
                if name == "dra" and self._health is not None:
                    self._health.close()
                server.stop(grace_s).wait()
                executor.shutdown(wait=False, cancel_futures=True)
                # gRPC unlinks its unix socket when the listener closes; make sure either way.
                path.unlink(missing_ok=True)
            self._started = False

    def __enter__(self) -> KubeletPluginServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _serve(self, path: Path, add_services: Callable[[grpc.Server], None], name: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        workers = self._max_workers if name == "dra" else 2
        executor = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"kubelet-{name}")
        server = grpc.server(executor)
        add_services(server)
        try:
            server.add_insecure_port(endpoints.grpc_target(path))
        except RuntimeError as exc:
            executor.shutdown(wait=True)
            raise RuntimeError(
                f"cannot listen on unix socket {path} for DRA driver {self.driver_name}: {exc}; "
                "check that the directory is writable and the path is under "
                f"{endpoints.UNIX_PATH_MAX_BYTES} bytes"
            ) from exc
        server.start()
        self._servers.append((name, server, executor, path))

    def _add_dra_services(self, server: grpc.Server) -> None:
        dra_v1_pb2_grpc.add_DRAPluginServicer_to_server(dra_service.DraV1Servicer(self._dispatcher), server)
        dra_v1beta1_pb2_grpc.add_DRAPluginServicer_to_server(
            dra_service.DraV1beta1Servicer(self._dispatcher), server
        )
        if self._health_source is not None:
            self._health = dra_service.HealthServicer(
                self._health_source, interval_s=self._health_interval_s, clock=self._clock
            )
            drahealth_v1alpha1_pb2_grpc.add_DRAResourceHealthServicer_to_server(self._health, server)

    def _add_registration_service(self, server: grpc.Server) -> None:
        info = pluginregistration_v1_pb2.PluginInfo(
            type=endpoints.PLUGIN_TYPE_DRA,
            name=self.driver_name,
            endpoint=str(self.sockets.dra),
            supported_versions=self.supported_versions,
        )
        pluginregistration_v1_pb2_grpc.add_RegistrationServicer_to_server(
            _RegistrationServicer(info, self._record_registration), server
        )


DEAD_SOCKET_MIN_AGE_S = 60.0
"""How old (since its bind) a socket nobody listens on must be before :func:`remove_dead_sockets`
removes it: an instance that is just starting has bound its socket but may not listen yet, which
a connection attempt cannot tell from a killed one."""


def remove_dead_sockets(
    paths: Iterable[Path],
    *,
    keep: Iterable[Path] = (),
    min_age_s: float = DEAD_SOCKET_MIN_AGE_S,
    clock: Callable[[], float] = time.time,
) -> list[Path]:
    """Remove each unix socket of ``paths`` whose owner is gone; return the removed.

    For per-instance sockets a killed instance left behind (it removes its own only when it stops
    cleanly): the kubelet keeps dialling such a registration socket. A socket is gone only when a
    connection is refused **and** it was bound at least ``min_age_s`` ago (``clock``: Unix
    seconds); a socket that accepts a connection, fails any other way, or is younger (an instance
    that bound it and does not listen yet), anything that is not a socket and the ``keep`` paths stay.
    """
    kept = set(keep)
    removed = []
    for path in paths:
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        if path in kept or not stat.S_ISSOCK(info.st_mode) or clock() - info.st_mtime < min_age_s:
            continue
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(1.0)
            try:
                probe.connect(str(path))
                continue
            except ConnectionRefusedError:
                pass
            except OSError:
                continue  # gone meanwhile, busy, or not ours to judge
        LOG.info("removing socket %s of a plugin instance that is gone", path)
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _remove_stale_socket(path: Path) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(
            f"{path} exists and is not a unix socket, so it is not a stale plugin socket; "
            "remove it or configure a different plugin/registry directory"
        )
    LOG.info("removing stale socket %s from a previous run", path)
    path.unlink(missing_ok=True)
