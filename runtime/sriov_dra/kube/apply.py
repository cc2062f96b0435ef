"""Server-side apply of plain manifest dicts, and waiting for CRDs to be established.

Declarative objects this project ships (CRDs, RBAC, DeviceClasses) are written by server-side
apply with a named field manager, so re-applying is idempotent and conflicts with other managers
are reported rather than overwritten.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

FIELD_MANAGER = "sriov-dra"


def _resource(dyn: dynamic.DynamicClient, obj: Mapping[str, Any]) -> Any:
    return dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])


def apply_objects(
    api: client.ApiClient,
    objects: Iterable[Mapping[str, Any]],
    *,
    field_manager: str = FIELD_MANAGER,
    dry_run: bool = False,
    force: bool = False,
) -> list[dict[str, Any]]:
    """Server-side apply each object in order and return the server's answers.

    Shapes: each object is a full manifest dict with ``apiVersion``, ``kind`` and
    ``metadata.name`` (and ``metadata.namespace`` when namespaced). With ``dry_run`` the server
    validates and defaults without persisting (``dryRun=All``).
    Raises: ``ApiException`` from the client with the server's message when an object is refused.
    """
    dyn = dynamic.DynamicClient(api)
    out: list[dict[str, Any]] = []
    for obj in objects:
        res = _resource(dyn, obj)
        kwargs: dict[str, Any] = {"field_manager": field_manager, "force_conflicts": force}
        if dry_run:
            kwargs["dry_run"] = "All"
        if res.namespaced:
            kwargs["namespace"] = obj["metadata"].get("namespace", "default")
        answer = res.server_side_apply(body=dict(obj), name=obj["metadata"]["name"], **kwargs)
        out.append(answer.to_dict())
    return out


def wait_crds_established(api: client.ApiClient, names: Iterable[str], *, timeout_s: float = 30.0) -> None:
    """Wait until each named CRD reports ``Established=True``.

    Units: seconds. Raises: ``TimeoutError`` naming the CRDs still not established.
    """
    ext = client.ApiextensionsV1Api(api)
    pending = set(names)
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while pending and time.monotonic() < deadline:
        for name in sorted(pending):
            try:
                crd = ext.read_custom_resource_definition(name)
            except ApiException as exc:
                if exc.status == 404:
                    continue
                raise
            conds = (crd.status.conditions or []) if crd.status else []
            if any(c.type == "Established" and c.status == "True" for c in conds):
                pending.discard(name)
        if pending:
            pause.wait(0.1)
    if pending:
        raise TimeoutError(f"CRDs not established after {timeout_s:.0f}s: {sorted(pending)}")
