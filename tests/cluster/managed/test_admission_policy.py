"""Cluster tier: the shipped admission policy (``manifests/plugin/admission-policy.yaml``).

kube-apiserver, controller-manager and scheduler v1.36.3 with the shipped plugin RBAC and the
shipped policy applied unchanged. The plugin runs through the real handler and repair worker as
its ServiceAccount with the node-name extra a node-bound token carries (``conftest``); the
namespace admin is a user bound to ``admin`` and to NAD editing in the test namespace; the garbage
collector and the namespace controller are the real ones. Every refusal is checked for the message
the policy promises: the object, the field, who may change it and who was refused.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import pytest
import yaml
from kubernetes import client

from sriov_dra.kube import apply
from sriov_dra.kubeletapi import messages
from sriov_dra_lab import binaries
from sriov_dra_rules import names

from .conftest import (
    MANIFESTS,
    PLUGIN_USER,
    ClusterPlugin,
    eventually,
    gone,
    load_all,
    nads_in,
    pairs_template,
    workload_pod,
)
from .test_auto_attach import start_pair_workload
from .test_orphans_cli import run as orphans_run  # a later --kubeconfig overrides the admin's

MANIFEST = MANIFESTS / "plugin" / "admission-policy.yaml"
POLICY = "sriov-dra-binding-protection"
NAD_GROUP, NAD_VERSION, NADS = "k8s.cni.cncf.io", "v1", "network-attachment-definitions"
NS_ADMIN = "ns-admin"
POD = "gpu-sriov-pairs-demo"
EDITOR = "admission-test-editor"
PROBE_NS = "admission-policy-probe"
NODE_EXTRA_HEADER = "Impersonate-Extra-authentication.kubernetes.io%2Fnode-name"


# ----------------------------------------------------------------------------------- fixtures
def _editor_role() -> dict[str, Any]:
    """What a namespace admin of a Multus cluster holds besides ``admin``: NADs, Pod status, binding."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": EDITOR},
        "rules": [
            {"apiGroups": [NAD_GROUP], "resources": [NADS], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get", "patch", "update"]},
            {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
        ],
    }


def _grant(api: client.ApiClient, namespace: str, user: str) -> None:
    """Bind ``user`` to ``admin`` and to :data:`EDITOR` in ``namespace``."""
    apply.apply_objects(
        api,
        [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": f"{user}-{role}", "namespace": namespace},
                "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            }
            for role in ("admin", EDITOR)
        ],
    )


def _as(control_plane: Any, user: str, *, node: str | None = None) -> client.ApiClient:
    """An ApiClient impersonating ``user`` (a ServiceAccount user gets its groups from the server)."""
    api: client.ApiClient = control_plane.api()
    api.set_default_header("Impersonate-User", user)
    if node is not None:
        api.set_default_header(NODE_EXTRA_HEADER, node)
    return api


def _probe_shadow(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{NAD_GROUP}/{NAD_VERSION}",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": "dra-sriov-" + "0" * 32,
            "namespace": namespace,
            "labels": {names.LABEL_MANAGED_BY: names.MANAGED_BY_VALUE},
        },
        "spec": {"config": "{}"},
    }


def _probe_refused(probe: client.ApiClient) -> bool:
    """Whether a dry-run create of a labelled NAD by the probe user is refused by the policy."""
    try:
        client.CustomObjectsApi(probe).create_namespaced_custom_object(
            NAD_GROUP, NAD_VERSION, PROBE_NS, NADS, _probe_shadow(PROBE_NS), dry_run="All"
        )
    except client.ApiException as exc:
        if exc.status == 403 and POLICY in exc.body:
            return True
        raise
    return False


@pytest.fixture(scope="module")
def policy(api: client.ApiClient, control_plane: Any, installed: None) -> Iterator[list[dict[str, Any]]]:
    """The shipped policy applied as it ships, enforced (probed) for this module, then removed."""
    docs = load_all(MANIFEST)
    apply.apply_objects(api, [_editor_role()])
    apply.apply_objects(api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROBE_NS}}])
    _grant(api, PROBE_NS, "admission-probe")
    probe = _as(control_plane, "admission-probe")
    apply.apply_objects(api, docs)
    try:
        eventually("the policy enforced", lambda: _probe_refused(probe))
        yield docs
    finally:
        for doc in reversed(docs):
            _delete_cluster_object(api, doc)
        eventually("the policy gone", lambda: not _probe_refused(probe))
        probe.close()
        client.CoreV1Api(api).delete_namespace(PROBE_NS)
        client.RbacAuthorizationV1Api(api).delete_cluster_role(EDITOR)


