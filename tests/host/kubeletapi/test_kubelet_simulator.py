"""The simulated kubelet DRA manager against real plugins on unix sockets (``sriov_dra_lab``).

Checks that the lab drives a plugin as a 1.36 kubelet does: discovery in the registry
directory, the registration handshake, v1 preferred, one call per driver per Pod with only the
not-yet-prepared claims, per-claim errors and response checks, and unprepare of shared claims
(upstream: kubernetes ``pkg/kubelet/cm/dra``, v1.36).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from tests import waiting
from tests.fakes.claim_handler import FakeClaimHandler
from tests.fakes.scripted_plugin import ScriptedPlugin, serve_scripted
from tests.host.kubeletapi.conftest import DRIVER, ServerFactory

from sriov_dra.kubeletapi import dra_v1_pb2, endpoints, messages, plugin_server
from sriov_dra_lab import kubelet, kubelet_plugins
from sriov_dra_rules import errors

OTHER = "gpu.test.example.com"
C1 = messages.ClaimRef("ns", "c1", "uid-1")
C2 = messages.ClaimRef("ns", "c2", "uid-2")
C3 = messages.ClaimRef("ns", "c3", "uid-3")
C4 = messages.ClaimRef("ns", "c4", "uid-4")


@pytest.fixture
def other_handler() -> FakeClaimHandler:
    return FakeClaimHandler()


@pytest.fixture
def two_plugins(
    server: plugin_server.KubeletPluginServer, other_handler: FakeClaimHandler, short_dir: Path
) -> Iterator[tuple[plugin_server.KubeletPluginServer, plugin_server.KubeletPluginServer]]:
    """Our plugin server for DRIVER plus a second plugin server for OTHER in the same registry."""
    other = plugin_server.KubeletPluginServer(
        driver_name=OTHER,
        handler=other_handler,
        sockets=endpoints.plugin_sockets(
            OTHER, plugins_dir=short_dir / "plugins", registry_dir=short_dir / "registry"
        ),
    )
    other.start()
    try:
        yield server, other
    finally:
        other.stop(grace_s=0)


def _registered(manager: kubelet.KubeletDraManager, registry: Path, *drivers: str) -> None:
    for driver in drivers:
        assert manager.wait_for_driver(registry, driver, timeout_s=10), f"{driver} never registered"


# -- discovery and registration -------------------------------------------------------------


def test_scan_registry_sees_only_visible_unix_sockets_recursively(short_dir: Path) -> None:
    registry = short_dir / "registry"
    (registry / "nested").mkdir(parents=True)
    (registry / ".hidden-dir").mkdir()
    for path in (
        registry / "a-reg.sock",
        registry / "nested" / "b-reg.sock",
        registry / ".c-reg.sock",
        registry / ".hidden-dir" / "d-reg.sock",
    ):
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    (registry / "plain-file.sock").write_text("")
    assert kubelet_plugins.scan_registry(registry) == [
        registry / "a-reg.sock",
        registry / "nested" / "b-reg.sock",
    ]
    assert kubelet_plugins.scan_registry(short_dir / "missing") == []


def test_plugin_started_later_is_discovered_and_registered(
    make_server: ServerFactory, manager: kubelet.KubeletDraManager
) -> None:
    srv = make_server()
    starter = threading.Timer(0.2, srv.start)
    starter.start()
    try:
        assert manager.wait_for_driver(srv.sockets.registration.parent, DRIVER, timeout_s=10)
    finally:
        starter.join()
    plugin = manager.plugin(DRIVER)
    assert plugin is not None and plugin.service is endpoints.DraService.V1
    verdict = waiting.eventually(
        "the kubelet's verdict", lambda: srv.registration, timeout_s=5, interval_s=0.01
    )
    assert verdict == plugin_server.RegistrationState(True, "")


def test_removed_registration_socket_deregisters_the_driver(
    server: plugin_server.KubeletPluginServer, manager: kubelet.KubeletDraManager
) -> None:
    registry = server.sockets.registration.parent
    assert manager.sync_registry(registry) == ([DRIVER], [])
    server.stop(grace_s=0)
    assert manager.sync_registry(registry) == ([], [DRIVER])
    assert manager.plugin(DRIVER) is None


@pytest.mark.parametrize(
    ("plugin", "reason", "fragment"),
    [
        (
            ScriptedPlugin(supported_versions=("v1beta1",)),
            errors.Reason.UNSUPPORTED_VERSION,
            "none of the advertised",
        ),
        (ScriptedPlugin(supported_versions=()), errors.Reason.UNSUPPORTED_VERSION, "none of the advertised"),
        (
            ScriptedPlugin(plugin_type="CSIPlugin"),
            errors.Reason.CONTRACT_VIOLATION,
            "PluginInfo.type is 'CSIPlugin'",
        ),
        (ScriptedPlugin(name=""), errors.Reason.CONTRACT_VIOLATION, "PluginInfo.name is empty"),
    ],
    ids=[
        "bare-version-rejected",
        "empty-version-list-rejected",
        "wrong-plugin-type-rejected",
        "empty-name-rejected",
    ],
)
def test_unacceptable_plugin_is_told_it_failed_and_registration_raises(
    short_dir: Path, plugin: ScriptedPlugin, reason: errors.Reason, fragment: str
) -> None:
    sock = short_dir / "registry" / "bad-reg.sock"
    with serve_scripted(plugin, sock), pytest.raises(errors.ContractViolation) as info:
        kubelet_plugins.register_plugin(sock)
    assert info.value.reason is reason and fragment in str(info.value)
    assert [registered for registered, _ in plugin.statuses] == [False]
    assert fragment in plugin.statuses[0][1]


def test_v1beta1_only_plugin_is_called_over_v1beta1_and_empty_endpoint_means_this_socket(
    short_dir: Path, manager: kubelet.KubeletDraManager
) -> None:
    plugin = ScriptedPlugin(supported_versions=("v1beta1.DRAPlugin",))
    sock = short_dir / "registry" / "old-reg.sock"
    with serve_scripted(plugin, sock):
        registered = manager.register(sock)
        assert registered.service is endpoints.DraService.V1BETA1 and registered.endpoint == sock
        result = manager.prepare_pod("pod-1", [kubelet.PodClaim(C1, (plugin.name,))])
    assert result.ok
    assert plugin.statuses == [(True, "")]
    assert plugin.requests == [
        ("k8s.io.kubelet.pkg.apis.dra.v1beta1.NodePrepareResourcesRequest", ("uid-1",))
    ]


# -- prepare --------------------------------------------------------------------------------


def test_one_call_per_driver_with_only_not_yet_prepared_claims(
    two_plugins: tuple[plugin_server.KubeletPluginServer, ...],
    handler: FakeClaimHandler,
    other_handler: FakeClaimHandler,
    manager: kubelet.KubeletDraManager,
) -> None:
    _registered(manager, two_plugins[0].sockets.registration.parent, DRIVER, OTHER)
    first = manager.prepare_pod(
        "pod-1",
        [kubelet.PodClaim(C1, (DRIVER,)), kubelet.PodClaim(C2, (DRIVER, OTHER)), kubelet.PodClaim(C3, ())],
    )
    assert first.ok
    assert first.calls == (
        kubelet.DriverCall(OTHER, ("uid-2",)),
        kubelet.DriverCall(DRIVER, ("uid-1", "uid-2")),
    )
    assert handler.prepare_calls == [(C1, C2)] and other_handler.prepare_calls == [(C2,)]
    assert first.devices[C2] == {
        DRIVER: (messages.Device("pool-a", "dev-c2"),),
        OTHER: (messages.Device("pool-a", "dev-c2"),),
    }
    assert first.devices[C3] == {}
    assert all(manager.is_prepared(c) for c in (C1, C2, C3))

    second = manager.prepare_pod("pod-2", [kubelet.PodClaim(C1, (DRIVER,)), kubelet.PodClaim(C4, (DRIVER,))])
    assert second.ok
    assert second.calls == (kubelet.DriverCall(DRIVER, ("uid-4",)),)
    assert second.devices[C1] == {DRIVER: (messages.Device("pool-a", "dev-c1"),)}


def test_kubelet_restart_prepares_cached_claims_again(
    server: plugin_server.KubeletPluginServer, handler: FakeClaimHandler, manager: kubelet.KubeletDraManager
) -> None:
    _registered(manager, server.sockets.registration.parent, DRIVER)
    assert manager.prepare_pod("pod-1", [kubelet.PodClaim(C1, (DRIVER,))]).ok
    restarted = kubelet.KubeletDraManager()
    try:
        _registered(restarted, server.sockets.registration.parent, DRIVER)
        assert restarted.prepare_pod("pod-1", [kubelet.PodClaim(C1, (DRIVER,))]).ok
    finally:
        restarted.close()
    assert handler.prepare_calls == [(C1,), (C1,)]


def test_claim_error_fails_the_pod_and_leaves_claims_unprepared_for_retry(
    server: plugin_server.KubeletPluginServer, handler: FakeClaimHandler, manager: kubelet.KubeletDraManager
) -> None:
    _registered(manager, server.sockets.registration.parent, DRIVER)
    handler.fail = {"uid-2": "no free VF on pool-a"}
    claims = [kubelet.PodClaim(C1, (DRIVER,)), kubelet.PodClaim(C2, (DRIVER,))]
    failed = manager.prepare_pod("pod-1", claims)
    assert failed.failure == kubelet.KubeletFailure(
        kubelet.FailureKind.CLAIM_FAILED,
        "NodePrepareResources failed for ResourceClaim ns/c2: no free VF on pool-a",
        driver=DRIVER,
        claim=C2,
    )
    assert not manager.is_prepared(C1) and not manager.is_prepared(C2)
    handler.fail = {}
    retried = manager.prepare_pod("pod-1", claims)
    assert retried.ok
    assert handler.prepare_calls == [(C1, C2), (C1, C2)]


def test_unregistered_driver_fails_the_pod_before_any_call(
    server: plugin_server.KubeletPluginServer, handler: FakeClaimHandler, manager: kubelet.KubeletDraManager
) -> None:
    _registered(manager, server.sockets.registration.parent, DRIVER)
    result = manager.prepare_pod("pod-1", [kubelet.PodClaim(C1, (DRIVER,)), kubelet.PodClaim(C2, (OTHER,))])
    assert result.failure is not None and result.failure.kind is kubelet.FailureKind.DRIVER_NOT_REGISTERED
    assert f"DRA driver {OTHER} is not registered" in result.failure.message
    assert result.calls == () and handler.prepare_calls == []


def test_same_claim_name_with_a_new_uid_fails_while_the_old_one_is_cached(
    server: plugin_server.KubeletPluginServer, manager: kubelet.KubeletDraManager
) -> None:
    _registered(manager, server.sockets.registration.parent, DRIVER)
    assert manager.prepare_pod("pod-1", [kubelet.PodClaim(C1, (DRIVER,))]).ok
    replaced = messages.ClaimRef("ns", "c1", "uid-1-new")
    result = manager.prepare_pod("pod-2", [kubelet.PodClaim(replaced, (DRIVER,))])
    assert result.failure is not None and result.failure.kind is kubelet.FailureKind.CLAIM_REPLACED
    assert "different UID uid-1 still exists" in result.failure.message


def _unknown_uid(request: dra_v1_pb2.NodePrepareResourcesRequest) -> dra_v1_pb2.NodePrepareResourcesResponse:
    response = dra_v1_pb2.NodePrepareResourcesResponse()
    for claim in request.claims:
        response.claims[claim.uid].error = ""
    response.claims["uid-somebody-else"].error = ""
    return response


def _skips_last(request: dra_v1_pb2.NodePrepareResourcesRequest) -> dra_v1_pb2.NodePrepareResourcesResponse:
    response = dra_v1_pb2.NodePrepareResourcesResponse()
    for claim in request.claims[:-1]:
        response.claims[claim.uid].error = ""
    return response


@pytest.mark.parametrize(
    ("script", "kind", "fragment"),
    [
        (_unknown_uid, kubelet.FailureKind.CONTRACT_VIOLATION, "unknown claim UIDs ['uid-somebody-else']"),
        (_skips_last, kubelet.FailureKind.CONTRACT_VIOLATION, "skipped 1 claims ['uid-2']"),
        (lambda request: grpc.StatusCode.INTERNAL, kubelet.FailureKind.RPC_FAILED, "StatusCode.INTERNAL"),
    ],
    ids=["unknown-claim-uid-in-response", "claim-missing-from-response", "grpc-error-fails-whole-call"],
)
def test_bad_plugin_answers_fail_the_pod(
    short_dir: Path,
    manager: kubelet.KubeletDraManager,
    script: object,
    kind: kubelet.FailureKind,
    fragment: str,
) -> None:
    plugin = ScriptedPlugin(prepare=script)  # type: ignore[arg-type]
    sock = short_dir / "registry" / "bad-reg.sock"
    with serve_scripted(plugin, sock):
        manager.register(sock)
        result = manager.prepare_pod(
            "pod-1", [kubelet.PodClaim(C1, (plugin.name,)), kubelet.PodClaim(C2, (plugin.name,))]
        )
    assert result.failure is not None and result.failure.kind is kind
    assert fragment in result.failure.message
    assert not manager.is_prepared(C1)


def test_call_deadline_applies_to_prepare(
    server: plugin_server.KubeletPluginServer, handler: FakeClaimHandler
) -> None:
    manager = kubelet.KubeletDraManager(timeouts=kubelet_plugins.KubeletTimeouts(call_s=0.3))
    try:
        _registered(manager, server.sockets.registration.parent, DRIVER)
        handler.hold = True
        result = manager.prepare_pod("pod-1", [kubelet.PodClaim(C1, (DRIVER,))])
    finally:
        handler.release.set()
        manager.close()
    assert result.failure is not None and result.failure.kind is kubelet.FailureKind.RPC_FAILED
    assert "DEADLINE_EXCEEDED" in result.failure.message


# -- unprepare ------------------------------------------------------------------------------


def test_shared_claim_is_unprepared_only_with_its_last_pod(
    server: plugin_server.KubeletPluginServer, handler: FakeClaimHandler, manager: kubelet.KubeletDraManager
) -> None:
    _registered(manager, server.sockets.registration.parent, DRIVER)
    assert manager.prepare_pod("pod-1", [kubelet.PodClaim(C1, (DRIVER,)), kubelet.PodClaim(C2, (DRIVER,))]).ok
    assert manager.prepare_pod("pod-2", [kubelet.PodClaim(C1, (DRIVER,))]).ok

    first = manager.unprepare_pod("pod-1")
    assert first.ok and first.released == (C2,)
    assert first.calls == (kubelet.DriverCall(DRIVER, ("uid-2",)),)
    assert manager.is_prepared(C1) and not manager.is_prepared(C2)

    last = manager.unprepare_pod("pod-2")
    assert last.ok and last.released == (C1,)
    assert handler.unprepare_calls == [(C2,), (C1,)]
    assert manager.unprepare_pod("pod-unknown") == kubelet.PodUnprepareResult(
        released=(), calls=(), failure=None
    )


def test_failed_unprepare_keeps_the_claim_for_a_retry(
    server: plugin_server.KubeletPluginServer, handler: FakeClaimHandler, manager: kubelet.KubeletDraManager
) -> None:
    _registered(manager, server.sockets.registration.parent, DRIVER)
    assert manager.prepare_pod("pod-1", [kubelet.PodClaim(C1, (DRIVER,))]).ok
    handler.fail = {"uid-1": "shadow NAD deletion pending"}
    failed = manager.unprepare_pod("pod-1")
    assert failed.failure is not None and failed.failure.kind is kubelet.FailureKind.CLAIM_FAILED
    assert (
        failed.failure.message
        == "NodeUnprepareResources failed for ResourceClaim ns/c1: shadow NAD deletion pending"
    )
    assert manager.is_prepared(C1)
    handler.fail = {}
    assert manager.unprepare_pod("pod-1").released == (C1,)
    assert not manager.is_prepared(C1)
