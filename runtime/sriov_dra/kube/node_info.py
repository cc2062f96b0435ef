"""The plugin's reads of its own Node: the UID that binding identities are built from, and its labels.

A live GET of ``nodes/<name>`` returning ``metadata.uid``, recorded once at startup and compared
on every binding (docs/design.md#consumer, docs/design.md#identity), or ``metadata.labels``, read
once at startup when a label gates auto-attach (``core.plugin.auto_attach_gate``). RBAC: ``nodes``
get, part of the DRA node plugin's permissions. Never caches across processes or guesses a UID.
"""

from __future__ import annotations

from kubernetes import client

from sriov_dra.kube import errors, pods


def _metadata(api: client.ApiClient, name: str, timeout_s: float) -> tuple[str, dict[str, object]]:
    """Live GET of Node ``name``: ``(action, metadata)``. Raises: as :func:`node_uid`."""
    action = f"get nodes {name}"
    with errors.translated(action):
        response = client.CoreV1Api(api).read_node(name, _preload_content=False, _request_timeout=timeout_s)
        body = response.data
    metadata = pods.decode_object(body, action).get("metadata")
    return action, metadata if isinstance(metadata, dict) else {}


def node_uid(api: client.ApiClient, name: str, *, timeout_s: float) -> str:
    """Live GET of Node ``name``; return its ``metadata.uid``.

    Raises: ``errors.NotFound`` when the Node is not registered; the other ``errors.ApiError``
    classes; ``errors.ServerError`` when the answer has no UID.
    """
    action, metadata = _metadata(api, name, timeout_s)
    uid = metadata.get("uid")
    if not isinstance(uid, str) or not uid:
        raise errors.ServerError(f"{action}: the answer has no metadata.uid")
    return uid


def node_labels(api: client.ApiClient, name: str, *, timeout_s: float) -> dict[str, str]:
    """Live GET of Node ``name``; return its ``metadata.labels`` (``{}`` when it has none).

    Raises: as :func:`node_uid` for the GET; ``errors.ServerError`` when the labels are not a map
    of strings.
    """
    action, metadata = _metadata(api, name, timeout_s)
    labels = metadata.get("labels") or {}
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise errors.ServerError(f"{action}: metadata.labels is not a map of strings")
    return dict(labels)
