"""FAKE ``ApiClient`` for list+watch tests: serves collections and scripted watch streams.

This is a test fake, not an API server: it answers ``call_api`` the way the official client does
with ``_preload_content=False`` (an object with ``data``, ``stream()``, ``close()``,
``release_conn()`` and ``shutdown()``). Collections are dicts keyed by path; GET of a collection path lists it, GET of
``<path>/<name>`` reads one object, and ``status`` overrides make any path answer with an HTTP
error. Each watch call takes the next script of its path: an ``ApiException`` to raise, or a list
of events, optionally ending with :data:`HOLD` (block until ``shutdown()``, like a quiet stream).
With no script left a watch holds. Every call is recorded in ``calls``.
"""

from __future__ import annotations

import json
import queue
import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.rest import ApiException

HOLD = "HOLD"
_END = object()


class FakeResponse:
    """A raw response: ``data`` for reads, ``stream()`` for watches."""

    def __init__(self, data: bytes = b"", events: list[Any] | None = None) -> None:
        self.data = data
        self._lines: queue.Queue[object] = queue.Queue()
        self.released = threading.Event()
        self.shut = threading.Event()
        self.closed = threading.Event()
        for event in events or []:
            self._lines.put(event)
        if events is not None and (not events or events[-1] != HOLD):
            self._lines.put(_END)

    def stream(self, amt: int | None = None, decode_content: bool = False) -> Iterator[bytes]:
        while True:
            item = self._lines.get()
            if item is _END:
                return
            if item == HOLD:
                continue
            yield (json.dumps(item) + "\n").encode()

    def push(self, event: dict[str, Any]) -> None:
        """Deliver one more event on this (held) stream."""
        self._lines.put(event)

    def release_conn(self) -> None:
        self.released.set()

    def close(self) -> None:
        """What the client's ``Watch.stream`` calls when a stream ends (before ``release_conn``)."""
        self.closed.set()

    def shutdown(self) -> None:
        self.shut.set()
        self._lines.put(_END)


@dataclass
class FakeWatchApi:
    """FAKE client. ``collections[path]`` is the list answer's items; ``rv`` its resourceVersion."""

    collections: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rv: str = "10"
    status: dict[str, int] = field(default_factory=dict)
    list_failures: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    scripts: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    calls: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    open_watches: list[FakeResponse] = field(default_factory=list)
    streams: dict[str, list[FakeResponse]] = field(default_factory=lambda: defaultdict(list))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def call_api(self, path: str, method: str, query_params: Any = None, **_: Any) -> FakeResponse:
        query = dict(query_params or [])
        with self.lock:
            self.calls.append((method, path, query))
            if path in self.status:
                raise ApiException(status=self.status[path], reason="scripted")
            if query.get("watch") == "true":
                script = self.scripts[path].pop(0) if self.scripts[path] else [HOLD]
                if isinstance(script, ApiException):
                    raise script
                resp = FakeResponse(events=list(script))
                self.open_watches.append(resp)
                self.streams[path].append(resp)
                return resp
            if self.list_failures[path]:
                raise ApiException(status=self.list_failures[path].pop(0), reason="scripted")
            if path in self.collections:
                doc = {"items": self.collections[path], "metadata": {"resourceVersion": self.rv}}
                return FakeResponse(json.dumps(doc).encode())
            parent, _, name = path.rpartition("/")
            for item in self.collections.get(parent, []):
                if item["metadata"]["name"] == name:
                    return FakeResponse(json.dumps(item).encode())
            raise ApiException(status=404, reason="NotFound")

    def watch_calls(self, path: str) -> list[dict[str, str]]:
        with self.lock:
            return [q for m, p, q in self.calls if p == path and q.get("watch") == "true"]

    def list_calls(self, path: str) -> list[dict[str, str]]:
        with self.lock:
            return [q for m, p, q in self.calls if p == path and m == "GET" and q.get("watch") != "true"]


def obj(name: str, rv: str, namespace: str = "", **extra: Any) -> dict[str, Any]:
    """A minimal object with metadata (name, namespace, resourceVersion, uid)."""
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv, "uid": f"uid-{name}"}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta, **extra}
