"""The plugin's Pod calls: a live GET and a conditional JSON Patch of annotations.

The two Pod requests of the auto-attach path (docs/design.md#selections): the live GET (never a
cache) and an RFC 6902 JSON Patch whose ``test`` operations on ``/metadata/uid`` and
``/metadata/resourceVersion`` make it conditional (ops from ``core.plugin.selections``). A failed
``test`` is HTTP 422, so callers treat ``errors.Invalid`` like a conflict: re-read and recompute.
RBAC (docs/design.md#rbac): ``pods`` get, patch. Never retries, caches, or writes other ops.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from kubernetes import client

from sriov_dra.kube import pods

DEFAULT_TIMEOUT_S: Final = 10.0
"""Budget of one Pod request."""
FIELD_MANAGER: Final = "sriov-dra-plugin"


class PodClient:
    """Pod requests through one ``ApiClient``; every method is one HTTP request.

    Units: ``timeout_s`` seconds per request.
    """

    def __init__(self, api: client.ApiClient, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._raw = api
        self._api = client.CoreV1Api(api)
        self._timeout_s = timeout_s

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """Live GET of Pod ``namespace/name`` (see :func:`sriov_dra.kube.pods.get_pod`)."""
        return pods.get_pod(self._raw, namespace, name, timeout_s=self._timeout_s)

    def json_patch(self, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Apply the RFC 6902 patch ``ops`` to Pod ``namespace/name``; return the patched Pod.

        Raises: ``errors.Invalid`` (422) for a failed ``test`` (the Pod changed or was replaced)
        or a refused patch (admission); ``errors.Conflict`` on a storage conflict;
        ``errors.NotFound``; ``errors.Forbidden``; ``errors.ServerError`` for 5xx/transport/timeout.
        Source: docs/design.md#selections (JSON Patch paragraph), K12.
        """
        action = f"patch pods {namespace}/{name}"
        return pods.json_patch(
            action,
            self._api.patch_namespaced_pod,
            name,
            namespace,
            ops=ops,
            field_manager=FIELD_MANAGER,
            timeout_s=self._timeout_s,
        )
