"""Typed reads and writes of any API object as plain dicts, with preconditions and a write log.

The generic object client the operator uses for its custom resources and the core kinds it reads:
GET/LIST/CREATE/PUT/DELETE, JSON Patch and server-side apply of the status subresource. Answers
are the server's JSON with camelCase keys, so ``sriov_dra.core`` reads them directly; failures are
``ApiError``; every successful write is reported to ``on_write`` (a no-op reconcile performs
none). Never retries, swallows an error other than a tolerated 404, or drops a precondition.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from sriov_dra.kube import errors

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class Resource:
    """One API resource: ``group`` ``""`` is the core group; ``plural`` is the URL segment."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """``group/version``, or ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str = "") -> str:
        """URL path of the collection, or of one object (and its subresource)."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            root += f"/namespaces/{namespace}"
        root += f"/{self.plural}"
        if name is not None:
            root += f"/{name}"
            if subresource:
                root += f"/{subresource}"
        return root

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


NAD = Resource("k8s.cni.cncf.io", "v1", "network-attachment-definitions", "NetworkAttachmentDefinition")
SRIOV_NETWORK = Resource("sriovnetwork.openshift.io", "v1", "sriovnetworks", "SriovNetwork")
NODE_POLICY = Resource(
    "sriovnetwork.openshift.io", "v1", "sriovnetworknodepolicies", "SriovNetworkNodePolicy"
)
DEVICE_ATTRIBUTES = Resource(
    "sriovnetwork.k8snetworkplumbingwg.io", "v1alpha1", "deviceattributes", "DeviceAttributes"
)
RESOURCE_POLICY = Resource(
    "sriovnetwork.k8snetworkplumbingwg.io", "v1alpha1", "sriovresourcepolicies", "SriovResourcePolicy"
)
DEVICE_CLASS = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False)
NAMESPACE = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODE = Resource("", "v1", "nodes", "Node", namespaced=False)
POD = Resource("", "v1", "pods", "Pod")
LEASE = Resource("coordination.k8s.io", "v1", "leases", "Lease")
EVENT = Resource("events.k8s.io", "v1", "events", "Event")

WriteHook = Callable[[str, Resource, str], None]
"""Called as ``on_write(verb, resource, "namespace/name")`` after each successful write."""


@dataclass(frozen=True)
class Listing:
    """A LIST answer: the items and the collection's resourceVersion (to start a watch from)."""

    items: list[JsonObject]
    resource_version: str


