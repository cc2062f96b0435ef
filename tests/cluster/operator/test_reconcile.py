"""Cluster tier: the network and node-policy controllers against a real kube-apiserver v1.36.3.

Proves what does not need the watch machinery: the operator-two-rails manifests
produce exactly the expected generated objects (two policies sharing ``resourceName: sriov_vfs``
get separate maps and selectors, no pool label) with both policies ``DRAConfigurationReady=True``
and both networks ``Ready=True``; a no-op reconcile performs zero writes (counted by the client
hook and cross-checked in the API server's audit log); and each listed edge case yields the
asserted condition reason and generated output.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.cluster.operator.conftest import Harness, audit_writes, line_count
from tests.fakes import operator_objects as oo
from tests.fakes import policy_objects as po

from sriov_dra.core.operator import network_refs
from sriov_dra.kube import objects
from sriov_dra_lab.control_plane import ControlPlane

GEN = "sriovnetwork.openshift.io/generated-by"
UID_LABEL = "sriovnetwork.openshift.io/node-policy-uid"
D = "sriovnetwork.k8snetworkplumbingwg.io"


def expected_attrs(h: Harness, uid: str, rail: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{D}/v1alpha1",
        "kind": "DeviceAttributes",
        "metadata": {
            "name": f"dra-policy-{uid}-attrs",
            "namespace": h.ns,
            "labels": {GEN: "sriov-network-operator", UID_LABEL: uid},
        },
        "spec": {
            "attributes": {
                "k8s.cni.cncf.io/resourceName": {"string": "openshift.io/sriov_vfs"},
                f"{D}/netAttachDefName": {"string": rail},
                f"{D}/netAttachDefNamespace": {"string": h.target_ns},
            }
        },
    }


def expected_config(uid: str, pf: str) -> dict[str, Any]:
    return {
        "deviceAttributesSelector": {"matchLabels": {GEN: "sriov-network-operator", UID_LABEL: uid}},
        "resourceFilters": [{"linkType": "eth", "pfNames": [pf], "vendors": ["15b3"]}],
    }


def expected_srp(h: Harness, node: str, configs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": f"{D}/v1alpha1",
        "kind": "SriovResourcePolicy",
        "metadata": {
            "name": node,
            "namespace": h.ns,
            "labels": {GEN: "sriov-network-operator", "sriovnetwork.openshift.io/node": node},
        },
        "spec": {
            "nodeSelector": po.hostname_selector(node),
            "configs": configs,
        },
    }


def two_rails(h: Harness) -> tuple[str, str, str]:
    """Apply the operator-two-rails manifests (target namespace included) and settle the controllers."""
    h.create_namespace(h.target_ns)
    node = h.add_node("worker-1")
    h.network("rail-a-net")
    h.network("rail-b-net")
    h.rails()
    h.settle()
    return node, h.uid("rail-a-policy"), h.uid("rail-b-policy")


def test_operator_two_rails_manifests_produce_exactly_the_expected_objects(harness: Harness) -> None:
    h = harness
    node, uid_a, uid_b = two_rails(h)
    attrs, srps = h.generated()
    assert attrs == {
        f"dra-policy-{uid_a}-attrs": expected_attrs(h, uid_a, "rail-a-net"),
        f"dra-policy-{uid_b}-attrs": expected_attrs(h, uid_b, "rail-b-net"),
    }
    assert srps == {
        node: expected_srp(h, node, [expected_config(uid_a, "ens1f0"), expected_config(uid_b, "ens2f0")])
    }
    for name in ("rail-a-policy", "rail-b-policy"):
        cond = h.condition(name)
        assert cond is not None
        assert (cond["status"], cond["reason"], cond["observedGeneration"]) == (
            "True",
            "DRAConfigurationApplied",
            1,
        )
    for rail in ("rail-a-net", "rail-b-net"):
        ready = h.ready(rail)
        assert ready is not None and (ready["status"], ready["reason"], ready["observedGeneration"]) == (
            "True",
            "NetworkReady",
            1,
        )
        nad = h.admin.get(objects.NAD, rail, h.target_ns)
        assert nad["metadata"]["annotations"] == {
            "k8s.v1.cni.cncf.io/resourceName": "openshift.io/sriov_vfs",
            network_refs.OWNER_REF_ANNOTATION: f"SriovNetwork.sriovnetwork.openshift.io/{h.ns}/{rail}",
        }
        assert "ownerReferences" not in nad["metadata"]
        config = json.loads(nad["spec"]["config"])
        assert config["name"] == rail and config["ipam"]["type"] == "whereabouts"
        assert nad["spec"]["config"].startswith('{\n    "cniVersion": "1.0.0",\n    "name": ')


def test_noop_reconcile_performs_zero_writes(harness: Harness, control_plane: ControlPlane) -> None:
    h = harness
    two_rails(h)
    h.settle()  # a second pass may still converge nothing; the third must be a pure no-op
    h.writes.clear()
    audit_from = line_count(control_plane.audit_log)
    results = h.reconcile_networks()
    policy_result = h.reconcile_policies()
    assert [r.outcome for r in results] == ["unchanged", "unchanged"]
    assert policy_result.outcome == "synced" and not policy_result.retry
    assert h.writes == []
    assert audit_writes(control_plane.audit_log, audit_from, {h.ns, h.target_ns}) == []


def test_stale_observed_generation_withholds_the_map_but_keeps_the_config(harness: Harness) -> None:
    h = harness
    node, uid_a, uid_b = two_rails(h)
    net = h.admin.get(objects.SRIOV_NETWORK, "rail-a-net", h.ns)
    net["spec"]["vlan"] = 42  # generation 2; the network controller has not observed it yet
    h.admin.replace(objects.SRIOV_NETWORK, net)
    h.reconcile_policies()
    cond = h.condition("rail-a-policy")
    assert cond is not None and cond["reason"] == "SriovNetworkNotReady"
    assert "generation 1, current generation 2" in cond["message"]
    attrs, srps = h.generated()
    assert f"dra-policy-{uid_a}-attrs" not in attrs and f"dra-policy-{uid_b}-attrs" in attrs
    assert srps[node]["spec"]["configs"][0] == expected_config(uid_a, "ens1f0")
    h.settle()
    assert h.reason("rail-a-policy") == "DRAConfigurationApplied"
    assert json.loads(h.admin.get(objects.NAD, "rail-a-net", h.target_ns)["spec"]["config"])["vlan"] == 42


def mutate_nad(h: Harness, fn: Any) -> None:
    nad = h.admin.get(objects.NAD, "rail-a-net", h.target_ns)
    fn(nad)
    h.admin.replace(objects.NAD, nad)


@pytest.mark.parametrize(
    ("mutation", "needle"),
    [
        (
            lambda n: n["spec"].update(config=n["spec"]["config"].replace("192.0.2.0/24", "10.9.0.0/16")),
            "content differs",
        ),
        (lambda n: n["metadata"]["annotations"].pop(network_refs.OWNER_REF_ANNOTATION), "owner marker None"),
    ],
    ids=["changed-nad-content", "removed-owner-marker"],
)
def test_tampered_source_nad_is_refused_until_the_network_controller_repairs_it(
    harness: Harness, mutation: Any, needle: str
) -> None:
    h = harness
    _, uid_a, _ = two_rails(h)
    mutate_nad(h, mutation)
    h.reconcile_policies()
    cond = h.condition("rail-a-policy")
    assert cond is not None and cond["reason"] == "SourceNADNotReady" and needle in cond["message"]
    assert f"dra-policy-{uid_a}-attrs" not in h.generated()[0]
    assert [r.outcome for r in h.reconcile_networks()] == ["updated", "unchanged"]
    h.reconcile_policies()
    assert h.reason("rail-a-policy") == "DRAConfigurationApplied"
    assert h.generated()[0][f"dra-policy-{uid_a}-attrs"] == expected_attrs(h, uid_a, "rail-a-net")


def test_deleting_source_nad_is_refused(harness: Harness) -> None:
    h = harness
    _, uid_a, _ = two_rails(h)
    mutate_nad(h, lambda n: n["metadata"].update(finalizers=["test.sriov-dra/hold"]))
    h.admin.delete(objects.NAD, "rail-a-net", h.target_ns)
    h.reconcile_policies()
    cond = h.condition("rail-a-policy")
    assert cond is not None and cond["reason"] == "SourceNADNotReady" and "being deleted" in cond["message"]
    assert f"dra-policy-{uid_a}-attrs" not in h.generated()[0]
    mutate_nad(h, lambda n: n["metadata"].update(finalizers=[]))  # the NAD goes away
    h.settle()
    assert h.reason("rail-a-policy") == "DRAConfigurationApplied"


def test_nad_uid_replacement_recovers_with_the_same_output(harness: Harness) -> None:
    h = harness
    two_rails(h)
    before = h.generated()
    old = h.admin.get(objects.NAD, "rail-a-net", h.target_ns)
    h.admin.delete(objects.NAD, "rail-a-net", h.target_ns)
    h.reconcile_policies()
    assert h.reason("rail-a-policy") == "SourceNADNotReady"
    h.settle()
    new = h.admin.get(objects.NAD, "rail-a-net", h.target_ns)
    assert new["metadata"]["uid"] != old["metadata"]["uid"] and new["spec"] == old["spec"]
    assert h.reason("rail-a-policy") == "DRAConfigurationApplied"
    assert h.generated() == before


def test_same_namespace_cr_uid_replacement_waits_for_the_new_owner(harness: Harness) -> None:
    h = harness
    node = h.add_node("worker-1")
    old_net = h.network("local-net", network_namespace=None)
    h.policy("local-policy", pf="ens1f0", dra={"attributes": oo.reference("local-net", h.ns)})
    h.settle()
    assert h.reason("local-policy") == "DRAConfigurationApplied"
    uid = h.uid("local-policy")
    assert (
        h.admin.get(objects.NAD, "local-net", h.ns)["metadata"]["ownerReferences"][0]["uid"]
        == old_net["metadata"]["uid"]
    )
    h.admin.delete(objects.SRIOV_NETWORK, "local-net", h.ns)
    new_net = h.network("local-net", network_namespace=None)  # same name, new UID, no Ready yet
    assert new_net["metadata"]["uid"] != old_net["metadata"]["uid"]
    h.reconcile_policies()
    cond = h.condition("local-policy")
    assert (
        cond is not None
        and cond["reason"] == "SriovNetworkNotReady"
        and "no Ready condition" in cond["message"]
    )
    assert f"dra-policy-{uid}-attrs" not in h.generated()[0]
    assert (
        h.generated()[1][node]["spec"]["configs"][0]["deviceAttributesSelector"]["matchLabels"][UID_LABEL]
        == uid
    )
    h.settle()  # the network controller (re)writes the NAD owned by the new UID, whether or not GC ran
    owners = h.admin.get(objects.NAD, "local-net", h.ns)["metadata"]["ownerReferences"]
    assert [o["uid"] for o in owners] == [new_net["metadata"]["uid"]]
    assert h.reason("local-policy") == "DRAConfigurationApplied"
    attrs = h.generated()[0][f"dra-policy-{uid}-attrs"]["spec"]["attributes"]
    assert attrs[f"{D}/netAttachDefName"] == {"string": "local-net"}
    assert attrs[f"{D}/netAttachDefNamespace"] == {"string": h.ns}


def test_non_operator_namespace_redirection_is_refused(harness: Harness) -> None:
    h = harness
    tenant = f"{h.ns}-tn"
    h.create_namespace(tenant)
    h.create_namespace(h.target_ns)
    h.add_node("worker-1")
    h.network("tenant-net", namespace=tenant)  # networkNamespace outside the operator namespace
    h.extra_networks.add(network_refs.ObjectRef(tenant, "tenant-net"))
    h.policy("p", pf="ens1f0", dra={"attributes": oo.reference("tenant-net", tenant)})
    h.settle()
    ready = h.ready("tenant-net", tenant)
    assert ready is not None and ready["reason"] == "NetworkAttachmentDefinitionInvalid"
    cond = h.condition("p")
    assert (
        cond is not None and cond["reason"] == "SriovNetworkNotReady" and "cannot be set" in cond["message"]
    )
    assert h.generated()[0] == {}
    assert h.admin.get_or_none(objects.NAD, "tenant-net", h.target_ns) is None


def test_zero_and_false_values_are_published(harness: Harness) -> None:
    h = harness
    node = h.add_node("worker-1")
    values = {
        "example.com/zero": {"int": 0},
        "example.com/off": {"bool": False},
        "example.com/v": {"version": "0.0.0"},
    }
    h.policy("p", pf="ens1f0", dra={"attributes": values})
    h.settle()
    uid = h.uid("p")
    attrs = h.generated()[0][f"dra-policy-{uid}-attrs"]["spec"]["attributes"]
    assert attrs == {**values, "k8s.cni.cncf.io/resourceName": {"string": "openshift.io/sriov_vfs"}}
    assert h.reason("p") == "DRAConfigurationApplied" and node in h.generated()[1]


def test_conflicting_overlap_withdraws_the_node_configs(harness: Harness) -> None:
    h = harness
    node, uid_a, uid_b = two_rails(h)
    p = h.admin.get(objects.NODE_POLICY, "rail-b-policy", h.ns)
    p["spec"]["nicSelector"] = {"vendor": "15b3"}  # now covers ens1f0 too, with another network
    h.admin.replace(objects.NODE_POLICY, p)
    h.reconcile_policies()
    srp = h.generated()[1][node]
    assert srp["spec"]["configs"] == []
    for name, other in (("rail-a-policy", "rail-b-policy"), ("rail-b-policy", "rail-a-policy")):
        cond = h.condition(name)
        assert cond is not None and cond["reason"] == "ConflictingDRAMapping" and other in cond["message"]
    assert cond["observedGeneration"] == 2  # rail-b-policy's new generation
    fixed = h.admin.get(objects.NODE_POLICY, "rail-b-policy", h.ns)
    fixed["spec"]["nicSelector"] = {"vendor": "15b3", "pfNames": ["ens2f0"]}
    h.admin.replace(objects.NODE_POLICY, fixed)
    h.reconcile_policies()
    assert h.generated()[1][node]["spec"]["configs"] == [
        expected_config(uid_a, "ens1f0"),
        expected_config(uid_b, "ens2f0"),
    ]


def test_deleted_policy_is_cleaned_by_name_and_unmarked_objects_survive(harness: Harness) -> None:
    h = harness
    node, uid_a, _ = two_rails(h)
    admin_attrs = {
        "apiVersion": f"{D}/v1alpha1",
        "kind": "DeviceAttributes",
        "metadata": {"name": "admin-extra", "namespace": h.ns, "labels": {"team": "net"}},
        "spec": {"attributes": {"example.com/x": {"string": "y"}}},
    }
    h.admin.create(objects.DEVICE_ATTRIBUTES, admin_attrs)
    h.admin.delete(objects.NODE_POLICY, "rail-b-policy", h.ns)
    h.reconcile_policies()
    attrs, srps = h.generated()
    assert set(attrs) == {f"dra-policy-{uid_a}-attrs", "admin-extra"}
    assert srps[node]["spec"]["configs"] == [expected_config(uid_a, "ens1f0")]
    h.admin.delete(objects.NODE_POLICY, "rail-a-policy", h.ns)
    h.reconcile_policies()
    attrs, srps = h.generated()
    assert set(attrs) == {"admin-extra"} and srps == {}


def test_network_deletion_removes_its_nad_without_a_finalizer(harness: Harness) -> None:
    h = harness
    two_rails(h)
    net = h.admin.get(objects.SRIOV_NETWORK, "rail-a-net", h.ns)
    assert not net["metadata"].get("finalizers")
    h.admin.delete(objects.SRIOV_NETWORK, "rail-a-net", h.ns)
    assert h.admin.get_or_none(objects.SRIOV_NETWORK, "rail-a-net", h.ns) is None  # nothing blocks deletion
    assert h.networks.reconcile(network_refs.ObjectRef(h.ns, "rail-a-net")).outcome == "cleaned"
    assert h.admin.get_or_none(objects.NAD, "rail-a-net", h.target_ns) is None
    h.reconcile_policies()
    assert h.reason("rail-a-policy") == "SriovNetworkNotFound"
