"""Namespace existence checks for configuration that names a namespace.

Owns one read: whether a Namespace exists, so a service can refuse to start with a namespace
flag that points nowhere (a typo would otherwise make it watch an empty namespace forever).
It must never create or modify a Namespace.
"""

from __future__ import annotations

from kubernetes import client

from sriov_dra.kube import errors


def namespace_exists(api: client.ApiClient, name: str, *, timeout_s: float) -> bool:
    """Return whether Namespace ``name`` exists (a terminating one counts as existing).

    Units: ``timeout_s`` seconds for the request.
    Raises: ``errors.Forbidden`` when RBAC forbids ``get namespaces`` (grant it, or the answer
    would be a guess); other ``errors.ApiError`` classes except ``NotFound``.
    """
    try:
        with errors.translated(f"get namespaces {name}"):
            client.CoreV1Api(api).read_namespace(name, _preload_content=False, _request_timeout=timeout_s)
    except errors.NotFound:
        return False
    return True
