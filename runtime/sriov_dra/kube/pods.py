"""Live reads of Pods, as plain JSON dicts.

The Pod GET made when freshness matters (the guard, the plugin): an ordinary live GET (never
``resourceVersion=0``, never an informer cache) bounded by the caller's time budget, returning
the server's JSON exactly as sent, so annotations arrive byte for byte. Failures are
:mod:`sriov_dra.kube.errors` classes. Never caches, falls back to an older read, or retries.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes import client

from sriov_dra.kube import errors


def get_pod(api: client.ApiClient, namespace: str, name: str, *, timeout_s: float) -> dict[str, Any]:
    """Live GET of Pod ``namespace/name``; return the server's JSON object.

    Units: ``timeout_s`` seconds, the total time this request may take (connect and read).
    Shapes: the API's Pod JSON (``metadata``, ``spec``, ``status``) as plain dicts and lists.
    Raises: ``errors.NotFound``, ``errors.Forbidden`` (the message names verb, resource and
    namespace), ``errors.ServerError`` for 5xx and transport failures or a timeout, other
    ``errors.ApiError`` subclasses by status; ``errors.ServerError`` when the body is not a JSON
    object.
    Source: docs/design.md#guard (live GET semantics, no stale fallback).
    """
    action = f"get pods {namespace}/{name}"
    with errors.translated(action):
        response = client.CoreV1Api(api).read_namespaced_pod(
            name, namespace, _preload_content=False, _request_timeout=timeout_s
        )
        body = response.data
    return decode_object(body, action)


def decode_object(body: bytes, action: str) -> dict[str, Any]:
    """Decode a response body that must be one JSON object.

    Raises: ``errors.ServerError`` naming ``action`` when it is not JSON or not an object.
    """
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise errors.ServerError(f"{action}: the server answered with a body that is not JSON") from exc
    if not isinstance(doc, dict):
        raise errors.ServerError(f"{action}: the server answered with JSON that is not an object")
    return doc


def json_patch(
    action: str,
    patch: Callable[..., Any],
    *target: str,
    ops: Sequence[Mapping[str, Any]],
    field_manager: str,
    timeout_s: float,
) -> dict[str, Any]:
    """One RFC 6902 JSON Patch request: ``patch(*target, ops, ...)``, the object it returns.

    ``patch`` is a generated client's patch method (``patch_namespaced_pod``,
    ``patch_namespaced_custom_object``), ``target`` its leading positional arguments, ``ops`` the
    operations (copied), ``timeout_s`` the request budget in seconds. ``action`` names the request
    in errors. Raises: the :mod:`sriov_dra.kube.errors` class of the failure (``errors.Invalid``
    for a failed ``test`` op); ``errors.ServerError`` when the answer is not one JSON object.
    Source: docs/design.md#selections (JSON Patch paragraph), K12.
    """
    with errors.translated(action):
        response = patch(
            *target,
            [dict(op) for op in ops],
            field_manager=field_manager,
            _content_type="application/json-patch+json",
            _preload_content=False,
            _request_timeout=timeout_s,
        )
        data = response.data
    return decode_object(data, action)
