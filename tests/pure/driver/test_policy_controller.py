"""Tests for sriov_dra.driver.policy_controller against a fake list+watch API.

Covers what the cluster tier cannot reach easily: the preflight errors, the node-heartbeat
filter, an evaluation failure withdrawing every device, managed-mode references in the snapshot,
and that the snapshot is an immutable value swapped only when the outcome changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests import waiting
from tests.fakes.watch_api import FakeWatchApi, obj

from sriov_dra.core import attributes
from sriov_dra.driver import policy_controller as pc
from sriov_dra.host import discovery
from sriov_dra_lab.fakes import fake_pci, fake_sysfs
from sriov_dra_rules import names

NS = "dra-driver-sriov"
NODE = "worker-1"
POLICIES = f"{pc.GROUP_PATH}/namespaces/{NS}/{pc.POLICY_PLURAL}"
ATTRS = f"{pc.GROUP_PATH}/namespaces/{NS}/{pc.ATTRIBUTES_PLURAL}"
NODES = "/api/v1/nodes"
D = names.DOMAIN


def eventually(what: str, fn: Callable[[], Any], timeout_s: float = 5.0) -> Any:
    """Poll ``fn`` every 0.01 s until truthy; fail naming ``what`` after ``timeout_s``."""
    return waiting.eventually(what, fn, timeout_s=timeout_s, interval_s=0.01)


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> tuple[discovery.DiscoveredVf, ...]:
    root: Path = tmp_path_factory.mktemp("sys")
    return discovery.discover(fake_sysfs.build(root, fake_pci.two_root_pfs(2)).sysfs)


def node(rv: str = "5", **labels: str) -> dict[str, Any]:
    n = obj(NODE, rv)
    n["metadata"]["labels"] = {"kubernetes.io/hostname": NODE, **labels}
    return n


def fake_api(
    policies: list[dict[str, Any]] | None = None, attrs: list[dict[str, Any]] | None = None
) -> FakeWatchApi:
    return FakeWatchApi(
        collections={
            POLICIES: policies or [],
            ATTRS: attrs or [],
            NODES: [node()],
            "/api/v1/namespaces": [obj(NS, "1")],
        }
    )


def policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {**obj(name, "3", NS), "spec": spec}


class Started:
    def __init__(self) -> None:
        self.controllers: list[pc.PolicyController] = []
        self.changes = 0
        self.lock = threading.Lock()

    def changed(self) -> None:
        with self.lock:
            self.changes += 1

    def count(self) -> int:
        with self.lock:
            return self.changes


@pytest.fixture
def started() -> Iterator[Started]:
    s = Started()
    yield s
    for c in s.controllers:
        c.close()


def controller(
    api: FakeWatchApi, inventory: Any, started: Started, *, managed: bool = False, start: bool = True
) -> pc.PolicyController:
    c = pc.PolicyController(
        api=api,
        node_name=NODE,
        namespace=NS,
        inventory=inventory,
        managed=managed,
        stop=threading.Event(),
        on_change=started.changed,
    )
    started.controllers.append(c)
    if start:
        c.start()
        eventually("the first lists", lambda: c.synced)
    return c


ALL = policy("all", {"configs": [{}]})


def test_missing_policy_namespace_names_the_fix(inventory, started) -> None:
    api = fake_api()
    api.collections["/api/v1/namespaces"] = []
    with pytest.raises(pc.PolicyNamespaceMissing) as caught:
        controller(api, inventory, started, start=False).check()
    assert f"{NS!r} does not exist" in str(caught.value) and "kubectl create namespace" in str(caught.value)


def test_missing_crd_names_the_manifest(inventory, started) -> None:
    api = fake_api()
    api.status[POLICIES] = 404
    with pytest.raises(pc.PolicyCrdMissing) as caught:
        controller(api, inventory, started, start=False).check()
    assert f"(sriovresourcepolicies.{D}) is not installed" in str(caught.value)
    assert f"manifests/crds/{D}_sriovresourcepolicies.yaml" in str(caught.value)


def test_unreadable_namespace_is_not_fatal(inventory, started) -> None:
    api = fake_api()
    api.status[f"/api/v1/namespaces/{NS}"] = 403
    controller(api, inventory, started, start=False).check()


def test_all_devices_policy_advertises_the_inventory_with_discovery_attributes(inventory, started) -> None:
    c = controller(fake_api([ALL]), inventory, started)
    snap = c.evaluate()
    assert snap.eligible == frozenset(vf.name for vf in inventory) and snap.revision == 1
    first = inventory[0]
    assert snap.attributes_of(first.name) == first.attributes
    assert snap.node_uid == f"uid-{NODE}" and snap.error is None
    assert c.evaluate() is snap, "an unchanged outcome keeps the same snapshot"


def test_snapshot_is_immutable_and_keeps_full_inventory(inventory, started) -> None:
    c = controller(fake_api([]), inventory, started)
    snap = c.evaluate()
    assert snap.eligible == frozenset() and len(snap.inventory) == len(inventory)
    with pytest.raises(TypeError):
        snap.published["x"] = None  # type: ignore[index]
    assert not snap.is_eligible(inventory[0].name) and snap.attributes_of(inventory[0].name) is None


def test_evaluation_failure_withdraws_every_device_and_reports_it(inventory, started) -> None:
    broken = policy("broken", {"nodeSelector": "worker-1", "configs": [{}]})
    c = controller(fake_api([ALL, broken]), inventory, started)
    snap = c.evaluate()
    assert snap.eligible == frozenset() and len(snap.inventory) == len(inventory)
    assert snap.error is not None and "broken" in snap.error and "nodeSelector" in snap.error


def test_managed_snapshot_carries_the_nad_reference(inventory, started) -> None:
    attrs = [
        {
            **obj("rail-a", "4", NS),
            "metadata": {"name": "rail-a", "namespace": NS, "labels": {"rail": "a"}},
            "spec": {"attributes": {f"{D}/netAttachDefName": {"string": "rail-a-net"}}},
        }
    ]
    spec = {"configs": [{"deviceAttributesSelector": {"matchLabels": {"rail": "a"}}}]}
    c = controller(fake_api([policy("rail", spec)], attrs), inventory, started, managed=True)
    snap = c.evaluate()
    name = inventory[0].name
    outcome = snap.evaluation.outcomes[name]
    assert outcome.eligible and outcome.reference == attributes.NadReference("rail-a-net", None)
    assert snap.attributes_of(name)[f"{D}/netAttachDefName"] == attributes.string_value("rail-a-net")


def test_node_heartbeat_does_not_trigger_but_a_label_change_does(inventory, started) -> None:
    api = fake_api([ALL])
    c = controller(api, inventory, started)
    (stream,) = eventually("the node watch to open", lambda: list(api.streams[NODES]))
    before = started.count()
    heartbeat = node(rv="6")
    heartbeat["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    stream.push({"type": "MODIFIED", "object": heartbeat})
    eventually(
        "the heartbeat to reach the cache", lambda: c.node.get(NODE)["metadata"]["resourceVersion"] == "6"
    )
    assert started.count() == before
    stream.push({"type": "MODIFIED", "object": node(rv="7", **{"example.com/rail": "a"})})
    eventually("a label change to trigger", lambda: started.count() > before)
    assert c.evaluate().node_labels["example.com/rail"] == "a"