def _delete_cluster_object(api: client.ApiClient, doc: dict[str, Any]) -> None:
    group, _, version = doc["apiVersion"].rpartition("/")
    plural = {
        "ClusterRole": "clusterroles",
        "ClusterRoleBinding": "clusterrolebindings",
        "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
        "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
    }[doc["kind"]]
    with contextlib.suppress(client.ApiException):
        client.CustomObjectsApi(api).delete_cluster_custom_object(
            group, version, plural, doc["metadata"]["name"]
        )


@pytest.fixture
def ns_admin(api: client.ApiClient, control_plane: Any, namespace: str) -> Iterator[client.ApiClient]:
    """A namespace admin of ``namespace`` (``admin`` plus NADs, Pod status and binding)."""
    _grant(api, namespace, NS_ADMIN)
    admin = _as(control_plane, NS_ADMIN)
    try:
        yield admin
    finally:
        admin.close()


class Workload(NamedTuple):
    """A prepared gpu-nic-pairs workload in ``namespace`` with its namespace admin (policy enforced)."""

    api: client.ApiClient
    plugin: ClusterPlugin
    namespace: str
    admin: client.ApiClient
    ref: messages.ClaimRef


@pytest.fixture
def workload(
    api: client.ApiClient, plugin: ClusterPlugin, namespace: str, ns_admin: client.ApiClient, policy: Any
) -> Iterator[Workload]:
    """Two shadows, the registry and the selections, as the plugin wrote them; released afterwards."""
    ref = prepared(api, plugin, namespace)
    yield Workload(api, plugin, namespace, ns_admin, ref)
    release(api, plugin, namespace, ref)  # a claim already released is an unknown claim: a no-op


# ------------------------------------------------------------------------------------ helpers
def refusal(call: Callable[[], object]) -> str:
    """The policy's message of a refused ``call`` (fails when it passed or failed otherwise)."""
    with pytest.raises(client.ApiException) as info:
        call()
    assert info.value.status == 403, info.value.body
    message = str(json.loads(info.value.body)["message"])
    assert f"ValidatingAdmissionPolicy '{POLICY}'" in message, message
    return message


def assert_names_who(message: str, ref: str, node: str, user: str) -> None:
    """The refusal names the object, who may change it and who may not."""
    assert f"{ref}: " in message, message
    assert f"only the sriov-dra plugin on node {node} (ClusterRole sriov-dra-binding-node-writer" in message
    assert "ClusterRole sriov-dra-binding-manager: the operator, group sriov-dra:binding-managers" in message
    assert f"; {user} may not" in message


