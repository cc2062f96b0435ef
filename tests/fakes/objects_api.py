"""FAKE in-memory API with the method set of ``sriov_dra.kube.objects.Objects``.

This is a test fake, not a server: it stores dicts per (resource, namespace, name), assigns
UIDs, resourceVersions and generations, honours resourceVersion/UID preconditions, supports the
JSON Patch ``test``/``remove`` ops the operator sends and server-side apply of
``status.conditions`` merged by type. ``fail`` injects an error for ``(verb, plural, name)``
(``name`` ``"*"`` matches every object); ``writes`` records every successful write in order.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sriov_dra.kube import errors, objects


@dataclass
class FakeObjects:
    """FAKE ``Objects``; see the module docstring."""

    field_manager: str = "test"
    api: Any = None
    """Stands for ``Objects.api`` (the ApiClient watches use); unit tests never start a watch."""
    store: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    writes: list[tuple[str, str, str]] = field(default_factory=list)
    fail: dict[tuple[str, str, str], errors.ApiError] = field(default_factory=dict)
    _rv: Any = field(default_factory=lambda: itertools.count(1))

    def _check(self, verb: str, res: objects.Resource, name: str) -> None:
        for key in ((verb, res.plural, name), (verb, res.plural, "*")):
            if key in self.fail:
                raise self.fail[key]

    def _key(self, res: objects.Resource, namespace: str | None, name: str) -> tuple[str, str, str]:
        return (str(res), namespace or "" if res.namespaced else "", name)

    def put(self, res: objects.Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as if created by someone else (no write recorded)."""
        body = copy.deepcopy(dict(obj))
        meta = body.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("generation", 1)
        meta["resourceVersion"] = str(next(self._rv))
        body.setdefault("apiVersion", res.api_version)
        body.setdefault("kind", res.kind)
        self.store[self._key(res, meta.get("namespace"), meta["name"])] = body
        return copy.deepcopy(body)

    def get(self, res: objects.Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self._check("get", res, name)
        obj = self.store.get(self._key(res, namespace, name))
        if obj is None:
            raise errors.NotFound(f"get {res} {namespace}/{name}: not found", status=404)
        return copy.deepcopy(obj)

    def get_or_none(
        self, res: objects.Resource, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        try:
            return self.get(res, name, namespace)
        except errors.NotFound:
            return None

    def list(
        self, res: objects.Resource, namespace: str | None = None, *, label_selector: str | None = None
    ) -> objects.Listing:
        self._check("list", res, "*")
        wanted = dict(part.split("=", 1) for part in (label_selector or "").split(",") if "=" in part)
        items = [
            copy.deepcopy(o)
            for (r, ns, _), o in sorted(self.store.items())
            if r == str(res)
            and (namespace is None or not res.namespaced or ns == namespace)
            and all((o["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())
        ]
        return objects.Listing(items, str(next(self._rv)))

    def create(
        self, res: objects.Resource, body: Mapping[str, Any], *, dry_run: bool = False
    ) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        self._check("create", res, meta["name"])
        if self._key(res, meta.get("namespace"), meta["name"]) in self.store:
            raise errors.Conflict("already exists", status=409, reason="AlreadyExists")
        out = self.put(res, body)
        self.writes.append(("create", res.plural, meta["name"]))
        return out

    def replace(self, res: objects.Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        self._check("update", res, meta["name"])
        key = self._key(res, meta.get("namespace"), meta["name"])
        current = self.store.get(key)
        if current is None:
            raise errors.NotFound("not found", status=404)
        if meta.get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise errors.Conflict("the object has been modified", status=409, reason="Conflict")
        new = copy.deepcopy(dict(body))
        new["metadata"] = {**new["metadata"], "uid": current["metadata"]["uid"]}
        if new.get("spec") != current.get("spec"):
            new["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        if "status" in current:
            new["status"] = current["status"]
        out = self.put(res, new)
        self.writes.append(("update", res.plural, meta["name"]))
        return out

    def delete(
        self,
        res: objects.Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> bool:
        self._check("delete", res, name)
        key = self._key(res, namespace, name)
        current = self.store.get(key)
        if current is None:
            return False
        if uid and current["metadata"]["uid"] != uid:
            raise errors.Conflict("uid precondition failed", status=409, reason="Conflict")
        del self.store[key]
        self.writes.append(("delete", res.plural, name))
        return True

    def json_patch(
        self,
        res: objects.Resource,
        name: str,
        namespace: str | None,
        ops: Sequence[Mapping[str, Any]],
        *,
        subresource: str = "",
    ) -> dict[str, Any]:
        self._check("patch", res, name)
        key = self._key(res, namespace, name)
        obj = copy.deepcopy(self.store[key])
        for op in ops:
            parts = [p for p in str(op["path"]).split("/") if p]
            parent: Any = obj
            for p in parts[:-1]:
                parent = parent[int(p)] if isinstance(parent, list) else parent[p]
            last = parts[-1]
            target = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if op["op"] == "test" and target != op["value"]:
                raise errors.Invalid("test failed", status=422)
            if op["op"] == "remove":
                del parent[int(last) if isinstance(parent, list) else last]
        self.store[key] = obj
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self.writes.append(("patch", res.plural, name))
        return copy.deepcopy(obj)

    def apply_status(
        self, res: objects.Resource, name: str, namespace: str | None, status: Mapping[str, Any]
    ) -> dict[str, Any]:
        self._check("apply-status", res, name)
        key = self._key(res, namespace, name)
        obj = self.store[key]
        current = {c["type"]: c for c in (obj.get("status") or {}).get("conditions", [])}
        for cond in status.get("conditions", []):
            current[cond["type"]] = copy.deepcopy(cond)
        obj.setdefault("status", {})["conditions"] = list(current.values())
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        self.writes.append(("apply-status", res.plural, name))
        return copy.deepcopy(obj)

    def all(self, res: objects.Resource) -> list[dict[str, Any]]:
        """Every stored object of ``res`` (test inspection)."""
        return [copy.deepcopy(o) for (r, _, _), o in sorted(self.store.items()) if r == str(res)]