class Objects:
    """Dict-in, dict-out API calls through one ``ApiClient``.

    ``field_manager`` names this writer in managedFields (required for server-side apply).
    """

    def __init__(
        self,
        api: client.ApiClient,
        *,
        field_manager: str,
        on_write: WriteHook | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.api = api
        self.field_manager = field_manager
        self.on_write = on_write
        self.timeout_s = timeout_s

    def _call(
        self,
        action: str,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: object = None,
        content_type: str = "application/json",
    ) -> JsonObject:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        with errors.translated(action):
            resp = self.api.call_api(
                path,
                method,
                query_params=list(query),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
                _request_timeout=self.timeout_s,
            )
            try:
                raw = resp.data
            finally:
                resp.release_conn()
        decoded = json.loads(raw) if raw else {}
        return decoded if isinstance(decoded, dict) else {}

    def _wrote(self, verb: str, res: Resource, namespace: str | None, name: str) -> None:
        if self.on_write is not None:
            self.on_write(verb, res, f"{namespace}/{name}" if namespace else name)

    def get(self, res: Resource, name: str, namespace: str | None = None) -> JsonObject:
        """GET one object. Raises: NotFound and the other :mod:`errors` classes."""
        return self._call(f"get {res} {namespace or ''}/{name}", "GET", res.path(namespace, name))

    def get_or_none(self, res: Resource, name: str, namespace: str | None = None) -> JsonObject | None:
        """GET one object; ``None`` when it (or its namespace) does not exist."""
        try:
            return self.get(res, name, namespace)
        except errors.NotFound:
            return None

    def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> Listing:
        """LIST a collection (all namespaces when ``namespace`` is ``None``), optionally filtered."""
        query = [("labelSelector", label_selector)] if label_selector else []
        if field_selector:
            query.append(("fieldSelector", field_selector))
        doc = self._call(
            f"list {res} in {namespace or 'all namespaces'}", "GET", res.path(namespace), query=query
        )
        items = [i for i in doc.get("items") or [] if isinstance(i, dict)]
        for item in items:
            item.setdefault("apiVersion", res.api_version)
            item.setdefault("kind", res.kind)
        meta = doc.get("metadata") or {}
        return Listing(items, str(meta.get("resourceVersion") or ""))

    def create(self, res: Resource, body: Mapping[str, Any], *, dry_run: bool = False) -> JsonObject:
        """POST ``body``. Raises: Conflict (``already_exists``) when the name is taken."""
        meta = body.get("metadata") or {}
        ns, name = meta.get("namespace"), str(meta.get("name"))
        query = [("fieldManager", self.field_manager)] + ([("dryRun", "All")] if dry_run else [])
        out = self._call(
            f"create {res} {ns or ''}/{name}", "POST", res.path(ns), query=query, body=dict(body)
        )
        if not dry_run:
            self._wrote("create", res, ns, name)
        return out

    def replace(self, res: Resource, body: Mapping[str, Any]) -> JsonObject:
        """PUT ``body``; its ``metadata.resourceVersion`` is the optimistic-concurrency precondition.

        Raises: Conflict when the object changed since it was read.
        """
        meta = body.get("metadata") or {}
        ns, name = meta.get("namespace"), str(meta.get("name"))
        if not meta.get("resourceVersion"):
            raise ValueError(f"replace {res} {ns}/{name}: metadata.resourceVersion is required")
        query = [("fieldManager", self.field_manager)]
        out = self._call(
            f"replace {res} {ns or ''}/{name}", "PUT", res.path(ns, name), query=query, body=dict(body)
        )
        self._wrote("update", res, ns, name)
        return out

    def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> bool:
        """DELETE with optional UID/resourceVersion preconditions; ``False`` when already gone.

        A 404 of the object or of its namespace counts as done. Raises: Conflict when a
        precondition fails (the object was replaced or changed).
        """
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
        }
        if preconditions:
            body["preconditions"] = preconditions
        try:
            self._call(
                f"delete {res} {namespace or ''}/{name}", "DELETE", res.path(namespace, name), body=body
            )
        except errors.NotFound:
            return False
        self._wrote("delete", res, namespace, name)
        return True

    def json_patch(
        self,
        res: Resource,
        name: str,
        namespace: str | None,
        ops: Sequence[Mapping[str, Any]],
        *,
        subresource: str = "",
    ) -> JsonObject:
        """Apply a JSON Patch (RFC 6902); ``test`` ops make it conditional. Raises: Invalid on a failed test."""
        out = self._call(
            f"patch {res} {namespace or ''}/{name}{'/' + subresource if subresource else ''}",
            "PATCH",
            res.path(namespace, name, subresource),
            query=[("fieldManager", self.field_manager)],
            body=[dict(op) for op in ops],
            content_type="application/json-patch+json",
        )
        self._wrote("patch", res, namespace, name)
        return out

    def apply_status(
        self, res: Resource, name: str, namespace: str | None, status: Mapping[str, Any]
    ) -> JsonObject:
        """Server-side apply ``status`` on the status subresource as this field manager (forced).

        Shapes: ``status`` holds only the fields this manager owns, e.g. ``{"conditions": [...]}``.
        """
        body = {
            "apiVersion": res.api_version,
            "kind": res.kind,
            "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
            "status": dict(status),
        }
        out = self._call(
            f"apply status of {res} {namespace or ''}/{name}",
            "PATCH",
            res.path(namespace, name, "status"),
            query=[("fieldManager", self.field_manager), ("force", "true")],
            body=body,
            content_type="application/apply-patch+yaml",
        )
        self._wrote("apply-status", res, namespace, name)
        return out
