"""ResourceClaim reads and the conflict-safe ``status.devices`` update, as plain JSON dicts.

The plugin's two claim calls: a live GET (never a cache: prepare must see the current UID and
allocation) and the update of ``status.devices`` on ``resourceclaims/status``: a PUT of the claim
as read with only ``status.devices`` replaced, under the read resourceVersion and UID, so a 409
re-runs the caller's pure ``compute`` on a fresh read and other drivers' entries are never lost.
A PUT because a patch cannot re-send opaque parameters in their creator's bytes
(:func:`encode_claim`). Writes nothing else; retries only a conflict. An update given no claim
starts from the claim as this client's last write of it left it (the server's answer), when that
write is remembered, instead of a GET: the same resourceVersion precondition refuses it if anyone
changed the claim since (a 409, then the fresh read), so a stale copy costs one request and is
never written; a copy on which ``compute`` finds nothing to change is never trusted (re-read).
"""

from __future__ import annotations

import collections
import copy
import itertools
import json
import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import urllib3
from kubernetes import client
from kubernetes.client import rest

from sriov_dra.kube import errors, pods

LOG = logging.getLogger(__name__)

RESOURCE: Final = "resourceclaims.resource.k8s.io"
DEFAULT_TIMEOUT_S: Final = 10.0
"""Budget of one claim request; well inside the kubelet's 45 s prepare deadline."""
WRITTEN_KEPT: Final = 256
"""Claims whose last written state a :class:`ClaimClient` remembers, the least recently written
dropped first: a node's prepared claims (one VF each at least) fit."""
DEFAULT_ATTEMPTS: Final = 5
"""Status updates tried before giving up on repeated conflicts (upstream's backoff has 5 steps)."""

STYLES: Final = ("go", "python")
"""Formats of opaque parameters a status write tries (see :func:`encode_claim`)."""
MAX_MIXED_CONFIGS: Final = 3
"""Up to this many opaque configs, mixed formats are tried too (2**n attempts at most)."""
_GO_ESCAPES: Final = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)

StatusCompute = Callable[[object], list[dict[str, object]] | None]
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


def _styled(value: object, style: str) -> str:
    """JSON text of one opaque ``parameters`` object in one of the writers' formats.

    ``go``: compact, HTML characters escaped as Go's encoding/json does (kubectl, Helm, Go
    clients); ``python``: ``json.dumps`` defaults (``", "``/``": "``, ASCII), as this Python
    client and Ansible's kubernetes.core send objects.
    """
    if style == "python":
        return json.dumps(value)
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in _GO_ESCAPES:
        text = text.replace(char, escaped)
    return text


