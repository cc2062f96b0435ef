"""Writing one condition on an object's status subresource, only when it changed.

Server-side apply as the operator's field manager, carrying only that condition, so other
writers' conditions stay. Nothing is written when type, status, reason, message and
observedGeneration are unchanged (no update loops); the transition time is kept while the status
is unchanged. Each transition records an Event (best effort). Never writes a condition type it
does not own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from sriov_dra.core.operator import conditions
from sriov_dra.kube import api_time, errors, events, objects, views

log = logging.getLogger(__name__)


def utc_now() -> str:
    """The current time as RFC 3339 seconds in UTC (condition transition times)."""
    return api_time.rfc3339()


class StatusWriter:
    """Writes conditions through ``client``; ``now`` supplies transition times."""

    def __init__(
        self,
        client: objects.Objects,
        *,
        now: Callable[[], str] = utc_now,
        recorder: events.Recorder | None = None,
    ) -> None:
        self.client = client
        self.now = now
        self.recorder = recorder

    def set(
        self,
        res: objects.Resource,
        obj: Mapping[str, object],
        desired: conditions.Condition,
        *,
        event_reason: str | None = None,
    ) -> bool:
        """Apply ``desired`` on ``obj`` when it differs from the stored one; True when written.

        The Event of a write: with ``event_reason``, one Event of that reason (Warning unless the
        condition is True) for every write, so that each new problem message is seen; without it,
        ``<Type>Added``/``<Type>Changed`` only when the status changed.
        Raises: :class:`sriov_dra.kube.errors.ApiError` from the apply call.
        """
        stored = conditions.find(obj, desired.type)
        if not conditions.needs_write(stored, desired):
            return False
        meta = views.mapping(obj.get("metadata"))
        body = conditions.to_api(desired, stored, now=self.now())
        self.client.apply_status(
            res, str(meta.get("name")), views.optional_text(meta.get("namespace")), {"conditions": [body]}
        )
        if self.recorder is not None and event_reason is not None:
            self.recorder.record(
                res, obj, reason=event_reason, note=desired.message, warning=desired.status != "True"
            )
        elif self.recorder is not None and (stored is None or stored.get("status") != desired.status.value):
            change = "Added" if stored is None else "Changed"
            self.recorder.record(
                res,
                obj,
                reason=f"{desired.type}{change}",
                note=desired.message,
                warning=desired.status != "True",
            )
        return True

    def remove(self, res: objects.Resource, obj: Mapping[str, object], type_: str) -> bool:
        """Remove the condition ``type_`` with a JSON Patch guarded by a ``test`` op; True when removed."""
        status = obj.get("status") or {}
        items = status.get("conditions") if isinstance(status, Mapping) else None
        if not isinstance(items, list):
            return False
        for index, item in enumerate(items):
            if isinstance(item, Mapping) and item.get("type") == type_:
                meta = views.mapping(obj.get("metadata"))
                ops = [
                    {"op": "test", "path": f"/status/conditions/{index}/type", "value": type_},
                    {"op": "remove", "path": f"/status/conditions/{index}"},
                ]
                try:
                    self.client.json_patch(
                        res,
                        str(meta.get("name")),
                        views.optional_text(meta.get("namespace")),
                        ops,
                        subresource="status",
                    )
                except errors.Invalid:
                    log.info("condition moved; retried next reconcile", extra={"op": "remove-condition"})
                    return False
                return True
        return False
