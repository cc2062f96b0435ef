"""The plugin's NetworkAttachmentDefinition calls: source reads and shadow writes, as plain dicts.

Every NAD request of the auto-attach path (docs/design.md#prepare, docs/design.md#release): a
live GET, the shadow create with everything in one call (body from
``core.plugin.shadow_object.build_shadow_nad``), a DELETE under a UID precondition, a JSON Patch on the
NAD's main endpoint (the CRD has no ``/finalizers`` subresource), and one all-namespace LIST by
label (the orphan scan). RBAC (docs/design.md#rbac): get, list, create, patch, delete. Never
retries, caches, replaces (PUT), or deletes without a UID precondition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from kubernetes import client

from sriov_dra.kube import errors, pods

GROUP: Final = "k8s.cni.cncf.io"
VERSION: Final = "v1"
PLURAL: Final = "network-attachment-definitions"
RESOURCE: Final = f"{PLURAL}.{GROUP}"
DEFAULT_TIMEOUT_S: Final = 10.0
"""Budget of one NAD request; several fit in the kubelet's 45 s prepare deadline."""
FIELD_MANAGER: Final = "sriov-dra-plugin"


class NadClient:
    """NAD requests through one ``ApiClient``; every method is one HTTP request.

    Units: ``timeout_s`` seconds per request (connect and read).
    """

    def __init__(self, api: client.ApiClient, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._api = client.CustomObjectsApi(api)
        self._timeout_s = timeout_s

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """Live GET of NAD ``namespace/name``.

        Raises: ``errors.NotFound``, ``errors.Forbidden``, ``errors.ServerError`` (5xx, transport,
        timeout) and the other ``errors.ApiError`` classes.
        """
        action = f"get {RESOURCE} {namespace}/{name}"
        with errors.translated(action):
            response = self._api.get_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                _preload_content=False,
                _request_timeout=self._timeout_s,
            )
            body = response.data
        return pods.decode_object(body, action)

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST the complete NAD ``body`` into its ``metadata.namespace``; return the created object.

        Raises: ``errors.Conflict`` with ``already_exists`` when the name is taken (a lost earlier
        response, or someone else's object: the caller GETs and verifies); ``errors.Invalid`` for a
        refused body; ``errors.NotFound`` when the namespace is gone; the other classes as :meth:`get`.
        """
        meta = body.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        action = f"create {RESOURCE} {namespace}/{name}"
        with errors.translated(action):
            response = self._api.create_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                dict(body),
                field_manager=FIELD_MANAGER,
                _preload_content=False,
                _request_timeout=self._timeout_s,
            )
            data = response.data
        return pods.decode_object(data, action)

    def delete(self, namespace: str, name: str, *, uid: str) -> None:
        """Request deletion of NAD ``namespace/name`` if and only if its UID is still ``uid``.

        A NAD with finalizers only gets a ``deletionTimestamp``; the call does not wait.
        Raises: ``errors.NotFound`` when it is gone; ``errors.Conflict`` when the UID precondition
        fails (the name now holds another object, which must not be touched); others as :meth:`get`.
        """
        if not uid:
            raise ValueError(f"delete {RESOURCE} {namespace}/{name}: a UID precondition is required")
        action = f"delete {RESOURCE} {namespace}/{name} (uid {uid})"
        options = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
            "preconditions": {"uid": uid},
        }
        with errors.translated(action):
            response = self._api.delete_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                PLURAL,
                name,
                body=options,
                _preload_content=False,
                _request_timeout=self._timeout_s,
            )
            response.data  # noqa: B018 - read the body so the connection is released

    def json_patch(self, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Apply the RFC 6902 patch ``ops`` to NAD ``namespace/name`` on its main endpoint.

        Raises: ``errors.Invalid`` (422) when a ``test`` operation fails or the patch is invalid;
        ``errors.Conflict`` on a storage conflict; ``errors.NotFound``; others as :meth:`get`.
        Used to remove only our finalizer under UID and resourceVersion tests
        (docs/design.md#release).
        """
        action = f"patch {RESOURCE} {namespace}/{name}"
        return pods.json_patch(
            action,
            self._api.patch_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            ops=ops,
            field_manager=FIELD_MANAGER,
            timeout_s=self._timeout_s,
        )

    def list_all(self, *, label_selector: str) -> list[dict[str, Any]]:
        """One LIST of NADs across all namespaces matching ``label_selector``.

        Raises: ``errors.Forbidden`` when the identity lacks a cluster-wide ``list`` grant (a
        namespace RoleBinding is not enough); others as :meth:`get`. Source: docs/design.md#orphans.
        """
        action = f"list {RESOURCE} in all namespaces ({label_selector})"
        with errors.translated(action):
            response = self._api.list_cluster_custom_object(
                GROUP,
                VERSION,
                PLURAL,
                label_selector=label_selector,
                _preload_content=False,
                _request_timeout=self._timeout_s,
            )
            data = response.data
        doc = pods.decode_object(data, action)
        items = doc.get("items")
        return [dict(i) for i in items if isinstance(i, dict)] if isinstance(items, list) else []
