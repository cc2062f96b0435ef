"""Tests for the network and node-policy controllers on the in-memory fake API (failure injection)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.fakes import operator_objects as oo
from tests.fakes.objects_api import FakeObjects

from sriov_dra.core.operator import conditions, dra_verdicts, network_refs, sriov_network
from sriov_dra.kube import errors as api_errors
from sriov_dra.kube import events, objects
from sriov_dra.operator import network_controller, policy_controller, settings, status
from sriov_dra_rules import errors

R = errors.Reason
CONFIG = settings.ReconcileSettings(namespace=oo.OP_NS)
RAIL_A = network_refs.ObjectRef(oo.OP_NS, "rail-a-net")
RAIL_B = network_refs.ObjectRef(oo.OP_NS, "rail-b-net")


@pytest.fixture
def api() -> FakeObjects:
    fake = FakeObjects()
    for ns in (oo.OP_NS, oo.TARGET_NS, "tenant"):
        fake.put(objects.NAMESPACE, {"metadata": {"name": ns}})
    return fake


def marked(api: FakeObjects):  # type: ignore[no-untyped-def]
    def find(ref: network_refs.ObjectRef) -> list[network_refs.ObjectRef]:
        return [
            network_refs.ref_of(n)
            for n in api.all(objects.NAD)
            if network_refs.parse_owner_marker(
                (n["metadata"].get("annotations") or {}).get(network_refs.OWNER_REF_ANNOTATION)
            )
            == ref
        ]

    return find


def net_controller(api: FakeObjects) -> network_controller.NetworkController:
    writer = status.StatusWriter(api, now=lambda: "2026-01-01T00:00:00Z")  # type: ignore[arg-type]
    return network_controller.NetworkController(api, CONFIG, writer, marked(api))  # type: ignore[arg-type]


def ready_of(api: FakeObjects, ref: network_refs.ObjectRef) -> dict[str, Any]:
    cond = conditions.find(api.get(objects.SRIOV_NETWORK, ref.name, ref.namespace), "Ready")
    assert cond is not None
    return dict(cond)


def rail_a_with_its_nad(
    api: FakeObjects,
) -> tuple[network_controller.NetworkController, dict[str, Any], dict[str, Any]]:
    """The controller after it created rail-a-net's NAD, with that NAD and the network."""
    api.put(objects.SRIOV_NETWORK, oo.sriov_network("rail-a-net"))
    ctl = net_controller(api)
    assert ctl.reconcile(RAIL_A).outcome == "created"
    return (
        ctl,
        api.get(objects.NAD, "rail-a-net", oo.TARGET_NS),
        api.get(objects.SRIOV_NETWORK, "rail-a-net", oo.OP_NS),
    )


def test_network_renders_its_nad_once_and_then_writes_nothing(api: FakeObjects) -> None:
    ctl, nad, net = rail_a_with_its_nad(api)
    assert nad["spec"] == sriov_network.render_nad(net, resource_prefix="openshift.io")["spec"]
    assert ready_of(api, RAIL_A) | {"lastTransitionTime": "x"} == {
        "type": "Ready",
        "status": "True",
        "reason": "NetworkReady",
        "message": network_controller.READY_MESSAGE,
        "observedGeneration": 1,
        "lastTransitionTime": "x",
    }
    before = len(api.writes)
    assert ctl.reconcile(RAIL_A).outcome == "unchanged"
    assert api.writes[before:] == []


