"""One label-selected LIST of the node's shadows per repair pass, instead of one GET per shadow.

:class:`ListedShadows` is the ``NadApi`` a full repair pass hands to the ensure pass: it lists
the node's shadows once with the orphan scan's selector (docs/design.md#orphans) and answers each
shadow read of the pass from that list, so decisions stay those of a GET at the time of the LIST.
A name the LIST lacks is read live ("missing" is never concluded from the LIST); each listed object
answers one read, and reads after a write go live; writes keep their own preconditions. A shadow
changed during the pass is handled by the next one.
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
