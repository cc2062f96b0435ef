"""Tests of sriov_dra.core.plugin.shadow_object: the fresh shadow NAD object and the live-object verification."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import binding_annotation, identities, render
from sriov_dra.core.plugin import shadow_object
from sriov_dra_rules import errors, names

POD_UID = "11111111-2222-3333-4444-555555555555"
CLAIM_UID = "c1a1c1a1-0000-4000-8000-000000000001"
NODE_UID = "0b7c6f2e-5a1d-4c3e-9f10-2a3b4c5d6e7f"
PCI = "0000:03:00.1"
BINDING_KEY = names.BINDING_ANNOTATION
RESOURCE_NAME_KEY = names.RESOURCE_NAME_ANNOTATION

SOURCE_NAD: dict[str, Any] = {
    "apiVersion": "k8s.cni.cncf.io/v1",
    "kind": "NetworkAttachmentDefinition",
    "metadata": {
        "name": "rail-a-net",
        "namespace": "ai-workloads",
        "uid": "5a5a5a5a-0000-4000-8000-00000000000a",
        "resourceVersion": "4711",
        "generation": 3,
        "labels": {"team": "net", "sriovnetwork.k8snetworkplumbingwg.io/pod-uid": "forged"},
        "annotations": {
            RESOURCE_NAME_KEY: "openshift.io/rail_a",
            "sriovnetwork.openshift.io/owner-ref": "SriovNetwork.sriovnetwork.openshift.io/sriov-network-operator/rail-a",
        },
        "finalizers": ["example.com/keep"],
        "ownerReferences": [
            {
                "apiVersion": "sriovnetwork.openshift.io/v1",
                "kind": "SriovNetwork",
                "name": "rail-a",
                "uid": "x",
            }
        ],
        "managedFields": [{"manager": "operator"}],
    },
    "spec": {
        "config": '{"cniVersion":"1.0.0","plugins":[{"type":"sriov","ipam":{"type":"whereabouts",'
        '"range":"192.0.2.0/24"}},{"type":"tuning","mtu":9000}]}'
    },
}


def make_inputs(
    *, pod_uid: str = POD_UID, device: str = "0000-03-00-1", pci: str = PCI
) -> tuple[identities.BindingIdentity, binding_annotation.Binding, render.RenderedConfig]:
    identity = identities.build_binding_identity(
        node_uid=NODE_UID, pod_uid=pod_uid, claim_uid=CLAIM_UID, pool="worker-a", device=device
    )
    rendered = render.render_shadow_config(SOURCE_NAD, pci)
    binding = binding_annotation.Binding(
        attachment_id=identities.attachment_id(identity),
        pod_uid=identities.PodUid(pod_uid),
        claim_uid=identities.ClaimUid(CLAIM_UID),
        node_name="worker-a",
        node_uid=identities.NodeUid(NODE_UID),
        source=binding_annotation.SourceRef(
            namespace="ai-workloads",
            name="rail-a-net",
            uid=identities.ObjectUid("5a5a5a5a-0000-4000-8000-00000000000a"),
            resource_version="4711",
        ),
        pci_address=identities.PciAddress(rendered.pci_address),
        interface="dra0",
        config_sha256=rendered.config_sha256,
    )
    return identity, binding, rendered


def build(**overrides: Any) -> dict[str, Any]:
    identity, binding, rendered = make_inputs()
    kwargs: dict[str, Any] = {
        "identity": identity,
        "binding": binding,
        "rendered": rendered,
        "pod_namespace": "ai-workloads",
        "pod_name": "gpu-sriov-pairs-demo",
    }
    kwargs.update(overrides)
    return shadow_object.build_shadow_nad(**kwargs)


# --- build_shadow_nad -------------------------------------------------------------------------------


def test_shadow_object_is_exactly_the_owned_fields() -> None:
    identity, binding, rendered = make_inputs()
    aid = identities.attachment_id(identity)
    assert build() == {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": "dra-sriov-" + aid[:32],
            "namespace": "ai-workloads",
            "labels": {
                "sriovnetwork.k8snetworkplumbingwg.io/managed-by": names.MANAGED_BY_VALUE,
                "sriovnetwork.k8snetworkplumbingwg.io/pod-uid": POD_UID,
                "sriovnetwork.k8snetworkplumbingwg.io/claim-uid": CLAIM_UID,
                "sriovnetwork.k8snetworkplumbingwg.io/node-uid": NODE_UID,
            },
            "annotations": {
                "sriovnetwork.k8snetworkplumbingwg.io/binding": binding_annotation.encode_binding(binding)
            },
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "gpu-sriov-pairs-demo",
                    "uid": POD_UID,
                    "blockOwnerDeletion": False,
                }
            ],
            "finalizers": ["sriovnetwork.k8snetworkplumbingwg.io/attachment-protection"],
        },
        "spec": {"config": rendered.config_text},
    }


def test_shadow_name_matches_identity_vector_fixture() -> None:
    # tests/fixtures/contract/identity-vectors.json, first vector.
    assert build()["metadata"]["name"] == "dra-sriov-652d94b430103632b120b6647d7f60e7"


def test_nothing_is_copied_from_the_source_nad() -> None:
    metadata = build()["metadata"]
    assert set(metadata) == {"name", "namespace", "labels", "annotations", "ownerReferences", "finalizers"}
    assert RESOURCE_NAME_KEY not in metadata["annotations"]
    assert "team" not in metadata["labels"]
    assert metadata["labels"]["sriovnetwork.k8snetworkplumbingwg.io/pod-uid"] == POD_UID
    assert "example.com/keep" not in metadata["finalizers"]
    assert all(ref["kind"] == "Pod" for ref in metadata["ownerReferences"])


def test_owner_reference_has_explicit_false_block_and_no_controller() -> None:
    (ref,) = build()["metadata"]["ownerReferences"]
    assert ref["blockOwnerDeletion"] is False
    assert "controller" not in ref


def test_spec_config_is_the_exact_rendered_text_with_matching_hash() -> None:
    _, binding, rendered = make_inputs()
    nad = build()
    assert nad["spec"]["config"].encode("utf-8") == rendered.config_bytes
    assert binding_annotation.config_sha256(nad["spec"]["config"]) == binding.config_sha256
    assert json.loads(nad["spec"]["config"])["name"] == "rail-a-net"


def test_binding_annotation_decodes_to_the_binding() -> None:
    _, binding, _ = make_inputs()
    assert binding_annotation.decode_binding(build()["metadata"]["annotations"][BINDING_KEY]) == binding


def test_every_call_returns_fresh_objects() -> None:
    expected = build()
    first = build()
    first["metadata"]["labels"]["x"] = "y"
    first["metadata"]["finalizers"].append("z")
    first["metadata"]["ownerReferences"][0]["uid"] = "other"
    assert build() == expected


@pytest.mark.parametrize(
    ("override", "paths"),
    [
        (lambda i, b, r: {"rendered": render.render_shadow_config(SOURCE_NAD, "0000:03:00.2")},
         ["binding.pciAddress", "binding.configSHA256"]),
        (lambda i, b, r: {"binding": _replace(b, config_sha256="0" * 64)}, ["binding.configSHA256"]),
        (lambda i, b, r: {"identity": make_inputs(device="0000-81-00-1")[0]}, ["binding.attachmentID"]),
        (lambda i, b, r: {"identity": make_inputs(pod_uid="22222222-2222-3333-4444-555555555555")[0]},
         ["binding.attachmentID", "binding.podUID"]),
        (lambda i, b, r: {"pod_namespace": "Bad_NS"}, ["pod.namespace"]),
        (lambda i, b, r: {"pod_name": ""}, ["pod.name"]),
    ],
    ids=["pci-and-hash-of-another-render", "hash-mismatch", "identity-of-another-device",
         "identity-of-another-pod", "malformed-namespace", "empty-pod-name"],
)  # fmt: skip
def test_inconsistent_inputs_are_refused(
    override: Callable[
        [identities.BindingIdentity, binding_annotation.Binding, render.RenderedConfig], dict[str, Any]
    ],
    paths: list[str],
) -> None:
    with pytest.raises(errors.ContractViolation) as caught:
        build(**override(*make_inputs()))
    assert [e.path for e in caught.value.errors] == paths


def _replace(binding: binding_annotation.Binding, **changes: Any) -> binding_annotation.Binding:
    return dataclasses.replace(binding, **changes)


# --- verify_shadow_matches -------------------------------------------------------------------------


def live_copy(expected: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server returns it: ours plus server-set fields."""
    live = copy.deepcopy(expected)
    live["metadata"].update(
        uid="99999999-0000-4000-8000-000000000009",
        resourceVersion="123",
        generation=1,
        creationTimestamp="2026-01-01T00:00:00Z",
        managedFields=[{"manager": "sriov-dra-plugin"}],
    )
    return live


