"""Cluster tier: the shipped operator RBAC is sufficient and least-privilege (by impersonation).

The shipped ServiceAccount, ClusterRole and Role are applied (namespace and cluster-scoped names
made per-test), then the whole operator-two-rails reconcile, every watch, Event recording and the leader
Lease run as ``system:serviceaccount:<ns>:sriov-dra-operator``. SubjectAccessReviews prove what the
account cannot do. The Deployment manifest passes server dry-run.
"""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.leaderelection import leaderelectionrecord
from tests import waiting
from tests.cluster.operator.conftest import MANIFESTS, SHADOW_SELECTOR, Harness

from sriov_dra.core.operator import network_refs
from sriov_dra.kube import apply, leader, objects, watches
from sriov_dra_lab.control_plane import ControlPlane

OPERATOR = MANIFESTS / "operator"
SHIPPED_NS = "sriov-network-operator"


def manifests(path: Path, namespace: str, suffix: str) -> list[dict[str, Any]]:
    """The shipped objects with the installation namespace and cluster-scoped names made per-test."""
    out = []
    for doc in yaml.safe_load_all(path.read_text()):
        obj = copy.deepcopy(doc)
        meta = obj["metadata"]
        if meta.get("namespace") == SHIPPED_NS:
            meta["namespace"] = namespace
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            meta["name"] = f"{meta['name']}-{suffix}"
        if "roleRef" in obj and obj["roleRef"]["kind"] == "ClusterRole":
            obj["roleRef"]["name"] = f"{obj['roleRef']['name']}-{suffix}"
        for subject in obj.get("subjects", []):
            subject["namespace"] = namespace
        out.append(obj)
    return out


@contextlib.contextmanager
def shipped_rbac(api: client.ApiClient, namespace: str) -> Iterator[None]:
    """The shipped RBAC applied for ``namespace``; cluster-scoped objects removed afterwards."""
    apply.apply_objects(api, manifests(OPERATOR / "rbac.yaml", namespace, namespace))
    try:
        yield
    finally:
        rbac = client.RbacAuthorizationV1Api(api)
        rbac.delete_cluster_role_binding(f"sriov-dra-operator-{namespace}")
        rbac.delete_cluster_role(f"sriov-dra-operator-{namespace}")


@pytest.fixture
def operator_account(
    api: client.ApiClient, control_plane: ControlPlane, namespace: str
) -> Iterator[client.ApiClient]:
    """An ApiClient impersonating the operator's ServiceAccount after the shipped RBAC is applied."""
    with shipped_rbac(api, namespace):
        impersonated = control_plane.api()
        impersonated.set_default_header(
            "Impersonate-User", f"system:serviceaccount:{namespace}:sriov-dra-operator"
        )
        try:
            yield impersonated
        finally:
            impersonated.close()


@pytest.fixture(scope="module")
def rbac_namespace(api: client.ApiClient) -> Iterator[str]:
    """One namespace with the shipped RBAC for all the access reviews of this module."""
    name = f"rbac-review-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        with shipped_rbac(api, name):
            yield name
    finally:
        core.delete_namespace(name)


def test_the_operator_account_can_do_the_whole_job(
    api: client.ApiClient, namespace: str, operator_crds: Any, operator_account: client.ApiClient
) -> None:
    h = Harness(operator_account, namespace, admin_api=api, recorder=True)
    try:
        h.create_namespace(h.target_ns)
        node = h.add_node("worker-1")
        h.network("rail-a-net")
        h.network("rail-b-net")
        h.rails()
        for _ in range(2):
            result = h.settle()
        assert not result.retry, result.failed_writes
        assert {h.reason("rail-a-policy"), h.reason("rail-b-policy")} == {"DRAConfigurationApplied"}
        assert len(h.generated()[0]) == 2 and node in h.generated()[1]
        served = h.admin.get(objects.DEVICE_CLASS, "sriov-vfs")  # the rails' shared resourceName
        assert served["spec"]["extendedResourceName"] == f"{h.config.resource_prefix}/sriov_vfs"
        assert h.ready("rail-a-net")["status"] == "True"  # type: ignore[index]
        notes = [e["reason"] for e in h.admin.list(objects.EVENT, namespace).items]
        assert "DRAConfigurationReadyAdded" in notes and "ReadyAdded" in notes
        h.admin.delete(objects.NODE_POLICY, "rail-b-policy", namespace)
        h.admin.delete(objects.SRIOV_NETWORK, "rail-b-net", namespace)
        h.reconcile_networks()
        h.networks.reconcile(network_refs.ObjectRef(namespace, "rail-b-net"))
        assert not h.reconcile_policies().retry
        assert h.admin.get_or_none(objects.NAD, "rail-b-net", h.target_ns) is None
        watch_everything(operator_account, namespace)
        lease_as_operator(operator_account, namespace)
    finally:
        h.cleanup()