def get_nad(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    return client.CustomObjectsApi(api).get_namespaced_custom_object(
        NAD_GROUP, NAD_VERSION, namespace, NADS, name
    )


def patch_nad(api: client.ApiClient, namespace: str, name: str, body: Any) -> Any:
    """A merge patch (``dict`` body) or a JSON Patch (``list`` body) of a NAD."""
    kind = "application/json-patch+json" if isinstance(body, list) else "application/merge-patch+json"
    return client.CustomObjectsApi(api).patch_namespaced_custom_object(
        NAD_GROUP, NAD_VERSION, namespace, NADS, name, body, _content_type=kind
    )


def annotations(api: client.ApiClient, namespace: str, pod: str = POD) -> dict[str, str]:
    return client.CoreV1Api(api).read_namespaced_pod(pod, namespace).metadata.annotations or {}


def patch_annotations(
    api: client.ApiClient, namespace: str, values: dict[str, str | None], pod: str = POD
) -> Any:
    return client.CoreV1Api(api).patch_namespaced_pod(pod, namespace, {"metadata": {"annotations": values}})


def prepared(api: client.ApiClient, plugin: ClusterPlugin, namespace: str) -> messages.ClaimRef:
    """The gpu-nic-pairs workload prepared by the plugin (two shadows, registry, selections)."""
    ref = start_pair_workload(api, plugin, namespace)
    assert isinstance(plugin.prepare(ref), messages.Prepared)
    return ref


def release(api: client.ApiClient, plugin: ClusterPlugin, namespace: str, ref: messages.ClaimRef) -> None:
    assert plugin.unprepare(ref) is None
    eventually("shadows gone after release", lambda: nads_in(api, namespace) == [])


def managed_elements(networks: str) -> list[str]:
    return [
        json.dumps(e, separators=(",", ":"))
        for e in json.loads(networks)
        if e["name"].startswith("dra-sriov-")
    ]


# ---------------------------------------------------------------------------------- manifests
def test_shipped_admission_policy_manifest_passes_server_dry_run(
    api: client.ApiClient, installed: None
) -> None:
    docs = load_all(MANIFEST)
    assert [d["kind"] for d in docs][-2:] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    apply.apply_objects(api, docs, dry_run=True)


def test_the_policy_compiles_without_type_warnings_and_binds_with_deny(
    api: client.ApiClient, policy: Any
) -> None:
    reg = client.AdmissionregistrationV1Api(api)
    live = eventually(
        "the policy's type check done",
        lambda: (
            (p := reg.read_validating_admission_policy(POLICY)).status
            and p.status.observed_generation == p.metadata.generation
            and p
        ),
    )
    assert not (live.status.type_checking and live.status.type_checking.expression_warnings)
    binding = reg.read_validating_admission_policy_binding(POLICY)
    assert binding.spec.policy_name == POLICY and binding.spec.validation_actions == ["Deny"]


# ------------------------------------------------------------------- NAD edits are refused
def _reformat_config(shadow: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"config": json.dumps(json.loads(shadow["spec"]["config"]), indent=1)}}


NAD_EDITS: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "spec-config-reformatted": (_reformat_config, "spec.config of a managed shadow is frozen"),
    "protection-finalizer-removed": (
        lambda s: [
            {"op": "test", "path": "/metadata/finalizers", "value": s["metadata"]["finalizers"]},
            {"op": "remove", "path": "/metadata/finalizers/0"},
        ],
        f"finalizer {names.FINALIZER_ATTACHMENT_PROTECTION} is removed by the plugin",
    ),
    "managed-by-label-removed": (
        lambda s: {"metadata": {"labels": {names.LABEL_MANAGED_BY: None}}},
        f"label {names.LABEL_MANAGED_BY} and annotation {names.BINDING_ANNOTATION} mark a shadow",
    ),
    "binding-annotation-changed": (
        lambda s: {"metadata": {"annotations": {names.BINDING_ANNOTATION: "{}"}}},
        f"label {names.LABEL_MANAGED_BY} and annotation {names.BINDING_ANNOTATION} mark a shadow",
    ),
    "any-other-label-on-a-shadow": (
        lambda s: {"metadata": {"labels": {"team": "a"}}},
        "is a shadow the plugin owns (UPDATE refused)",
    ),
}


@pytest.mark.parametrize("edit", sorted(NAD_EDITS))
def test_a_namespace_admin_edit_of_a_shadow_is_refused_naming_the_field_and_who_may(
    workload: Workload, edit: str
) -> None:
    api, plugin, namespace, ns_admin, _ref = workload
    shadow = nads_in(api, namespace)[0]
    name = shadow["metadata"]["name"]
    body, expected = NAD_EDITS[edit]
    message = refusal(lambda: patch_nad(ns_admin, namespace, name, body(shadow)))
    assert expected in message, message
    assert_names_who(message, f"NetworkAttachmentDefinition {namespace}/{name}", plugin.node.name, NS_ADMIN)
    after = get_nad(api, namespace, name)
    assert (after["metadata"]["resourceVersion"], after["spec"]) == (
        shadow["metadata"]["resourceVersion"],
        shadow["spec"],
    )


