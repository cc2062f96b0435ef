"""A FAKE in-memory API for Pods and NetworkAttachmentDefinitions, with fault injection.

**Fake, for tests only.** :class:`FakeKube` keeps Pods and NADs as JSON dicts and implements the
``driver.managed.seams`` ``PodApi`` and ``NadApi`` boundaries with the API server's semantics
that the auto-attach path relies on: ``resourceVersion`` bumps on every write, ``AlreadyExists``
on a taken name, UID-precondition DELETE (409 on mismatch), finalizers holding a deleted object
(``deletionTimestamp`` set, object gone when the last finalizer is removed), JSON Patch with
``test`` ops answered 422 on failure (as the real server does, K12), no new finalizer on a
terminating object (K14), and garbage collection of dependents when a Pod is deleted.

Faults: :meth:`FakeKube.fail` makes the next matching call raise (``before``) or perform the
write and then raise (``after``: a lost response). :class:`Crash` is a ``BaseException`` that no
production handler catches, standing for the plugin process dying at that point.
The cluster tier runs the same code against the real API server.
"""

from __future__ import annotations

import copy
import itertools
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.fakes import json_patch_apply

from sriov_dra.kube import errors as kube_errors
from sriov_dra_rules import errors


class Crash(BaseException):
    """The plugin process dies here (not an Exception: no handler code catches it)."""


def forbidden(action: str) -> kube_errors.Forbidden:
    return kube_errors.Forbidden(
        f"{action}: HTTP 403 Forbidden: access denied", status=403, reason="Forbidden"
    )


def timeout(action: str) -> kube_errors.ServerError:
    return kube_errors.ServerError(f"{action}: ReadTimeoutError: timed out")


def not_found(action: str) -> kube_errors.NotFound:
    return kube_errors.NotFound(f"{action}: HTTP 404 NotFound", status=404, reason="NotFound")


def conflict(action: str) -> kube_errors.Conflict:
    return kube_errors.Conflict(f"{action}: HTTP 409 Conflict", status=409, reason="Conflict")


def invalid(action: str) -> kube_errors.Invalid:
    return kube_errors.Invalid(f"{action}: HTTP 422 Invalid", status=422, reason="Invalid")


@dataclass
class Fault:
    """One injected failure: ``op`` like ``nads.create``; ``name`` limits it to one object."""

    op: str
    error: Callable[[str], BaseException]
    after: bool = False
    times: int = 1
    name: str = ""


