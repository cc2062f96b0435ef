"""The plugin's kubelet-facing servers on real unix sockets (``sriov_dra.kubeletapi.plugin_server``).

Driven by the kubelet-side client of ``sriov_dra_lab`` and by raw generated stubs. Upstream: the
kubelet's plugin registration and DRA gRPC APIs (kubernetes ``pkg/kubelet``, v1.36).
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import threading
from pathlib import Path

import grpc
import pytest
from tests import waiting
from tests.fakes.claim_handler import FakeClaimHandler
from tests.host.kubeletapi.conftest import DRIVER, ServerFactory

from sriov_dra.core import device_health
from sriov_dra.kubeletapi import (
    dra_v1_pb2,
    dra_v1_pb2_grpc,
    dra_v1beta1_pb2,
    dra_v1beta1_pb2_grpc,
    drahealth_v1alpha1_pb2,
    drahealth_v1alpha1_pb2_grpc,
    endpoints,
    messages,
    plugin_server,
    pluginregistration_v1_pb2,
    pluginregistration_v1_pb2_grpc,
)
from sriov_dra_lab import kubelet, kubelet_plugins

A = messages.ClaimRef("ns", "a", "uid-a")
B = messages.ClaimRef("ns", "b", "uid-b")
C = messages.ClaimRef("ns2", "c", "uid-c")
SHARED = messages.Device("pool-a", "vf-0", ("vf",), ("vendor.example.com/vf=uid-a-vf-0",), "share-7")


def _channel(path: Path) -> grpc.Channel:
    return grpc.insecure_channel(endpoints.grpc_target(path))


def _get_info(path: Path) -> pluginregistration_v1_pb2.PluginInfo:
    with _channel(path) as ch:
        info: pluginregistration_v1_pb2.PluginInfo = pluginregistration_v1_pb2_grpc.RegistrationStub(
            ch
        ).GetInfo(pluginregistration_v1_pb2.InfoRequest(), timeout=5)
    return info


def _client(
    server: plugin_server.KubeletPluginServer, service: endpoints.DraService
) -> kubelet_plugins.DraPluginClient:
    plugin = kubelet_plugins.unregistered(DRIVER, server.sockets, server.supported_versions, service)
    return kubelet_plugins.DraPluginClient(plugin, call_timeout_s=10)


# -- registration ---------------------------------------------------------------------------


def test_registration_handshake_registers_plugin_and_server_records_verdict(
    server: plugin_server.KubeletPluginServer, manager: kubelet.KubeletDraManager
) -> None:
    plugin = manager.register(server.sockets.registration)
    assert plugin == kubelet_plugins.RegisteredPlugin(
        driver_name=DRIVER,
        endpoint=server.sockets.dra,
        service=endpoints.DraService.V1,
        supported_versions=("v1.DRAPlugin", "v1beta1.DRAPlugin"),
        registration_socket=server.sockets.registration,
    )
    verdict = waiting.eventually(
        "the kubelet's verdict", lambda: server.registration, timeout_s=5, interval_s=0.01
    )
    assert verdict == plugin_server.RegistrationState(registered=True, error="")


@pytest.mark.parametrize(
    ("with_health", "versions"),
    [
        (False, ["v1.DRAPlugin", "v1beta1.DRAPlugin"]),
        (True, ["v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth"]),
    ],
    ids=["dra-services-only-v1-first", "health-advertised-only-when-served"],
)
def test_get_info_answers_type_name_endpoint_and_versions(
    make_server: ServerFactory, with_health: bool, versions: list[str]
) -> None:
    srv = make_server(health_source=(lambda: []) if with_health else None)
    srv.start()
    info = _get_info(srv.sockets.registration)
    assert info.type == "DRAPlugin"
    assert info.name == DRIVER
    assert info.endpoint == str(srv.sockets.dra) and Path(info.endpoint).is_absolute()
    assert list(info.supported_versions) == versions


def test_failed_registration_is_recorded_surfaced_and_answered_with_an_error(
    make_server: ServerFactory,
) -> None:
    seen: list[plugin_server.RegistrationState] = []
    srv = make_server(on_registration=seen.append)
    srv.start()
    with _channel(srv.sockets.registration) as ch, pytest.raises(grpc.RpcError) as info:
        pluginregistration_v1_pb2_grpc.RegistrationStub(ch).NotifyRegistrationStatus(
            pluginregistration_v1_pb2.RegistrationStatus(
                plugin_registered=False, error="driver already registered"
            ),
            timeout=5,
        )
    assert info.value.code() == grpc.StatusCode.UNKNOWN
    assert "driver already registered" in info.value.details()
    expected = plugin_server.RegistrationState(registered=False, error="driver already registered")
    assert srv.registration == expected
    assert seen == [expected]


def test_no_verdict_before_the_kubelet_calls(server: plugin_server.KubeletPluginServer) -> None:
    assert server.registration is None


# -- socket lifecycle -----------------------------------------------------------------------

IN_CREATE = 0x100


class CreateWatcher:
    """Records files created in some directories, in kernel order (one inotify queue, Linux)."""

    def __init__(self, dirs: list[Path]) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._fd = self._libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self._fd >= 0, os.strerror(ctypes.get_errno())
        self._watches = {self._libc.inotify_add_watch(self._fd, str(d).encode(), IN_CREATE): d for d in dirs}
        assert all(wd >= 0 for wd in self._watches), os.strerror(ctypes.get_errno())

    def created(self) -> list[Path]:
        data = b""
        try:
            while chunk := os.read(self._fd, 65536):
                data += chunk
        except BlockingIOError:
            pass
        created: list[Path] = []
        offset = 0
        while offset < len(data):
            wd, mask, _cookie, length = struct.unpack_from("iIII", data, offset)
            name = data[offset + 16 : offset + 16 + length].rstrip(b"\0").decode()
            if mask & IN_CREATE:
                created.append(self._watches[wd] / name)
            offset += 16 + length
        return created

    def close(self) -> None:
        os.close(self._fd)


def test_dra_socket_is_created_before_the_registration_socket(make_server: ServerFactory) -> None:
    srv = make_server()
    srv.sockets.dra.parent.mkdir(parents=True)
    srv.sockets.registration.parent.mkdir(parents=True)
    watcher = CreateWatcher([srv.sockets.dra.parent, srv.sockets.registration.parent])
    try:
        srv.start()
        created = watcher.created()
    finally:
        watcher.close()
    assert [p for p in created if p.suffix == ".sock"] == [srv.sockets.dra, srv.sockets.registration]


def test_dra_service_answers_as_soon_as_registration_socket_exists(make_server: ServerFactory) -> None:
    srv = make_server()
    started = threading.Thread(target=srv.start, daemon=True)
    started.start()
    waiter = threading.Event()
    for _ in range(5000):  # up to ~10 s on a loaded machine
        if srv.sockets.registration.exists():
            break
        waiter.wait(0.002)
    assert srv.sockets.registration.exists()
    with _channel(srv.sockets.dra) as ch:
        response = dra_v1_pb2_grpc.DRAPluginStub(ch).NodePrepareResources(
            dra_v1_pb2.NodePrepareResourcesRequest(), timeout=5
        )
    assert len(response.claims) == 0
    started.join(5)


def test_stop_removes_both_sockets_and_refuses_connections(
    server: plugin_server.KubeletPluginServer,
) -> None:
    dra, reg = server.sockets.dra, server.sockets.registration
    assert dra.is_socket() and reg.is_socket()
    server.stop(grace_s=1)
    assert not dra.exists() and not reg.exists()
    with _channel(dra) as ch, pytest.raises(grpc.RpcError) as info:
        dra_v1_pb2_grpc.DRAPluginStub(ch).NodePrepareResources(
            dra_v1_pb2.NodePrepareResourcesRequest(), timeout=1
        )
    assert info.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def test_stop_is_idempotent_and_server_restarts_on_the_same_paths(make_server: ServerFactory) -> None:
    srv = make_server(health_source=lambda: [_report("pool-a", "vf-0")], health_interval_s=0.05)
    srv.start()
    srv.stop(grace_s=0)
    srv.stop(grace_s=0)
    srv.start()
    assert _get_info(srv.sockets.registration).name == DRIVER
    client = _client(srv, endpoints.DraService.V1)
    try:
        assert len(client.watch_health(reports=2, timeout_s=10)) == 2
    finally:
        client.close()


def _leave_stale_socket(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.close()  # the file stays behind, like after a crash


def test_stale_sockets_from_a_previous_run_are_replaced(make_server: ServerFactory) -> None:
    srv = make_server()
    _leave_stale_socket(srv.sockets.dra)
    _leave_stale_socket(srv.sockets.registration)
    for stale in (srv.sockets.dra, srv.sockets.registration):
        os.utime(stale, ns=(0, 0))  # mark the leftovers: a fresh socket has a current mtime
    srv.start()
    assert os.stat(srv.sockets.dra).st_mtime_ns != 0
    assert os.stat(srv.sockets.registration).st_mtime_ns != 0
    assert _get_info(srv.sockets.registration).name == DRIVER


def test_non_socket_file_at_socket_path_is_refused_and_nothing_is_left_serving(
    make_server: ServerFactory,
) -> None:
    srv = make_server()
    srv.sockets.registration.parent.mkdir(parents=True)
    srv.sockets.registration.write_text("not a socket")
    with pytest.raises(FileExistsError, match="is not a unix socket"):
        srv.start()
    assert srv.sockets.registration.read_text() == "not a socket"
    assert not srv.sockets.dra.exists()


def test_in_flight_call_finishes_within_the_grace_period(
    server: plugin_server.KubeletPluginServer, handler: FakeClaimHandler
) -> None:
    handler.hold = True
    client = _client(server, endpoints.DraService.V1)
    results: list[object] = []
    call = threading.Thread(target=lambda: results.append(client.node_prepare_resources([A])), daemon=True)
    call.start()
    assert handler.entered.wait(5)
    stopper = threading.Thread(target=server.stop, kwargs={"grace_s": 10}, daemon=True)
    stopper.start()
    stopper.join(0.2)
    assert stopper.is_alive(), "stop returned while a call was in flight inside its grace period"
    handler.release.set()
    call.join(5)
    stopper.join(5)
    client.close()
    assert results == [{"uid-a": messages.Prepared((messages.Device("pool-a", "dev-a"),))}]
    assert not server.sockets.dra.exists()


def test_a_second_stop_waits_for_the_first_ones_drain_and_neither_fails(
    server: plugin_server.KubeletPluginServer, handler: FakeClaimHandler
) -> None:
    """A hand-over and a SIGTERM stop the server from two threads: the later call returns only after the drain."""
    handler.hold = True
    client = _client(server, endpoints.DraService.V1)
    call = threading.Thread(target=client.node_prepare_resources, args=([A],), daemon=True)
    call.start()
    assert handler.entered.wait(5)
    errors: list[BaseException] = []

    def stop() -> None:
        try:
            server.stop(grace_s=10)
        except BaseException as exc:  # an IndexError of two threads popping one list
            errors.append(exc)

    first = threading.Thread(target=stop, daemon=True)
    first.start()
    waiting.eventually(
        "the registration socket removed",
        lambda: not server.sockets.registration.exists(),
        timeout_s=5,
        interval_s=0.01,
    )
    second = threading.Thread(target=stop, daemon=True)
    second.start()
    second.join(0.5)
    assert second.is_alive(), "the second stop returned while the first one still drained a call"
    handler.release.set()
    call.join(5)
    first.join(5)
    second.join(5)
    client.close()
    assert errors == [] and not first.is_alive() and not second.is_alive()
    assert not server.sockets.dra.exists()


# -- DRAPlugin v1 / v1beta1 -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("stub", "request_type"),
    [
        (dra_v1_pb2_grpc.DRAPluginStub, dra_v1_pb2.NodePrepareResourcesRequest),
        (dra_v1_pb2_grpc.DRAPluginStub, dra_v1_pb2.NodeUnprepareResourcesRequest),
        (dra_v1beta1_pb2_grpc.DRAPluginStub, dra_v1beta1_pb2.NodePrepareResourcesRequest),
        (dra_v1beta1_pb2_grpc.DRAPluginStub, dra_v1beta1_pb2.NodeUnprepareResourcesRequest),
    ],
    ids=["v1-prepare", "v1-unprepare", "v1beta1-prepare", "v1beta1-unprepare"],
)
def test_empty_request_succeeds_with_empty_map(
    server: plugin_server.KubeletPluginServer, handler: FakeClaimHandler, stub: type, request_type: type
) -> None:
    method = "NodePrepareResources" if "Unprepare" not in request_type.__name__ else "NodeUnprepareResources"
    with _channel(server.sockets.dra) as ch:
        response = getattr(stub(ch), method)(request_type(), timeout=5)
    assert len(response.claims) == 0
    assert handler.prepare_calls == [] and handler.unprepare_calls == []


@pytest.mark.parametrize("service", list(endpoints.DraService), ids=["v1", "v1beta1"])
def test_response_has_exactly_one_entry_per_requested_claim(
    server: plugin_server.KubeletPluginServer, service: endpoints.DraService
) -> None:
    claims = [messages.ClaimRef("ns", f"c{i}", f"uid-{i}") for i in range(7)]
    client = _client(server, service)
    try:
        prepared = client.node_prepare_resources(claims)
        unprepared = client.node_unprepare_resources(claims)
    finally:
        client.close()
    assert sorted(prepared) == sorted(c.uid for c in claims)
    assert all(isinstance(o, messages.Prepared) for o in prepared.values())
    assert unprepared == {c.uid: None for c in claims}


@pytest.mark.parametrize("service", list(endpoints.DraService), ids=["v1", "v1beta1"])
def test_one_claims_error_never_fails_the_other_claims(
    server: plugin_server.KubeletPluginServer, handler: FakeClaimHandler, service: endpoints.DraService
) -> None:
    handler.raise_for = {"uid-b"}
    handler.fail = {"uid-c": "VF 0000:03:02.1 is bound to vfio-pci"}
    client = _client(server, service)
    try:
        out = client.node_prepare_resources([A, B, C])
    finally:
        client.close()
    assert out == {
        "uid-a": messages.Prepared((messages.Device("pool-a", "dev-a"),)),
        "uid-b": messages.ClaimError("fake handler exploded on uid-b"),
        "uid-c": messages.ClaimError("VF 0000:03:02.1 is bound to vfio-pci"),
    }


def test_v1beta1_delegates_to_the_same_handler_and_drops_share_id(
    server: plugin_server.KubeletPluginServer, handler: FakeClaimHandler
) -> None:
    handler.devices = {"uid-a": (SHARED,)}
    v1, v1beta1 = _client(server, endpoints.DraService.V1), _client(server, endpoints.DraService.V1BETA1)
    try:
        via_v1 = v1.node_prepare_resources([A])
        via_v1beta1 = v1beta1.node_prepare_resources([A])
    finally:
        v1.close()
        v1beta1.close()
    assert via_v1 == {"uid-a": messages.Prepared((SHARED,))}
    assert via_v1beta1 == {
        "uid-a": messages.Prepared((messages.Device("pool-a", "vf-0", ("vf",), SHARED.cdi_device_ids, None),))
    }
    assert handler.prepare_calls == [(A,), (A,)]


def test_claim_namespace_name_and_uid_reach_the_handler(
    server: plugin_server.KubeletPluginServer, handler: FakeClaimHandler
) -> None:
    client = _client(server, endpoints.DraService.V1)
    try:
        client.node_unprepare_resources([C])
    finally:
        client.close()
    assert handler.unprepare_calls == [(messages.ClaimRef(namespace="ns2", name="c", uid="uid-c"),)]


# -- health ---------------------------------------------------------------------------------


def _report(
    pool: str, device: str, health: str = "HEALTHY", message: str = ""
) -> messages.DeviceHealthReport:
    return messages.DeviceHealthReport(messages.DeviceId(pool, device), device_health.Health(health), message)


def test_health_stream_reports_each_devices_health_and_reason_repeatedly(make_server: ServerFactory) -> None:
    devices = [_report("pool-a", "vf-0", "HEALTHY", "ok"), _report("pool-b", "vf-1", "UNHEALTHY", "PF down")]
    srv = make_server(health_source=lambda: devices, health_interval_s=0.05, clock=lambda: 1_750_000_000.7)
    srv.start()
    client = _client(srv, endpoints.DraService.V1)
    try:
        reports = client.watch_health(reports=2, timeout_s=10)
    finally:
        client.close()
    expected = tuple(
        kubelet_plugins.HealthReport(d.device, d.health.value, 1_750_000_000, 0, d.message) for d in devices
    )
    assert reports == [expected, expected]


def test_notify_health_sends_the_changed_health_at_once_instead_of_at_the_next_interval(
    make_server: ServerFactory,
) -> None:
    current = [_report("pool-a", "vf-0", "HEALTHY", "ok")]
    srv = make_server(health_source=lambda: list(current), health_interval_s=3600)
    srv.start()
    ch = _channel(srv.sockets.dra)
    try:
        stream = drahealth_v1alpha1_pb2_grpc.DRAResourceHealthStub(ch).NodeWatchResources(
            drahealth_v1alpha1_pb2.NodeWatchResourcesRequest(), timeout=30
        )
        assert [d.health for d in next(stream).devices] == [drahealth_v1alpha1_pb2.HEALTHY]
        current[0] = _report("pool-a", "vf-0", "UNHEALTHY", "PF ens1f0 has no carrier")
        srv.notify_health()
        (entry,) = next(stream).devices
        assert (entry.health, entry.message) == (drahealth_v1alpha1_pb2.UNHEALTHY, "PF ens1f0 has no carrier")
        stream.cancel()
    finally:
        ch.close()


def test_health_source_error_skips_the_report_instead_of_claiming_health(make_server: ServerFactory) -> None:
    calls: list[int] = []

    def flaky() -> list[messages.DeviceHealthReport]:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("sysfs unreadable")
        return [_report("pool-a", "vf-0")]

    srv = make_server(health_source=flaky, health_interval_s=0.05)
    srv.start()
    client = _client(srv, endpoints.DraService.V1)
    try:
        reports = client.watch_health(reports=1, timeout_s=10)
    finally:
        client.close()
    assert len(calls) >= 2
    assert [r.device for r in reports[0]] == [messages.DeviceId("pool-a", "vf-0")]


def test_stop_ends_open_health_streams_promptly(make_server: ServerFactory) -> None:
    srv = make_server(health_source=lambda: [], health_interval_s=60)
    srv.start()
    ch = _channel(srv.sockets.dra)
    stream = drahealth_v1alpha1_pb2_grpc.DRAResourceHealthStub(ch).NodeWatchResources(
        drahealth_v1alpha1_pb2.NodeWatchResourcesRequest(), timeout=30
    )
    assert len(next(stream).devices) == 0
    stopper = threading.Thread(target=srv.stop, kwargs={"grace_s": 20}, daemon=True)
    stopper.start()
    stopper.join(5)
    assert not stopper.is_alive(), "stop waited for the health stream's whole grace period"
    ch.close()


def test_health_service_is_not_served_without_a_source(server: plugin_server.KubeletPluginServer) -> None:
    with _channel(server.sockets.dra) as ch, pytest.raises(grpc.RpcError) as info:
        next(
            drahealth_v1alpha1_pb2_grpc.DRAResourceHealthStub(ch).NodeWatchResources(
                drahealth_v1alpha1_pb2.NodeWatchResourcesRequest(), timeout=5
            )
        )
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_only_sockets_nobody_listens_on_are_removed_as_a_killed_instances(tmp_path: Path) -> None:
    """docs/plugin.md#rolling-update: a killed instance leaves its sockets; a live one's, the owner's
    own and other files stay."""
    dead, live, own = (tmp_path / f"{DRIVER}-{n}-reg.sock" for n in ("dead", "live", "own"))
    for path in (dead, own):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.bind(str(path))  # closed without unlinking: what a SIGKILL leaves
        _age(path)
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(live))
    listening.listen(1)
    _age(live)
    other = tmp_path / f"{DRIVER}-file-reg.sock"
    other.write_text("not a socket")
    try:
        removed = plugin_server.remove_dead_sockets(
            [dead, live, own, other, tmp_path / "gone.sock"], keep=[own]
        )
    finally:
        listening.close()
    assert removed == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (live, own, other))


def _age(path: Path) -> None:
    """Make ``path`` look bound long ago (past ``DEAD_SOCKET_MIN_AGE_S``)."""
    then = os.lstat(path).st_mtime - plugin_server.DEAD_SOCKET_MIN_AGE_S - 1
    os.utime(path, (then, then), follow_symlinks=False)


def test_the_socket_of_an_instance_that_bound_it_and_does_not_listen_yet_stays(tmp_path: Path) -> None:
    """A starting instance binds its socket before it listens; a connection to it is refused just
    as to a killed instance's. The owner's clean-up must not remove it (the kubelet would never
    see the starting instance): only a socket bound longer than the grace ago counts as dead."""
    starting = tmp_path / f"{DRIVER}-starting-reg.sock"
    bound = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    bound.bind(str(starting))  # bound, not yet listening: connect() is refused
    try:
        assert plugin_server.remove_dead_sockets([starting]) == []
        assert starting.exists()
        later = os.lstat(starting).st_mtime + plugin_server.DEAD_SOCKET_MIN_AGE_S + 1
        assert plugin_server.remove_dead_sockets([starting], clock=lambda: later) == [starting]
    finally:
        bound.close()