@pytest.mark.parametrize(
    ("network", "reason", "needle"),
    [
        (oo.sriov_network("n1", namespace="tenant"), "NetworkAttachmentDefinitionInvalid", "cannot be set"),
        (
            oo.sriov_network("n1", namespace=oo.OP_NS, network_namespace="missing"),
            "NamespaceNotFound",
            '"missing" does not exist',
        ),
        (
            oo.sriov_network("n1", namespace=oo.OP_NS, ipam="{"),
            "InvalidNetworkSpec",
            "SriovNetwork sriov-network-operator/n1 cannot be rendered: spec.ipam: malformed JSON",
        ),
    ],
    ids=["redirect-outside-operator-namespace", "target-namespace-missing", "unrenderable"],
)
def test_network_failures_set_ready_false_without_writing_a_nad(
    api: FakeObjects, network: dict[str, Any], reason: str, needle: str
) -> None:
    api.put(objects.SRIOV_NETWORK, network)
    ref = network_refs.ref_of(network)
    net_controller(api).reconcile(ref)
    cond = ready_of(api, ref)
    assert (cond["status"], cond["reason"]) == ("False", reason) and needle in cond["message"]
    assert api.all(objects.NAD) == []


def events_of(api: FakeObjects) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["note"]) for e in api.all(objects.EVENT)]


@pytest.mark.parametrize(
    ("spec", "problem"), list(oo.UNRENDERABLE_SPECS.values()), ids=list(oo.UNRENDERABLE_SPECS)
)
def test_invalid_spec_writes_no_nad_and_reports_invalid_network_spec_with_a_warning(
    api: FakeObjects, spec: dict[str, Any], problem: str
) -> None:
    api.put(objects.SRIOV_NETWORK, oo.sriov_network("rail-a-net", **spec))
    recorder = events.Recorder(api, controller="sriov-dra-operator", instance="t")  # type: ignore[arg-type]
    writer = status.StatusWriter(api, now=lambda: "2026-01-01T00:00:00Z", recorder=recorder)  # type: ignore[arg-type]
    ctl = network_controller.NetworkController(api, CONFIG, writer, marked(api))  # type: ignore[arg-type]
    assert ctl.reconcile(RAIL_A).outcome == "invalid"
    assert api.all(objects.NAD) == []
    cond = ready_of(api, RAIL_A)
    assert (cond["status"], cond["reason"]) == ("False", "InvalidNetworkSpec")
    assert cond["message"].startswith(f"SriovNetwork {RAIL_A} cannot be rendered: {problem}")
    assert events_of(api) == [("Warning", "InvalidNetworkSpec", cond["message"])]
    ctl.reconcile(RAIL_A)  # unchanged problem: no second condition write, no second Event
    assert len(events_of(api)) == 1


def test_invalid_spec_leaves_an_existing_nad_exactly_as_it_is(api: FakeObjects) -> None:
    ctl, before, net = rail_a_with_its_nad(api)
    net["spec"]["ipam"] = "[]"
    net["metadata"]["generation"] = 2
    api.put(objects.SRIOV_NETWORK, net)
    writes = len(api.writes)
    assert ctl.reconcile(RAIL_A).outcome == "invalid"
    assert api.get(objects.NAD, "rail-a-net", oo.TARGET_NS) == before
    assert [w for w in api.writes[writes:] if w[1] == objects.NAD.plural] == []
    cond = ready_of(api, RAIL_A)
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == ("False", "InvalidNetworkSpec", 2)


def test_nad_claimed_by_another_network_is_not_touched(api: FakeObjects) -> None:
    api.put(objects.SRIOV_NETWORK, oo.sriov_network("rail-a-net"))
    other = network_refs.owner_marker(network_refs.ObjectRef("tenant", "x"))
    api.put(
        objects.NAD,
        {
            "metadata": {
                "name": "rail-a-net",
                "namespace": oo.TARGET_NS,
                "annotations": {network_refs.OWNER_REF_ANNOTATION: other},
            },
            "spec": {"config": "{}"},
        },
    )
    net_controller(api).reconcile(RAIL_A)
    cond = ready_of(api, RAIL_A)
    assert (
        cond["reason"] == "NetworkAttachmentDefinitionInvalid" and "owned by SriovNetwork" in cond["message"]
    )
    assert api.get(objects.NAD, "rail-a-net", oo.TARGET_NS)["spec"] == {"config": "{}"}


