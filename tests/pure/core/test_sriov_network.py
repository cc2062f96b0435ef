"""Tests for sriov_dra.core.operator.sriov_network: the source NAD manifest, its managed fields, source resolution."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tests.fakes import operator_objects as oo
from tests.fakes.sriov_networks import simple

from sriov_dra.core.operator import network_refs, sriov_network
from sriov_dra_rules import errors

R = errors.Reason
OP = oo.OP_NS
MARKER_A = "SriovNetwork.sriovnetwork.openshift.io/sriov-network-operator/rail-a-net"


def test_cross_namespace_nad_has_marker_and_no_owner_reference() -> None:
    net = oo.sriov_network("rail-a-net", uid="u-a")
    nad = sriov_network.render_nad(net, resource_prefix="openshift.io")
    assert nad["metadata"] == {
        "name": "rail-a-net",
        "namespace": "ai-workloads",
        "annotations": {
            "k8s.v1.cni.cncf.io/resourceName": "openshift.io/sriov_vfs",
            "sriovnetwork.openshift.io/owner-ref": MARKER_A,
        },
    }
    assert nad["apiVersion"] == "k8s.cni.cncf.io/v1" and nad["kind"] == "NetworkAttachmentDefinition"


def test_same_namespace_nad_gets_a_plain_owner_reference() -> None:
    net = oo.sriov_network("n1", namespace="tenant", network_namespace=None, uid="u-1")
    meta = sriov_network.render_nad(net, resource_prefix="example.com")["metadata"]
    assert meta["namespace"] == "tenant"
    assert meta["ownerReferences"] == [
        {"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovNetwork", "name": "n1", "uid": "u-1"}
    ]
    assert meta["annotations"]["k8s.v1.cni.cncf.io/resourceName"] == "example.com/sriov_vfs"


def test_missing_resource_name_is_refused() -> None:
    net = simple()
    del net["spec"]["resourceName"]
    with pytest.raises(errors.InvalidSpec) as exc:
        sriov_network.render_nad(net, resource_prefix="openshift.io")
    assert exc.value.reason is R.INVALID_NETWORK_SPEC
    assert [str(e) for e in exc.value.errors] == ["spec.resourceName: is required; set it"]


def rendered(net: dict[str, Any]) -> dict[str, Any]:
    nad = sriov_network.render_nad(net, resource_prefix="openshift.io")
    nad["metadata"]["uid"] = "nad-uid"
    return nad


def test_nad_differences_name_only_changed_managed_fields() -> None:
    net = oo.sriov_network("n1", namespace="tenant", network_namespace=None, uid="u-1")
    expected = sriov_network.render_nad(net, resource_prefix="openshift.io")
    live = copy.deepcopy(expected)
    live["metadata"]["resourceVersion"] = "7"
    live["metadata"]["labels"] = {"extra": "kept"}
    assert sriov_network.nad_differences(expected, live) == []
    live["spec"]["config"] += " "
    live["metadata"]["annotations"]["x"] = "y"
    live["metadata"]["ownerReferences"][0]["uid"] = "old"
    assert sriov_network.nad_differences(expected, live) == [
        "spec",
        "metadata.annotations",
        "metadata.ownerReferences",
    ]


REF_A = network_refs.ObjectRef(OP, "rail-a-net")


def _deleting(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return obj


def _case(
    mutate_net: Any = None, mutate_nad: Any = None, net_missing: bool = False, nad_missing: bool = False
):
    net = oo.sriov_network("rail-a-net", uid="u-a", ready="True")
    nad = rendered(net)
    if mutate_net:
        mutate_net(net)
    if mutate_nad:
        mutate_nad(nad)
    return (None if net_missing else net), (None if nad_missing else nad)


def _stale(net: dict[str, Any]) -> None:
    net["metadata"]["generation"] = 2


def _ready_false(net: dict[str, Any]) -> None:
    net["status"]["conditions"][0].update(status="False", reason="NamespaceNotFound")


def _no_ready(net: dict[str, Any]) -> None:
    del net["status"]


def _redirect_tenant(net: dict[str, Any]) -> None:
    net["metadata"]["namespace"] = "tenant"


def _content(nad: dict[str, Any]) -> None:
    nad["spec"]["config"] = nad["spec"]["config"].replace("192.0.2.0/24", "10.0.0.0/8")


def _no_marker(nad: dict[str, Any]) -> None:
    del nad["metadata"]["annotations"][network_refs.OWNER_REF_ANNOTATION]


def _other_marker(nad: dict[str, Any]) -> None:
    nad["metadata"]["annotations"][network_refs.OWNER_REF_ANNOTATION] = MARKER_A.replace("rail-a", "rail-b")


def _resource_name(nad: dict[str, Any]) -> None:
    nad["metadata"]["annotations"][sriov_network.RESOURCE_NAME_ANNOTATION] = "x/y"


@pytest.mark.parametrize(
    ("case", "reason", "needle"),
    [
        (_case(net_missing=True), R.SRIOV_NETWORK_NOT_FOUND, "does not exist"),
        (_case(mutate_net=_deleting), R.SRIOV_NETWORK_NOT_READY, "being deleted"),
        (_case(mutate_net=_redirect_tenant), R.SRIOV_NETWORK_NOT_READY, "networkNamespace cannot be set"),
        (_case(mutate_net=_no_ready), R.SRIOV_NETWORK_NOT_READY, "no Ready condition"),
        (_case(mutate_net=_ready_false), R.SRIOV_NETWORK_NOT_READY, "Ready is False"),
        (_case(mutate_net=_stale), R.SRIOV_NETWORK_NOT_READY, "generation 1, current generation 2"),
        (_case(nad_missing=True), R.SOURCE_NAD_NOT_READY, "does not exist yet"),
        (_case(mutate_nad=_deleting), R.SOURCE_NAD_NOT_READY, "being deleted"),
        (_case(mutate_nad=_content), R.SOURCE_NAD_NOT_READY, "content differs"),
        (_case(mutate_nad=_no_marker), R.SOURCE_NAD_NOT_READY, "owner marker None"),
        (_case(mutate_nad=_other_marker), R.SOURCE_NAD_NOT_READY, "rail-b-net"),
        (_case(mutate_nad=_resource_name), R.SOURCE_NAD_NOT_READY, "content differs"),
    ],
    ids=[
        "network-missing",
        "network-deleting",
        "non-operator-namespace-redirection",
        "no-ready-condition",
        "ready-false",
        "stale-observed-generation",
        "nad-missing",
        "nad-deleting",
        "nad-content-changed",
        "owner-marker-removed",
        "owner-marker-of-another-network",
        "legacy-annotation-changed",
    ],
)
def test_unusable_sources_are_refused_with_the_precise_reason(case: Any, reason: R, needle: str) -> None:
    net, nad = case
    got = sriov_network.resolve_source(REF_A, net, nad, operator_namespace=OP, resource_prefix="openshift.io")
    assert not got.ready and got.nad is None
    assert got.reason is reason
    assert needle in got.message


def test_ready_cross_namespace_source_resolves_to_the_rendered_target() -> None:
    net, nad = _case()
    got = sriov_network.resolve_source(REF_A, net, nad, operator_namespace=OP, resource_prefix="openshift.io")
    assert got.ready and got.nad == network_refs.ObjectRef("ai-workloads", "rail-a-net")


def test_same_namespace_owner_reference_must_name_the_current_uid() -> None:
    ref = network_refs.ObjectRef("tenant", "n1")
    net = oo.sriov_network("n1", namespace="tenant", network_namespace=None, uid="new-uid", ready="True")
    nad = rendered(net)
    ok = sriov_network.resolve_source(ref, net, nad, operator_namespace=OP, resource_prefix="openshift.io")
    assert ok.ready and ok.nad == ref
    nad["metadata"]["ownerReferences"][0]["uid"] = "old-uid"  # the CR was deleted and recreated
    got = sriov_network.resolve_source(ref, net, nad, operator_namespace=OP, resource_prefix="openshift.io")
    assert got.reason is R.SOURCE_NAD_NOT_READY and "old-uid" in got.message and "new-uid" in got.message


def test_resolution_does_not_depend_on_the_nad_uid() -> None:
    net, nad = _case()
    assert nad is not None
    nad["metadata"]["uid"] = "recreated-nad-uid"
    got = sriov_network.resolve_source(REF_A, net, nad, operator_namespace=OP, resource_prefix="openshift.io")
    assert got.ready
