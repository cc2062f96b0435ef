"""``/healthz`` means alive and ``/readyz`` means serving, in every service (servicekit/probes.py)."""

from __future__ import annotations

import socket
import threading
import urllib.error
from collections.abc import Iterator

import prometheus_client
import pytest
from tests import waiting
from tests.health_probes import get

from sriov_dra.servicekit import probes


@pytest.fixture
def served() -> Iterator[tuple[probes.Health, int]]:
    registry = prometheus_client.CollectorRegistry()
    prometheus_client.Counter("probe_total", "a test counter", registry=registry).inc()
    state = probes.Health(["registered"])
    server = probes.HttpServer("127.0.0.1:0", state, probes.registry_renderer(registry))
    server.start()
    try:
        yield state, server.port
    finally:
        server.stop()


def test_a_starting_service_is_alive_but_not_ready(served: tuple[probes.Health, int]) -> None:
    _, port = served
    assert get(port, "/healthz") == (200, "ok\n")
    assert get(port, "/readyz") == (503, "registered: starting\n")


def test_ready_once_every_condition_holds_and_unready_again_with_the_reason(
    served: tuple[probes.Health, int],
) -> None:
    state, port = served
    state.set("registered", True)
    assert get(port, "/readyz") == (200, "ok\n")
    state.set("caches", False, "watch of pods not synced")
    assert get(port, "/readyz") == (503, "caches: watch of pods not synced\n")


def test_a_crashed_essential_worker_fails_liveness_and_readiness(served: tuple[probes.Health, int]) -> None:
    state, port = served
    state.set("registered", True)
    state.worker_crashed("managed-repair", RuntimeError("lost"))
    assert get(port, "/healthz") == (503, "worker managed-repair crashed: RuntimeError: lost\n")
    assert get(port, "/readyz")[0] == 503


def test_metrics_and_unknown_paths(served: tuple[probes.Health, int]) -> None:
    _, port = served
    status, body = get(port, "/metrics")
    assert status == 200 and "probe_total 1.0" in body
    assert get(port, "/nope")[0] == 404


def test_a_probed_condition_is_decided_at_each_request() -> None:
    state = probes.Health()
    answers = iter([(False, "caches not synced"), (True, ""), ValueError("probe broke")])

    def probe() -> tuple[bool, str]:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    state.check("caches", probe)
    assert state.ready() == (False, "caches: caches not synced")
    assert state.ready() == (True, "ok")
    assert state.ready() == (False, "caches: ValueError: probe broke")


def test_an_address_in_use_is_served_as_soon_as_the_previous_holder_frees_it() -> None:
    """A rollout's two Pods on the node's network: the new one serves once the old one exited."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    server = probes.HttpServer(f"127.0.0.1:{port}", probes.Health(), lambda: b"")
    stop = threading.Event()
    try:
        server.start_when_free(stop, retry_s=0.02)
        with pytest.raises(RuntimeError):
            _ = server.port  # not bound while the address is taken
        holder.close()
        waiting.eventually(
            "the freed address to be served",
            lambda: _healthy(port),
            timeout_s=30,
            interval_s=0.02,
        )
    finally:
        stop.set()
        holder.close()
        server.stop()


def _healthy(port: int) -> bool:
    try:
        return get(port, "/healthz")[0] == 200
    except urllib.error.URLError:
        return False


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_a_probe_of_another_pod_is_answered_503_and_its_own_pods_as_without_the_header(path: str) -> None:
    """Two Pods of a rollout probe one node address: only the serving instance's own Pod gets its state."""
    state = probes.Health(pod_uid="uid-old")
    server = probes.HttpServer("127.0.0.1:0", state, lambda: b"")
    server.start()
    try:
        assert get(server.port, path, "uid-old") == (200, "ok\n")
        status, body = get(server.port, path, "uid-new")
        assert status == 503 and "served by another instance" in body and "uid-old" in body
        assert get(server.port, path) == (200, "ok\n")  # no header: unchanged
    finally:
        server.stop()


def test_the_liveness_probe_of_an_instance_this_one_superseded_is_answered_200_and_its_readiness_503() -> (
    None
):
    """docs/guard.md#rolling-update: the idle old daemon's Pod is not restarted by its liveness probe
    (a restart would only idle again); it stays unready, and any other Pod still gets 503."""
    state = probes.Health(pod_uid="uid-new")
    state.vouch_for(["uid-old", "uid-new", ""])
    server = probes.HttpServer("127.0.0.1:0", state, lambda: b"")
    server.start()
    try:
        status, body = get(server.port, "/healthz", "uid-old")
        assert status == 200 and "superseded by Pod uid-new" in body
        assert get(server.port, "/readyz", "uid-old")[0] == 503
        assert get(server.port, "/healthz", "uid-other")[0] == 503
        assert get(server.port, "/healthz", "uid-new") == (200, "ok\n")
    finally:
        server.stop()