@dataclass
class FakeKube:
    """FAKE Pod and NAD storage with API-server write semantics (see the module docstring)."""

    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    nads: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    hooks: dict[str, Callable[[], None]] = field(default_factory=dict)
    on_nad_patch: Callable[[str, Sequence[Mapping[str, Any]]], None] | None = None
    _version: Any = field(default_factory=lambda: itertools.count(100))
    _fault_lock: Any = field(default_factory=threading.Lock)  # the plugin fans out shadow requests

    # ------------------------------------------------------------------ helpers for tests
    def fail(
        self,
        op: str,
        error: Callable[[str], BaseException] | BaseException,
        *,
        after: bool = False,
        times: int = 1,
        name: str = "",
    ) -> None:
        """Make the next ``times`` calls of ``op`` fail with ``error`` (before or after the write)."""
        make = error if callable(error) and not isinstance(error, BaseException) else (lambda _a, e=error: e)
        self.faults.append(Fault(op, make, after, times, name))

    def _fault(self, op: str, name: str, *, after: bool) -> None:
        with self._fault_lock:  # one matching fault fires once, also under concurrent calls
            for fault in self.faults:
                if (
                    fault.op == op
                    and fault.after == after
                    and fault.times > 0
                    and (not fault.name or fault.name == name)
                ):
                    fault.times -= 1
                    break
            else:
                return
        raise fault.error(f"{op} {name}")

    def _rv(self) -> str:
        return str(next(self._version))

    def add_pod(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(dict(pod))
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta["resourceVersion"] = self._rv()
        self.pods[(meta["namespace"], meta["name"])] = obj
        return copy.deepcopy(obj)

    def add_nad(self, nad: Mapping[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(dict(nad))
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta["resourceVersion"] = self._rv()
        self.nads[(meta["namespace"], meta["name"])] = obj
        return copy.deepcopy(obj)

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self.pods[(namespace, name)]

    def edit_pod(self, namespace: str, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Another writer changes the Pod (bumps its resourceVersion)."""
        obj = self.pods[(namespace, name)]
        change(obj)
        obj["metadata"]["resourceVersion"] = self._rv()

    def edit_nad(self, namespace: str, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Another writer changes a NAD (bumps its resourceVersion)."""
        obj = self.nads[(namespace, name)]
        change(obj)
        obj["metadata"]["resourceVersion"] = self._rv()
        self._maybe_gone(self.nads, (namespace, name))

    def delete_nad_now(self, namespace: str, name: str) -> None:
        """Someone deletes the NAD (finalizers hold it, as in the API)."""
        self._delete(self.nads, (namespace, name), None)

    def delete_pod(self, namespace: str, name: str, *, orphan: bool = False) -> None:
        """Delete the Pod; the garbage collector then deletes its dependents (unless ``orphan``)."""
        pod = self.pods.pop((namespace, name))
        uid = pod["metadata"]["uid"]
        for key, nad in list(self.nads.items()):
            owners = nad["metadata"].get("ownerReferences") or []
            if any(o.get("uid") == uid for o in owners):
                if orphan:
                    nad["metadata"]["ownerReferences"] = [o for o in owners if o.get("uid") != uid]
                    nad["metadata"]["resourceVersion"] = self._rv()
                else:
                    self._delete(self.nads, key, None)

    def shadows(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(n)
            for (ns, name), n in sorted(self.nads.items())
            if name.startswith("dra-sriov-") and (namespace is None or ns == namespace)
        ]

    # ------------------------------------------------------------------ semantics
    def _maybe_gone(self, table: dict[tuple[str, str], dict[str, Any]], key: tuple[str, str]) -> None:
        obj = table.get(key)
        if (
            obj is not None
            and obj["metadata"].get("deletionTimestamp")
            and not obj["metadata"].get("finalizers")
        ):
            del table[key]

    def _delete(
        self, table: dict[tuple[str, str], dict[str, Any]], key: tuple[str, str], uid: str | None
    ) -> None:
        obj = table.get(key)
        action = f"delete {key[0]}/{key[1]}"
        if obj is None:
            raise not_found(action)
        if uid is not None and obj["metadata"]["uid"] != uid:
            raise conflict(action + " (uid precondition)")
        if obj["metadata"].get("finalizers"):
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = "2026-11-30T00:00:00Z"
                obj["metadata"]["resourceVersion"] = self._rv()
            return
        del table[key]

    def _patch(
        self,
        table: dict[tuple[str, str], dict[str, Any]],
        key: tuple[str, str],
        ops: Sequence[Mapping[str, Any]],
    ) -> dict[str, Any]:
        obj = table.get(key)
        action = f"patch {key[0]}/{key[1]}"
        if obj is None:
            raise not_found(action)
        try:
            new = json_patch_apply.apply_patch(obj, [dict(op) for op in ops])  # type: ignore[misc]
        except errors.SriovDraError as exc:
            raise invalid(f"{action}: {exc}") from exc
        old_fin, new_fin = obj["metadata"].get("finalizers") or [], new["metadata"].get("finalizers") or []
        if obj["metadata"].get("deletionTimestamp") and set(new_fin) - set(old_fin):
            raise invalid(f"{action}: no new finalizers can be added if the object is being deleted")
        if new["metadata"].get("uid") != obj["metadata"]["uid"]:
            raise invalid(f"{action}: metadata.uid is immutable")
        new["metadata"]["resourceVersion"] = self._rv()
        table[key] = new
        self._maybe_gone(table, key)
        return copy.deepcopy(new)

    def _call(self, op: str, name: str) -> None:
        self.calls.append((op, name))
        hook = self.hooks.get(op)
        if hook is not None:
            hook()
        self._fault(op, name, after=False)


class PodView:
    """FAKE ``PodApi`` over a :class:`FakeKube`."""

    def __init__(self, kube: FakeKube) -> None:
        self.kube = kube

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        self.kube._call("pods.get", name)
        obj = self.kube.pods.get((namespace, name))
        if obj is None:
            raise not_found(f"get pods {namespace}/{name}")
        return copy.deepcopy(obj)

    def json_patch(self, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        self.kube._call("pods.patch", name)
        out = self.kube._patch(self.kube.pods, (namespace, name), ops)
        self.kube._fault("pods.patch", name, after=True)
        return out


class NadView:
    """FAKE ``NadApi`` over a :class:`FakeKube`."""

    def __init__(self, kube: FakeKube) -> None:
        self.kube = kube

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        self.kube._call("nads.get", name)
        obj = self.kube.nads.get((namespace, name))
        if obj is None:
            raise not_found(f"get nads {namespace}/{name}")
        return copy.deepcopy(obj)

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body["metadata"]
        self.kube._call("nads.create", meta["name"])
        key = (meta["namespace"], meta["name"])
        if key in self.kube.nads:
            raise kube_errors.Conflict(
                f"create nads {key[0]}/{key[1]}: HTTP 409 AlreadyExists", status=409, reason="AlreadyExists"
            )
        out = self.kube.add_nad(body)
        self.kube._fault("nads.create", meta["name"], after=True)
        return out

    def delete(self, namespace: str, name: str, *, uid: str) -> None:
        self.kube._call("nads.delete", name)
        self.kube._delete(self.kube.nads, (namespace, name), uid)
        self.kube._fault("nads.delete", name, after=True)

    def json_patch(self, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        self.kube._call("nads.patch", name)
        if self.kube.on_nad_patch is not None:
            self.kube.on_nad_patch(name, ops)
        out = self.kube._patch(self.kube.nads, (namespace, name), ops)
        self.kube._fault("nads.patch", name, after=True)
        return out

    def list_all(self, *, label_selector: str) -> list[dict[str, Any]]:
        self.kube._call("nads.list", label_selector)
        wanted = dict(part.split("=", 1) for part in label_selector.split(",") if part)
        return [
            copy.deepcopy(n)
            for _, n in sorted(self.kube.nads.items())
            if all((n["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())
        ]


@dataclass
class FakeClock:
    """FAKE clock: ``sleep`` advances time instantly and records the waits."""

    now: float = 1000.0
    slept: list[float] = field(default_factory=list)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@dataclass
class RecordedEvents:
    """FAKE ``EventSink``: keeps every Event (kind, namespace/name, reason, warning)."""

    items: list[tuple[str, str, str, bool]] = field(default_factory=list)
    fail: BaseException | None = None

    def emit(self, ref: Any, *, reason: str, note: str, warning: bool, action: str) -> None:
        if self.fail is not None:
            raise self.fail
        self.items.append((ref.kind, f"{ref.namespace}/{ref.name}", reason, warning))

    def reasons(self) -> list[str]:
        return [r for _, _, r, _ in self.items]
