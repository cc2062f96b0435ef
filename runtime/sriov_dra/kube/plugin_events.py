"""The plugin's Kubernetes Events (``events.k8s.io/v1``) about Pods, claims and shadow NADs.

The Event body and its create call: ``regarding`` the Pod, ResourceClaim or NAD, a bounded
CamelCase ``reason`` (``sriov_dra_rules.errors.Reason``), a one-line ``note`` cut to the API's
1 kB, ``type`` Normal/Warning, and the reporting service and node, so ``kubectl describe`` shows
them beside the object. RBAC: ``events`` create. Never puts a payload in a note; never retries
(best effort: the caller logs a failure, never raises it into a prepare).
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any, Final

from kubernetes import client

from sriov_dra.kube import errors

NOTE_LIMIT: Final = 1024
"""``note`` is limited to 1 kB by the API server."""
DEFAULT_TIMEOUT_S: Final = 5.0


@dataclass(frozen=True)
class ObjectRef:
    """The object an Event is about.

    Shapes: ``api_version`` ``v1`` for Pods and Nodes, ``resource.k8s.io/v1`` for claims,
    ``k8s.cni.cncf.io/v1`` for NADs; ``namespace`` ``""`` for a cluster-scoped object (its Events
    go to ``default``); ``uid`` may be ``""`` when unknown.
    """

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    def body(self) -> dict[str, str]:
        """The ``regarding`` object reference (no namespace for a cluster-scoped object)."""
        out = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        return out


def event_body(
    ref: ObjectRef,
    *,
    reason: str,
    note: str,
    warning: bool,
    action: str,
    controller: str,
    instance: str,
    now: dt.datetime,
) -> dict[str, Any]:
    """The ``events.k8s.io/v1`` Event object for one occurrence.

    Shapes: ``metadata.name`` ``<object name>.<16 hex>``; ``eventTime`` RFC 3339 with
    microseconds; ``note`` at most :data:`NOTE_LIMIT` characters.
    """
    short = note if len(note) <= NOTE_LIMIT else note[: NOTE_LIMIT - 3] + "..."
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{ref.name}.{uuid.uuid4().hex[:16]}", "namespace": ref.namespace or "default"},
        "eventTime": now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": controller,
        "reportingInstance": instance,
        "action": action,
        "reason": reason,
        "regarding": ref.body(),
        "note": short,
        "type": "Warning" if warning else "Normal",
    }


class EventRecorder:
    """Creates Events through one ``ApiClient`` as ``controller`` on ``instance`` (the node).

    Units: ``timeout_s`` seconds per request.
    """

    def __init__(
        self, api: client.ApiClient, *, controller: str, instance: str, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self._api = client.EventsV1Api(api)
        self._controller = controller
        self._instance = instance
        self._timeout_s = timeout_s

    def emit(self, ref: ObjectRef, *, reason: str, note: str, warning: bool, action: str) -> None:
        """Create one Event about ``ref``.

        Raises: the ``errors.ApiError`` classes (callers log and continue).
        """
        body = event_body(
            ref,
            reason=reason,
            note=note,
            warning=warning,
            action=action,
            controller=self._controller,
            instance=self._instance,
            now=dt.datetime.now(dt.UTC),
        )
        with errors.translated(f"create events.events.k8s.io {ref.namespace}/{ref.name}"):
            response = self._api.create_namespaced_event(
                ref.namespace or "default", body, _preload_content=False, _request_timeout=self._timeout_s
            )
            response.data  # noqa: B018 - release the connection