def test_a_namespace_admin_may_not_delete_or_forge_a_shadow(workload: Workload) -> None:
    api, plugin, namespace, ns_admin, _ref = workload
    shadow = nads_in(api, namespace)[0]
    name = shadow["metadata"]["name"]
    custom = client.CustomObjectsApi(ns_admin)
    message = refusal(
        lambda: custom.delete_namespaced_custom_object(NAD_GROUP, NAD_VERSION, namespace, NADS, name)
    )
    assert "(DELETE refused)" in message
    assert_names_who(message, f"NetworkAttachmentDefinition {namespace}/{name}", plugin.node.name, NS_ADMIN)
    forged = {
        "apiVersion": shadow["apiVersion"],
        "kind": shadow["kind"],
        "metadata": {
            "name": "dra-sriov-" + "e" * 32,
            "namespace": namespace,
            "labels": shadow["metadata"]["labels"],
            "annotations": shadow["metadata"]["annotations"],
        },
        "spec": shadow["spec"],
    }
    message = refusal(
        lambda: custom.create_namespaced_custom_object(NAD_GROUP, NAD_VERSION, namespace, NADS, forged)
    )
    assert "(CREATE refused)" in message
    assert_names_who(
        message, f"NetworkAttachmentDefinition {namespace}/dra-sriov-{'e' * 32}", plugin.node.name, NS_ADMIN
    )


def test_marks_may_not_be_added_to_any_nad_nor_the_finalizer_removed_from_one(
    api: client.ApiClient, namespace: str, ns_admin: client.ApiClient, policy: Any
) -> None:
    custom = client.CustomObjectsApi(ns_admin)
    plain = {
        "apiVersion": f"{NAD_GROUP}/{NAD_VERSION}",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": "rail-a-net",
            "namespace": namespace,
            "finalizers": [names.FINALIZER_ATTACHMENT_PROTECTION],
        },
        "spec": {"config": '{"cniVersion":"1.0.0","name":"rail-a","type":"sriov"}'},
    }
    custom.create_namespaced_custom_object(
        NAD_GROUP, NAD_VERSION, namespace, NADS, plain
    )  # not marked: allowed
    ref = f"NetworkAttachmentDefinition {namespace}/rail-a-net"
    for body, key in (
        ({"metadata": {"labels": {names.LABEL_MANAGED_BY: names.MANAGED_BY_VALUE}}}, names.LABEL_MANAGED_BY),
        ({"metadata": {"annotations": {names.BINDING_ANNOTATION: "{}"}}}, names.BINDING_ANNOTATION),
    ):
        message = refusal(lambda body=body: patch_nad(ns_admin, namespace, "rail-a-net", body))
        assert (
            "mark a shadow the plugin owns and may not be added, changed or removed" in message
            and key in message
        )
        assert_names_who(message, ref, "(unknown)", NS_ADMIN)
    message = refusal(
        lambda: patch_nad(ns_admin, namespace, "rail-a-net", {"metadata": {"finalizers": None}})
    )
    assert f"finalizer {names.FINALIZER_ATTACHMENT_PROTECTION} is removed by the plugin" in message
    patch_nad(
        ns_admin,
        namespace,
        "rail-a-net",
        {"spec": {"config": '{"cniVersion":"1.0.0","name":"b","type":"sriov"}'}},
    )
    patch_nad(api, namespace, "rail-a-net", {"metadata": {"finalizers": None}})  # cluster-admin: a manager


