"""The plugin's one read of its own Node: the UID that binding identities are built from.

A live GET of ``nodes/<name>`` returning ``metadata.uid``, recorded once at startup and compared
on every binding (docs/design.md#consumer, docs/design.md#identity). RBAC: ``nodes`` get, part of
the DRA node plugin's permissions. Never caches across processes or guesses a UID.
"""

from __future__ import annotations

from kubernetes import client

from sriov_dra.kube import errors, pods


def node_uid(api: client.ApiClient, name: str, *, timeout_s: float) -> str:
    """Live GET of Node ``name``; return its ``metadata.uid``.

    Raises: ``errors.NotFound`` when the Node is not registered; the other ``errors.ApiError``
    classes; ``errors.ServerError`` when the answer has no UID.
    """
    action = f"get nodes {name}"
    with errors.translated(action):
        response = client.CoreV1Api(api).read_node(name, _preload_content=False, _request_timeout=timeout_s)
        body = response.data
    uid = (pods.decode_object(body, action).get("metadata") or {}).get("uid")
    if not isinstance(uid, str) or not uid:
        raise errors.ServerError(f"{action}: the answer has no metadata.uid")
    return uid
