"""Watches of plain-dict objects through the official client's ``SharedInformer`` and ``Watch``.

Owns the adapter that lets ``kubernetes.informer.SharedInformer`` (one daemon thread per watch:
list, then watch from the last resourceVersion, re-list on 410 Gone, optional periodic re-list)
work on any resource as dicts, and the wrapper that stops it from a ``threading.Event``, backs
off with ``stop.wait`` after a failed watch instead of reconnecting in a tight loop, and contains
and counts every handler exception so one bad handler cannot stop the watch.

It must never decide what an event means; handlers receive ``(event_type, object)`` and do that.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from kubernetes import informer

from sriov_dra.kube import objects

log = logging.getLogger(__name__)

ADDED, MODIFIED, DELETED = informer.ADDED, informer.MODIFIED, informer.DELETED
Handler = Callable[[str, objects.JsonObject], None]


class ListWatch:
    """A list/watch function over dicts in the shape ``SharedInformer`` and ``Watch`` call.

    ``SharedInformer`` calls it for the initial list (returns an object with ``items`` and
    ``metadata.resource_version``); ``Watch.stream`` calls it with ``watch=True`` and reads the
    raw stream. The ``:rtype: object`` line below tells ``Watch`` to keep events as dicts while
    still tracking their resourceVersion.

    :rtype: object
    """

    def __init__(
        self,
        client: objects.Objects,
        res: objects.Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> None:
        self.client = client
        self.res = res
        self.namespace = namespace
        self.label_selector = label_selector
        self.listed = threading.Event()

    def __call__(self, **kwargs: Any) -> Any:
        query: list[tuple[str, str]] = []
        if self.label_selector:
            query.append(("labelSelector", self.label_selector))
        if kwargs.get("watch"):
            self.listed.set()  # SharedInformer watches only after its list filled the cache
            if kwargs.get("resource_version"):
                query.append(("resourceVersion", str(kwargs["resource_version"])))
            if kwargs.get("timeout_seconds"):
                query.append(("timeoutSeconds", str(int(kwargs["timeout_seconds"]))))
            query.append(("allowWatchBookmarks", "true"))
            return self.client.raw_watch(self.res, self.namespace, query)
        listing = self.client.list(self.res, self.namespace, label_selector=self.label_selector)
        return SimpleNamespace(
            items=listing.items, metadata=SimpleNamespace(resource_version=listing.resource_version)
        )


class Watcher:
    """One informer on one resource, started and stopped explicitly.

    ``on_event(event_type, obj)`` runs on the informer thread for ADDED/MODIFIED/DELETED (a
    periodic re-list delivers MODIFIED for every object, so handlers must compare content);
    ``on_handler_error(name)`` counts contained handler failures.
    Units: ``resync_period_s``, ``backoff_initial_s``, ``backoff_max_s`` in seconds.
    """

    def __init__(
        self,
        client: objects.Objects,
        res: objects.Resource,
        on_event: Handler,
        *,
        name: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        resync_period_s: float = 0.0,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
        on_handler_error: Callable[[str], None] | None = None,
    ) -> None:
        self.name = name
        self._lw = ListWatch(client, res, namespace=namespace, label_selector=label_selector)
        self._informer = informer.SharedInformer(self._lw, resync_period=resync_period_s)
        self._on_event = on_event
        self._on_handler_error = on_handler_error
        self._stopping = threading.Event()
        self._backoff_initial_s = backoff_initial_s
        self._backoff_max_s = backoff_max_s
        self._backoff_s = backoff_initial_s
        for kind in (ADDED, MODIFIED, DELETED):
            self._informer.add_event_handler(kind, self._handler(kind))
        self._informer.add_event_handler(informer.ERROR, self._on_error)

    def _handler(self, kind: str) -> Callable[[Any], None]:
        def handle(obj: Any) -> None:
            self._backoff_s = self._backoff_initial_s
            if not isinstance(obj, dict):
                return
            try:
                self._on_event(kind, obj)
            except Exception:
                log.exception("watch handler failed", extra={"watch": self.name, "op": kind})
                if self._on_handler_error is not None:
                    self._on_handler_error(self.name)

        return handle

    def _on_error(self, exc: Any) -> None:
        """Pause before the informer reconnects; wakes at once on stop."""
        log.warning("watch interrupted", extra={"watch": self.name, "error": str(exc)[:256]})
        self._stopping.wait(self._backoff_s)
        self._backoff_s = min(self._backoff_s * 2, self._backoff_max_s)

    def start(self) -> None:
        """Start the informer's daemon thread (list, then watch)."""
        self._informer.start()

    def stop(self) -> None:
        """Stop the watch and join its thread."""
        self._stopping.set()
        self._informer.stop()

    def synced(self, timeout_s: float | None = None) -> bool:
        """Wait until the initial list filled the cache. Units: seconds."""
        return self._lw.listed.wait(timeout_s)

    def items(self) -> list[objects.JsonObject]:
        """A snapshot of the cached objects."""
        return [o for o in self._informer.cache.list() if isinstance(o, dict)]
