"""Cluster tier: sriov_dra.kube.watches against a real kube-apiserver.

Proves on real streams what the pure tier proves on a fake: close() ends a watch whose stream is
blocked waiting for events (and one closed at any point of its start), and a shared stop alone
ends the thread within the bounded ``timeoutSeconds``. The 10 s joins are hang detectors, not
timing assertions. 410 Gone handling is proven in the pure tier (tests/pure/kube/test_watches.py):
this apiserver (v1.36.3, watch cache on) answers a watch from a compacted resourceVersion with an
empty stream rather than 410, so it cannot be provoked here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from kubernetes import client
from tests import waiting

from sriov_dra.kube import watches

T = TypeVar("T")
HANG_S = 10.0


def eventually(what: str, fn: Callable[[], T | None], timeout_s: float = 30.0) -> T:
    """Poll ``fn`` every 0.05 s until truthy; fail naming ``what`` after ``timeout_s``."""
    return waiting.eventually(what, fn, timeout_s=timeout_s, interval_s=0.05)


class Seen:
    """Records ``(kind, name)`` of every event."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str]] = []

    def __call__(self, kind: str, obj: dict[str, Any]) -> None:
        with self.lock:
            self.events.append((kind, str((obj.get("metadata") or {}).get("name", ""))))

    def has(self, event: tuple[str, str]) -> bool:
        with self.lock:
            return event in self.events


@pytest.fixture
def started() -> Iterator[list[watches.Watch]]:
    out: list[watches.Watch] = []
    yield out
    for w in out:
        w.close(timeout_s=HANG_S)


def configmaps(namespace: str) -> watches.Target:
    return watches.Target(f"/api/v1/namespaces/{namespace}/configmaps")


def make_configmap(api: client.ApiClient, namespace: str, name: str) -> None:
    client.CoreV1Api(api).create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name))
    )


def test_close_returns_while_the_stream_is_blocked_waiting_for_events(
    api: client.ApiClient, namespace: str, started: list[watches.Watch]
) -> None:
    seen = Seen()
    w = watches.Watch(api, configmaps(namespace), seen, name="cm").start()
    started.append(w)
    assert w.wait_synced(30), w.last_error
    eventually("the watch to open", lambda: w.streams)
    make_configmap(api, namespace, "first")
    eventually("the ADDED event", lambda: seen.has(("ADDED", "first")))
    w.close(timeout_s=HANG_S)  # the stream is open and quiet, waiting for the next event
    assert not w.alive, "close() did not interrupt a blocked watch stream"
    assert w.failures == 0, w.last_error


@pytest.mark.parametrize(
    "after", ["start", "sync", "open"], ids=["right-after-start", "after-sync", "after-open"]
)
def test_close_at_any_point_of_the_start_ends_the_thread(
    api: client.ApiClient, namespace: str, after: str
) -> None:
    for _ in range(3):
        w = watches.Watch(api, configmaps(namespace), lambda *_: None, name="cm").start()
        if after in ("sync", "open"):
            assert w.wait_synced(30), w.last_error
        if after == "open":
            eventually("the watch to open", lambda w=w: w.streams)
        w.close(timeout_s=HANG_S)
        assert not w.alive, f"close() after {after} left the watch thread running"


def test_a_shared_stop_alone_ends_the_thread_when_the_bounded_stream_times_out(
    api: client.ApiClient, namespace: str, started: list[watches.Watch]
) -> None:
    stop = threading.Event()
    w = watches.Watch(api, configmaps(namespace), lambda *_: None, name="cm", stop=stop, timeout_s=1).start()
    started.append(w)
    eventually("the watch to open", lambda: w.streams)
    stop.set()  # no close(): only the server's timeoutSeconds ends the quiet stream
    eventually("the thread to end", lambda: not w.alive, timeout_s=HANG_S)
    assert w.failures == 0, w.last_error
