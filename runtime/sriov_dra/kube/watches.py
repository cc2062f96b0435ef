"""A small threaded list+watch over plain-dict objects, with field and label selectors.

Owns one daemon thread per watch that lists a collection, then watches it from the list's
resourceVersion, resumes from the last seen resourceVersion (bookmarks included) when a stream
ends, re-lists on 410 Gone, backs off with ``stop.wait`` after failures, and keeps a cache of
the objects. Handlers get ``(event_type, object)``; an exception in a handler is logged, counted
and contained, so one bad handler cannot stop the watch. :meth:`Watch.close` interrupts a
blocked stream (urllib3 ``shutdown``) so shutdown takes well under a second.

Also owns :func:`request_json`, the one raw JSON request helper the plugin's API modules share
(the answer is the server's JSON with its camelCase keys, no generated model classes).

It must never interpret an object, write to the API, or retry a handler.
Source: STYLE.md §4 (kubernetes-client informer); the operator's ``kube.informers`` wraps the
client's ``SharedInformer`` instead, which has no field selectors and cannot interrupt a stream.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.watch import watch as k8s_watch

from sriov_dra.kube import errors

LOG = logging.getLogger(__name__)

ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"
SYNCED: Final = "SYNCED"
"""Fired (with an empty object) after every full list, including one that found nothing."""

JsonObject = dict[str, Any]
ApiClient = client.ApiClient
"""The client type, for service code that may not import ``kubernetes`` itself (layer contract)."""
Handler = Callable[[str, JsonObject], None]


def request_json(
    api: client.ApiClient,
    action: str,
    method: str,
    path: str,
    *,
    query: Sequence[tuple[str, str]] = (),
    body: object = None,
    timeout_s: float = 30.0,
) -> JsonObject:
    """One API request whose answer is a JSON object (or empty).

    Units: ``timeout_s`` seconds for the whole request.
    Shapes: ``path`` like ``/apis/resource.k8s.io/v1/resourceslices``; ``query`` pairs.
    Raises: :class:`errors.ApiError` subclasses naming ``action``; ``errors.ServerError`` when
    the body is not a JSON object.
    """
    with errors.translated(action):
        resp = api.call_api(
            path,
            method,
            query_params=list(query),
            header_params={"Accept": "application/json", "Content-Type": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
            _preload_content=False,
            _request_timeout=timeout_s,
        )
        try:
            raw = resp.data
        finally:
            resp.release_conn()
    if not raw:
        return {}
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise errors.ServerError(f"{action}: the server answered with a body that is not JSON") from exc
    if not isinstance(doc, dict):
        raise errors.ServerError(f"{action}: the server answered with JSON that is not an object")
    return doc


@dataclass(frozen=True)
class Target:
    """A collection to watch.

    Shapes: ``path`` is the collection URL path (``/api/v1/nodes``,
    ``/apis/<group>/<version>/namespaces/<ns>/<plural>``); selectors use the API's syntax.
    """

    path: str
    field_selector: str = ""
    label_selector: str = ""

    def query(self) -> list[tuple[str, str]]:
        """The selector query parameters."""
        out = []
        if self.field_selector:
            out.append(("fieldSelector", self.field_selector))
        if self.label_selector:
            out.append(("labelSelector", self.label_selector))
        return out

    def __str__(self) -> str:
        sel = ",".join(v for _, v in self.query())
        return f"{self.path}?{sel}" if sel else self.path


def _key(obj: JsonObject) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or ""
    return f"{ns}/{meta.get('name', '')}"


def _rv(obj: JsonObject) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class _Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): re-list."""


