"""Tests for sriov_dra.kube.watches: list then watch, resume, re-list on 410, contained handlers, close."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes.client.rest import ApiException
from tests import waiting
from tests.fakes.watch_api import HOLD, FakeWatchApi, obj

from sriov_dra.kube import errors, watches

PATH = "/apis/example.com/v1/namespaces/ns/things"


def eventually(what: str, fn: Callable[[], Any], timeout_s: float = 5.0) -> Any:
    """Poll ``fn`` every 0.01 s until truthy; fail naming ``what`` after ``timeout_s``."""
    return waiting.eventually(what, fn, timeout_s=timeout_s, interval_s=0.01)


class Recorder:
    def __init__(self, fail_on: str = "") -> None:
        self.events: list[tuple[str, str]] = []
        self.fail_on = fail_on
        self.lock = threading.Lock()

    def __call__(self, kind: str, o: dict[str, Any]) -> None:
        name = (o.get("metadata") or {}).get("name", "")
        with self.lock:
            self.events.append((kind, name))
        if self.fail_on and name == self.fail_on:
            raise RuntimeError("handler bug")

    def seen(self) -> list[tuple[str, str]]:
        with self.lock:
            return list(self.events)


@pytest.fixture
def run() -> Iterator[Callable[..., watches.Watch]]:
    started: list[watches.Watch] = []

    def start(api: FakeWatchApi, handler: Recorder, **kwargs: Any) -> watches.Watch:
        target = kwargs.pop("target", watches.Target(PATH))
        w = watches.Watch(
            api,
            target,
            handler,
            name="things",
            stop=kwargs.pop("stop", threading.Event()),
            backoff_initial_s=0.01,
            backoff_max_s=0.02,
            **kwargs,
        )
        started.append(w)
        return w.start()

    yield start
    for w in started:
        w.close()
        assert not w.alive


def test_initial_list_fills_the_cache_and_fires_added_then_synced(run) -> None:
    api = FakeWatchApi(collections={PATH: [obj("b", "3", "ns"), obj("a", "2", "ns")]})
    rec = Recorder()
    w = run(api, rec)
    assert w.wait_synced(5)
    assert rec.seen()[:3] == [("ADDED", "a"), ("ADDED", "b"), (watches.SYNCED, "")]
    assert [i["metadata"]["name"] for i in w.items()] == ["a", "b"]
    assert w.get("a", "ns") is not None and w.get("a") is None
    first_watch = eventually("a watch call", lambda: api.watch_calls(PATH))[0]
    assert first_watch["resourceVersion"] == "10" and first_watch["allowWatchBookmarks"] == "true"


def test_selectors_reach_both_list_and_watch(run) -> None:
    api = FakeWatchApi(collections={PATH: []})
    target = watches.Target(PATH, field_selector="spec.nodeName=n1", label_selector="a=b")
    run(api, Recorder(), target=target)
    eventually("a watch call", lambda: api.watch_calls(PATH))
    for query in (api.list_calls(PATH)[0], api.watch_calls(PATH)[0]):
        assert query["fieldSelector"] == "spec.nodeName=n1" and query["labelSelector"] == "a=b"


def test_events_update_the_cache_and_the_next_watch_resumes_from_the_last_version(run) -> None:
    api = FakeWatchApi(collections={PATH: [obj("a", "2", "ns")]})
    api.scripts[PATH] = [
        [
            {"type": "ADDED", "object": obj("c", "11", "ns")},
            {"type": "MODIFIED", "object": obj("a", "12", "ns")},
            {"type": "DELETED", "object": obj("c", "13", "ns")},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}},
        ]
    ]
    rec = Recorder()
    w = run(api, rec)
    calls = eventually("a second watch", lambda: (c := api.watch_calls(PATH)) and len(c) >= 2 and c)
    assert calls[1]["resourceVersion"] == "20"
    assert len(api.list_calls(PATH)) == 1, "a stream that ends resumes without re-listing"
    assert rec.seen()[2:] == [("ADDED", "c"), ("MODIFIED", "a"), ("DELETED", "c")]
    assert [(i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in w.items()] == [("a", "12")]


@pytest.mark.parametrize(
    "expired",
    [
        ApiException(status=410, reason="Gone"),
        [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}],
    ],
    ids=["http-410-relists", "error-event-410-relists"],
)
def test_expired_watch_relists_and_reports_the_difference(run, expired: Any) -> None:
    api = FakeWatchApi(collections={PATH: [obj("a", "2", "ns"), obj("b", "3", "ns")]})
    api.scripts[PATH] = [[HOLD], expired]
    rec = Recorder()
    w = run(api, rec)
    eventually("the first watch", lambda: api.open_watches)
    with api.lock:
        api.collections[PATH] = [obj("a", "7", "ns"), obj("c", "8", "ns")]
    api.open_watches[0].shutdown()  # the server ends the quiet stream; the next watch expires
    eventually("a second list", lambda: len(api.list_calls(PATH)) >= 2)
    eventually("the relist events", lambda: len(rec.seen()) >= 7)
    assert rec.seen()[3:7] == [("DELETED", "b"), ("MODIFIED", "a"), ("ADDED", "c"), (watches.SYNCED, "")]
    assert w.lists == 2


def test_unchanged_object_on_relist_fires_nothing(run) -> None:
    api = FakeWatchApi(collections={PATH: [obj("a", "2", "ns")]})
    api.scripts[PATH] = [ApiException(status=410, reason="Gone")]
    rec = Recorder()
    w = run(api, rec)
    eventually("a second list", lambda: w.lists >= 2)
    assert rec.seen() == [("ADDED", "a"), (watches.SYNCED, ""), (watches.SYNCED, "")]


def test_handler_exception_is_contained_and_counted(run) -> None:
    api = FakeWatchApi(collections={PATH: [obj("bad", "2", "ns")]})
    api.scripts[PATH] = [[{"type": "ADDED", "object": obj("good", "11", "ns")}, HOLD]]
    rec = Recorder(fail_on="bad")
    w = run(api, rec)
    eventually("the later event", lambda: ("ADDED", "good") in rec.seen())
    assert w.handler_errors == 1 and w.alive


def test_failed_list_backs_off_and_retries(run) -> None:
    api = FakeWatchApi(collections={PATH: [obj("a", "2", "ns")]})
    api.list_failures[PATH] = [500, 403]
    w = run(api, Recorder())
    assert w.wait_synced(5)
    assert w.failures == 2 and "403" in w.last_error


def test_close_interrupts_a_quiet_stream_at_once(run) -> None:
    api = FakeWatchApi(collections={PATH: []})
    w = run(api, Recorder())
    eventually("the watch to open", lambda: api.open_watches)
    started = time.monotonic()
    w.close(timeout_s=2)
    assert not w.alive and time.monotonic() - started < 1.0
    assert api.open_watches[0].shut.is_set() and api.open_watches[0].released.is_set()


def test_shared_stop_ends_the_thread_after_the_stream(run) -> None:
    stop = threading.Event()
    api = FakeWatchApi(collections={PATH: []})
    api.scripts[PATH] = [[{"type": "ADDED", "object": obj("a", "11", "ns")}]]
    stop.set()
    w = run(api, Recorder(), stop=stop)
    eventually("the thread to end", lambda: not w.alive)
    assert api.list_calls(PATH) == []


def test_request_json_translates_errors_and_rejects_non_objects() -> None:
    api = FakeWatchApi(collections={PATH: []}, status={"/missing": 404})
    with pytest.raises(errors.NotFound, match="get thing missing"):
        watches.request_json(api, "get thing missing", "GET", "/missing")
    assert watches.request_json(api, "list", "GET", PATH)["items"] == []


def test_broken_stream_resumes_after_the_last_delivered_event(run) -> None:
    api = FakeWatchApi(collections={PATH: []})
    api.scripts[PATH] = [
        [
            {"type": "ADDED", "object": obj("c", "11", "ns")},
            {"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "etcd timeout"}},
        ]
    ]
    w = run(api, Recorder())
    calls = eventually("the resumed watch", lambda: (c := api.watch_calls(PATH)) and len(c) >= 2 and c)
    assert calls[1]["resourceVersion"] == "11" and len(api.list_calls(PATH)) == 1
    assert w.failures == 1 and "etcd timeout" in w.last_error
