"""Cluster tier: auto-attach against kube-apiserver, scheduler and controller-manager v1.36.3.

The one-network-deviceclass and gpu-nic-pairs objects (DeviceAttributes, SriovResourcePolicy, DeviceClasses, the GPU/NIC pair
template, a Pod with no networks annotation) are applied; the real scheduler pairs each NIC with
a synthetic GPU by PCIe root; the plugin (as its ServiceAccount, with the shipped RBAC) prepares
the claim. Deletion paths use the real garbage collector and namespace controller.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from kubernetes import client

from sriov_dra.core import binding_annotation, registry
from sriov_dra.driver.managed import orphans
from sriov_dra.kube import apply
from sriov_dra.kubeletapi import messages
from sriov_dra_rules import names

from .conftest import (
    RBAC,
    ClusterPlugin,
    eventually,
    gone,
    load_all,
    nads_in,
    one_vf_claim,
    pairs_template,
    workload_pod,
)

RAILS = {"pci0000:00": ("rail-a-net", "192.0.2.0/24"), "pci0000:80": ("rail-b-net", "198.51.100.0/24")}


def start_pair_workload(
    api: client.ApiClient, plugin: ClusterPlugin, namespace: str, pod: str = "gpu-sriov-pairs-demo"
) -> messages.ClaimRef:
    plugin.publish_mapping(namespace)
    apply.apply_objects(api, [pairs_template(namespace)])
    client.CoreV1Api(api).create_namespaced_pod(
        namespace,
        workload_pod(
            pod, plugin.node.name, [{"name": "devices", "resourceClaimTemplateName": "gpu-nic-pairs"}]
        ),
    )
    return plugin.claim_ref(namespace, pod)


def annotations(api: client.ApiClient, namespace: str, pod: str) -> dict[str, str]:
    return client.CoreV1Api(api).read_namespaced_pod(pod, namespace).metadata.annotations or {}


def test_gpu_nic_pairs_get_one_shadow_per_vf_with_the_rail_of_its_root(api, plugin, namespace):
    ref = start_pair_workload(api, plugin, namespace)
    claim = client.ResourceV1Api(api).read_namespaced_resource_claim(ref.name, namespace)
    results = {r.request: r for r in claim.status.allocation.devices.results}
    assert sorted(results) == ["gpu-0", "gpu-1", "nic-0", "nic-1"]
    out = plugin.prepare(ref)
    assert isinstance(out, messages.Prepared), out
    assert sorted(d.request_names[0] for d in out.devices) == ["nic-0", "nic-1"]  # GPU results create nothing
    status = client.ResourceV1Api(api).read_namespaced_resource_claim(ref.name, namespace).status
    ours = [d for d in status.devices or [] if d.driver == names.DRIVER_NAME]
    assert len(ours) == 2  # resourceclaims/status + resourceclaims/driver (associated-node) grants work
    shadows = nads_in(api, namespace)
    assert len(shadows) == 2
    pod = client.CoreV1Api(api).read_namespaced_pod("gpu-sriov-pairs-demo", namespace)
    inventory = plugin.publisher.snapshot().inventory
    for obj in shadows:
        meta = obj["metadata"]
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.metadata.name,
                "uid": pod.metadata.uid,
                "blockOwnerDeletion": False,
            }
        ]
        assert meta["finalizers"] == [names.FINALIZER_ATTACHMENT_PROTECTION]
        assert meta["labels"][names.LABEL_NODE_UID] == plugin.node.uid
        assert names.RESOURCE_NAME_ANNOTATION not in meta["annotations"]
        binding = binding_annotation.decode_binding(meta["annotations"][names.BINDING_ANNOTATION])
        vf = next(v for v in inventory.values() if v.pci_address == binding.pci_address)
        source, cidr = RAILS[vf.pcie_root]
        config = json.loads(obj["spec"]["config"])
        assert (binding.source.name, config["ipam"]["range"], config["deviceID"]) == (
            source,
            cidr,
            vf.pci_address,
        )
        # each VF is the one the scheduler paired with a GPU under the same root
        nic = next(r for r in results.values() if r.device == vf.name)
        gpu = results["gpu-" + nic.request[-1]]
        assert gpu.device == f"gpu-{0 if vf.pcie_root == 'pci0000:00' else 1}"
    ann = annotations(api, namespace, "gpu-sriov-pairs-demo")
    selections = json.loads(ann[names.NETWORKS_ANNOTATION])
    assert [s["interface"] for s in selections] == ["dra0", "dra1"]
    reg = registry.decode_registry(ann[names.MANAGED_NETWORKS_ANNOTATION])
    assert {e.uid for e in reg.entries} == {o["metadata"]["uid"] for o in shadows}
    # a repeated prepare (kubelet restart) changes nothing
    before = [o["metadata"]["resourceVersion"] for o in nads_in(api, namespace)]
    assert isinstance(plugin.prepare(ref), messages.Prepared)
    assert [o["metadata"]["resourceVersion"] for o in nads_in(api, namespace)] == before
    assert plugin.unprepare(ref) is None
    eventually("shadows gone after release", lambda: nads_in(api, namespace) == [])
    assert names.NETWORKS_ANNOTATION not in annotations(api, namespace, "gpu-sriov-pairs-demo")


def test_a_device_class_naming_one_nad_gives_its_vf_a_shadow_of_that_nad(api, plugin, namespace):
    plugin.publish_mapping(namespace)
    cls = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": f"sriov-one-network-{namespace}"[:63]},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f'device.driver == "{names.DRIVER_NAME}" && device.attributes["{names.DOMAIN}"].PFName == "enp3s0f0"'
                    }
                }
            ],
            "config": [
                {
                    "opaque": {
                        "driver": names.DRIVER_NAME,
                        "parameters": {
                            "apiVersion": f"{names.DOMAIN}/v1alpha1",
                            "kind": "VfConfig",
                            "netAttachDefName": "rail-a-net",
                            "netAttachDefNamespace": namespace,
                        },
                    }
                }
            ],
        },
    }
    apply.apply_objects(api, [cls])
    try:
        template = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-network-vf", "namespace": namespace},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "vf",
                                "exactly": {
                                    "deviceClassName": cls["metadata"]["name"],
                                    "allocationMode": "ExactCount",
                                    "count": 1,
                                },
                            }
                        ]
                    }
                }
            },
        }
        apply.apply_objects(api, [template])
        client.CoreV1Api(api).create_namespaced_pod(
            namespace,
            workload_pod(
                "one-net",
                plugin.node.name,
                [{"name": "devices", "resourceClaimTemplateName": "one-network-vf"}],
            ),
        )
        ref = plugin.claim_ref(namespace, "one-net")
        assert isinstance(plugin.prepare(ref), messages.Prepared)
        (shadow,) = nads_in(api, namespace)
        assert json.loads(shadow["spec"]["config"])["ipam"]["range"] == "192.0.2.0/24"
        assert plugin.unprepare(ref) is None
    finally:
        client.ResourceV1Api(api).delete_device_class(cls["metadata"]["name"])


def _delete_pod(api: client.ApiClient, namespace: str, pod: str, policy: str) -> None:
    client.CoreV1Api(api).delete_namespaced_pod(
        pod, namespace, grace_period_seconds=0, propagation_policy=policy
    )


def _pod_gone(api: client.ApiClient, namespace: str, pod: str) -> bool:
    try:
        client.CoreV1Api(api).read_namespaced_pod(pod, namespace)
    except client.ApiException as exc:
        return exc.status == 404
    return False


def test_foreground_pod_deletion_is_not_blocked_and_shadows_wait_for_release(api, plugin, namespace):
    ref = start_pair_workload(api, plugin, namespace)
    plugin.prepare(ref)
    _delete_pod(api, namespace, "gpu-sriov-pairs-demo", "Foreground")
    eventually(
        "the Pod deleted (blockOwnerDeletion=false)",
        lambda: _pod_gone(api, namespace, "gpu-sriov-pairs-demo"),
    )
    held = eventually(
        "GC requested shadow deletion",
        lambda: (
            (s := nads_in(api, namespace)) and all(o["metadata"].get("deletionTimestamp") for o in s) and s
        ),
    )
    assert len(held) == 2 and all(
        o["metadata"]["finalizers"] == [names.FINALIZER_ATTACHMENT_PROTECTION] for o in held
    )
    assert plugin.unprepare(ref) is None
    eventually("shadows gone after release", lambda: nads_in(api, namespace) == [])


def test_background_deletion_and_orphan_propagation_both_end_with_release(api, plugin, namespace):
    ref = start_pair_workload(api, plugin, namespace)
    plugin.prepare(ref)
    _delete_pod(api, namespace, "gpu-sriov-pairs-demo", "Orphan")
    eventually("Pod gone", lambda: _pod_gone(api, namespace, "gpu-sriov-pairs-demo"))
    orphaned = eventually(
        "owner references removed by orphan propagation",
        lambda: (
            (s := nads_in(api, namespace)) and all(not o["metadata"].get("ownerReferences") for o in s) and s
        ),
    )
    assert not any(o["metadata"].get("deletionTimestamp") for o in orphaned)
    assert plugin.unprepare(ref) is None  # an absent owner reference is allowed during release
    eventually("shadows gone", lambda: nads_in(api, namespace) == [])
    # background: a second workload in the same namespace
    client.ResourceV1Api(api).delete_collection_namespaced_resource_claim(namespace)
    client.CoreV1Api(api).create_namespaced_pod(
        namespace,
        workload_pod(
            "second", plugin.node.name, [{"name": "devices", "resourceClaimTemplateName": "gpu-nic-pairs"}]
        ),
    )
    ref2 = plugin.claim_ref(namespace, "second")
    assert isinstance(plugin.prepare(ref2), messages.Prepared)
    _delete_pod(api, namespace, "second", "Background")
    eventually(
        "GC requested deletion",
        lambda: (
            all(o["metadata"].get("deletionTimestamp") for o in nads_in(api, namespace))
            and nads_in(api, namespace)
        ),
    )
    assert plugin.unprepare(ref2) is None
    eventually("shadows gone", lambda: nads_in(api, namespace) == [])


def test_retained_completed_pod_is_cleaned_by_explicit_release(api, plugin, namespace):
    ref = start_pair_workload(api, plugin, namespace)
    plugin.prepare(ref)
    client.CoreV1Api(api).patch_namespaced_pod_status(
        "gpu-sriov-pairs-demo", namespace, {"status": {"phase": "Succeeded"}}
    )
    assert plugin.unprepare(ref) is None
    eventually("shadows gone while the Pod is retained", lambda: nads_in(api, namespace) == [])
    ann = annotations(api, namespace, "gpu-sriov-pairs-demo")
    assert names.NETWORKS_ANNOTATION not in ann and names.MANAGED_NETWORKS_ANNOTATION not in ann


def test_namespace_termination_waits_for_release_then_completes(api, plugin):
    namespace = f"mg-terminate-{plugin.node.name}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    eventually(
        "default ServiceAccount",
        lambda: any(
            sa.metadata.name == "default"
            for sa in client.CoreV1Api(api).list_namespaced_service_account(namespace).items
        ),
    )
    ref = start_pair_workload(api, plugin, namespace)
    plugin.prepare(ref)
    client.CoreV1Api(api).delete_namespace(namespace)
    eventually(
        "shadows marked for deletion",
        lambda: (
            all(o["metadata"].get("deletionTimestamp") for o in nads_in(api, namespace))
            and nads_in(api, namespace)
        ),
    )
    assert not gone(api, namespace)  # held by the protection finalizers
    assert plugin.unprepare(ref) is None
    eventually("namespace gone after release", lambda: gone(api, namespace), timeout_s=120)


def test_sequential_reuse_gets_a_new_identity_and_concurrent_reuse_is_refused(api, plugin, namespace):
    plugin.publish_mapping(namespace)
    client.ResourceV1Api(api).create_namespaced_resource_claim(
        namespace, one_vf_claim(namespace, "shared-vf")
    )
    use = [{"name": "devices", "resourceClaimName": "shared-vf"}]
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(namespace, workload_pod("first", plugin.node.name, use))
    ref = plugin.claim_ref(namespace, "first")
    assert isinstance(plugin.prepare(ref), messages.Prepared)
    first_names = {o["metadata"]["name"] for o in nads_in(api, namespace)}
    core.create_namespaced_pod(namespace, workload_pod("second", plugin.node.name, use))
    eventually(
        "the second Pod reserved on the shared claim",
        lambda: (
            len(
                client.ResourceV1Api(api)
                .read_namespaced_resource_claim("shared-vf", namespace)
                .status.reserved_for
                or []
            )
            == 2
        ),
    )
    refused = plugin.prepare(ref)
    assert isinstance(refused, messages.ClaimError) and "consumers" in refused.message
    _delete_pod(api, namespace, "first", "Background")
    assert plugin.unprepare(ref) is None
    eventually(
        "reservation moved to the second Pod",
        lambda: (
            [
                r.name
                for r in (
                    client.ResourceV1Api(api)
                    .read_namespaced_resource_claim("shared-vf", namespace)
                    .status.reserved_for
                    or []
                )
            ]
            == ["second"]
        ),
    )
    assert isinstance(plugin.prepare(ref), messages.Prepared)
    second_names = {
        o["metadata"]["name"] for o in nads_in(api, namespace) if not o["metadata"].get("deletionTimestamp")
    }
    assert second_names and second_names.isdisjoint(first_names)
    _delete_pod(api, namespace, "second", "Background")
    assert plugin.unprepare(ref) is None


def test_orphan_scan_lists_only_this_nodes_shadows_and_never_finalizes(api, plugin, namespace):
    ref = start_pair_workload(api, plugin, namespace)
    plugin.prepare(ref)
    (first, second) = nads_in(api, namespace)
    foreign = dict(first)
    foreign["metadata"] = {
        "name": "dra-sriov-" + "f" * 32,
        "namespace": namespace,
        "labels": {**first["metadata"]["labels"]},
        "annotations": first["metadata"]["annotations"],
        "finalizers": [names.FINALIZER_ATTACHMENT_PROTECTION],
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", namespace, "network-attachment-definitions", foreign
    )
    other_node = dict(first)
    other_node["metadata"] = {
        **foreign["metadata"],
        "name": "dra-sriov-" + "e" * 32,
        "labels": {
            **first["metadata"]["labels"],
            names.LABEL_NODE_UID: "0e0e0e0e-0000-4000-8000-00000000000e",
        },
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", namespace, "network-attachment-definitions", other_node
    )
    found = plugin.worker().scan_orphans()  # one all-namespace LIST as the plugin's ServiceAccount
    by_name = {r.name: r.status for r in found}
    assert by_name[first["metadata"]["name"]] is orphans.Status.ACTIVE
    assert by_name[second["metadata"]["name"]] is orphans.Status.ACTIVE
    assert by_name["dra-sriov-" + "f" * 32] is orphans.Status.ORPHANED
    assert "dra-sriov-" + "e" * 32 not in by_name
    left = {o["metadata"]["name"]: o for o in nads_in(api, namespace)}
    assert left["dra-sriov-" + "f" * 32]["metadata"]["finalizers"] == [names.FINALIZER_ATTACHMENT_PROTECTION]
    assert plugin.unprepare(ref) is None
    for name in ("dra-sriov-" + "f" * 32, "dra-sriov-" + "e" * 32):
        client.CustomObjectsApi(api).patch_namespaced_custom_object(
            "k8s.cni.cncf.io",
            "v1",
            namespace,
            "network-attachment-definitions",
            name,
            {"metadata": {"finalizers": None}},
        )


def can_create_nads(plugin_api: client.ApiClient, namespace: str) -> bool:
    """SelfSubjectAccessReview as the plugin: may it create NADs in ``namespace``?"""
    attrs = {"group": "k8s.cni.cncf.io", "resource": "network-attachment-definitions", "verb": "create"}
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {**attrs, "namespace": namespace}},
    }
    answer = client.AuthorizationV1Api(plugin_api).create_self_subject_access_review(review)
    return bool(answer.status.allowed)


def test_a_missing_grant_is_an_actionable_access_error_and_retry_state_is_kept(api, plugin, namespace):
    ref = start_pair_workload(api, plugin, namespace)
    shipped = load_all(RBAC)
    role = next(
        o
        for o in shipped
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "dra-sriov-managed-networks"
    )
    reduced = yaml.safe_load(yaml.safe_dump(role))
    reduced["rules"][1]["verbs"] = [v for v in reduced["rules"][1]["verbs"] if v != "create"]
    client.RbacAuthorizationV1Api(api).replace_cluster_role(role["metadata"]["name"], reduced)
    try:
        eventually("the reduced role to take effect", lambda: not can_create_nads(plugin.api, namespace))
        out = plugin.prepare(ref)
        assert isinstance(out, messages.ClaimError)
        assert (
            "forbidden" in out.message.lower()
            and "create" in out.message
            and "network-attachment-definitions" in out.message
        )
        assert [b.phase.value for b in plugin.store.snapshot_claim(ref.uid).managed_bindings()] == [
            "Pending",
            "Pending",
        ]
    finally:
        apply.apply_objects(api, [role], force=True)
        eventually("the shipped role back", lambda: can_create_nads(plugin.api, namespace))
    eventually(
        "the worker converges once the grant is back",
        lambda: (
            plugin.worker().run_once(),
            [b.phase.value for b in plugin.store.snapshot_claim(ref.uid).managed_bindings()]
            == ["Ready", "Ready"],
        )[1],
    )
    assert isinstance(plugin.prepare(ref), messages.Prepared)
    assert plugin.unprepare(ref) is None


def test_shipped_plugin_rbac_is_exactly_the_documented_grant_set():
    docs = load_all(RBAC)
    managed = next(
        o
        for o in docs
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "dra-sriov-managed-networks"
    )
    assert managed["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]},
        {
            "apiGroups": ["k8s.cni.cncf.io"],
            "resources": ["network-attachment-definitions"],
            "verbs": ["get", "list", "create", "patch", "delete"],
        },
    ]
    dra = next(o for o in docs if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "sriov-dra-plugin")
    driver_rule = next(r for r in dra["rules"] if r["resources"] == ["resourceclaims/driver"])
    assert driver_rule["resourceNames"] == [names.DRIVER_NAME]
    assert set(driver_rule["verbs"]) == {"associated-node:update", "associated-node:patch"}
    assert all("pods/finalizers" not in r["resources"] for r in dra["rules"] + managed["rules"])


def test_every_shipped_plugin_manifest_passes_server_dry_run(api, installed):
    """The shipped plugin RBAC is valid as the server sees it; ``installed`` creates its namespace,
    so the test passes run alone as well as after others."""
    apply.apply_objects(api, load_all(RBAC), dry_run=True)


__all__: list[Any] = []