def test_live_object_with_server_fields_matches() -> None:
    expected = build()
    assert shadow_object.verify_shadow_matches(live_copy(expected), expected) == []


def test_foreign_labels_annotations_and_finalizers_are_allowed() -> None:
    expected = build()
    live = live_copy(expected)
    live["metadata"]["labels"]["team"] = "x"
    live["metadata"]["annotations"]["example.com/note"] = "y"
    live["metadata"]["finalizers"].append("example.com/other")
    assert shadow_object.verify_shadow_matches(live, expected) == []


def test_live_object_without_api_version_and_kind_matches() -> None:
    expected = build()
    live = live_copy(expected)
    del live["apiVersion"], live["kind"]
    assert shadow_object.verify_shadow_matches(live, expected) == []


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        target = obj
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _delete(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def mutate(obj: dict[str, Any]) -> None:
        target = obj
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


def _reindent(obj: dict[str, Any]) -> None:
    obj["spec"]["config"] = json.dumps(json.loads(obj["spec"]["config"]), indent=2)


LABEL_POD = f'metadata.labels["{names.LABEL_POD_UID}"]'
MUTATIONS: list[tuple[str, Callable[[dict[str, Any]], None], list[str]]] = [
    ("other-name", _set(("metadata", "name"), "dra-sriov-" + "0" * 32), ["metadata.name"]),
    ("other-namespace", _set(("metadata", "namespace"), "other"), ["metadata.namespace"]),
    ("other-kind", _set(("kind",), "ConfigMap"), ["kind"]),
    ("pod-uid-label-changed", _set(("metadata", "labels", names.LABEL_POD_UID), "x"), [LABEL_POD]),
    ("claim-label-missing", _delete(("metadata", "labels", names.LABEL_CLAIM_UID)),
     [f'metadata.labels["{names.LABEL_CLAIM_UID}"]']),
    ("labels-missing", _delete(("metadata", "labels")),
     [f'metadata.labels["{k}"]' for k in (names.LABEL_MANAGED_BY, names.LABEL_POD_UID, names.LABEL_CLAIM_UID,
                                           names.LABEL_NODE_UID)]),
    ("binding-annotation-edited", _set(("metadata", "annotations", BINDING_KEY), "{}"),
     [f'metadata.annotations["{BINDING_KEY}"]']),
    ("resource-name-empty-added", _set(("metadata", "annotations", RESOURCE_NAME_KEY), ""),
     [f'metadata.annotations["{RESOURCE_NAME_KEY}"]']),
    ("owner-uid-changed", _set(("metadata", "ownerReferences", 0, "uid"), "x"), ["metadata.ownerReferences[0].uid"]),
    ("owner-kind-changed", _set(("metadata", "ownerReferences", 0, "kind"), "ResourceClaim"),
     ["metadata.ownerReferences[0].kind"]),
    ("owner-blocks-deletion", _set(("metadata", "ownerReferences", 0, "blockOwnerDeletion"), True),
     ["metadata.ownerReferences[0].blockOwnerDeletion"]),
    ("owner-is-controller", _set(("metadata", "ownerReferences", 0, "controller"), True),
     ["metadata.ownerReferences[0].controller"]),
    ("second-owner", lambda o: o["metadata"]["ownerReferences"].append({"kind": "Pod", "uid": "y"}),
     ["metadata.ownerReferences"]),
    ("owners-removed", _delete(("metadata", "ownerReferences")), ["metadata.ownerReferences"]),
    ("finalizer-removed", _set(("metadata", "finalizers"), []), ["metadata.finalizers"]),
    ("terminating", _set(("metadata", "deletionTimestamp"), "2026-01-01T00:00:01Z"), ["metadata.deletionTimestamp"]),
    ("config-reformatted", _reindent, ["spec.config"]),
    ("config-missing", _delete(("spec",)), ["spec.config"]),
]  # fmt: skip
MUTATION_BY_NAME = {name: mutate for name, mutate, _ in MUTATIONS}


@pytest.mark.parametrize(("mutate", "paths"), [m[1:] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS])
def test_each_difference_is_reported(mutate: Callable[[dict[str, Any]], None], paths: list[str]) -> None:
    expected = build()
    live = live_copy(expected)
    mutate(live)
    found = shadow_object.verify_shadow_matches(live, expected)
    assert [e.path for e in found] == paths
    assert all(e.message for e in found)


def test_config_difference_names_both_hashes() -> None:
    expected = build()
    live = live_copy(expected)
    _reindent(live)
    (problem,) = shadow_object.verify_shadow_matches(live, expected)
    assert binding_annotation.config_sha256(expected["spec"]["config"]) in problem.message
    assert binding_annotation.config_sha256(live["spec"]["config"]) in problem.message


@pytest.mark.parametrize(
    "mutations",
    [
        ["owners-removed"],
        ["finalizer-removed", "terminating"],
        ["owners-removed", "finalizer-removed", "terminating"],
    ],
    ids=["orphaned-by-propagation", "finalizer-done-and-terminating", "all-release-drift"],
)
def test_release_accepts_orphaning_termination_and_finalizer_removal(mutations: list[str]) -> None:
    expected = build()
    live = live_copy(expected)
    for name in mutations:
        MUTATION_BY_NAME[name](live)
    assert shadow_object.verify_shadow_matches(live, expected, releasing=True) == []


@pytest.mark.parametrize(
    ("name", "paths"),
    [("owner-uid-changed", ["metadata.ownerReferences[0].uid"]), ("second-owner", ["metadata.ownerReferences"]),
     ("config-reformatted", ["spec.config"]), ("binding-annotation-edited", [f'metadata.annotations["{BINDING_KEY}"]']),
     ("resource-name-empty-added", [f'metadata.annotations["{RESOURCE_NAME_KEY}"]'])],
    ids=["replacement-owner-uid", "extra-owner", "altered-config", "altered-binding", "resource-name-key"],
)  # fmt: skip
def test_release_still_rejects_conflicting_owner_and_content(name: str, paths: list[str]) -> None:
    expected = build()
    live = live_copy(expected)
    MUTATION_BY_NAME[name](live)
    assert [e.path for e in shadow_object.verify_shadow_matches(live, expected, releasing=True)] == paths


# --- properties ---------------------------------------------------------------------------------------


@given(
    st.uuids().map(str),
    st.from_regex(r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?", fullmatch=True),
    st.integers(0, 0x1F),
    st.integers(0, 7),
)
def test_property_built_shadow_verifies_and_has_a_dns_label_name(
    pod_uid: str, pod_name: str, device: int, function: int
) -> None:
    pci = f"0000:3b:{device:02x}.{function}"
    identity, binding, rendered = make_inputs(
        pod_uid=pod_uid, device=pci.replace(":", "-").replace(".", "-"), pci=pci
    )
    nad: dict[str, Any] = shadow_object.build_shadow_nad(
        identity=identity, binding=binding, rendered=rendered, pod_namespace="ns-a", pod_name=pod_name
    )
    assert names.is_dns1123_label(nad["metadata"]["name"])
    assert len(nad["metadata"]["name"]) == 42
    assert shadow_object.verify_shadow_matches(live_copy(nad), nad) == []
    assert json.loads(nad["spec"]["config"])["plugins"][0]["deviceID"] == pci
