"""The one list+watch+cache of the package (plugin and operator), over plain-dict objects.

One daemon thread per :class:`Watch` lists a collection, watches it from the list's
resourceVersion through ``kubernetes.watch.Watch`` (bookmarks advance it), resumes after a stream
ends, re-lists on 410 Gone and optionally periodically, backs off after failures, and caches the
objects. Every request carries a bounded ``timeoutSeconds``; :meth:`Watch.close` interrupts at
once. A handler exception is logged, counted and contained. Also :func:`request_json`, the raw
JSON request helper the plugin's API modules share. Interprets and writes nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.watch import watch as k8s_watch

from sriov_dra.kube import errors, objects, pods

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
    return pods.decode_object(raw, action)


@dataclass(frozen=True)
class Target:
    """A collection to watch.

    Shapes: ``path`` is the collection URL path (``/api/v1/nodes``,
    ``/apis/<group>/<version>/namespaces/<ns>/<plural>``); selectors use the API's syntax.
    ``api_version``/``kind``, when set, are filled into listed items that lack them (a LIST of
    a core kind returns items without them).
    """

    path: str
    field_selector: str = ""
    label_selector: str = ""
    api_version: str = ""
    kind: str = ""

    @classmethod
    def of(
        cls,
        res: objects.Resource,
        namespace: str | None = None,
        *,
        field_selector: str = "",
        label_selector: str = "",
    ) -> Target:
        """The collection of ``res`` in ``namespace`` (all namespaces when ``None``)."""
        return cls(res.path(namespace), field_selector, label_selector, res.api_version, res.kind)

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


class _DictStream(k8s_watch.Watch):  # type: ignore[misc]  # the client is untyped
    """The client's ``Watch`` keeping objects as dicts.

    An ``ERROR`` Status without ``code``/``reason``/``message`` (all ``omitempty`` on the wire)
    still ends the stream as an ``ApiException`` instead of a ``KeyError`` inside the client.
    """

    def __init__(self) -> None:
        super().__init__(return_type="object")

    def unmarshal_event(self, data: str, return_type: str) -> Any:
        event = super().unmarshal_event(data, return_type)
        if isinstance(event, dict) and event.get("type") == "ERROR":
            status = event.get("raw_object")
            status = dict(status) if isinstance(status, dict) else {}
            status.setdefault("code", 0)
            status.setdefault("reason", "Unknown")
            status.setdefault("message", "")
            event["raw_object"] = status
        return event


def _shutdown(resp: Any) -> None:
    """Shut the socket of a streaming response so a blocked read returns (urllib3 ≥ 2.3)."""
    try:
        resp.shutdown()
    except Exception:  # already released or closed: nothing left to interrupt
        LOG.debug("watch stream already closed")


class Watch:
    """List+watch of one :class:`Target` on one daemon thread (``watch-<name>``), with a cache.

    ``on_event(kind, obj)`` runs on the watch thread for ADDED/MODIFIED/DELETED and for
    :data:`SYNCED` after each full list (a re-list reports only the difference to the cache:
    objects gone, new, or with another resourceVersion). ``on_handler_error(name)`` is called
    after a contained handler exception. The thread ends at once on :meth:`close`; when only the
    shared ``stop`` is set it ends at the next event or when the stream times out.
    Units: ``timeout_s`` is the server-side watch timeout (the bound on one stream); backoffs
    and ``relist_period_s`` (0: re-list only on 410 Gone) in seconds.
    Source: kubernetes-client/python 36.x ``kubernetes/watch/watch.py`` (with
    ``timeout_seconds`` set, ``stream`` makes exactly one request and raises ``ApiException``
    for an ``ERROR`` event instead of retrying it).
    """

    def __init__(
        self,
        api: client.ApiClient,
        target: Target,
        on_event: Handler,
        *,
        name: str,
        stop: threading.Event | None = None,
        timeout_s: int = 300,
        relist_period_s: float = 0.0,
        backoff_initial_s: float = 0.2,
        backoff_max_s: float = 10.0,
        on_handler_error: Callable[[str], None] | None = None,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] = LOG,
    ) -> None:
        self.api = api
        self.target = target
        self.name = name
        self._on_event = on_event
        self._on_handler_error = on_handler_error
        self._stop = stop if stop is not None else threading.Event()
        self._closing = threading.Event()
        self._timeout_s = max(1, int(min(timeout_s, relist_period_s) if relist_period_s > 0 else timeout_s))
        self._relist_period_s = relist_period_s
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self._log = log
        self._lock = threading.Lock()
        self._cache: dict[str, JsonObject] = {}
        self._synced = threading.Event()
        self._stream: Any = None
        self._resp: Any = None
        self._rv = ""
        self._listed_at = 0.0
        self._thread: threading.Thread | None = None
        self.handler_errors = 0
        self.lists = 0
        self.streams = 0
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
        """Stop this watch now: interrupt the open (or opening) stream and join the thread.

        Units: ``timeout_s`` seconds to wait for the thread. Idempotent.
        """
        self._closing.set()
        with self._lock:
            stream, resp = self._stream, self._resp
        if stream is not None:
            stream.stop()
        if resp is not None:
            _shutdown(resp)
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
        """Wait ``seconds`` unless stopped; wakes at once on close, within 0.2 s of a shared stop."""
        deadline = time.monotonic() + seconds
        while not self._stopping() and (left := deadline - time.monotonic()) > 0:
            self._closing.wait(min(left, 0.2))

    def _run(self) -> None:
        backoff = self._backoff_initial_s
        while not self._stopping():
            try:
                if not self._rv or self._relist_due():
                    self._rv = self._list()
                self._watch()
                backoff = self._backoff_initial_s
            except _Expired:
                self._log.info("watch expired, re-listing", extra={"watch": self.name})
                self._rv = ""
            except Exception as exc:  # API error or broken stream: resume from rv after a pause
                if self._stopping():
                    break
                self.failures += 1
                self.last_error = (
                    str(exc) if isinstance(exc, errors.ApiError) else f"{type(exc).__name__}: {exc}"
                )[:512]
                self._log.warning("watch failed", extra={"watch": self.name, "error": self.last_error})
                self._pause(backoff)
                backoff = min(backoff * 2, self._backoff_max_s)

    def _relist_due(self) -> bool:
        return self._relist_period_s > 0 and time.monotonic() - self._listed_at >= self._relist_period_s

    def _list(self) -> str:
        doc = request_json(
            self.api, f"list {self.target}", "GET", self.target.path, query=self.target.query()
        )
        items = [i for i in doc.get("items") or [] if isinstance(i, dict)]
        for item in items:
            if self.target.api_version:
                item.setdefault("apiVersion", self.target.api_version)
            if self.target.kind:
                item.setdefault("kind", self.target.kind)
        fresh = {_key(i): i for i in items}
        with self._lock:
            old = self._cache
            self._cache = fresh
        self.lists += 1
        self._listed_at = time.monotonic()
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

        Each event (bookmarks included) advances that resourceVersion, so a stream that breaks
        midway resumes after the last event it delivered.
        Raises: :class:`_Expired` on 410 Gone; ``errors.ApiError`` when the request is refused
        or the server ends the stream with an ``ERROR`` event.
        """
        stream = _DictStream()
        with self._lock:
            self._stream = stream
        events = stream.stream(self._open, resource_version=self._rv, timeout_seconds=self._timeout_s)
        try:
            for event in events:
                if self._stopping():
                    break
                if isinstance(event, dict):
                    self._rv = str(stream.resource_version or self._rv)
                    self._event(event)
        except ApiException as exc:  # only an ERROR event: _open translates its own failures
            if exc.status == 410:
                raise _Expired from exc
            raise errors.ServerError(
                f"watch {self.target}: the server ended the stream with HTTP {exc.status} {exc.reason}"[:512]
            ) from exc
        finally:
            events.close()
            with self._lock:
                self._stream = None
                self._resp = None

    def _open(self, **kwargs: Any) -> Any:
        """Open one watch request (called by the client's ``Watch.stream``); interrupt it if closing.

        Raises: :class:`_Expired` on HTTP 410; ``errors.ApiError`` for other refusals.
        """
        query = [
            *self.target.query(),
            ("watch", "true"),
            ("resourceVersion", str(kwargs.get("resource_version") or "")),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self._timeout_s)),
        ]
        with errors.translated(f"watch {self.target}"):
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
                raise
        self.streams += 1
        with self._lock:
            self._resp = resp
            closing = self._stopping()
        if closing:  # stopped while the request was opening: end the stream now
            _shutdown(resp)
        return resp

    def _event(self, event: JsonObject) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if kind not in (ADDED, MODIFIED, DELETED) or not isinstance(obj, dict):
            return  # BOOKMARK (its resourceVersion is already taken) or an unknown type
        key = _key(obj)
        with self._lock:
            if kind == DELETED:
                self._cache.pop(key, None)
            else:
                self._cache[key] = obj
        self._fire(str(kind), obj)

    def _fire(self, kind: str, obj: JsonObject) -> None:
        try:
            self._on_event(kind, obj)
        except Exception:
            self.handler_errors += 1
            self._log.exception("watch handler failed", extra={"watch": self.name, "op": kind})
            if self._on_handler_error is not None:
                self._on_handler_error(self.name)