# ------------------------------------------------------------------- Pod edits are refused
POD_EDITS: dict[str, tuple[Callable[[dict[str, str]], dict[str, str | None]], str]] = {
    "registry-removed": (
        lambda a: {names.MANAGED_NETWORKS_ANNOTATION: None},
        f"annotation {names.MANAGED_NETWORKS_ANNOTATION} is the plugin's registry",
    ),
    "registry-changed": (
        lambda a: {
            names.MANAGED_NETWORKS_ANNOTATION: a[names.MANAGED_NETWORKS_ANNOTATION].replace("dra0", "dra7")
        },
        f"annotation {names.MANAGED_NETWORKS_ANNOTATION} is the plugin's registry",
    ),
    "networks-removed": (
        lambda a: {names.NETWORKS_ANNOTATION: None},
        f"annotation {names.NETWORKS_ANNOTATION} must keep every selection the registry",
    ),
    "managed-selection-dropped": (
        lambda a: {names.NETWORKS_ANNOTATION: "[" + managed_elements(a[names.NETWORKS_ANNOTATION])[0] + "]"},
        f"annotation {names.NETWORKS_ANNOTATION} must keep every selection the registry",
    ),
    "managed-interface-renamed": (
        lambda a: {names.NETWORKS_ANNOTATION: a[names.NETWORKS_ANNOTATION].replace('"dra1"', '"net9"')},
        f"annotation {names.NETWORKS_ANNOTATION} must keep every selection the registry",
    ),
    "managed-selections-reordered": (
        lambda a: {
            names.NETWORKS_ANNOTATION: "["
            + ",".join(reversed(managed_elements(a[names.NETWORKS_ANNOTATION])))
            + "]"
        },
        f"annotation {names.NETWORKS_ANNOTATION} must keep every selection the registry",
    ),
    "managed-selection-nested-in-a-user-entry": (
        lambda a: {
            names.NETWORKS_ANNOTATION: '[{"name":"user-net","x":['
            + managed_elements(a[names.NETWORKS_ANNOTATION])[0]
            + "]},"
            + managed_elements(a[names.NETWORKS_ANNOTATION])[1]
            + "]"
        },
        f"annotation {names.NETWORKS_ANNOTATION} must keep every selection the registry",
    ),
    "managed-selection-duplicated": (
        lambda a: {
            names.NETWORKS_ANNOTATION: a[names.NETWORKS_ANNOTATION][:-1]
            + ","
            + managed_elements(a[names.NETWORKS_ANNOTATION])[0]
            + "]"
        },
        f"annotation {names.NETWORKS_ANNOTATION} must keep every selection the registry",
    ),
    "comma-notation": (
        lambda a: {
            names.NETWORKS_ANNOTATION: ",".join(
                f"{e['namespace']}/{e['name']}@{e['interface']}"
                for e in json.loads(a[names.NETWORKS_ANNOTATION])
            )
        },
        f"annotation {names.NETWORKS_ANNOTATION} must keep every selection the registry",
    ),
}


@pytest.mark.parametrize("edit", sorted(POD_EDITS))
def test_a_namespace_admin_edit_of_the_registry_or_a_managed_selection_is_refused(
    workload: Workload, edit: str
) -> None:
    api, plugin, namespace, ns_admin, _ref = workload
    before = annotations(api, namespace)
    body, expected = POD_EDITS[edit]
    message = refusal(lambda: patch_annotations(ns_admin, namespace, body(before)))
    assert expected in message, message
    assert_names_who(message, f"Pod {namespace}/{POD}", plugin.node.name, NS_ADMIN)
    if edit.startswith(("managed", "networks", "comma")):
        for element in managed_elements(before[names.NETWORKS_ANNOTATION]):
            assert json.loads(element)["name"] in message  # the recorded selections are named
    assert annotations(api, namespace) == before


def test_the_registry_may_not_be_written_through_pods_status_but_network_status_may(
    workload: Workload,
) -> None:
    api, _plugin, namespace, ns_admin, _ref = workload
    core = client.CoreV1Api(ns_admin)
    message = refusal(
        lambda: core.patch_namespaced_pod_status(
            POD, namespace, {"metadata": {"annotations": {names.MANAGED_NETWORKS_ANNOTATION: None}}}
        )
    )
    assert f"annotation {names.MANAGED_NETWORKS_ANNOTATION} is the plugin's registry" in message
    status = json.dumps([{"name": "k8s-pod-network", "interface": "eth0", "default": True}])
    core.patch_namespaced_pod_status(
        POD, namespace, {"metadata": {"annotations": {names.NETWORK_STATUS_ANNOTATION: status}}}
    )  # as Multus writes it
    assert annotations(api, namespace)[names.NETWORK_STATUS_ANNOTATION] == status


