"""Live reads of NetworkAttachmentDefinitions, as plain JSON dicts.

The NAD GET of the guard's pre-ADD checks: one live GET per selected managed shadow, bounded by
the caller's time budget, returning the server's JSON exactly as sent (``spec.config`` byte for
byte, so ``configSHA256`` can be checked). Failures are :mod:`sriov_dra.kube.errors` classes. Never
caches, lists, falls back to an older read, or retries: the caller owns the budget.
"""

from __future__ import annotations

from typing import Any, Final

from kubernetes import client

from sriov_dra.kube import errors, pods

GROUP: Final = "k8s.cni.cncf.io"
VERSION: Final = "v1"
PLURAL: Final = "network-attachment-definitions"


def get_nad(api: client.ApiClient, namespace: str, name: str, *, timeout_s: float) -> dict[str, Any]:
    """Live GET of NetworkAttachmentDefinition ``namespace/name``; return the server's JSON object.

    Units: ``timeout_s`` seconds, the total time this request may take.
    Shapes: the NAD JSON (``metadata``, ``spec.config`` as a string) as plain dicts.
    Raises: ``errors.NotFound``, ``errors.Forbidden``, ``errors.ServerError`` (5xx, transport,
    timeout, non-object body) and the other ``errors.ApiError`` subclasses by status.
    Source: docs/design.md#guard, docs/design.md#guard-checks.
    """
    action = f"get {PLURAL}.{GROUP} {namespace}/{name}"
    with errors.translated(action):
        response = client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, _preload_content=False, _request_timeout=timeout_s
        )
        body = response.data
    return pods.decode_object(body, action)
