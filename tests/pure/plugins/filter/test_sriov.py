"""Tests for ``plugins/filter/sriov.py``: VF plan from node policies and why it is empty, policy overlaps, checkpoint
bindings, manifest retargeting and image search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sriovnet.dra.plugins.filter import sriov

REPO = Path(__file__).resolve().parents[4]
PFS = [
    {"pci_address": "0000:03:00.0", "name": "ens1f0", "vendor": "8086", "device_id": "1592"},
    {"pci_address": "0000:81:00.0", "name": "ens2f0", "vendor": "15b3", "device_id": "101d"},
]


def _policy(name: str, **spec: object) -> dict[str, object]:
    return {"metadata": {"namespace": "sriov-network-operator", "name": name}, "spec": spec}


# --- sriov_vf_plan ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policies", "labels", "plan"),
    [
        (
            [_policy("a", nodeSelector={"sriov": "true"}, numVfs=8, nicSelector={"pfNames": ["ens1f0#0-3"]})],
            {"sriov": "true"},
            [{"pf": "ens1f0", "pci_address": "0000:03:00.0", "num_vfs": 8, "vf_driver": None, "policies": ["sriov-network-operator/a"]}],
        ),
        (
            [_policy("a", nodeSelector={"sriov": "true"}, numVfs=8, nicSelector={"pfNames": ["ens1f0"]})],
            {"sriov": "false"},
            [],
        ),
        (
            [
                _policy("a", numVfs=4, nicSelector={"vendor": "15b3"}, deviceType="vfio-pci"),
                _policy("b", numVfs=16, nicSelector={"rootDevices": ["0000:81:00.0"]}, deviceType="vfio-pci", priority=10),
            ],
            {},
            [{"pf": "ens2f0", "pci_address": "0000:81:00.0", "num_vfs": 16, "vf_driver": "vfio-pci",
              "policies": ["sriov-network-operator/b", "sriov-network-operator/a"]}],
        ),
        (
            [_policy("a", numVfs=2, nicSelector={"vendor": "8086", "deviceID": "158b"})],
            {},
            [],
        ),
    ],
    ids=[
        "pf-name-range-selects-the-pf-with-policy-numvfs",
        "node-selector-mismatch-selects-nothing",
        "highest-numvfs-wins-and-priority-orders-policies",
        "vendor-and-device-must-both-match",
    ],
)  # fmt: skip
def test_vf_plan(policies, labels, plan):
    assert sriov.sriov_vf_plan(policies, labels, PFS) == plan


def test_vf_plan_refuses_two_device_types_on_one_pf():
    policies = [
        _policy("a", numVfs=4, nicSelector={"pfNames": ["ens1f0#0-1"]}),
        _policy("b", numVfs=4, nicSelector={"pfNames": ["ens1f0#2-3"]}, deviceType="vfio-pci"),
    ]
    with pytest.raises(AnsibleFilterError, match="ask for deviceType netdevice and vfio-pci on PF ens1f0"):
        sriov.sriov_vf_plan(policies, {}, PFS)


def test_vf_plan_refuses_net_filter():
    with pytest.raises(AnsibleFilterError, match="netFilter is not supported"):
        sriov.sriov_vf_plan(
            [_policy("a", numVfs=1, nicSelector={"netFilter": "openstack/NetworkID:x"})], {}, PFS
        )


# --- sriov_vf_plan_gap --------------------------------------------------------------------------

NODE_LABELS = {"kubernetes.io/hostname": "worker-1", "rail": "a"}


def _gap(policies: list[dict[str, object]], pfs: list[dict[str, object]] = PFS) -> str:
    return sriov.sriov_vf_plan_gap(policies, NODE_LABELS, pfs, "worker-1", "sriov-network-operator")


def test_vf_plan_gap_of_an_empty_namespace_names_the_node_its_labels_and_the_namespace():
    assert _gap([]) == (
        "no policy selects this node: node worker-1, node labels considered: kubernetes.io/hostname=worker-1, "
        "rail=a; namespace sriov-network-operator holds no SriovNetworkNodePolicy. Create the node policies there "
        "(as examples/operator-two-rails does), or set operator_namespace (vfs_policy_namespace) to the namespace "
        "that holds them, then run site.yml again"
    )


def test_vf_plan_gap_names_the_policies_whose_node_selector_the_labels_do_not_match():
    policies = [
        _policy("b", nodeSelector={"rail": "b"}, numVfs=4, nicSelector={"pfNames": ["ens1f0"]}),
        _policy("a", nodeSelector={"gpu": "true"}, numVfs=4, nicSelector={"pfNames": ["ens1f0"]}),
    ]
    gap = _gap(policies)
    assert gap.startswith("no policy selects this node: node worker-1, node labels considered: ")
    assert (
        "none of the SriovNetworkNodePolicies in namespace sriov-network-operator (sriov-network-operator/a, "
        "sriov-network-operator/b) has a nodeSelector these labels match" in gap
    )


def test_vf_plan_gap_names_the_pfs_when_the_node_is_selected_but_no_nic_selector_matches():
    policies = [_policy("a", nodeSelector={"rail": "a"}, numVfs=4, nicSelector={"pfNames": ["ens9f0"]})]
    assert (
        "SriovNetworkNodePolicies sriov-network-operator/a in namespace sriov-network-operator select the node, but "
        "their nicSelector matches none of its PFs (ens1f0 0000:03:00.0, ens2f0 0000:81:00.0)"
        in _gap(policies)
    )
    assert "matches none of its PFs (no SR-IOV PF found)" in _gap(policies, [])


@pytest.mark.parametrize("external", [False, True], ids=["created-here", "externally-managed"])
def test_vf_plan_gap_is_empty_when_a_policy_selects_a_pf_of_the_node(external: bool):
    pfs = [{**PFS[0], "numvfs": 8}]
    policies = [
        _policy(
            "a",
            nodeSelector={"rail": "a"},
            numVfs=8,
            nicSelector={"pfNames": ["ens1f0"]},
            externallyManaged=external,
        )
    ]
    assert _gap(policies, pfs) == ""
    assert sriov.sriov_vf_plan(policies, NODE_LABELS, pfs) == ([] if external else [
        {"pf": "ens1f0", "pci_address": "0000:03:00.0", "num_vfs": 8, "vf_driver": None,
         "policies": ["sriov-network-operator/a"]}
    ])  # fmt: skip


# --- sriov_policy_overlaps ---------------------------------------------------------------------

NODES = [
    {"metadata": {"name": "w1", "labels": {"rail": "a", "gpu": "true"}}},
    {"metadata": {"name": "w2", "labels": {"rail": "b"}}},
]


def _rp(
    name: str, filters: list[dict[str, object]] | None, selector: dict[str, object] | None = None
) -> dict[str, object]:
    config: dict[str, object] = {} if filters is None else {"resourceFilters": filters}
    spec: dict[str, object] = {"configs": [config]}
    if selector is not None:
        spec["nodeSelector"] = selector
    return {"metadata": {"namespace": "dra", "name": name}, "spec": spec}


def _on(key: str, op: str, *values: str) -> dict[str, object]:
    return {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}]
    }


@pytest.mark.parametrize(
    ("policies", "expected"),
    [
        ([_rp("a", [{"pfNames": ["ens1f0"]}]), _rp("b", [{"pfNames": ["ens2f0"]}])], []),
        (
            [_rp("a", [{"pfNames": ["ens1f0"]}]), _rp("b", [{"vendors": ["8086"]}])],
            [{"policies": ["dra/a", "dra/b"], "nodes": ["w1", "w2"]}],
        ),
        ([_rp("a", None, _on("rail", "In", "a")), _rp("b", None, _on("rail", "In", "b"))], []),
        (
            [_rp("a", None, _on("gpu", "Exists")), _rp("b", [{"linkType": "eth"}], _on("rail", "NotIn", "b"))],
            [{"policies": ["dra/a", "dra/b"], "nodes": ["w1"]}],
        ),
        ([_rp("a", [{"linkType": "eth"}]), _rp("b", [{"linkType": "infiniband"}])], []),
        ([_rp("a", [{"linkType": "ETH"}]), _rp("b", [{"linkType": "ethernet"}])], [{"policies": ["dra/a", "dra/b"], "nodes": ["w1", "w2"]}]),
    ],
    ids=[
        "disjoint-pf-names-do-not-overlap",
        "unset-field-is-a-wildcard-so-they-overlap",
        "disjoint-node-selectors-do-not-overlap",
        "overlap-only-on-nodes-both-select",
        "different-link-types-do-not-overlap",
        "link-type-aliases-are-the-same-type",
    ],
)  # fmt: skip
def test_policy_overlaps(policies, expected):
    assert sriov.sriov_policy_overlaps(policies, NODES) == expected


def test_policy_without_configs_advertises_nothing_so_never_overlaps():
    empty = {"metadata": {"namespace": "dra", "name": "z"}, "spec": {"configs": []}}
    assert sriov.sriov_policy_overlaps([_rp("a", None), empty], NODES) == []


# --- sriov_checkpoint_bindings ----------------------------------------------------------------


def test_checkpoint_without_managed_bindings_has_none():
    fixture = json.loads((REPO / "tests/fixtures/checkpoint/v1-no-managed.json").read_text())
    assert sriov.sriov_checkpoint_bindings(fixture) == []


def test_checkpoint_bindings_are_listed_with_phase_and_shadow():
    fixture = json.loads((REPO / "tests/fixtures/checkpoint/v1-no-managed.json").read_text())
    claim_uid, claim = next(iter(fixture["data"]["claims"].items()))
    claim["devices"][0]["managedBinding"] = {
        "phase": "Ready",
        "shadowNamespace": "ns1",
        "shadowName": "dra-sriov-abc",
    }
    assert sriov.sriov_checkpoint_bindings(fixture) == [
        {
            "claim_uid": claim_uid,
            "namespace": claim["namespace"],
            "name": claim["name"],
            "pod_uid": claim["podUID"],
            "device": claim["devices"][0]["device"],
            "phase": "Ready",
            "shadow": "ns1/dra-sriov-abc",
        }
    ]


@pytest.mark.parametrize("absent", [None, ""], ids=["null", "empty"])
def test_absent_checkpoint_has_no_bindings(absent):
    assert sriov.sriov_checkpoint_bindings(absent) == []


def test_unknown_checkpoint_version_is_refused_not_guessed():
    with pytest.raises(AnsibleFilterError, match="has version 2; this reader understands version 1"):
        sriov.sriov_checkpoint_bindings({"version": 2, "data": {}})


# --- sriov_protected_shadows ------------------------------------------------------------------


def test_protected_shadows_are_named_with_their_namespace_sorted():
    def nad(namespace, name, finalizers=None):
        meta = {"namespace": namespace, "name": name}
        if finalizers is not None:
            meta["finalizers"] = finalizers
        return {"metadata": meta}

    protection = "sriovnetwork.k8snetworkplumbingwg.io/attachment-protection"
    nads = [
        nad("ns-b", "dra-sriov-b", [protection]),
        nad("ns-a", "dra-sriov-a", ["other.example/keep", protection]),
        nad("ns-a", "released"),
        nad("ns-a", "other-finalizer", ["other.example/keep"]),
    ]
    assert sriov.sriov_protected_shadows(nads) == ["ns-a/dra-sriov-a", "ns-b/dra-sriov-b"]


def test_protected_shadows_refuse_what_is_not_a_list_of_objects():
    with pytest.raises(AnsibleFilterError, match="expects a list of NetworkAttachmentDefinitions"):
        sriov.sriov_protected_shadows({"resources": []})


# --- sriov_retarget and sriov_workloads_with_image --------------------------------------------


def test_retarget_moves_namespaced_objects_and_subjects_and_pins_images():
    docs = [
        {"kind": "ServiceAccount", "metadata": {"name": "op", "namespace": "old"}},
        {"kind": "ClusterRole", "metadata": {"name": "op"}},
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "op"},
            "subjects": [
                {"kind": "ServiceAccount", "name": "op", "namespace": "old"},
                {"kind": "User", "name": "x"},
            ],
        },
        {
            "kind": "Deployment",
            "metadata": {"name": "op", "namespace": "old"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "c", "image": "a:1"}],
                        "initContainers": [{"image": "b"}],
                    }
                }
            },
        },
        None,
    ]
    out = sriov.sriov_retarget(docs, "new", "img@sha256:" + "0" * 64)
    assert [d["metadata"].get("namespace") for d in out] == ["new", None, None, "new"]
    assert out[2]["subjects"] == [
        {"kind": "ServiceAccount", "name": "op", "namespace": "new"},
        {"kind": "User", "name": "x"},
    ]
    pod = out[3]["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["containers"] + pod["initContainers"]] == ["img@sha256:" + "0" * 64] * 2
    assert docs[0]["metadata"]["namespace"] == "old"  # the input is not modified


def test_retarget_of_the_shipped_operator_manifests_changes_only_namespace_and_image():
    import yaml

    path = REPO / "roles/operator/files/manifests/operator/rbac.yaml"
    docs = list(yaml.safe_load_all(path.read_text()))
    out = sriov.sriov_retarget(docs, "elsewhere")
    for before, after in zip(docs, out, strict=True):
        before_meta = dict(before["metadata"])
        after_meta = dict(after["metadata"])
        if "namespace" in before_meta:
            assert after_meta.pop("namespace") == "elsewhere"
            before_meta.pop("namespace")
        assert before_meta == after_meta
        assert {k: v for k, v in before.items() if k not in ("metadata", "subjects")} == {
            k: v for k, v in after.items() if k not in ("metadata", "subjects")
        }


def test_workloads_with_image():
    objs = [
        {"metadata": {"namespace": "kube-system", "name": "sriov-dp"},
         "spec": {"template": {"spec": {"containers": [{"image": "ghcr.io/k8snetworkplumbingwg/sriov-network-device-plugin:v3"}]}}}},
        {"metadata": {"namespace": "kube-system", "name": "multus"},
         "spec": {"template": {"spec": {"containers": [{"image": "multus"}]}}}},
    ]  # fmt: skip
    assert sriov.sriov_workloads_with_image(objs, "sriov-network-device-plugin") == ["kube-system/sriov-dp"]


def test_extended_resource_classes_follow_the_operators_rule_with_the_role_label():
    from sriov_dra.core.operator import dra_objects

    (cls,) = sriov.sriov_extended_resource_classes(["rail_a"], "openshift.io")
    operator = dra_objects.device_class_object("rail_a", "openshift.io", "sriov-network-operator")
    assert cls["metadata"]["name"] == operator["metadata"]["name"] == "rail-a"
    assert cls["spec"] == operator["spec"]
    assert cls["metadata"]["labels"] == {
        sriov.EXTENDED_RESOURCE_CLASS_LABEL: "plugin-role",
        "app.kubernetes.io/part-of": "sriov-dra",
    }
    assert sriov.sriov_extended_resource_classes([], "openshift.io") == []


@pytest.mark.parametrize(
    ("names", "prefix", "fragment"),
    [
        (["rail_a-"], "openshift.io", "'rail_a-' cannot be an extended resource"),
        (["rail_a"], "kubernetes.io", "Kubernetes domain"),
        (["rail_a", "rail-a"], "openshift.io", "both make DeviceClass 'rail-a'"),
        ("rail_a", "openshift.io", "expected a list"),
    ],
)
def test_extended_resource_classes_refuse_what_kubernetes_or_the_class_names_would(names, prefix, fragment):
    with pytest.raises(AnsibleFilterError, match=fragment):
        sriov.sriov_extended_resource_classes(names, prefix)
