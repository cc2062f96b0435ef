"""ResourceSlice reads and writes for one driver on one node, as plain dicts.

List this driver's node-scoped slices (field selectors ``spec.driver`` and ``spec.nodeName``),
create, replace under the resourceVersion precondition, delete under UID and resourceVersion
preconditions, apply a :class:`sriov_dra.core.plugin.slices.SliceWrites` plan in its order, and
the watch target of the collection. Failures are :mod:`sriov_dra.kube.errors` classes naming the
request; every successful write is reported to ``on_write`` (an idle resync performs none).
Never decides what to write, retries, or drops a precondition.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from kubernetes import client

from sriov_dra.core.plugin import slices
from sriov_dra.kube import errors, watches

PATH: Final = "/apis/resource.k8s.io/v1/resourceslices"
RESOURCE: Final = "resourceslices.resource.k8s.io"

WriteHook = Callable[[str, str], None]
"""Called as ``on_write(verb, slice_name)`` after each successful write."""

StoredHook = Callable[[Mapping[str, Any], Mapping[str, Any]], None]
"""Called as ``on_stored(sent, stored)`` after each create or update, with the server's answer."""


def field_selector(*, driver: str, node: str) -> str:
    """The selector of this driver's slices of ``node``."""
    return f"spec.driver={driver},spec.nodeName={node}"


def watch_target(*, driver: str, node: str) -> watches.Target:
    """What :class:`sriov_dra.kube.watches.Watch` should watch to see these slices."""
    return watches.Target(PATH, field_selector=field_selector(driver=driver, node=node))


def list_slices(
    api: client.ApiClient, *, driver: str, node: str, timeout_s: float = 30.0
) -> list[dict[str, Any]]:
    """LIST (a consistent read) every slice of ``driver`` on ``node``.

    Units: ``timeout_s`` seconds. Shapes: the API's JSON of each slice, sorted by name.
    Raises: ``errors.ApiError`` subclasses (``Forbidden`` names the missing list permission).
    """
    doc = watches.request_json(
        api,
        f"list {RESOURCE} of driver {driver} on node {node}",
        "GET",
        PATH,
        query=[("fieldSelector", field_selector(driver=driver, node=node))],
        timeout_s=timeout_s,
    )
    items = [i for i in doc.get("items") or [] if isinstance(i, dict)]
    return sorted(items, key=lambda i: str((i.get("metadata") or {}).get("name", "")))


def create_slice(
    api: client.ApiClient, body: Mapping[str, Any], *, timeout_s: float = 30.0
) -> dict[str, Any]:
    """POST a new slice. Raises: ``errors.Conflict`` (``already_exists``) when the name is taken."""
    name = _name(body)
    return watches.request_json(
        api, f"create {RESOURCE} {name}", "POST", PATH, body=dict(body), timeout_s=timeout_s
    )


def replace_slice(
    api: client.ApiClient, body: Mapping[str, Any], *, timeout_s: float = 30.0
) -> dict[str, Any]:
    """PUT a slice; its ``metadata.resourceVersion`` is the optimistic-concurrency precondition.

    Raises: ``errors.Conflict`` when the slice changed since it was read, ``errors.NotFound``
    when it was deleted; ValueError when the body has no resourceVersion (a caller bug).
    """
    name = _name(body)
    if not (body.get("metadata") or {}).get("resourceVersion"):
        raise ValueError(f"replace {RESOURCE} {name}: metadata.resourceVersion is required")
    return watches.request_json(
        api, f"replace {RESOURCE} {name}", "PUT", f"{PATH}/{name}", body=dict(body), timeout_s=timeout_s
    )


def delete_slice(
    api: client.ApiClient, name: str, *, uid: str, resource_version: str, timeout_s: float = 30.0
) -> bool:
    """DELETE slice ``name`` if it is still the object that was read; ``False`` if already gone.

    Raises: ``errors.Conflict`` when a precondition fails (the slice was replaced or changed).
    """
    preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if preconditions:
        body["preconditions"] = preconditions
    try:
        watches.request_json(
            api, f"delete {RESOURCE} {name}", "DELETE", f"{PATH}/{name}", body=body, timeout_s=timeout_s
        )
    except errors.NotFound:
        return False
    return True


def apply_writes(
    api: client.ApiClient,
    writes: slices.SliceWrites,
    *,
    on_write: WriteHook | None = None,
    on_stored: StoredHook | None = None,
    timeout_s: float = 30.0,
) -> int:
    """Apply a plan in its order (deletes, updates, creates); return the number of writes sent.

    ``on_stored`` sees each create/update body beside what the server stored (to notice fields
    a disabled feature gate dropped).

    Stops at the first failure, so a later step never runs on a pool the plan no longer
    describes; the caller re-lists and re-plans.
    Raises: ``errors.Conflict`` / ``errors.NotFound`` when the pool changed under the plan, and
    the other ``errors.ApiError`` subclasses.
    """
    sent = 0

    def wrote(verb: str, name: str) -> None:
        nonlocal sent
        sent += 1
        if on_write is not None:
            on_write(verb, name)

    for ref in writes.deletes:
        if delete_slice(
            api, ref.name, uid=ref.uid, resource_version=ref.resource_version, timeout_s=timeout_s
        ):
            wrote("delete", ref.name)
    for body in writes.updates:
        stored = replace_slice(api, body, timeout_s=timeout_s)
        wrote("update", _name(body))
        if on_stored is not None:
            on_stored(body, stored)
    for body in writes.creates:
        stored = create_slice(api, body, timeout_s=timeout_s)
        wrote("create", _name(body))
        if on_stored is not None:
            on_stored(body, stored)
    return sent


def _name(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("name", ""))