def test_a_pod_may_not_be_created_or_bound_with_a_registry(
    api: client.ApiClient, namespace: str, ns_admin: client.ApiClient, policy: Any
) -> None:
    core = client.CoreV1Api(ns_admin)
    registry_text = json.dumps({"version": 1, "podUID": str(uuid.uuid4()), "entries": []})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "forged", "annotations": {names.MANAGED_NETWORKS_ANNOTATION: registry_text}},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "registry.invalid/x"}]},
    }
    message = refusal(lambda: core.create_namespaced_pod(namespace, pod))
    assert (
        f"Pod {namespace}/forged: annotation {names.MANAGED_NETWORKS_ANNOTATION} is the plugin's registry"
        in message
    )
    del pod["metadata"]["annotations"]
    core.create_namespaced_pod(namespace, pod)
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "forged", "annotations": {names.MANAGED_NETWORKS_ANNOTATION: registry_text}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "some-node"},
    }
    message = refusal(lambda: core.create_namespaced_pod_binding("forged", namespace, binding))
    assert f"annotation {names.MANAGED_NETWORKS_ANNOTATION} is the plugin's registry" in message
    assert not core.read_namespaced_pod("forged", namespace).spec.node_name


# ----------------------------------------------------------- what stays writable for users
def test_other_annotations_and_user_selections_stay_writable_by_the_namespace_admin(
    workload: Workload,
) -> None:
    api, _plugin, namespace, ns_admin, _ref = workload
    before = annotations(api, namespace)
    managed = managed_elements(before[names.NETWORKS_ANNOTATION])
    user = '{"name":"user-net","interface":"net1","ips":["192.0.2.200/24"]}'
    for networks in (
        "[" + user + "," + ",".join(managed) + "]",  # a user entry before the managed ones
        "[" + ",".join(managed) + "," + user.replace("net1", "net2") + "]",  # after, changed
        "[ " + " , ".join(managed) + " ]",  # whitespace between elements
        before[names.NETWORKS_ANNOTATION],
    ):
        patch_annotations(
            ns_admin, namespace, {names.NETWORKS_ANNOTATION: networks, "example.com/owner": "team-a"}
        )
        assert annotations(api, namespace)[names.NETWORKS_ANNOTATION] == networks
    assert (
        annotations(api, namespace)[names.MANAGED_NETWORKS_ANNOTATION]
        == before[names.MANAGED_NETWORKS_ANNOTATION]
    )


