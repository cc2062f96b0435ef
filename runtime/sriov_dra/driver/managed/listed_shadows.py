"""One label-selected LIST of the node's shadows per repair pass, instead of one GET per shadow.

Owns :class:`ListedShadows`, the ``NadApi`` a full repair pass (``repair``) hands to the shared
EnsureManagedBindings: at 64 prepared claims the pass used to read each of the node's 256
shadows with its own GET (256 of its 352 requests, issue 17 item 3). Now the pass lists them once
with the orphan scan's selector (``managed-by`` and ``node-uid`` labels, all namespaces: the
plugin's ClusterRole already grants that ``list``, spec §8.5, §12.3) and each shadow read of the
pass is answered from that answer.

Why the decisions stay the same:

- a listed object is exactly what a GET at the time of the LIST returns (same storage, same
  serialization), and the pass decides on it as before (``shadow_lifecycle.ensure_shadow``);
- a name the LIST did not return (truly gone, created after the LIST, or its labels were edited
  so the selector missed it) is read with a live GET, as before: "missing" is never concluded
  from the LIST alone;
- each listed object answers **one** read: a later read of the same name (the re-read after a
  failed finalizer patch, an adopt after ``AlreadyExists``) and every read after a write to that
  name go to the live API, so a retry never decides twice on the same snapshot;
- every write keeps its own preconditions (UID and resourceVersion ``test`` ops), so a listed
  object that changed since the LIST makes the write fail and be re-read, never overwrite.

What changes: a shadow changed *between* the LIST and its Pod's turn in the same pass (well under
a second at 64 claims) is seen as it was at the LIST and handled by the next pass, one
``interval_s`` later, instead of in this one.

It must never write on its own, never answer a read twice from the same listed object, and never
report a listed-but-absent name as missing without a live GET.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence

from sriov_dra.driver.managed import orphans, seams
from sriov_dra.kube import views

JsonObject = seams.JsonObject


class ListedShadows:
    """A ``NadApi`` whose reads are answered once each from one LIST, all else by ``nads``.

    Thread-safe: the shadows of one claim are ensured concurrently (``fanout``).
    Counters: ``served`` reads answered from the LIST, ``live`` reads forwarded to the API.
    """

    def __init__(self, nads: seams.NadApi, listed: Iterable[Mapping[str, object]]) -> None:
        self._nads = nads
        self._lock = threading.Lock()
        self._listed: dict[tuple[str, str], JsonObject] = {}
        for obj in listed:
            meta = views.decode_meta(obj)
            self._listed[(meta.namespace, meta.name)] = dict(obj)
        self.served = 0
        self.live = 0

    @classmethod
    def of_node(cls, nads: seams.NadApi, node_uid: str) -> ListedShadows:
        """One all-namespace LIST of ``node_uid``'s shadows (the orphan scan's selector).

        Raises: ``kube.errors`` classes of the LIST (the caller falls back to live GETs).
        """
        return cls(nads, nads.list_all(label_selector=orphans.label_selector(node_uid)))

    def _take(self, namespace: str, name: str) -> JsonObject | None:
        with self._lock:
            found = self._listed.pop((namespace, name), None)
            if found is not None:
                self.served += 1
            else:
                self.live += 1
            return found

    def _forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._listed.pop((namespace, name), None)

    def get(self, namespace: str, name: str) -> JsonObject:
        """The listed object, once; afterwards (or when it was not listed) a live GET."""
        found = self._take(namespace, name)
        return found if found is not None else self._nads.get(namespace, name)

    def create(self, body: Mapping[str, object]) -> JsonObject:
        """Forwarded; a listed object of that name is forgotten first."""
        meta = views.decode_meta(body)
        self._forget(meta.namespace, meta.name)
        return self._nads.create(body)

    def delete(self, namespace: str, name: str, *, uid: str) -> None:
        """Forwarded; a listed object of that name is forgotten first."""
        self._forget(namespace, name)
        self._nads.delete(namespace, name, uid=uid)

    def json_patch(self, namespace: str, name: str, ops: Sequence[Mapping[str, object]]) -> JsonObject:
        """Forwarded; a listed object of that name is forgotten first."""
        self._forget(namespace, name)
        return self._nads.json_patch(namespace, name, ops)

    def list_all(self, *, label_selector: str) -> list[JsonObject]:
        """Forwarded: a LIST is always live."""
        return self._nads.list_all(label_selector=label_selector)