def watch_everything(api: client.ApiClient, namespace: str) -> None:
    """Every watch the operator opens lists and watches under the operator's account."""

    def watch(res: objects.Resource, name: str, **kw: Any) -> watches.Watch:
        return watches.Watch(api, watches.Target.of(res, **kw), lambda *_: None, name=name)

    watchers = [
        watch(objects.NODE_POLICY, "policies", namespace=namespace),
        watch(objects.SRIOV_NETWORK, "networks"),
        watch(objects.NAD, "nads", label_selector=SHADOW_SELECTOR),
        watch(objects.NAMESPACE, "namespaces"),
        watch(objects.NODE, "nodes"),
    ]
    for w in watchers:
        w.start()
    try:
        for w in watchers:
            assert w.wait_synced(20), (
                f"watch {w.name} never synced under the operator account: {w.last_error}"
            )
            waiting.eventually(
                f"watch {w.name} to open or fail",
                lambda w=w: w.streams or w.failures,
                timeout_s=20,
                interval_s=0.1,
            )
            assert w.failures == 0, f"watch {w.name} failed under the operator account: {w.last_error}"
    finally:
        for w in watchers:
            w.close()


def lease_as_operator(api: client.ApiClient, namespace: str) -> None:
    c = objects.Objects(api, field_manager="sriov-dra-operator")
    lock = leader.LeaseLock(c, "sriov-dra-operator", namespace, "me")
    ok, _ = lock.get("sriov-dra-operator", namespace)
    assert not ok
    rec = leaderelectionrecord.LeaderElectionRecord("me", "15", "2026-01-01 00:00:00", "2026-01-01 00:00:00")
    assert lock.create("sriov-dra-operator", namespace, rec)
    assert lock.get("sriov-dra-operator", namespace)[0]
    assert lock.update("sriov-dra-operator", namespace, rec)
    assert leader.release(lock)


DENIED = [
    ("get", "", "pods", None, "ns"),
    ("list", "", "secrets", None, "ns"),
    ("create", "", "pods", None, "ns"),
    ("get", "", "nodes", None, None),
    ("patch", "", "nodes", None, None),
    ("create", "", "namespaces", None, None),
    ("delete", "sriovnetwork.openshift.io", "sriovnetworks", None, "ns"),
    ("update", "sriovnetwork.openshift.io", "sriovnetworks", None, "ns"),
    ("create", "sriovnetwork.openshift.io", "sriovnetworks", None, "ns"),
    ("update", "sriovnetwork.openshift.io", "sriovnetworknodepolicies", None, "ns"),
    ("patch", "sriovnetwork.openshift.io", "sriovnetworknodepolicies", None, "ns"),
    ("delete", "sriovnetwork.openshift.io", "sriovnetworknodepolicies", None, "ns"),
    ("create", "sriovnetwork.openshift.io", "sriovnetworknodepolicies", None, "other"),
    ("create", "sriovnetwork.k8snetworkplumbingwg.io", "deviceattributes", None, "other"),
    ("delete", "sriovnetwork.k8snetworkplumbingwg.io", "sriovresourcepolicies", None, "other"),
    ("patch", "k8s.cni.cncf.io", "network-attachment-definitions", None, "ns"),
    ("update", "coordination.k8s.io", "leases", "someone-elses-lease", "ns"),
    ("get", "resource.k8s.io", "resourceclaims", None, "ns"),
    ("patch", "resource.k8s.io", "deviceclasses", None, None),
    ("update", "resource.k8s.io", "resourceslices", None, None),
]


@pytest.mark.parametrize(
    ("verb", "group", "resource", "name", "where"),
    DENIED,
    ids=[f"{v}-{r}{'-' + n if n else ''}{'-in-' + w if w == 'other' else ''}" for v, _, r, n, w in DENIED],
)
def test_the_operator_account_cannot_do_anything_else(
    api: client.ApiClient,
    rbac_namespace: str,
    verb: str,
    group: str,
    resource: str,
    name: str | None,
    where: str | None,
) -> None:
    namespace = rbac_namespace
    ns = {"ns": namespace, "other": "default", None: None}[where]
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{namespace}:sriov-dra-operator",
            groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
            resource_attributes=client.V1ResourceAttributes(
                verb=verb, group=group, resource=resource, name=name, namespace=ns
            ),
        )
    )
    answer = client.AuthorizationV1Api(api).create_subject_access_review(review)
    assert answer.status.allowed is False, f"{verb} {resource} is allowed: {answer.status.reason}"


def test_deployment_manifest_passes_server_dry_run(api: client.ApiClient, namespace: str) -> None:
    (deployment,) = manifests(OPERATOR / "deployment.yaml", namespace, namespace)
    (answer,) = apply.apply_objects(api, [deployment], dry_run=True)
    container = answer["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["sriov-dra-operator"]
    assert answer["spec"]["template"]["spec"]["serviceAccountName"] == "sriov-dra-operator"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    rbac = manifests(OPERATOR / "rbac.yaml", namespace, f"dry-{namespace}")
    assert len(apply.apply_objects(api, rbac, dry_run=True)) == 5


def test_deployment_runs_the_same_account_the_rbac_binds() -> None:
    docs = list(yaml.safe_load_all((OPERATOR / "rbac.yaml").read_text()))
    (deployment,) = yaml.safe_load_all((OPERATOR / "deployment.yaml").read_text())
    account = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["name"]
    assert deployment["metadata"]["namespace"] == account["namespace"]
    bound = {(d["kind"], s["name"], s["namespace"]) for d in docs if "subjects" in d for s in d["subjects"]}
    assert bound == {
        ("ClusterRoleBinding", account["name"], account["namespace"]),
        ("RoleBinding", account["name"], account["namespace"]),
    }
    lease_rule = next(r for d in docs if d["kind"] == "Role" for r in d["rules"] if r.get("resourceNames"))
    assert lease_rule["resourceNames"] == ["sriov-dra-operator"]  # the default --lease-name
