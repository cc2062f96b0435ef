"""``vfs_from_policies`` plans from node policies only once they can exist, and says when none selects a node.

Against the real test control plane, the ``vfs`` role on this machine (an empty host tree: no PF) for a Node
object: while the cluster does not serve SriovNetworkNodePolicy the role refuses, naming the operator role
that installs it; once the operator's CRD is applied, a namespace without node policies and policies whose
``nodeSelector`` the node's labels do not match are each reported per node as "no policy selects this node",
naming the namespace read and the labels considered. ``playbooks/site.yml`` installs the operator before its
VF play.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from tests.ansible.conftest import LOCAL_PLAYBOOK, REPO, run

from sriov_dra.kube import apply

NODE = "sriovnet-vfs-policies-node"
NAMESPACE = "sriovnet-vfs-policies"
CRD = REPO / "roles/operator/files/manifests/crds/sriovnetwork.openshift.io_sriovnetworknodepolicies.yaml"
PLAYBOOK = f"""
- hosts: localhost
  gather_facts: false
  vars:
    vfs_from_policies: true
    vfs_node_name: {NODE}
    vfs_policy_namespace: {NAMESPACE}
    vfs_persist: false
    vfs_drain: false
    vfs_restart_plugin: false
  roles:
    - role: sriovnet.dra.vfs
"""


@pytest.fixture(scope="module")
def node(api: Any) -> Iterator[str]:
    """A labelled Node object (no kubelet) and the policy namespace; the node-policy CRD not served."""
    core = k8s.CoreV1Api(api)
    _delete_crd(api)
    core.create_node(k8s.V1Node(metadata=k8s.V1ObjectMeta(name=NODE, labels={"rail": "a"})))
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE)))
    try:
        yield NODE
    finally:
        core.delete_namespace(NAMESPACE)
        core.delete_node(NODE)


def _delete_crd(api: Any) -> None:
    """Remove the node-policy CRD another test of the session may have applied, and wait until it is gone."""
    ext = k8s.ApiextensionsV1Api(api)
    name = "sriovnetworknodepolicies.sriovnetwork.openshift.io"
    try:
        ext.delete_custom_resource_definition(name)
    except k8s.ApiException as exc:
        if exc.status != 404:
            raise
        return
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not _served(api):
            return
        time.sleep(0.2)
    raise AssertionError(f"CRD {name} was deleted, but its resource was still served after 60 s")


def _served(api: Any) -> bool:
    """Whether the API server still lists and serves SriovNetworkNodePolicy (the CRD object can be gone a
    moment before its discovery entry and its REST handler are)."""
    custom = k8s.CustomObjectsApi(api)
    try:
        listed = custom.get_api_resources("sriovnetwork.openshift.io", "v1")
    except k8s.ApiException as exc:
        if exc.status != 404:
            raise
    else:
        if any(r.name == "sriovnetworknodepolicies" for r in listed.resources or []):
            return True
    try:
        custom.list_namespaced_custom_object(
            "sriovnetwork.openshift.io", "v1", NAMESPACE, "sriovnetworknodepolicies"
        )
    except k8s.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
    try:
        api.call_api(
            f"/apis/sriovnetwork.openshift.io/v1/namespaces/{NAMESPACE}/sriovnetworknodepolicies", "GET",
            auth_settings=["BearerToken"], _return_http_data_only=True, _preload_content=False,
        )  # fmt: skip
    except k8s.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _run_role(control_plane: Any, ansible_env: dict[str, str], tmp_path: Path, *, check: bool) -> str:
    playbook = tmp_path / "vfs.yml"
    playbook.write_text(PLAYBOOK)
    root = tmp_path / "root"
    for sub in ("sys/bus/pci/devices", "sys/class/net"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    tmp = tmp_path / "tmp"  # kubernetes.core caches API discovery in the temp directory, per server and user:
    tmp.mkdir(exist_ok=True)  # a fresh one, or a run of the session that saw the CRD makes it look served
    env = {**ansible_env, "K8S_AUTH_KUBECONFIG": str(control_plane.kubeconfig), "TMPDIR": str(tmp)}
    done = run([*LOCAL_PLAYBOOK, "-e", f"vfs_host_root={root}", str(playbook)], env, check=check)
    return " ".join(done.stdout.split())  # folded messages read as one line


def test_site_installs_the_operator_before_the_vf_play_reads_node_policies() -> None:
    plays = yaml.safe_load((REPO / "playbooks" / "site.yml").read_text())
    roles = [[r["role"] for r in play.get("roles", [])] for play in plays]
    operator = next(i for i, names in enumerate(roles) if "sriovnet.dra.operator" in names)
    vfs = next(i for i, names in enumerate(roles) if "sriovnet.dra.vfs" in names)
    assert operator < vfs, roles


def test_vfs_from_policies_refuses_before_the_crd_then_says_which_policies_do_not_select_the_node(
    control_plane: Any, api: Any, node: str, ansible_env: dict[str, str], tmp_path: Path
) -> None:
    refused = _run_role(control_plane, ansible_env, tmp_path, check=False)
    assert (
        f"the cluster does not serve SriovNetworkNodePolicy (sriovnetwork.openshift.io/v1), so no VF could be "
        f"planned for {NODE}: its CRD is installed by the sriovnet.dra.operator role" in refused
    ), refused[-3000:]
    assert "failed=1" in refused

    crds = [d for d in yaml.safe_load_all(CRD.read_text()) if d]
    apply.apply_objects(api, crds)
    apply.wait_crds_established(api, [d["metadata"]["name"] for d in crds])
    try:
        empty = _run_role(control_plane, ansible_env, tmp_path, check=True)
        assert (
            f"no policy selects this node: node {NODE}, node labels considered: rail=a; namespace {NAMESPACE} "
            "holds no SriovNetworkNodePolicy" in empty
        ), empty[-3000:]

        k8s.CustomObjectsApi(api).create_namespaced_custom_object(
            "sriovnetwork.openshift.io",
            "v1",
            NAMESPACE,
            "sriovnetworknodepolicies",
            {
                "apiVersion": "sriovnetwork.openshift.io/v1",
                "kind": "SriovNetworkNodePolicy",
                "metadata": {"name": "rail-b"},
                "spec": {
                    "resourceName": "rail_b",
                    "nodeSelector": {"rail": "b"},
                    "numVfs": 4,
                    "nicSelector": {"pfNames": ["ens1f0"]},
                },
            },
        )
        unmatched = _run_role(control_plane, ansible_env, tmp_path, check=True)
        assert (
            f"no policy selects this node: node {NODE}, node labels considered: rail=a; none of the "
            f"SriovNetworkNodePolicies in namespace {NAMESPACE} ({NAMESPACE}/rail-b) has a nodeSelector these "
            "labels match" in unmatched
        ), unmatched[-3000:]
    finally:
        _delete_crd(api)
