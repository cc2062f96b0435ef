"""ResourceClaim reads and the conflict-safe ``status.devices`` update, as plain JSON dicts.

Owns the plugin's two claim calls: a live GET of ``resource.k8s.io/v1`` ResourceClaims (never a
cache: prepare must see the current UID and allocation) and the update of ``status.devices`` on
the ``resourceclaims/status`` subresource. The update is a JSON merge patch that carries the
whole rebuilt list plus ``metadata.resourceVersion`` and ``metadata.uid``, so the API server
refuses it (409) when anyone changed the claim since it was read; the caller's pure ``compute``
function then runs again on a fresh read. Other drivers' entries are whatever ``compute`` keeps
(``core.claimplan.merged_status_devices`` keeps all of them), so a conflict can never drop them,
unlike upstream's retry that re-applied a stale snapshot.

It must never write anything but ``status.devices`` and never retry anything but a conflict.
RBAC: ``resourceclaims`` get, ``resourceclaims/status`` patch, and ``resourceclaims/driver``
``associated-node:patch`` for the driver name (Kubernetes 1.36 granular status authorization).

Source: reference ``dra-protocol.md`` §3.5, §4.3; ``dra-driver-sriov.md`` §4.2, §8.1 (c)(d).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from kubernetes import client

from sriov_dra.kube import errors, pods

LOG = logging.getLogger(__name__)

RESOURCE: Final = "resourceclaims.resource.k8s.io"
DEFAULT_TIMEOUT_S: Final = 10.0
"""Budget of one claim request; well inside the kubelet's 45 s prepare deadline."""
DEFAULT_ATTEMPTS: Final = 5
"""Status updates tried before giving up on repeated conflicts (upstream's backoff has 5 steps)."""

StatusCompute = Callable[[object], list[dict[str, Any]] | None]
"""Gets the claim's current ``status.devices`` (maybe None) and returns the new list, or None to
write nothing. Must be pure: it runs again after every conflict."""


def get_claim(api: client.ApiClient, namespace: str, name: str, *, timeout_s: float) -> dict[str, Any]:
    """Live GET of ResourceClaim ``namespace/name``; return the server's JSON object.

    Units: ``timeout_s`` seconds for the whole request.
    Raises: ``errors.NotFound``, ``errors.Forbidden``, ``errors.ServerError`` (5xx, transport,
    timeout, a body that is not a JSON object) and the other ``errors.ApiError`` classes.
    """
    action = f"get {RESOURCE} {namespace}/{name}"
    with errors.translated(action):
        response = client.ResourceV1Api(api).read_namespaced_resource_claim(
            name, namespace, _preload_content=False, _request_timeout=timeout_s
        )
        body = response.data
    return pods.decode_object(body, action)


def patch_status_devices(
    api: client.ApiClient,
    namespace: str,
    name: str,
    *,
    devices: list[dict[str, Any]],
    uid: str,
    resource_version: str,
    timeout_s: float,
) -> dict[str, Any]:
    """Replace ``status.devices`` of the claim if it is still at ``resource_version`` with ``uid``.

    Shapes: a JSON merge patch ``{"metadata": {"uid", "resourceVersion"}, "status": {"devices"}}``
    on the ``status`` subresource; an empty ``devices`` list clears the field.
    Raises: ``errors.Conflict`` when the claim changed or was replaced since it was read;
    ``errors.Invalid`` when the server rejects the list (e.g. an entry for an unallocated device);
    the other ``errors.ApiError`` classes as :func:`get_claim`.
    """
    body = {
        "metadata": {"uid": uid, "resourceVersion": resource_version},
        "status": {"devices": devices},
    }
    action = f"patch {RESOURCE} {namespace}/{name} status.devices"
    with errors.translated(action):
        response = client.ResourceV1Api(api).patch_namespaced_resource_claim_status(
            name,
            namespace,
            body,
            _content_type="application/merge-patch+json",
            _preload_content=False,
            _request_timeout=timeout_s,
        )
        data = response.data
    return pods.decode_object(data, action)


class ClaimClient:
    """The plugin's claim API: live GETs and the conflict-safe ``status.devices`` update.

    Units: ``timeout_s`` seconds per request. ``attempts`` bounds the conflict retries.
    """

    def __init__(
        self, api: client.ApiClient, *, timeout_s: float = DEFAULT_TIMEOUT_S, attempts: int = DEFAULT_ATTEMPTS
    ) -> None:
        self._api = api
        self._timeout_s = timeout_s
        self._attempts = max(1, attempts)

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        """Live GET of the claim (see :func:`get_claim`)."""
        return get_claim(self._api, namespace, name, timeout_s=self._timeout_s)

    def update_device_status(
        self,
        namespace: str,
        name: str,
        *,
        uid: str,
        compute: StatusCompute,
        current: Mapping[str, Any] | None = None,
    ) -> bool:
        """Write ``compute(status.devices)`` to the claim, re-reading and recomputing on conflicts.

        ``current`` is a claim object already read (saves one GET); it is used for the first
        attempt only. Returns True when a patch was written, False when ``compute`` asked for
        no change or the claim is gone or was replaced (another UID): there is nothing to update.

        Raises: ``errors.Conflict`` after ``attempts`` conflicts in a row; ``errors.Invalid``,
        ``errors.Forbidden`` and other ``errors.ApiError`` classes as the server reports them.
        """
        claim: Mapping[str, Any] | None = current
        for attempt in range(1, self._attempts + 1):
            if claim is None:
                try:
                    claim = self.get(namespace, name)
                except errors.NotFound:
                    return False
            meta = claim.get("metadata") or {}
            if meta.get("uid") != uid:
                return False
            status = claim.get("status") or {}
            devices = compute(status.get("devices"))
            if devices is None:
                return False
            try:
                patch_status_devices(
                    self._api,
                    namespace,
                    name,
                    devices=devices,
                    uid=uid,
                    resource_version=str(meta.get("resourceVersion", "")),
                    timeout_s=self._timeout_s,
                )
                return True
            except errors.NotFound:
                return False
            except errors.Conflict:
                if attempt == self._attempts:
                    raise
                LOG.info(
                    "claim status conflict: re-reading",
                    extra={"claim": f"{namespace}/{name}", "op": "status", "attempt": attempt},
                )
                claim = None
        return False  # pragma: no cover - the loop returns or raises
