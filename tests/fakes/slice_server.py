"""An in-memory ResourceSlice store that applies the plugin's slice writes as the API server would.

A fake at the API boundary, for pure tests of ``sriov_dra.core.plugin.slices`` plans: it checks
the preconditions (uid and resourceVersion of a delete, resourceVersion of an update, no
resourceVersion on a create), omits an empty device list, stamps ``timeAdded`` on a device taint
that has none (from a counter, as the server stamps the time of the write) and counts the writes.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from sriov_dra.core.plugin import slices


class FakeSliceServer:
    """The slices of one driver on one node, and the number of writes applied so far."""

    def __init__(self, *, driver: str, node: str, node_uid: str) -> None:
        self.driver, self.node, self.node_uid = driver, node, node_uid
        self.objects: dict[str, dict[str, Any]] = {}
        self.rv = itertools.count(100)
        self.clock = itertools.count(1)
        self.writes = 0

    def apply(self, writes: slices.SliceWrites) -> None:
        """Apply a plan, asserting the preconditions the API server would enforce."""
        for ref in writes.deletes:
            have = self.objects[ref.name]["metadata"]
            assert (have["uid"], have["resourceVersion"]) == (ref.uid, ref.resource_version)
            del self.objects[ref.name]
            self.writes += 1
        for body in writes.updates:
            name = body["metadata"]["name"]
            assert self.objects[name]["metadata"]["resourceVersion"] == body["metadata"]["resourceVersion"]
            self.store(copy.deepcopy(dict(body)), uid=self.objects[name]["metadata"]["uid"])
        for body in writes.creates:
            assert body["metadata"]["name"] not in self.objects
            assert "resourceVersion" not in body["metadata"]
            self.store(copy.deepcopy(dict(body)), uid=f"uid-{next(self.rv)}")

    def store(self, body: dict[str, Any], *, uid: str) -> None:
        """Keep ``body`` as the server would store it."""
        body["metadata"].update(uid=uid, resourceVersion=str(next(self.rv)))
        if not body["spec"]["devices"]:
            del body["spec"]["devices"]  # the server omits an empty list
        for device in body["spec"].get("devices", []):
            for taint in device.get("taints", []):
                taint.setdefault("timeAdded", f"2026-01-01T00:00:{next(self.clock):02d}Z")
        self.objects[body["metadata"]["name"]] = body
        self.writes += 1

    def slices(self) -> list[dict[str, Any]]:
        """The stored slices."""
        return list(self.objects.values())

    def sync(
        self,
        devs: list[slices.PublishedDevice],
        last_generation: int = 0,
        taints: slices.Taints | None = None,
    ) -> slices.SliceWrites:
        """Plan against the stored slices and apply the plan; returns it."""
        writes = slices.plan_writes(
            self.slices(),
            devs,
            driver=self.driver,
            node=self.node,
            node_uid=self.node_uid,
            last_generation=last_generation,
            taints=taints,
        )
        self.apply(writes)
        return writes
