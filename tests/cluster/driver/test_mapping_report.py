"""Cluster tier: each mapping problem is a Warning Event on its object and a per-node gauge.

Against the real apiserver, with the publisher in auto-attach mode on a fake-sysfs node (two
PFs, four VFs each): a selector that matches no DeviceAttributes, conflicting network
references, a reserved key, an attribute-budget overflow and a filter that selects nothing
here each produce an ``events.k8s.io`` Warning regarding the SriovResourcePolicy or
DeviceAttributes, once per change (resyncs add none, a spec change adds one), the
``sriov_dra_plugin_withheld_devices`` / ``sriov_dra_plugin_policy_findings`` samples, and a False
``Valid`` condition in the node's own ``status.nodes`` entry, beside another node's entry.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import prometheus_client
import pytest
from kubernetes import client
from tests.cluster.driver.conftest import Factory
from tests.cluster.driver.test_publisher import create, eventually

from sriov_dra.driver import mapping_report, metrics
from sriov_dra.kube import objects, plugin_events
from sriov_dra_lab.nodes import SimulatedNode
from sriov_dra_rules import names

D = names.DOMAIN
NAD_NAME = names.ATTR_NET_ATTACH_DEF_NAME
VFS = 8


def warnings(api: client.ApiClient, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
    """Warning Events regarding ``kind/name`` in ``namespace``, oldest first."""
    listed = client.EventsV1Api(api).list_namespaced_event(namespace, _preload_content=False)
    items = json.loads(listed.data)["items"]
    return [
        e
        for e in items
        if e["type"] == "Warning" and e["regarding"]["kind"] == kind and e["regarding"]["name"] == name
    ]


@pytest.fixture
def reported(
    api: client.ApiClient, node: SimulatedNode, namespace: str, start_publisher: Factory
) -> Callable[[], tuple[Any, metrics.MappingGauges, prometheus_client.CollectorRegistry]]:
    """Start an auto-attach publisher whose mapping reporter writes real Events and gauges."""

    def start() -> tuple[Any, metrics.MappingGauges, prometheus_client.CollectorRegistry]:
        registry = prometheus_client.CollectorRegistry()
        gauges = metrics.MappingGauges(registry)
        reporter = mapping_report.MappingReporter(
            node_name=node.name,
            namespace=namespace,
            gauges=gauges,
            events=plugin_events.EventRecorder(api, controller="sriov-dra-plugin", instance=node.name),
            status=objects.Objects(api, field_manager=mapping_report.field_manager(node.name)),
        )
        return start_publisher(managed=True, mapping=reporter), gauges, registry

    return start


def sample(
    registry: prometheus_client.CollectorRegistry, metric: str, node: str, reason: str
) -> float | None:
    return registry.get_sample_value(f"sriov_dra_plugin_{metric}", {"node": node, "reason": reason})


def attributes_object(
    api: client.ApiClient, namespace: str, name: str, attrs: dict[str, Any], net: str = "rail"
) -> None:
    create(api, namespace, "deviceattributes", name, {"attributes": attrs}, labels={"net": net})


SELECT_RAIL = {"configs": [{"deviceAttributesSelector": {"matchLabels": {"net": "rail"}}}]}


def _selects_nothing(api: client.ApiClient, namespace: str) -> None:
    create(api, namespace, "sriovresourcepolicies", "p", SELECT_RAIL)


def _conflict(api: client.ApiClient, namespace: str) -> None:
    attributes_object(api, namespace, "a", {NAD_NAME: {"string": "rail-a"}})
    attributes_object(api, namespace, "b", {NAD_NAME: {"string": "rail-b"}})
    create(api, namespace, "sriovresourcepolicies", "p", SELECT_RAIL)


def _reserved(api: client.ApiClient, namespace: str) -> None:
    attributes_object(
        api, namespace, "a", {NAD_NAME: {"string": "rail-a"}, f"{D}/vendor": {"string": "8086"}}
    )
    create(api, namespace, "sriovresourcepolicies", "p", SELECT_RAIL)


def _over_budget(api: client.ApiClient, namespace: str) -> None:
    custom = {f"example.com/a{i}": {"int": i} for i in range(30)}
    attributes_object(api, namespace, "a", {NAD_NAME: {"string": "rail-a"}, **custom})
    create(api, namespace, "sriovresourcepolicies", "p", SELECT_RAIL)


def _pf_typo(api: client.ApiClient, namespace: str) -> None:
    create(
        api,
        namespace,
        "sriovresourcepolicies",
        "p",
        {"configs": [{"resourceFilters": [{"pfNames": ["enp3s0f0", "enp3s0f9"]}]}]},
    )


CASES = [
    # (setup, reason, objects the Event regards, withheld devices, published devices)
    (_selects_nothing, "DeviceNotEligible", [("SriovResourcePolicy", "p")], VFS, 0),
    (_conflict, "ConflictingNetworkReference", [("SriovResourcePolicy", "p")], VFS, 0),
    (_reserved, "ReservedAttribute", [("DeviceAttributes", "a"), ("SriovResourcePolicy", "p")], VFS, 0),
    (_over_budget, "InvalidAttribute", [("SriovResourcePolicy", "p")], VFS, 0),
    (_pf_typo, "SelectorMatchesNothing", [("SriovResourcePolicy", "p")], 0, VFS // 2),
]


@pytest.mark.parametrize(
    ("setup", "reason", "regarding", "withheld", "published"),
    CASES,
    ids=["selects-nothing", "conflict", "reserved-key", "attribute-budget", "filter-selects-nothing"],
)
def test_each_mapping_problem_is_a_warning_event_on_its_object_and_a_gauge(
    api, namespace, node, reported, setup, reason, regarding, withheld, published
) -> None:
    pub, _, registry = reported()
    setup(api, namespace)
    for kind, name in regarding:
        found = eventually(
            f"a {reason} Warning on {kind}/{name}",
            lambda kind=kind, name=name: [
                e for e in warnings(api, namespace, kind, name) if e["reason"] == reason
            ],
        )
        assert f"node {node.name}: " in found[0]["note"]
        assert found[0]["reportingInstance"] == node.name
    assert (
        eventually(f"{reason} findings gauge", lambda: sample(registry, "policy_findings", node.name, reason))
        >= 1
    )
    assert (sample(registry, "withheld_devices", node.name, reason) or 0) == withheld
    assert len(pub.snapshot().published) == published
    for kind, name in regarding:
        condition = eventually(
            f"{kind}/{name} status of {node.name}",
            lambda kind=kind, name=name: valid(api, namespace, kind, name, node.name),
        )
        assert (condition["status"], condition["reason"]) == ("False", reason)


def valid(api: client.ApiClient, namespace: str, kind: str, name: str, node: str) -> dict[str, Any] | None:
    """The ``Valid`` condition of ``node``'s entry in the object's status, if any."""
    res = objects.RESOURCE_POLICY if kind == "SriovResourcePolicy" else objects.DEVICE_ATTRIBUTES
    obj = objects.Objects(api, field_manager="test").get(res, name, namespace)
    for entry in (obj.get("status") or {}).get("nodes") or []:
        if entry["node"] == node:
            return next(c for c in entry["conditions"] if c["type"] == "Valid")
    return None


def test_two_nodes_each_own_their_status_entry_and_a_fix_turns_it_true(
    api, namespace, node, reported
) -> None:
    """Another node's entry, applied under its own field manager, survives this node's writes."""
    other = objects.Objects(api, field_manager=mapping_report.field_manager("other-node"))
    _selects_nothing(api, namespace)
    entry = {
        "node": "other-node",
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Valid",
                "status": "True",
                "reason": "NoFindings",
                "message": "no problem found on this node",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
    other.apply_status(objects.RESOURCE_POLICY, "p", namespace, {"nodes": [entry]})
    pub, _, _ = reported()
    false = eventually(
        "this node's False entry", lambda: valid(api, namespace, "SriovResourcePolicy", "p", node.name)
    )
    assert (false["status"], false["reason"]) == ("False", "DeviceNotEligible")
    attributes_object(api, namespace, "fix", {NAD_NAME: {"string": "rail-a"}})
    eventually(
        "this node's entry True once fixed",
        lambda: (
            (valid(api, namespace, "SriovResourcePolicy", "p", node.name) or {}).get("status") == "True"
            or None
        ),
    )
    assert valid(api, namespace, "SriovResourcePolicy", "p", "other-node")["reason"] == "NoFindings"
    assert len(pub.snapshot().published) == VFS


def test_a_finding_is_reported_once_per_change_not_per_resync(api, namespace, node, reported) -> None:
    pub, _, registry = reported()
    _selects_nothing(api, namespace)

    def policy_warnings() -> list[dict[str, Any]]:
        return [
            e
            for e in warnings(api, namespace, "SriovResourcePolicy", "p")
            if e["reason"] == "DeviceNotEligible"
        ]

    eventually("the first Warning", policy_warnings)
    eventually("the status entry", lambda: valid(api, namespace, "SriovResourcePolicy", "p", node.name))
    written = objects.Objects(api, field_manager="test").get(objects.RESOURCE_POLICY, "p", namespace)
    for _ in range(3):
        pub.sync()
    assert len(policy_warnings()) == 1
    again = objects.Objects(api, field_manager="test").get(objects.RESOURCE_POLICY, "p", namespace)
    assert again["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
    custom = client.CustomObjectsApi(api)
    spec = {"configs": [{"deviceAttributesSelector": {"matchLabels": {"net": "other"}}}]}
    custom.patch_namespaced_custom_object(
        D, "v1alpha1", namespace, "sriovresourcepolicies", "p", {"spec": spec}
    )
    eventually("a second Warning after the spec change", lambda: len(policy_warnings()) == 2 or None)
    attributes_object(api, namespace, "fix", {NAD_NAME: {"string": "rail-a"}}, net="other")
    eventually("the devices published once fixed", lambda: len(pub.snapshot().published) == VFS or None)
    assert sample(registry, "withheld_devices", node.name, "DeviceNotEligible") == 0
    assert sample(registry, "policy_findings", node.name, "DeviceNotEligible") == 0
    assert len(policy_warnings()) == 2


def test_an_empty_policy_namespace_is_a_node_event_naming_where_the_policies_are(
    api, namespace, node, start_publisher
) -> None:
    watched = f"watched-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=watched)))
    try:
        create(api, namespace, "sriovresourcepolicies", "rails", {"configs": [{}]})
        reporter = mapping_report.MappingReporter(
            node_name=node.name,
            namespace=watched,
            gauges=metrics.MappingGauges(prometheus_client.CollectorRegistry()),
            events=plugin_events.EventRecorder(api, controller="sriov-dra-plugin", instance=node.name),
            policies=objects.Objects(api, field_manager=mapping_report.field_manager(node.name)),
        )
        pub = start_publisher(policy_namespace=watched, mapping=reporter)

        def node_events() -> list[dict[str, Any]]:
            listed = client.EventsV1Api(api).list_namespaced_event("default", _preload_content=False)
            return [
                e
                for e in json.loads(listed.data)["items"]
                if e["regarding"].get("name") == node.name and e["reason"] == "PolicyNamespaceEmpty"
            ]

        (event,) = eventually("a PolicyNamespaceEmpty Warning on the Node", node_events)
        assert event["type"] == "Warning" and event["regarding"]["kind"] == "Node"
        assert f"the plugin watches {watched}, which holds no SriovResourcePolicy" in event["note"]
        assert f"{namespace} (1)" in event["note"]
        for _ in range(3):
            pub.sync()
        assert len(node_events()) == 1
        assert pub.snapshot().published == {}
    finally:
        core.delete_namespace(watched, propagation_policy="Background")
