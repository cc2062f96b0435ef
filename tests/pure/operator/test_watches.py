"""Tests for sriov_dra.operator.watches.Router: which events wake which reconciliation
(docs/design.md#operator-status)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests.fakes import operator_objects as oo

from sriov_dra.core.operator import network_refs
from sriov_dra.kube import watches as kube_watches
from sriov_dra.operator import queue, watches

ADDED, MODIFIED, DELETED = kube_watches.ADDED, kube_watches.MODIFIED, kube_watches.DELETED
NET_A = queue.network_key(oo.OP_NS, "rail-a-net")


@pytest.fixture
def woken() -> list[queue.Key]:
    return []


@pytest.fixture
def router(woken: list[queue.Key]) -> watches.Router:
    r = watches.Router(woken.append, operator_namespace=oo.OP_NS, resource_prefix="openshift.io")
    r.on_policy(ADDED, oo.rail_policies()[0])  # rail-a-policy references rail-a-net
    r.on_network(ADDED, oo.sriov_network("rail-a-net", uid="u-a", ready="True"))
    r.on_network(ADDED, oo.sriov_network("unreferenced", uid="u-u", ready="True"))
    woken.clear()
    return r


def nad(
    name: str = "rail-a-net", ns: str = oo.TARGET_NS, marker: str | None = "rail-a-net", **meta: Any
) -> dict[str, Any]:
    annotations = {}
    if marker:
        annotations[network_refs.OWNER_REF_ANNOTATION] = network_refs.owner_marker(
            network_refs.ObjectRef(oo.OP_NS, marker)
        )
    return {
        "metadata": {"name": name, "namespace": ns, "uid": "nad-1", "annotations": annotations, **meta},
        "spec": {"config": "{}"},
    }


def test_policy_status_writes_do_not_wake_the_plan(router: watches.Router, woken: list[queue.Key]) -> None:
    p = oo.rail_policies()[0]
    p["status"] = {"conditions": [{"type": "DRAConfigurationReady", "status": "True"}]}
    router.on_policy(MODIFIED, p)
    assert woken == []
    p["metadata"]["generation"] = 2
    router.on_policy(MODIFIED, p)
    assert woken == [queue.POLICIES]


def test_status_only_ready_transition_of_a_referenced_network_wakes_the_plan_only(
    router: watches.Router, woken: list[queue.Key]
) -> None:
    net = oo.sriov_network("rail-a-net", uid="u-a", ready="False")
    router.on_network(MODIFIED, net)
    assert woken == [queue.POLICIES]  # the network controller wrote this status itself: no self-wake


def test_unreferenced_network_status_wakes_nothing_but_its_spec_wakes_its_controller(
    router: watches.Router, woken: list[queue.Key]
) -> None:
    router.on_network(MODIFIED, oo.sriov_network("unreferenced", uid="u-u", ready="False"))
    assert woken == []
    router.on_network(MODIFIED, oo.sriov_network("unreferenced", uid="u-u", ready="False", generation=2))
    assert woken == [queue.network_key(oo.OP_NS, "unreferenced")]


def test_periodic_relist_with_unchanged_objects_wakes_nothing(
    router: watches.Router, woken: list[queue.Key]
) -> None:
    router.on_policy(MODIFIED, oo.rail_policies()[0])
    router.on_network(MODIFIED, oo.sriov_network("rail-a-net", uid="u-a", ready="True"))
    router.on_nad(ADDED, nad())
    woken.clear()
    router.on_nad(MODIFIED, nad())
    assert woken == []


def test_owner_marker_removal_is_seen_from_the_old_object(
    router: watches.Router, woken: list[queue.Key]
) -> None:
    router.on_nad(ADDED, nad())
    woken.clear()
    router.on_nad(MODIFIED, nad(marker=None))
    assert woken == [NET_A, queue.POLICIES]
    assert router.marked_nads(network_refs.ObjectRef(oo.OP_NS, "rail-a-net")) == []


def test_nad_content_change_and_deletion_of_a_referenced_source_wake_both(
    router: watches.Router, woken: list[queue.Key]
) -> None:
    router.on_nad(ADDED, nad())
    assert woken == [NET_A, queue.POLICIES]
    changed = nad()
    changed["spec"]["config"] = '{"changed": true}'
    woken.clear()
    router.on_nad(MODIFIED, changed)
    assert woken == [NET_A, queue.POLICIES]
    woken.clear()
    router.on_nad(DELETED, changed)
    assert woken == [NET_A, queue.POLICIES]


def test_shadow_nads_wake_nothing_and_are_not_indexed(router: watches.Router, woken: list[queue.Key]) -> None:
    shadow = nad(name="dra-sriov-0123456789abcdef0123456789abcdef", ns="ai-workloads")
    labelled = nad(name="x", labels={"sriovnetwork.k8snetworkplumbingwg.io/managed-by": "sriov-dra-plugin"})
    for obj in (shadow, labelled):
        router.on_nad(ADDED, obj)
        router.on_nad(DELETED, obj)
    assert woken == []
    assert router.marked_nads(network_refs.ObjectRef(oo.OP_NS, "rail-a-net")) == []


def test_unrelated_nad_wakes_nothing(router: watches.Router, woken: list[queue.Key]) -> None:
    router.on_nad(ADDED, nad(name="someone-elses", ns="team", marker=None))
    assert woken == []


def test_nad_of_a_deleted_network_wakes_that_network_for_cleanup(
    router: watches.Router, woken: list[queue.Key]
) -> None:
    router.on_nad(ADDED, nad(name="ghost", marker="ghost"))
    assert woken == [queue.network_key(oo.OP_NS, "ghost")]
    assert network_refs.ObjectRef(oo.OP_NS, "ghost") in router.known_networks()


def test_namespace_creation_wakes_networks_rendering_into_it(
    router: watches.Router, woken: list[queue.Key]
) -> None:
    router.on_namespace(ADDED, {"metadata": {"name": oo.TARGET_NS}})
    assert woken == [NET_A, queue.network_key(oo.OP_NS, "unreferenced"), queue.POLICIES]
    woken.clear()
    router.on_namespace(MODIFIED, {"metadata": {"name": oo.TARGET_NS}})
    router.on_namespace(ADDED, {"metadata": {"name": "elsewhere"}})
    assert woken == []


def test_node_label_changes_wake_the_plan(router: watches.Router, woken: list[queue.Key]) -> None:
    n = oo.node("worker-1")
    router.on_node(ADDED, n)
    router.on_node(MODIFIED, copy.deepcopy(n))
    assert woken == [queue.POLICIES]
    n["metadata"]["labels"]["new"] = "label"
    router.on_node(MODIFIED, n)
    router.on_node(DELETED, n)
    assert woken == [queue.POLICIES] * 3


def test_network_deletion_wakes_its_controller_and_the_plan(
    router: watches.Router, woken: list[queue.Key]
) -> None:
    router.on_network(DELETED, oo.sriov_network("rail-a-net", uid="u-a"))
    assert woken == [NET_A, queue.POLICIES]
