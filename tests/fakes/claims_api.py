"""ResourceClaim JSON builders and a FAKE claim API for handler tests.

``resource_claim`` builds the JSON a live GET of an allocated ``resource.k8s.io/v1`` claim
returns. :class:`FakeClaimsApi` is a **fake** of ``driver.managed.seams.ClaimStatusApi`` (the
``kube.claims.ClaimClient`` boundary): it keeps claims in memory, bumps ``resourceVersion`` on
every write, can inject conflicts and failures, and counts reads and writes. It is not a
Kubernetes API server; the cluster tier runs the real one.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sriov_dra.kube import claims as kube_claims
from sriov_dra.kube import errors as kube_errors
from sriov_dra_rules import names

DRIVER = names.DRIVER_NAME
NODE = "node-a"
POD_UID = "11111111-2222-3333-4444-555555555555"
OTHER_POD_UID = "22222222-3333-4444-5555-666666666666"
CLAIM_UID = "c1a1c1a1-0000-4000-8000-000000000001"
CLAIM_UID_2 = "c1a1c1a1-0000-4000-8000-000000000002"


def vf_config(**fields: object) -> dict[str, Any]:
    """A VfConfig ``parameters`` object with ``fields`` (API names)."""
    return {"apiVersion": f"{names.DOMAIN}/v1alpha1", "kind": "VfConfig", **fields}


def result(
    device: str, request: str = "vf", *, pool: str = NODE, driver: str = DRIVER, **extra: object
) -> dict[str, Any]:
    """One ``status.allocation.devices.results`` entry."""
    return {"request": request, "driver": driver, "pool": pool, "device": device, **extra}


def config(
    params: Mapping[str, object],
    *,
    source: str = "FromClaim",
    requests: Sequence[str] = (),
    driver: str = DRIVER,
) -> dict[str, Any]:
    """One ``status.allocation.devices.config`` entry with opaque ``params``."""
    return {
        "source": source,
        "requests": list(requests),
        "opaque": {"driver": driver, "parameters": dict(params)},
    }


def resource_claim(
    results: Sequence[Mapping[str, object]],
    *,
    uid: str = CLAIM_UID,
    name: str = "vf-claim",
    namespace: str = "ns-a",
    configs: Sequence[Mapping[str, object]] = (),
    pod_uid: str | None = POD_UID,
    pod_name: str = "consumer",
    reserved: Sequence[Mapping[str, object]] | None = None,
    allocated: bool = True,
    requests: Sequence[Mapping[str, object]] = (),
    devices_status: Sequence[Mapping[str, object]] | None = None,
) -> dict[str, Any]:
    """A live ResourceClaim JSON object allocated with ``results`` and reserved for one Pod."""
    status: dict[str, Any] = {}
    if allocated:
        status["allocation"] = {
            "devices": {"results": [dict(r) for r in results], "config": [dict(c) for c in configs]}
        }
    if reserved is not None:
        status["reservedFor"] = [dict(r) for r in reserved]
    elif pod_uid is not None:
        status["reservedFor"] = [{"resource": "pods", "name": pod_name, "uid": pod_uid}]
    if devices_status is not None:
        status["devices"] = [dict(d) for d in devices_status]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "1"},
        "spec": {"devices": {"requests": [dict(r) for r in requests]}},
        "status": status,
    }


@dataclass
class FakeClaimsApi:
    """FAKE claim API: in-memory claims keyed by (namespace, name).

    ``conflicts``: how many status writes fail with a 409 before one succeeds (another writer
    modified the claim; the fake applies ``intruder`` entries to ``status.devices`` each time).
    ``fail_get`` / ``fail_status``: exceptions raised by the next GET / every status write.
    """

    claims: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    conflicts: int = 0
    intruder: list[dict[str, Any]] = field(default_factory=list)
    fail_get: Exception | None = None
    fail_status: Exception | None = None
    gets: int = 0
    status_writes: int = 0
    _lock: Any = field(default_factory=threading.RLock)
    """Serializes calls: the plugin reads a claim on one thread while a fan-out worker writes its
    status (as an API server serves concurrent requests); unguarded, a deepcopy of the stored claim
    raced the in-place status update ("dictionary changed size during iteration")."""

    def add(self, claim: Mapping[str, Any]) -> None:
        meta = claim["metadata"]
        self.claims[(meta["namespace"], meta["name"])] = copy.deepcopy(dict(claim))

    def stored(self, namespace: str, name: str) -> dict[str, Any]:
        return self.claims[(namespace, name)]

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        with self._lock:
            return self._get(namespace, name)

    def _get(self, namespace: str, name: str) -> dict[str, Any]:
        self.gets += 1
        if self.fail_get is not None:
            exc, self.fail_get = self.fail_get, None
            raise exc
        found = self.claims.get((namespace, name))
        if found is None:
            raise kube_errors.NotFound(
                f"get resourceclaims {namespace}/{name}: HTTP 404 NotFound", status=404
            )
        return copy.deepcopy(found)

    def update_device_status(
        self,
        namespace: str,
        name: str,
        *,
        uid: str,
        compute: kube_claims.StatusCompute,
        current: Mapping[str, Any] | None = None,
    ) -> bool:
        with self._lock:
            return self._update_device_status(namespace, name, uid=uid, compute=compute, current=current)

    def _update_device_status(
        self,
        namespace: str,
        name: str,
        *,
        uid: str,
        compute: kube_claims.StatusCompute,
        current: Mapping[str, Any] | None,
    ) -> bool:
        if self.fail_status is not None:
            raise self.fail_status
        for _ in range(5):
            found = self.claims.get((namespace, name))
            if found is None or found["metadata"]["uid"] != uid:
                return False
            seen = copy.deepcopy(dict(current)) if current is not None else copy.deepcopy(found)
            current = None
            devices = compute(seen.get("status", {}).get("devices"))
            if devices is None:
                return False
            if seen["metadata"]["resourceVersion"] != found["metadata"]["resourceVersion"] or self.conflicts:
                if self.conflicts:
                    self.conflicts -= 1
                    self._bump(found)
                    found.setdefault("status", {}).setdefault("devices", []).extend(
                        copy.deepcopy(self.intruder)
                    )
                continue
            found.setdefault("status", {})["devices"] = copy.deepcopy(devices)
            self._bump(found)
            self.status_writes += 1
            return True
        raise kube_errors.Conflict("patch resourceclaims status: HTTP 409 Conflict", status=409)

    @staticmethod
    def _bump(claim: dict[str, Any]) -> None:
        claim["metadata"]["resourceVersion"] = str(int(claim["metadata"]["resourceVersion"]) + 1)