def _kubectl(control_plane: Any, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(binaries.find("kubectl")),
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--as",
            NS_ADMIN,
            *args,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_kubectl_apply_and_server_side_apply_of_a_workload_pass_and_a_manifest_rewriting_networks_is_refused(
    api: client.ApiClient,
    control_plane: Any,
    plugin: ClusterPlugin,
    namespace: str,
    ns_admin: client.ApiClient,
    policy: Any,
) -> None:
    plugin.publish_mapping(namespace)
    apply.apply_objects(api, [pairs_template(namespace)])
    manifest = workload_pod(
        POD, plugin.node.name, [{"name": "devices", "resourceClaimTemplateName": "gpu-nic-pairs"}]
    )
    manifest["metadata"]["namespace"] = namespace
    manifest["metadata"]["annotations"] = {"example.com/owner": "team-a"}
    created = _kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    assert created.returncode == 0, created.stderr
    ref = plugin.claim_ref(namespace, POD)
    assert isinstance(plugin.prepare(ref), messages.Prepared)
    prepared_annotations = annotations(api, namespace)

    manifest["metadata"]["labels"]["tier"] = "gold"
    manifest["metadata"]["annotations"]["example.com/owner"] = "team-b"
    again = _kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    assert again.returncode == 0, again.stderr
    manifest["metadata"]["labels"]["tier"] = "silver"
    # server-side apply taking the declared fields over from client-side apply (the usual migration)
    ssa = _kubectl(
        control_plane,
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=team-a",
        "-f",
        "-",
        stdin=yaml.safe_dump(manifest),
    )
    assert ssa.returncode == 0, ssa.stderr
    live = annotations(api, namespace)
    for key in (names.NETWORKS_ANNOTATION, names.MANAGED_NETWORKS_ANNOTATION):
        assert live[key] == prepared_annotations[key]
    assert live["example.com/owner"] == "team-b"
    assert client.CoreV1Api(api).read_namespaced_pod(POD, namespace).metadata.labels["tier"] == "silver"

    # A manifest that declares its own networks value would reset the annotation to it on every
    # apply (the three-way merge writes every declared field that differs), dropping the plugin's
    # entries: refused, with the message, and nothing changes.
    manifest["metadata"]["annotations"][names.NETWORKS_ANNOTATION] = (
        '[{"name":"user-net","interface":"net1"}]'
    )
    rewrite = _kubectl(control_plane, "apply", "-f", "-", stdin=yaml.safe_dump(manifest))
    assert rewrite.returncode != 0
    assert f"annotation {names.NETWORKS_ANNOTATION} must keep every selection the registry" in rewrite.stderr
    assert f"; {NS_ADMIN} may not" in rewrite.stderr
    assert (
        annotations(api, namespace)[names.NETWORKS_ANNOTATION]
        == prepared_annotations[names.NETWORKS_ANNOTATION]
    )
    release(api, plugin, namespace, ref)


# ------------------------------------------------------------ the lifecycle writes all pass
def test_the_plugins_prepare_and_release_writes_pass_the_policy(
    api: client.ApiClient, plugin: ClusterPlugin, namespace: str, policy: Any
) -> None:
    ref = prepared(api, plugin, namespace)
    shadows = nads_in(api, namespace)
    assert len(shadows) == 2
    assert all(s["metadata"]["finalizers"] == [names.FINALIZER_ATTACHMENT_PROTECTION] for s in shadows)
    assert names.MANAGED_NETWORKS_ANNOTATION in annotations(api, namespace)
    release(api, plugin, namespace, ref)
    after = annotations(api, namespace)
    assert names.MANAGED_NETWORKS_ANNOTATION not in after and names.NETWORKS_ANNOTATION not in after


def test_the_repair_workers_restorations_pass_the_policy(workload: Workload) -> None:
    api, plugin, namespace, _ns_admin, _ref = workload
    before = annotations(api, namespace)
    first, second = sorted(nads_in(api, namespace), key=lambda s: s["metadata"]["name"])
    # cluster-admin (a binding manager) tampers: registry and selections gone, one finalizer gone,
    # the other shadow deleted outright
    patch_annotations(
        api, namespace, {names.NETWORKS_ANNOTATION: None, names.MANAGED_NETWORKS_ANNOTATION: None}
    )
    patch_nad(api, namespace, first["metadata"]["name"], {"metadata": {"finalizers": None}})
    patch_nad(api, namespace, second["metadata"]["name"], {"metadata": {"finalizers": None}})
    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        NAD_GROUP, NAD_VERSION, namespace, NADS, second["metadata"]["name"]
    )
    eventually(
        "the worker restored everything as the plugin",
        lambda: (
            plugin.worker().run_once(),
            annotations(api, namespace).get(names.NETWORKS_ANNOTATION) == before[names.NETWORKS_ANNOTATION]
            and len(s := nads_in(api, namespace)) == 2
            and all(o["metadata"].get("finalizers") == [names.FINALIZER_ATTACHMENT_PROTECTION] for o in s),
        )[1],
    )
    assert names.MANAGED_NETWORKS_ANNOTATION in annotations(api, namespace)


def test_the_plugin_identity_of_another_node_is_refused(workload: Workload, control_plane: Any) -> None:
    api, plugin, namespace, _ns_admin, _ref = workload
    other = _as(control_plane, PLUGIN_USER, node="another-node")
    shadow = nads_in(api, namespace)[0]
    try:
        message = refusal(
            lambda: patch_annotations(other, namespace, {names.MANAGED_NETWORKS_ANNOTATION: None})
        )
        assert_names_who(message, f"Pod {namespace}/{POD}", plugin.node.name, PLUGIN_USER)
        message = refusal(
            lambda: patch_nad(
                other, namespace, shadow["metadata"]["name"], {"metadata": {"finalizers": None}}
            )
        )
        assert_names_who(
            message,
            f"NetworkAttachmentDefinition {namespace}/{shadow['metadata']['name']}",
            plugin.node.name,
            PLUGIN_USER,
        )
        without_node = _as(control_plane, PLUGIN_USER)
        try:
            refusal(
                lambda: patch_annotations(without_node, namespace, {names.MANAGED_NETWORKS_ANNOTATION: None})
            )
        finally:
            without_node.close()
    finally:
        other.close()


