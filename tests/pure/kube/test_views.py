"""``kube.views``: typed views of Pods, ResourceClaims, ResourceSlices and NADs decoded at the boundary.

Each view reads exactly the named fields of a real-shaped body; a field left out reads as its empty
value; and no JSON value (arbitrary, or a valid body with one field of the wrong kind) makes a
decoder raise.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.kube import views

texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), texts),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=10,
)

POD: dict[str, Any] = {
    "metadata": {
        "namespace": "ai",
        "name": "pairs",
        "uid": "11111111-2222-3333-4444-555555555555",
        "labels": {"app": "pairs"},
        "annotations": {"k8s.v1.cni.cncf.io/network-status": "[]"},
        "finalizers": ["example.com/hold"],
        "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-1", "controller": True}
        ],
        "deletionTimestamp": "2026-12-01T22:00:00Z",
    },
    "spec": {
        "nodeName": "node-1",
        "hostNetwork": True,
        "resourceClaims": [
            {"name": "vf", "resourceClaimName": "direct"},
            {"name": "gen", "resourceClaimTemplateName": "t"},
            {"name": "none", "resourceClaimTemplateName": "t2"},
        ],
    },
    "status": {
        "resourceClaimStatuses": [{"name": "gen", "resourceClaimName": "pairs-gen-x"}, {"name": "none"}],
        "extendedResourceClaimStatus": {
            "resourceClaimName": "pairs-extended",
            "requestMappings": [
                {
                    "containerName": "app",
                    "resourceName": "example.com/rail_a",
                    "requestName": "container-0-request-0",
                },
                {"containerName": "side"},
            ],
        },
    },
}

CLAIM: dict[str, Any] = {
    "metadata": {"namespace": "ai", "name": "pairs-gen-x", "uid": "c-1"},
    "spec": {"devices": {"constraints": [{"requests": ["gpu", "nic"], "matchAttribute": "x/pcieRoot"}]}},
    "status": {
        "allocation": {
            "devices": {"results": [{"request": "nic", "driver": "d", "pool": "p", "device": "vf-1"}]}
        },
        "reservedFor": [{"resource": "pods", "name": "pairs", "uid": "11111111-2222-3333-4444-555555555555"}],
        "devices": [
            {"driver": "d", "pool": "p", "device": "vf-1", "shareID": "s-1", "networkData": {"ips": ["x"]}},
            {
                "driver": "d",
                "pool": "p",
                "device": "vf-1",
                "networkData": {"interfaceName": "net1", "ips": ["192.0.2.5/24"], "hardwareAddress": "aa"},
            },
        ],
    },
}


def test_pod_view_reads_identity_node_claims_and_statuses() -> None:
    pod = views.decode_pod(POD)
    assert (pod.meta.ref, pod.meta.uid, pod.node_name, pod.host_network) == (
        "ai/pairs",
        "11111111-2222-3333-4444-555555555555",
        "node-1",
        True,
    )
    assert pod.meta.deleting and pod.meta.finalizers == ("example.com/hold",)
    assert pod.meta.owners == (views.OwnerRef("apps/v1", "ReplicaSet", "rs", "u-1", controller=True),)
    assert pod.claims == (
        views.PodClaimEntry("vf", "direct", ""),
        views.PodClaimEntry("gen", "", "t"),
        views.PodClaimEntry("none", "", "t2"),
    )
    assert pod.claim_statuses == {"gen": "pairs-gen-x", "none": None}
    assert pod.extended_claim_name == "pairs-extended"
    assert pod.extended_requests == (
        views.ExtendedRequest("app", "example.com/rail_a", "container-0-request-0"),
        views.ExtendedRequest("side", "", ""),
    )


def test_fields_left_out_read_as_their_empty_values() -> None:
    pod = views.decode_pod({})
    assert pod == views.Pod(views.Meta(), "", False, (), {}, "")
    assert views.decode_claim({}) == views.Claim(views.Meta(), (), (), ())
    assert views.decode_nad({}) == views.Nad(views.Meta(), "")
    assert views.slice_devices({}) == {}


def test_claim_view_reads_constraints_results_and_unshared_network_data() -> None:
    claim = views.decode_claim(CLAIM)
    assert claim.constraints == (views.Constraint(("gpu", "nic"), "x/pcieRoot"),)
    assert claim.results == (views.AllocationResult("nic", "d", "p", "vf-1"),)
    assert claim.reserved_for == (
        views.Reservation("", "pods", "pairs", "11111111-2222-3333-4444-555555555555"),
    )
    assert claim.network_data(("d", "p", "vf-1")) == views.NetworkData("net1", ("192.0.2.5/24",), "aa")
    assert claim.network_data(("d", "p", "vf-2")) is None


def test_empty_network_data_reads_as_none() -> None:
    claim = views.decode_claim(
        {"status": {"devices": [{"driver": "d", "pool": "p", "device": "v", "networkData": {}}]}}
    )
    assert claim.devices[0].network_data is None and claim.network_data(("d", "p", "v")) is None


def test_slice_devices_qualify_bare_attribute_names_with_the_driver() -> None:
    body = {
        "spec": {
            "driver": "sriovnetwork.k8snetworkplumbingwg.io",
            "pool": {"name": "node-1"},
            "devices": [
                {
                    "name": "vf-1",
                    "attributes": {
                        "pfName": {"string": "eth0"},
                        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
                        "vfId": {"int": 1},
                        "broken": {"string": "a", "int": 2},
                    },
                }
            ],
        }
    }
    assert views.slice_devices(body) == {
        ("sriovnetwork.k8snetworkplumbingwg.io", "node-1", "vf-1"): {
            "sriovnetwork.k8snetworkplumbingwg.io/pfName": "eth0",
            "resource.kubernetes.io/pcieRoot": "pci0000:00",
            "sriovnetwork.k8snetworkplumbingwg.io/vfId": 1,
        }
    }


def test_a_value_of_the_wrong_kind_reads_as_absent_and_keeps_its_siblings() -> None:
    body = {
        "metadata": {"name": 5, "labels": {"a": "b", "n": 1}, "finalizers": ["f", 2]},
        "spec": {"resourceClaims": ["not an object", {"name": "vf", "resourceClaimName": "c"}]},
    }
    pod = views.decode_pod(body)
    assert (pod.meta.name, dict(pod.meta.labels), pod.meta.finalizers) == ("", {"a": "b"}, ("f",))
    assert pod.claims == (views.PodClaimEntry("", "", ""), views.PodClaimEntry("vf", "c", ""))


@given(body=st.dictionaries(st.sampled_from(["metadata", "spec", "status", "x"]), json_values, max_size=4))
def test_no_json_body_makes_a_decoder_raise(body: dict[str, Any]) -> None:
    views.decode_pod(body)
    views.decode_claim(body).network_data(("", "", ""))
    views.decode_nad(body)
    views.slice_devices(body)
