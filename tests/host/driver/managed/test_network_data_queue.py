"""The repair worker's Pod-watch queue for claim networkData: what wakes it, what not.

On the fake node (fake sysfs, fake Pod/NAD/claim APIs): the watch handler queues a Pod only when
it has published records and its network-status value changed since it was last handled, makes
no API call itself, forgets a deleted Pod, and the queue run writes only for a Pod still on this
node and not terminating. The cluster tier proves the same path against the real API server.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes import claims_api as fx
from tests.fakes import managed_node as mn

from sriov_dra.driver.managed import network_data_writer, repair
from sriov_dra.kubeletapi import messages
from sriov_dra_rules import names

TWO_VFS = [("nic-0", mn.DEV_A0), ("nic-1", mn.DEV_B0)]


def worker(node: mn.ManagedNode) -> repair.RepairWorker:
    made = node.worker()
    return repair.RepairWorker(
        attach=made.attach,
        host_release=made.host_release,
        host_prepare=made.host_prepare,
        clear_status=made.clear_status,
        network_data=network_data_writer.NetworkDataWriter(claims=node.claims),
    )


def reported(node: mn.ManagedNode, ips: tuple[str, str] = ("192.0.2.10", "198.51.100.10")) -> dict[str, Any]:
    """The consumer Pod with network-status as Multus writes it for the registry's shadows."""
    pod = node.attach.pods.get(mn.NS, "consumer")
    record = next(iter(node.store.all_claims().values()))
    status = [
        {
            "name": f"{d.managed.shadow_namespace}/{d.managed.shadow_name}",
            "interface": d.managed.interface,
            "ips": [ip],
        }
        for d, ip in zip(record.devices, ips, strict=True)
        if d.managed is not None
    ]
    pod["metadata"].setdefault("annotations", {})[names.NETWORK_STATUS_ANNOTATION] = json.dumps(status)
    return pod


def prepared(node: mn.ManagedNode) -> messages.ClaimRef:
    ref = node.add_consumer(TWO_VFS)
    assert isinstance(node.prepare(ref), messages.Prepared)
    return ref


def network_data(node: mn.ManagedNode) -> list[Any]:
    return sorted(
        (e.get("networkData") for e in mn.our_status_entries(node)),
        key=lambda d: json.dumps(d, sort_keys=True),
    )


def test_a_changed_network_status_is_queued_and_written_without_a_full_pass(node: mn.ManagedNode) -> None:
    prepared(node)
    w = worker(node)
    gets = node.claims.gets
    w.pod_event("MODIFIED", reported(node))
    assert node.claims.gets == gets  # the watch handler makes no API call
    assert w.run_network_data() == [fx.POD_UID]
    assert w.passes == 0 and w.network_data_runs == 1
    assert network_data(node) == [
        {"interfaceName": "dra0", "ips": ["192.0.2.10/24"]},
        {"interfaceName": "dra1", "ips": ["198.51.100.10/24"]},
    ]


def handled(node: mn.ManagedNode) -> tuple[repair.RepairWorker, dict[str, Any]]:
    """A prepared consumer whose network-status the worker has already written; the worker and Pod."""
    prepared(node)
    w = worker(node)
    pod = reported(node)
    w.pod_event("MODIFIED", pod)
    assert w.run_network_data() == [fx.POD_UID]
    return w, pod


def test_the_same_network_status_again_queues_nothing_until_it_changes(node: mn.ManagedNode) -> None:
    w, pod = handled(node)
    writes = node.claims.status_writes
    w.pod_event("MODIFIED", pod)
    assert w.run_network_data() == [] and node.claims.status_writes == writes
    w.pod_event("MODIFIED", reported(node, ("192.0.2.11", "198.51.100.10")))
    assert w.run_network_data() == [fx.POD_UID] and node.claims.status_writes == writes + 1


def test_a_deleted_pod_is_forgotten(node: mn.ManagedNode) -> None:
    w, pod = handled(node)
    w.pod_event("DELETED", pod)
    w.pod_event("MODIFIED", pod)  # handled before the deletion, but forgotten with it
    assert w.run_network_data() == [fx.POD_UID]


def test_a_pod_without_published_records_is_not_queued(node: mn.ManagedNode) -> None:
    node.add_consumer(TWO_VFS)  # not prepared: no record
    w = worker(node)
    w.pod_event("MODIFIED", node.attach.pods.get(mn.NS, "consumer"))
    assert w.run_network_data() == []


def test_a_queued_pod_that_moved_or_is_terminating_is_not_written(node: mn.ManagedNode) -> None:
    prepared(node)
    w = worker(node)
    elsewhere = reported(node)
    elsewhere["spec"]["nodeName"] = "node-b"
    w.pod_event("MODIFIED", elsewhere)
    assert w.run_network_data() == []
    terminating = reported(node)
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    w.pod_event("MODIFIED", terminating)
    assert w.run_network_data() == []
    assert network_data(node) == [None, None]


def test_without_a_writer_pod_events_do_nothing(node: mn.ManagedNode) -> None:
    prepared(node)
    w = node.worker()
    w.pod_event("MODIFIED", reported(node))
    assert w.run_network_data() == [] and w.network_data_runs == 0