def test_gc_orphan_propagation_passes_and_the_release_completes(workload: Workload) -> None:
    api, plugin, namespace, _ns_admin, ref = workload
    client.CoreV1Api(api).delete_namespaced_pod(
        POD, namespace, grace_period_seconds=0, propagation_policy="Orphan"
    )
    eventually(
        "the garbage collector removed the owner references",
        lambda: (s := nads_in(api, namespace)) and all(not o["metadata"].get("ownerReferences") for o in s),
    )
    release(api, plugin, namespace, ref)


def test_gc_background_deletion_passes_and_the_release_completes(workload: Workload) -> None:
    api, plugin, namespace, _ns_admin, ref = workload
    client.CoreV1Api(api).delete_namespaced_pod(POD, namespace, grace_period_seconds=0)
    eventually(
        "the garbage collector deleted the shadows (held by the finalizer)",
        lambda: (s := nads_in(api, namespace)) and all(o["metadata"].get("deletionTimestamp") for o in s),
    )
    release(api, plugin, namespace, ref)


def test_namespace_deletion_completes_after_release(
    api: client.ApiClient, plugin: ClusterPlugin, policy: Any
) -> None:
    namespace = f"vap-terminate-{plugin.node.name}"
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    eventually(
        "its default ServiceAccount",
        lambda: core.list_namespaced_service_account(namespace, field_selector="metadata.name=default").items,
    )
    ref = prepared(api, plugin, namespace)
    client.CoreV1Api(api).delete_namespace(namespace)
    eventually(
        "the namespace controller deleted the shadows",
        lambda: (s := nads_in(api, namespace)) and all(o["metadata"].get("deletionTimestamp") for o in s),
    )
    assert plugin.unprepare(ref) is None
    eventually("namespace gone after release", lambda: gone(api, namespace), timeout_s=120)


# --------------------------------------------------------------------- the cleanup path
def test_orphans_apply_passes_for_a_binding_manager_and_is_refused_for_anyone_else(
    api: client.ApiClient,
    control_plane: Any,
    plugin: ClusterPlugin,
    namespace: str,
    policy: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ref = prepared(api, plugin, namespace)
    plugin.store.mark_managed_deleting(ref.uid)  # the kubelet released the host; only API work is left
    plugin.store.mark_managed_release_complete(ref.uid)
    rbac = f"admission-test-cleanup-{namespace}"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": rbac},
        "rules": [
            {"apiGroups": [NAD_GROUP], "resources": [NADS], "verbs": ["get", "list", "patch", "delete"]},
            {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list"]},
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": rbac},
        "subjects": [
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": u}
            for u in ("cleanup-admin", "helpdesk")
        ],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": rbac},
    }
    apply.apply_objects(api, [role, binding])
    try:
        # Client-certificate users of the lab CA (the lab's stack issues its kubeconfigs the same way).
        helpdesk = control_plane._kubeconfig(f"helpdesk-{namespace}", "helpdesk")
        status, _ = orphans_run(control_plane, plugin, "--kubeconfig", str(helpdesk), "--apply")
        err = capsys.readouterr().err
        assert status == 1 and "sriov-dra orphans: --apply stopped:" in err and POLICY in err, err
        assert len(nads_in(api, namespace)) == 2  # the same RBAC, refused by the policy: nothing finalized
        manager = control_plane._kubeconfig(
            f"cleanup-admin-{namespace}", "cleanup-admin", ("sriov-dra:binding-managers",)
        )
        status, text = orphans_run(control_plane, plugin, "--kubeconfig", str(manager), "--apply")
        assert status == 0 and text.count("applied:") == 2, text
        eventually("released shadows gone", lambda: nads_in(api, namespace) == [])
    finally:
        client.RbacAuthorizationV1Api(api).delete_cluster_role_binding(rbac)
        client.RbacAuthorizationV1Api(api).delete_cluster_role(rbac)