def test_unmarked_nad_is_adopted_and_drift_is_repaired(api: FakeObjects) -> None:
    api.put(objects.SRIOV_NETWORK, oo.sriov_network("rail-a-net"))
    api.put(
        objects.NAD, {"metadata": {"name": "rail-a-net", "namespace": oo.TARGET_NS}, "spec": {"config": "{}"}}
    )
    assert net_controller(api).reconcile(RAIL_A).outcome == "updated"
    annotations = api.get(objects.NAD, "rail-a-net", oo.TARGET_NS)["metadata"]["annotations"]
    assert annotations[network_refs.OWNER_REF_ANNOTATION] == network_refs.owner_marker(RAIL_A)


def test_network_namespace_change_deletes_the_old_nad_by_marker(api: FakeObjects) -> None:
    api.put(objects.SRIOV_NETWORK, oo.sriov_network("rail-a-net"))
    ctl = net_controller(api)
    ctl.reconcile(RAIL_A)
    net = api.get(objects.SRIOV_NETWORK, "rail-a-net", oo.OP_NS)
    net["spec"]["networkNamespace"] = "tenant"
    api.replace(objects.SRIOV_NETWORK, net)
    ctl.reconcile(RAIL_A)
    assert [network_refs.ref_of(n) for n in api.all(objects.NAD)] == [
        network_refs.ObjectRef("tenant", "rail-a-net")
    ]


def test_deleted_network_loses_its_nads_and_404s_count_as_done(api: FakeObjects) -> None:
    api.put(objects.SRIOV_NETWORK, oo.sriov_network("rail-a-net"))
    ctl = net_controller(api)
    ctl.reconcile(RAIL_A)
    api.delete(objects.SRIOV_NETWORK, "rail-a-net", oo.OP_NS)
    assert ctl.reconcile(RAIL_A).outcome == "cleaned"
    assert api.all(objects.NAD) == []
    assert ctl.reconcile(RAIL_A).outcome == "absent"


