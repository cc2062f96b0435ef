"""Apply manifests to the lab and wait for workloads, the way a user with kubectl would.

Owns the demo's and the e2e suite's user-side actions: read a manifest file (all documents,
comments dropped, text otherwise untouched), apply it with server-side apply, wait for a Pod to
run (failing with the kubelet's last Warning Event and the Pod's conditions, so a stuck Pod says
why), delete objects and wait until they are gone. Never changes what a manifest says; the only
substitution mechanism is an explicit ``{old: new}`` text replacement named by the caller (the
physical substitutions an example's header allows: PF names, node labels, CIDRs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client

from sriov_dra.host import strict_yaml
from sriov_dra.kube import apply, objects
from sriov_dra.kube import errors as kube_errors

T = TypeVar("T")
POD = objects.Resource("", "v1", "pods", "Pod")
EVENT = objects.Resource("", "v1", "events", "Event")
CLAIM = objects.Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim")


class WaitTimeout(TimeoutError):
    """A wait ran out; the message names what was awaited and the last thing seen."""


def eventually(what: str, fn: Callable[[], T | None], *, timeout_s: float, poll_s: float = 0.25) -> T:
    """Poll ``fn`` until it returns a truthy value and return it.

    Units: seconds. Raises: :class:`WaitTimeout` naming ``what``.
    """
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout_s:.0f}s waiting for {what}")
        pause.wait(poll_s)


def load(path: Path, substitutions: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The documents of ``path`` after the caller's literal text ``substitutions``.

    Raises: ``ValueError`` when a substitution's text does not occur in the file (a stale
    substitution must not silently do nothing); InvalidSpec when the result is not strict YAML
    (a repeated key is named with its path, see :mod:`sriov_dra.host.strict_yaml`).
    """
    text = path.read_text()
    for old, new in (substitutions or {}).items():
        if old not in text:
            raise ValueError(f"substitution {old!r} does not occur in {path}")
        text = text.replace(old, new)
    return [d for d in strict_yaml.load_all(text, source=str(path)) if isinstance(d, dict)]


def apply_docs(api: client.ApiClient, docs: Iterable[Mapping[str, Any]], *, timeout_s: float = 60.0) -> None:
    """Server-side apply ``docs`` in order; a CRD-backed kind not served yet is retried.

    Units: ``timeout_s`` seconds for the retries.
    """
    pending = [dict(d) for d in docs]
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while pending:
        try:
            apply.apply_objects(api, [pending[0]], field_manager="lab-user")
            pending.pop(0)
        except Exception as exc:
            if time.monotonic() >= deadline:
                raise
            if "ResourceNotFound" not in type(exc).__name__ and "not found" not in str(exc).lower():
                raise
            pause.wait(0.5)


def pod_problem(obj: objects.Objects, namespace: str, name: str) -> str:
    """Why a Pod is not running: its phase, conditions and the last Warning Event, in one line."""
    pod = obj.get_or_none(POD, name, namespace)
    if pod is None:
        return "the Pod does not exist"
    status = pod.get("status") or {}
    conds = "; ".join(
        f"{c.get('type')}={c.get('status')} {c.get('reason', '')} {c.get('message', '')}".strip()
        for c in status.get("conditions") or []
    )
    uid = pod["metadata"]["uid"]
    events = [
        e
        for e in obj.list(EVENT, namespace).items
        if (e.get("involvedObject") or {}).get("uid") == uid and e.get("type") == "Warning"
    ]
    events.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    last = f"; last warning: {events[-1].get('reason')}: {events[-1].get('message')}" if events else ""
    return f"phase {status.get('phase')}, node {pod['spec'].get('nodeName')}; {conds}{last}"


def wait_running(
    api: client.ApiClient, namespace: str, name: str, *, timeout_s: float = 120.0
) -> dict[str, Any]:
    """Wait until Pod ``namespace/name`` is Running and return it.

    Raises: :class:`WaitTimeout` with :func:`pod_problem`'s explanation.
    """
    obj = objects.Objects(api, field_manager="lab-user")

    def running() -> dict[str, Any] | None:
        pod = obj.get_or_none(POD, name, namespace)
        return pod if pod and (pod.get("status") or {}).get("phase") == "Running" else None

    try:
        return eventually(f"Pod {namespace}/{name} to run", running, timeout_s=timeout_s)
    except WaitTimeout as exc:
        raise WaitTimeout(f"{exc}: {pod_problem(obj, namespace, name)}") from None


def warnings(api: client.ApiClient, namespace: str, name: str) -> list[str]:
    """``reason: message`` of every Warning Event of Pod ``namespace/name``, oldest first."""
    obj = objects.Objects(api, field_manager="lab-user")
    events = [
        e
        for e in obj.list(EVENT, namespace).items
        if (e.get("involvedObject") or {}).get("name") == name and e.get("type") == "Warning"
    ]
    events.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return [f"{e.get('reason')}: {e.get('message')}" for e in events]


def delete_docs(
    api: client.ApiClient, docs: Iterable[Mapping[str, Any]], *, timeout_s: float = 120.0
) -> None:
    """Delete ``docs`` (reverse order) and wait until each is gone.

    Namespaces are skipped (callers delete them explicitly, they take the longest).
    Units: ``timeout_s`` seconds for everything. Raises: :class:`WaitTimeout`.
    """
    from kubernetes import dynamic

    dyn = dynamic.DynamicClient(api)
    targets = [d for d in docs if d.get("kind") != "Namespace"]
    for doc in reversed(targets):
        res = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        meta = doc["metadata"]
        try:
            res.delete(name=meta["name"], namespace=meta.get("namespace"))
        except Exception as exc:
            if getattr(exc, "status", None) != 404:
                raise
    deadline = time.monotonic() + timeout_s
    for doc in targets:
        res = dyn.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        meta = doc["metadata"]

        def gone(res: Any = res, meta: Mapping[str, Any] = meta) -> bool:
            try:
                res.get(name=meta["name"], namespace=meta.get("namespace"))
            except Exception as exc:
                if getattr(exc, "status", None) == 404:
                    return True
                raise
            return False

        eventually(
            f"{doc['kind']} {meta.get('namespace', '')}/{meta['name']} to be deleted",
            gone,
            timeout_s=max(1.0, deadline - time.monotonic()),
        )


def claims_of(api: client.ApiClient, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The live ResourceClaims of ``pod`` (direct names and generated ones), in spec order."""
    obj = objects.Objects(api, field_manager="lab-user")
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    generated = {s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []}
    out = []
    for entry in spec.get("resourceClaims") or []:
        name = entry.get("resourceClaimName") or generated.get(entry.get("name"))
        if name:
            try:
                out.append(obj.get(CLAIM, name, meta["namespace"]))
            except kube_errors.NotFound:
                continue
    return out
