"""Tests for sriov_dra.core.sriovnetwork: upstream RenderNetAttDef, Go json.Indent, source resolution."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import operator_objects as oo

from sriov_dra.core import sriovnetwork
from sriov_dra_rules import errors

R = errors.Reason
OP = oo.OP_NS
MARKER_A = "SriovNetwork.sriovnetwork.openshift.io/sriov-network-operator/rail-a-net"


def simple(**spec: Any) -> dict[str, Any]:
    net = oo.sriov_network("test", namespace="ns1", network_namespace=None, uid="u-1", **spec)
    if "logLevel" not in spec:
        net["spec"].pop("logLevel")
    return net


def test_golden_simple_config_is_upstreams_indented_text() -> None:
    # Golden TestRendering simple case, after the controller's json.Indent(..., "", "    ").
    assert sriovnetwork.render_config(simple()) == (
        '{\n    "cniVersion": "1.0.0",\n    "name": "test",\n    "type": "sriov",\n    "vlan": 0,\n'
        '    "vlanQoS": 0,\n    "ipam": {}\n}'
    )


def test_every_optional_key_in_template_order() -> None:
    net = simple(
        vlan=100,
        spoofChk="on",
        trust="off",
        vlanQoS=3,
        vlanProto="802.1ad",
        minTxRate=0,
        maxTxRate=1000,
        capabilities='{"mac": true}',
        linkState="enable",
        logLevel="debug",
        logFile="/tmp/sriov.log",
        ipam='{"type": "host-local"}',
    )
    doc = json.loads(sriovnetwork.render_config(net))
    assert list(doc) == [
        "cniVersion",
        "name",
        "type",
        "vlan",
        "spoofchk",
        "trust",
        "vlanQoS",
        "vlanProto",
        "min_tx_rate",
        "max_tx_rate",
        "capabilities",
        "link_state",
        "logLevel",
        "logFile",
        "ipam",
    ]
    assert (
        doc["vlan"] == 100 and doc["vlanQoS"] == 3 and doc["min_tx_rate"] == 0 and doc["max_tx_rate"] == 1000
    )
    assert doc["capabilities"] == {"mac": True}


@pytest.mark.parametrize(
    ("spec", "absent"),
    [
        ({"spoofChk": ""}, "spoofchk"),
        ({"linkState": "bogus"}, "link_state"),
        ({"vlanQoS": 8}, "vlanQoS"),
        ({"minTxRate": -1}, "min_tx_rate"),
        ({"logLevel": ""}, "logLevel"),
        ({}, "max_tx_rate"),
        ({}, "capabilities"),
        ({}, "vlanProto"),
    ],
    ids=[
        "empty-spoofchk-omitted",
        "unknown-link-state-omitted",
        "qos-out-of-range-omitted",
        "negative-rate-omitted",
        "empty-log-level-omitted",
        "unset-rate-pointer-omitted",
        "unset-capabilities-omitted",
        "unset-vlan-proto-omitted",
    ],
)
def test_optional_keys_are_omitted_as_upstream_does(spec: dict[str, Any], absent: str) -> None:
    assert absent not in json.loads(sriovnetwork.render_config(simple(**spec)))


def test_meta_plugins_make_a_conflist_with_sriov_first() -> None:
    net = simple(metaPlugins='{"type": "tuning", "sysctl": {"net.ipv4.conf.IFNAME.arp_notify": "1"}}')
    doc = json.loads(sriovnetwork.render_config(net))
    assert list(doc) == ["cniVersion", "name", "plugins"]
    assert [p["type"] for p in doc["plugins"]] == ["sriov", "tuning"]
    assert "cniVersion" not in doc["plugins"][0] and doc["plugins"][0]["ipam"] == {}


def test_ipam_loses_every_go_space_even_inside_strings() -> None:
    ipam = '{ "type" : "whereabouts",\n\t"network_name": "rail a\u00a0b\u3000c" }'
    doc = json.loads(sriovnetwork.render_config(simple(ipam=ipam)))
    assert doc["ipam"] == {"type": "whereabouts", "network_name": "railabc"}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"capabilities": "{"}, "capabilities"),
        ({"ipam": '{"a": NaN}'}, "ipam"),
        ({"metaPlugins": '{"type": }'}, "metaPlugins"),
        ({"vlan": "100"}, "spec.vlan"),
        ({"ipam": 5}, "spec.ipam"),
    ],
    ids=["broken-capabilities", "nan-in-ipam", "broken-metaplugins", "vlan-not-int", "ipam-not-string"],
)
def test_unrenderable_networks_are_refused_naming_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(errors.InvalidSpec, match=field):
        sriovnetwork.render_config(simple(**spec))


def test_cross_namespace_nad_has_marker_and_no_owner_reference() -> None:
    net = oo.sriov_network("rail-a-net", uid="u-a")
    nad = sriovnetwork.render_nad(net, resource_prefix="openshift.io")
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
    meta = sriovnetwork.render_nad(net, resource_prefix="example.com")["metadata"]
    assert meta["namespace"] == "tenant"
    assert meta["ownerReferences"] == [
        {"apiVersion": "sriovnetwork.openshift.io/v1", "kind": "SriovNetwork", "name": "n1", "uid": "u-1"}
    ]
    assert meta["annotations"]["k8s.v1.cni.cncf.io/resourceName"] == "example.com/sriov_vfs"


def test_missing_resource_name_is_refused() -> None:
    net = simple()
    del net["spec"]["resourceName"]
    with pytest.raises(errors.InvalidSpec, match=r"spec\.resourceName is required"):
        sriovnetwork.render_nad(net, resource_prefix="openshift.io")


@pytest.mark.parametrize(
    ("namespace", "network_namespace", "ok"),
    [(OP, "ai-workloads", True), ("tenant", None, True), ("tenant", "ai-workloads", False)],
    ids=["operator-namespace-may-redirect", "tenant-without-redirect", "tenant-redirect-refused"],
)
def test_network_namespace_rule(namespace: str, network_namespace: str | None, ok: bool) -> None:
    net = oo.sriov_network("n", namespace=namespace, network_namespace=network_namespace)
    problem = sriovnetwork.namespace_rule_problem(net, OP)
    assert (problem is None) is ok
    if not ok:
        assert problem is not None and "cannot be set" in problem and OP in problem


@given(
    st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"[a-z][-a-z0-9.]{0,30}", fullmatch=True),
)
def test_owner_marker_round_trips(namespace: str, name: str) -> None:
    ref = sriovnetwork.ObjectRef(namespace, name)
    assert sriovnetwork.parse_owner_marker(sriovnetwork.owner_marker(ref)) == ref


@pytest.mark.parametrize(
    "value",
    [
        "",
        "SriovNetwork.sriovnetwork.openshift.io/ns",
        "OVSNetwork.sriovnetwork.openshift.io/a/b",
        None,
        3,
        "x/y/z",
    ],
    ids=["empty", "missing-name", "other-kind", "none", "not-string", "foreign"],
)
def test_foreign_markers_name_no_network(value: object) -> None:
    assert sriovnetwork.parse_owner_marker(value) is None


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)


@given(_JSON)
def test_go_indent_equals_four_space_json_and_is_idempotent(value: object) -> None:
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    indented = sriovnetwork.go_json_indent(compact)
    assert indented == json.dumps(value, indent=4, ensure_ascii=False)
    assert sriovnetwork.go_json_indent(indented) == indented


@pytest.mark.parametrize("text", ["", "{", '{"a":1} x', "[1,]", "NaN", '{"a":Infinity}'], ids=str)
def test_go_indent_refuses_non_json(text: str) -> None:
    with pytest.raises(errors.InvalidSpec):
        sriovnetwork.go_json_indent(text)


def rendered(net: dict[str, Any]) -> dict[str, Any]:
    nad = sriovnetwork.render_nad(net, resource_prefix="openshift.io")
    nad["metadata"]["uid"] = "nad-uid"
    return nad


def test_nad_differences_name_only_changed_managed_fields() -> None:
    net = oo.sriov_network("n1", namespace="tenant", network_namespace=None, uid="u-1")
    expected = sriovnetwork.render_nad(net, resource_prefix="openshift.io")
    live = copy.deepcopy(expected)
    live["metadata"]["resourceVersion"] = "7"
    live["metadata"]["labels"] = {"extra": "kept"}
    assert sriovnetwork.nad_differences(expected, live) == []
    live["spec"]["config"] += " "
    live["metadata"]["annotations"]["x"] = "y"
    live["metadata"]["ownerReferences"][0]["uid"] = "old"
    assert sriovnetwork.nad_differences(expected, live) == [
        "spec",
        "metadata.annotations",
        "metadata.ownerReferences",
    ]


REF_A = sriovnetwork.ObjectRef(OP, "rail-a-net")


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
    del nad["metadata"]["annotations"][sriovnetwork.OWNER_REF_ANNOTATION]


def _other_marker(nad: dict[str, Any]) -> None:
    nad["metadata"]["annotations"][sriovnetwork.OWNER_REF_ANNOTATION] = MARKER_A.replace("rail-a", "rail-b")


def _resource_name(nad: dict[str, Any]) -> None:
    nad["metadata"]["annotations"][sriovnetwork.RESOURCE_NAME_ANNOTATION] = "x/y"


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
    got = sriovnetwork.resolve_source(REF_A, net, nad, operator_namespace=OP, resource_prefix="openshift.io")
    assert not got.ready and got.nad is None
    assert got.reason is reason
    assert needle in got.message


def test_ready_cross_namespace_source_resolves_to_the_rendered_target() -> None:
    net, nad = _case()
    got = sriovnetwork.resolve_source(REF_A, net, nad, operator_namespace=OP, resource_prefix="openshift.io")
    assert got.ready and got.nad == sriovnetwork.ObjectRef("ai-workloads", "rail-a-net")


def test_same_namespace_owner_reference_must_name_the_current_uid() -> None:
    ref = sriovnetwork.ObjectRef("tenant", "n1")
    net = oo.sriov_network("n1", namespace="tenant", network_namespace=None, uid="new-uid", ready="True")
    nad = rendered(net)
    ok = sriovnetwork.resolve_source(ref, net, nad, operator_namespace=OP, resource_prefix="openshift.io")
    assert ok.ready and ok.nad == ref
    nad["metadata"]["ownerReferences"][0]["uid"] = "old-uid"  # the CR was deleted and recreated
    got = sriovnetwork.resolve_source(ref, net, nad, operator_namespace=OP, resource_prefix="openshift.io")
    assert got.reason is R.SOURCE_NAD_NOT_READY and "old-uid" in got.message and "new-uid" in got.message


def test_resolution_does_not_depend_on_the_nad_uid() -> None:
    net, nad = _case()
    assert nad is not None
    nad["metadata"]["uid"] = "recreated-nad-uid"
    got = sriovnetwork.resolve_source(REF_A, net, nad, operator_namespace=OP, resource_prefix="openshift.io")
    assert got.ready
