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

from sriov_dra.kube import errors, objects, watches

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


@pytest.mark.parametrize(
    "error_event",
    [
        {"type": "ERROR", "object": {"kind": "Status", "code": 410}},
        {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Gone", "message": "too old"}},
    ],
    ids=["bare-410-status-relists", "full-410-status-relists"],
)
def test_error_event_410_relists_even_without_reason_or_message(run, error_event: dict[str, Any]) -> None:
    api = FakeWatchApi(collections={PATH: [obj("a", "2", "ns")]})
    api.scripts[PATH] = [[error_event]]
    w = run(api, Recorder())
    eventually("a second list", lambda: w.lists >= 2)
    assert w.failures == 0, w.last_error


def test_error_event_without_a_code_is_a_failure_that_resumes_not_a_crash(run) -> None:
    api = FakeWatchApi(collections={PATH: []})
    api.scripts[PATH] = [[{"type": "ADDED", "object": obj("c", "11", "ns")}, {"type": "ERROR", "object": {}}]]
    w = run(api, Recorder())
    calls = eventually("the resumed watch", lambda: (c := api.watch_calls(PATH)) and len(c) >= 2 and c)
    assert calls[1]["resourceVersion"] == "11" and w.failures == 1 and w.alive
    assert "server ended the stream" in w.last_error


def test_handler_errors_are_reported_to_the_callback_and_the_loop_keeps_going(run) -> None:
    api = FakeWatchApi(collections={PATH: [obj("bad", "2", "ns")]})
    api.scripts[PATH] = [
        [
            {"type": "MODIFIED", "object": obj("bad", "11", "ns")},
            {"type": "ADDED", "object": obj("ok", "12", "ns")},
        ]
    ]
    reported: list[str] = []
    rec = Recorder(fail_on="bad")
    w = run(api, rec, on_handler_error=reported.append)
    eventually("the event after the failures", lambda: ("ADDED", "ok") in rec.seen())
    assert reported == ["things", "things"] and w.handler_errors == 2
    assert [i["metadata"]["name"] for i in w.items()] == ["bad", "ok"], "the cache still follows the stream"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [({}, "300"), ({"timeout_s": 60}, "60"), ({"timeout_s": 60, "relist_period_s": 5.0}, "5")],
    ids=["default-bound", "explicit-bound", "relist-period-shortens-the-bound"],
)
def test_every_watch_request_carries_a_bounded_timeout(run, kwargs: dict[str, Any], expected: str) -> None:
    api = FakeWatchApi(collections={PATH: []})
    run(api, Recorder(), **kwargs)
    query = eventually("a watch call", lambda: api.watch_calls(PATH))[0]
    assert query["timeoutSeconds"] == expected


def test_periodic_relist_after_a_stream_ends_reports_only_changes(run) -> None:
    api = FakeWatchApi(collections={PATH: [obj("a", "2", "ns"), obj("b", "3", "ns")]})
    rec = Recorder()
    w = run(api, rec, relist_period_s=0.01)
    eventually("the first watch", lambda: api.open_watches)
    with api.lock:
        api.collections[PATH] = [obj("a", "2", "ns"), obj("b", "4", "ns")]

    def end_streams_until_relisted() -> bool:
        with api.lock:
            api.open_watches[-1].shutdown()  # the server-side timeout ends the quiet stream
        return w.lists >= 2

    eventually("a periodic re-list", end_streams_until_relisted)
    eventually("the relist events", lambda: len(rec.seen()) >= 5)
    seen = rec.seen()
    assert seen[:5] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        (watches.SYNCED, ""),
        ("MODIFIED", "b"),
        (watches.SYNCED, ""),
    ]
    assert set(seen[5:]) <= {(watches.SYNCED, "")}, "an unchanged object is not reported again"
    assert api.watch_calls(PATH)[0]["timeoutSeconds"] == "1", "the stream ends by itself by the re-list time"


def test_target_of_a_resource_fills_api_version_and_kind_of_listed_items(run) -> None:
    path = objects.NODE.path()
    api = FakeWatchApi(collections={path: [obj("n1", "2")]})
    w = run(api, Recorder(), target=watches.Target.of(objects.NODE, label_selector="a=b"))
    assert w.wait_synced(5)
    assert w.get("n1") == {**obj("n1", "2"), "apiVersion": "v1", "kind": "Node"}
    assert api.list_calls(path)[0]["labelSelector"] == "a=b"
    assert (
        str(watches.Target.of(objects.NAD, "ns1"))
        == "/apis/k8s.cni.cncf.io/v1/namespaces/ns1/network-attachment-definitions"
    )


def test_the_thread_is_named_after_the_watch(run) -> None:
    api = FakeWatchApi(collections={PATH: []})
    w = run(api, Recorder())
    assert w.wait_synced(5)
    assert "watch-things" in [t.name for t in threading.enumerate()]


class SlowOpenApi(FakeWatchApi):
    """FAKE whose watch requests wait for ``release`` before answering (a request still opening)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.opening = threading.Event()
        self.release = threading.Event()

    def call_api(self, path: str, method: str, query_params: Any = None, **kw: Any) -> Any:
        if dict(query_params or []).get("watch") == "true":
            self.opening.set()
            self.release.wait(10)
        return super().call_api(path, method, query_params, **kw)


def test_close_while_the_watch_request_is_opening_ends_the_stream_it_gets(run) -> None:
    api = SlowOpenApi(collections={PATH: []})
    w = run(api, Recorder())
    assert api.opening.wait(5)
    w.close(timeout_s=0)  # the request has not answered yet: nothing to interrupt so far
    api.release.set()
    w.close(timeout_s=10)  # a hang detector, not a timing assertion
    assert not w.alive
    assert api.open_watches[0].shut.is_set() and api.open_watches[0].released.is_set()


def test_shared_stop_during_a_quiet_stream_ends_the_thread_at_the_next_event(run) -> None:
    stop = threading.Event()
    api = FakeWatchApi(collections={PATH: []})
    rec = Recorder()
    w = run(api, rec, stop=stop)
    stream = eventually("the watch to open", lambda: api.open_watches)[0]
    stop.set()
    stream.push({"type": "ADDED", "object": obj("late", "11", "ns")})
    eventually("the thread to end", lambda: not w.alive, timeout_s=10)
    assert ("ADDED", "late") not in rec.seen() and stream.released.is_set()