def encode_claim(claim: Mapping[str, Any], styles: Sequence[str]) -> bytes:
    """The claim as JSON bytes with opaque parameters ``i`` formatted in ``styles[i]``.

    The API server keeps each opaque ``parameters`` object as the exact bytes it was created
    with and refuses a status update whose allocation bytes differ ("status.allocation: field
    is immutable"); a GET only shows them compacted. So a status write must re-send them in the
    creator's format, which this function reproduces for the two formats in use (see
    :func:`_styled`). A patch (merge, JSON or apply) is applied to the compacted form and fails
    for every claim whose configs a Python client wrote (``json.dumps`` puts spaces in); Go
    clients avoid it only because they speak protobuf. Shapes: ``styles`` has one entry per
    ``status.allocation.devices.config`` entry with ``opaque.parameters``.
    RBAC: ``resourceclaims`` get, ``resourceclaims/status`` patch, and ``resourceclaims/driver``
    ``associated-node:patch`` for the driver name (Kubernetes 1.36 granular status authorization).
    """
    doc = copy.deepcopy(dict(claim))
    configs = (((doc.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("config") or []
    holders = [
        c["opaque"]
        for c in configs
        if isinstance((c or {}).get("opaque"), dict) and "parameters" in c["opaque"]
    ]
    tokens: dict[str, str] = {}
    for index, (holder, style) in enumerate(zip(holders, styles, strict=True)):
        token = f"sriov-dra-raw-{uuid.uuid4().hex}-{index}"
        tokens[json.dumps(token)] = _styled(holder["parameters"], style)
        holder["parameters"] = token
    text = _styled(doc, "go")
    for quoted, raw in tokens.items():
        text = text.replace(quoted, raw, 1)
    return text.encode("utf-8")


def parameter_count(claim: Mapping[str, Any]) -> int:
    """How many opaque ``parameters`` objects the claim's allocation holds."""
    configs = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("config") or []
    return sum(
        1 for c in configs if isinstance((c or {}).get("opaque"), dict) and "parameters" in c["opaque"]
    )


def _style_choices(count: int) -> list[tuple[str, ...]]:
    """Uniform formats first, then every mix (only for a few configs, to bound the attempts)."""
    uniform = [("go",) * count, ("python",) * count]
    if count == 0:
        return [()]
    if count > MAX_MIXED_CONFIGS:
        return uniform
    mixed = [c for c in itertools.product(STYLES, repeat=count) if c not in uniform]
    return uniform + mixed


def _allocation_bytes_differ(exc: errors.ApiError) -> bool:
    return isinstance(exc, errors.Invalid) and "status.allocation: Invalid value" in str(exc)


def _put_json(
    api: client.ApiClient, path: str, data: bytes, *, action: str, timeout_s: float
) -> dict[str, Any]:
    """PUT ``data`` (already-encoded JSON) to ``path``; the client's own encoder would reformat it."""
    headers: dict[str, str] = dict(api.default_headers)
    headers.update({"Content-Type": "application/json", "Accept": "application/json"})
    queries: list[tuple[str, str]] = []
    with errors.translated(action):
        api.update_params_for_auth(headers, queries, ["BearerToken"])
        url = f"{api.configuration.host}{path}"
        response = api.rest_client.pool_manager.request(
            "PUT", url, body=data, headers=headers, timeout=urllib3.Timeout(total=timeout_s)
        )
        if not 200 <= response.status <= 299:
            raise rest.ApiException(http_resp=rest.RESTResponse(response))
        body = response.data
    return pods.decode_object(body, action)


def replace_status_devices(
    api: client.ApiClient, claim: Mapping[str, Any], devices: list[dict[str, Any]], *, timeout_s: float
) -> dict[str, Any]:
    """PUT the claim's ``status`` with ``devices`` as ``status.devices``, everything else as read.

    The body carries the read ``resourceVersion`` and ``uid``, so the server refuses it (409)
    when the claim changed or was replaced meanwhile. The opaque parameters are re-sent in the
    format they were created with (:func:`encode_claim`), trying the known formats in turn.
    Raises: ``errors.Conflict`` for a changed claim; ``errors.Invalid`` when the server rejects
    the list or no format reproduces the allocation; other ``errors.ApiError`` classes.
    """
    meta = claim.get("metadata") or {}
    namespace, name = str(meta.get("namespace")), str(meta.get("name"))
    # shallow: encode_claim deep-copies what it changes; the caller's claim is never touched
    body = {**claim, "status": {**(claim.get("status") or {}), "devices": devices}}
    path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}/status"
    action = f"update {RESOURCE} {namespace}/{name} status.devices"
    last: errors.ApiError | None = None
    for styles in _style_choices(parameter_count(body)):
        try:
            return _put_json(api, path, encode_claim(body, styles), action=action, timeout_s=timeout_s)
        except errors.Invalid as exc:
            if not _allocation_bytes_differ(exc):
                raise
            last = exc
    assert last is not None
    raise last


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
        self._written: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
        self._written_lock = threading.Lock()

    def _remember(self, uid: str, claim: dict[str, Any] | None) -> None:
        """Keep ``claim`` (the server's answer to a write) as ``uid``'s last written state; None forgets it."""
        with self._written_lock:
            self._written.pop(uid, None)
            if claim is not None and (claim.get("metadata") or {}).get("uid") == uid:
                self._written[uid] = claim
                while len(self._written) > WRITTEN_KEPT:
                    self._written.popitem(last=False)

    def _last_written(self, uid: str) -> dict[str, Any] | None:
        with self._written_lock:
            return self._written.pop(uid, None)

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
        attempt only. Without it, the first attempt starts from this client's last write of the
        claim when remembered (module docstring), else from a GET. Returns True when an update was
        written, False when ``compute`` asked for no change or the claim is gone or was replaced
        (another UID): there is nothing to update.

        Raises: ``errors.Conflict`` after ``attempts`` conflicts in a row; ``errors.Invalid``,
        ``errors.Forbidden`` and other ``errors.ApiError`` classes as the server reports them.
        """
        claim: Mapping[str, Any] | None = current
        if claim is None:
            claim = self._last_written(uid)
            # never trusted to say "nothing to change": a stale copy could hide entries to remove
            if claim is not None and compute((claim.get("status") or {}).get("devices")) is None:
                claim = None
        extra = 1 if current is None and claim is not None else 0  # a stale copy's 409 is not a retry
        for attempt in range(1, self._attempts + 1 + extra):
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
                written = replace_status_devices(self._api, claim, devices, timeout_s=self._timeout_s)
                self._remember(uid, written)
                return True
            except errors.NotFound:
                return False
            except errors.Conflict:
                if attempt == self._attempts + extra:
                    raise
                LOG.info(
                    "claim status conflict: re-reading",
                    extra={"claim": f"{namespace}/{name}", "op": "status", "attempt": attempt},
                )
                claim = None
        return False  # pragma: no cover - the loop returns or raises
