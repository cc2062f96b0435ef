"""Kubernetes Events (``events.k8s.io/v1``) recorded about objects read through ``kube.objects``.

:class:`Recorder`, used by the operator's status writer: one Event per call ``regarding`` the
object, a CamelCase reason, a note cut to the API's 1 kB, type Normal or Warning. Best effort: a
failed create is logged, never raised, so an Event never fails a reconcile. No payloads in notes.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Mapping
from typing import Any, Final

from sriov_dra.kube import errors, objects

log = logging.getLogger(__name__)

NOTE_LIMIT: Final = 1024


class Recorder:
    """Creates Events through ``client`` as ``controller`` (reportingController) on ``instance``."""

    def __init__(self, client: objects.Objects, *, controller: str, instance: str) -> None:
        self.client = client
        self.controller = controller
        self.instance = instance

    def record(
        self, res: objects.Resource, obj: Mapping[str, Any], *, reason: str, note: str, warning: bool
    ) -> None:
        """Record one Event about ``obj`` (of resource ``res``); failures are logged only."""
        meta = obj.get("metadata") or {}
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "default")
        regarding = {"apiVersion": res.api_version, "kind": res.kind, "name": name}
        if meta.get("namespace"):
            regarding["namespace"] = namespace
        if meta.get("uid"):
            regarding["uid"] = str(meta["uid"])
        short = note if len(note) <= NOTE_LIMIT else note[: NOTE_LIMIT - 3] + "..."
        body = {
            "apiVersion": objects.EVENT.api_version,
            "kind": objects.EVENT.kind,
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "eventTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": "Reconcile",
            "reason": reason,
            "regarding": regarding,
            "note": short,
            "type": "Warning" if warning else "Normal",
        }
        try:
            self.client.create(objects.EVENT, body)
        except errors.ApiError as exc:
            log.warning("event not recorded: %s", exc, extra={"op": "event", "outcome": "failed"})