class Watch:
    """List+watch of one :class:`Target` on one daemon thread, with a cache.

    The thread stops when ``stop`` is set (checked between events and streams) or at once on
    :meth:`close`. Units: ``timeout_s`` is the server-side watch timeout, backoffs in seconds.
    """

    def __init__(
        self,
        api: client.ApiClient,
        target: Target,
        on_event: Handler,
        *,
        name: str,
        stop: threading.Event,
        timeout_s: int = 300,
        backoff_initial_s: float = 0.2,
        backoff_max_s: float = 10.0,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] = LOG,
    ) -> None:
        self.api = api
        self.target = target
        self.name = name
        self._on_event = on_event
        self._stop = stop
        self._closing = threading.Event()
        self._timeout_s = timeout_s
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self._log = log
        self._lock = threading.Lock()
        self._cache: dict[str, JsonObject] = {}
        self._synced = threading.Event()
        self._resp: Any = None
        self._rv = ""
        self._thread: threading.Thread | None = None
        self.handler_errors = 0
        self.lists = 0
        self.failures = 0
        self.last_error = ""

    # ------------------------------------------------------------------ public
    def start(self) -> Watch:
        """Start the daemon thread (list, then watch). Idempotent."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"watch-{self.name}", daemon=True)
            self._thread.start()
        return self

    def close(self, *, timeout_s: float = 2.0) -> None:
        """Stop this watch now: interrupt the open stream and join the thread (up to ``timeout_s``)."""
        self._closing.set()
        self._interrupt()
        if self._thread is not None:
            self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        """True while the thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def wait_synced(self, timeout_s: float | None = None) -> bool:
        """Wait until the first list filled the cache. Units: seconds."""
        return self._synced.wait(timeout_s)

    @property
    def synced(self) -> bool:
        """True once the first list completed."""
        return self._synced.is_set()

    def items(self) -> tuple[JsonObject, ...]:
        """The cached objects, sorted by namespace/name (callers must not mutate them)."""
        with self._lock:
            return tuple(self._cache[k] for k in sorted(self._cache))

    def get(self, name: str, namespace: str = "") -> JsonObject | None:
        """One cached object, or ``None``."""
        with self._lock:
            return self._cache.get(f"{namespace}/{name}")

    # ------------------------------------------------------------------ thread
    def _stopping(self) -> bool:
        return self._stop.is_set() or self._closing.is_set()

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` unless stopped; wakes within 0.2 s of a shared stop."""
        remaining = seconds
        while remaining > 0 and not self._stopping():
            step = min(remaining, 0.2)
            self._closing.wait(step)
            remaining -= step

    def _run(self) -> None:
        backoff = self._backoff_initial_s
        while not self._stopping():
            try:
                if not self._rv:
                    self._rv = self._list()
                self._watch()
                backoff = self._backoff_initial_s
            except _Expired:
                self._log.info("watch expired, re-listing", extra={"watch": self.name})
                self._rv = ""
            except errors.ApiError as exc:
                if self._stopping():
                    break
                self.failures += 1
                self.last_error = str(exc)
                self._log.warning("watch failed", extra={"watch": self.name, "error": str(exc)[:256]})
                self._pause(backoff)
                backoff = min(backoff * 2, self._backoff_max_s)
            except Exception as exc:  # a broken stream; resume from rv after a pause
                if self._stopping():
                    break
                self.failures += 1
                self.last_error = f"{type(exc).__name__}: {str(exc)[:256]}"
                self._log.warning("watch stream broke", extra={"watch": self.name, "error": self.last_error})
                self._pause(backoff)
                backoff = min(backoff * 2, self._backoff_max_s)

    def _list(self) -> str:
        doc = request_json(
            self.api, f"list {self.target}", "GET", self.target.path, query=self.target.query()
        )
        items = [i for i in doc.get("items") or [] if isinstance(i, dict)]
        fresh = {_key(i): i for i in items}
        with self._lock:
            old = self._cache
            self._cache = fresh
        self.lists += 1
        for key in sorted(old.keys() - fresh.keys()):
            self._fire(DELETED, old[key])
        for key in sorted(fresh):
            if key not in old:
                self._fire(ADDED, fresh[key])
            elif _rv(old[key]) != _rv(fresh[key]):
                self._fire(MODIFIED, fresh[key])
        self._synced.set()
        self._fire(SYNCED, {})
        return str((doc.get("metadata") or {}).get("resourceVersion") or "")

    def _watch(self) -> None:
        """Stream events from the last resourceVersion until the server ends the watch.

        Each event advances that resourceVersion, so a stream that breaks midway resumes after
        the last event it delivered.
        """
        query = [
            *self.target.query(),
            ("watch", "true"),
            ("resourceVersion", self._rv),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self._timeout_s)),
        ]
        try:
            resp = self.api.call_api(
                self.target.path,
                "GET",
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
                _request_timeout=(10, self._timeout_s + 30),
            )
        except ApiException as exc:
            if exc.status == 410:
                raise _Expired from exc
            raise errors.translate(exc, action=f"watch {self.target}") from exc
        self._resp = resp
        try:
            if self._stopping():
                return
            for line in k8s_watch.iter_resp_lines(resp):
                if self._stopping():
                    break
                if line:
                    self._event(json.loads(line))
        finally:
            self._resp = None
            resp.release_conn()

    def _event(self, event: JsonObject) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            return
        if kind == "ERROR":
            if obj.get("code") == 410 or obj.get("reason") in ("Expired", "Gone"):
                raise _Expired
            raise errors.ServerError(f"watch {self.target}: {str(obj.get('message'))[:256]}")
        self._rv = _rv(obj) or self._rv
        if kind == "BOOKMARK":
            return
        key = _key(obj)
        with self._lock:
            if kind == DELETED:
                self._cache.pop(key, None)
            elif kind in (ADDED, MODIFIED):
                self._cache[key] = obj
            else:
                return
        self._fire(str(kind), obj)

    def _fire(self, kind: str, obj: JsonObject) -> None:
        try:
            self._on_event(kind, obj)
        except Exception:
            self.handler_errors += 1
            self._log.exception("watch handler failed", extra={"watch": self.name, "op": kind})

    def _interrupt(self) -> None:
        resp = self._resp
        if resp is None:
            return
        try:
            resp.shutdown()
        except Exception:  # already released or closed: nothing left to interrupt
            self._log.debug("watch stream already closed", extra={"watch": self.name})