def test_upstream_finalizer_is_removed_so_deletion_never_hangs(api: FakeObjects) -> None:
    net = oo.sriov_network("rail-a-net")
    net["metadata"]["finalizers"] = [sriov_network.LEGACY_FINALIZER]
    net["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    api.put(objects.SRIOV_NETWORK, net)
    assert net_controller(api).reconcile(RAIL_A).outcome == "deleted"
    assert api.get(objects.SRIOV_NETWORK, "rail-a-net", oo.OP_NS)["metadata"]["finalizers"] == []


def test_nad_write_failure_is_retried_and_reported(api: FakeObjects) -> None:
    api.put(objects.SRIOV_NETWORK, oo.sriov_network("rail-a-net"))
    api.fail[("create", "network-attachment-definitions", "rail-a-net")] = api_errors.ServerError(
        "boom", status=500
    )
    result = net_controller(api).reconcile(RAIL_A)
    assert result.retry and ready_of(api, RAIL_A)["status"] == "False"


def policy_controller_for(
    api: FakeObjects, nodes: list[dict[str, Any]] | None = None
) -> policy_controller.PolicyController:
    writer = status.StatusWriter(api, now=lambda: "2026-01-01T00:00:00Z")  # type: ignore[arg-type]
    return policy_controller.PolicyController(
        api,  # type: ignore[arg-type]
        CONFIG,
        writer,
        policies=lambda: api.all(objects.NODE_POLICY),
        nodes=lambda: nodes if nodes is not None else [oo.node("worker-1")],
    )


def install_rails(api: FakeObjects) -> None:
    for name in ("rail-a-net", "rail-b-net"):
        api.put(objects.SRIOV_NETWORK, oo.sriov_network(name))
        net_controller(api).reconcile(network_refs.ObjectRef(oo.OP_NS, name))
    for p in oo.rail_policies():
        api.put(objects.NODE_POLICY, p)


def dra_condition(api: FakeObjects, name: str) -> dict[str, Any] | None:
    cond = conditions.find(api.get(objects.NODE_POLICY, name, oo.OP_NS), dra_verdicts.CONDITION_TYPE)
    return None if cond is None else dict(cond)


def test_policy_pass_generates_objects_then_a_noop_pass_writes_nothing(api: FakeObjects) -> None:
    install_rails(api)
    ctl = policy_controller_for(api)
    assert ctl.reconcile().outcome == "synced"
    assert len(api.all(objects.DEVICE_ATTRIBUTES)) == 2 and len(api.all(objects.RESOURCE_POLICY)) == 1
    for name in ("rail-a-policy", "rail-b-policy"):
        cond = dra_condition(api, name)
        assert cond is not None and cond["status"] == "True" and cond["observedGeneration"] == 1
    before = len(api.writes)
    result = ctl.reconcile()
    assert result.outcome == "synced" and api.writes[before:] == []


def test_failed_writes_report_sync_failed_until_they_succeed(api: FakeObjects) -> None:
    install_rails(api)
    api.fail[("create", "sriovresourcepolicies", "worker-1")] = api_errors.ServerError(
        "etcd timeout", status=504
    )
    ctl = policy_controller_for(api)
    result = ctl.reconcile()
    assert result.retry and any("SriovResourcePolicy worker-1" in f for f in result.failed_writes)
    for name in ("rail-a-policy", "rail-b-policy"):
        cond = dra_condition(api, name)
        assert (
            cond is not None
            and cond["reason"] == "DRAConfigurationSyncFailed"
            and "etcd timeout" in cond["message"]
        )
    api.fail.clear()
    assert not ctl.reconcile().retry
    assert dra_condition(api, "rail-a-policy")["status"] == "True"  # type: ignore[index]


def test_unmarked_object_with_a_generated_name_is_not_adopted(api: FakeObjects) -> None:
    install_rails(api)
    name = f"dra-policy-{oo.UID_A}-attrs"
    api.put(
        objects.DEVICE_ATTRIBUTES,
        {"metadata": {"name": name, "namespace": oo.OP_NS}, "spec": {"attributes": {}}},
    )
    result = policy_controller_for(api).reconcile()
    assert result.retry
    cond = dra_condition(api, "rail-a-policy")
    assert (
        cond is not None
        and cond["reason"] == "DRAConfigurationSyncFailed"
        and "not adopted" in cond["message"]
    )
    assert api.get(objects.DEVICE_ATTRIBUTES, name, oo.OP_NS)["spec"] == {"attributes": {}}


def test_forbidden_source_read_reports_access_denied(api: FakeObjects) -> None:
    install_rails(api)
    api.fail[("get", "sriovnetworks", "rail-a-net")] = api_errors.Forbidden(
        "sriovnetworks is forbidden", status=403
    )
    policy_controller_for(api).reconcile()
    cond = dra_condition(api, "rail-a-policy")
    assert (
        cond is not None and cond["reason"] == R.SOURCE_ACCESS_DENIED.value and "forbidden" in cond["message"]
    )
    assert dra_condition(api, "rail-b-policy")["status"] == "True"  # type: ignore[index]


def test_policy_that_drops_dra_loses_the_condition(api: FakeObjects) -> None:
    install_rails(api)
    ctl = policy_controller_for(api)
    ctl.reconcile()
    p = api.get(objects.NODE_POLICY, "rail-a-policy", oo.OP_NS)
    del p["spec"]["dra"]
    api.replace(objects.NODE_POLICY, p)
    ctl.reconcile()
    assert dra_condition(api, "rail-a-policy") is None
    assert {o["metadata"]["name"] for o in api.all(objects.DEVICE_ATTRIBUTES)} == {
        f"dra-policy-{oo.UID_B}-attrs",
        "sriov-vfs-attrs",
    }
