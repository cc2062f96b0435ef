"""``ansible-playbook sriovnet.dra.recover_node`` against the real test control plane (no kubelet).

Without a node name or a pinned image the playbook refuses before it creates anything. With both,
it grants its ServiceAccount what recovery needs and starts the run's Pod; this control plane has
no kubelet, so the Pod never runs: the playbook says so with the Pod's phase after its timeout,
and its run's Pod, ServiceAccount, ClusterRole and bindings are gone afterwards, as they are after
every run. The run itself (a killed lab node recovered through this playbook) is
``tests/e2e/test_lost_node.py``.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s
from tests.ansible.conftest import LOCAL_PLAYBOOK, REPO, existing, run

NAMESPACE = "sriovnet-recover-node-playbook"
IMAGE = f"localhost/sriov-dra:0.1.0@sha256:{'0' * 63}7"
PLAYBOOK = str(REPO / "playbooks" / "recover_node.yml")


def _left(api: Any) -> list[str]:
    """Which of the run's objects exist."""
    core, rbac = k8s.CoreV1Api(api), k8s.RbacAuthorizationV1Api(api)
    reads = {
        "Pod": lambda: core.read_namespaced_pod("sriov-dra-recover-node", NAMESPACE),
        "ServiceAccount": lambda: core.read_namespaced_service_account("sriov-dra-recover-node", NAMESPACE),
        "ClusterRole": lambda: rbac.read_cluster_role("sriov-dra-recover-node"),
        "ClusterRoleBinding": lambda: rbac.read_cluster_role_binding("sriov-dra-recover-node"),
        "ClusterRoleBinding/binding-manager": lambda: rbac.read_cluster_role_binding(
            "sriov-dra-recover-node-binding-manager"
        ),
    }
    return existing(reads)


def test_recover_node_playbook_refuses_without_a_node_or_pinned_image_and_leaves_nothing_after_a_run(
    control_plane: Any, api: Any, ansible_env: dict[str, str]
) -> None:
    env = {**ansible_env, "K8S_AUTH_KUBECONFIG": str(control_plane.kubeconfig)}
    k8s.CoreV1Api(api).create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE)))
    try:
        base = [*LOCAL_PLAYBOOK, "-e", f"recover_node_namespace={NAMESPACE}"]
        refused = run([*base, "-e", f"recover_node_image={IMAGE}", PLAYBOOK], env, check=False)
        assert (
            refused.returncode != 0
            and "set recover_node_name to the lost node's Kubernetes name" in refused.stdout
        )
        unpinned = ["-e", "recover_node_name=worker-9", "-e", "recover_node_image=localhost/sriov-dra:0.1.0"]
        refused = run([*base, *unpinned, PLAYBOOK], env, check=False)
        assert refused.returncode != 0 and "Nothing was changed" in refused.stdout
        assert _left(api) == []

        pinned = ["-e", "recover_node_name=worker-9", "-e", f"recover_node_image={IMAGE}"]
        timed_out = run([*base, *pinned, "-e", "recover_node_timeout=4", PLAYBOOK], env, check=False)
        assert timed_out.returncode != 0, timed_out.stdout[-4000:]
        assert "did not finish in 4 s: phase Pending" in timed_out.stdout, timed_out.stdout[-4000:]
        assert "its grants are removed" in timed_out.stdout
        assert _left(api) == []
    finally:
        k8s.CoreV1Api(api).delete_namespace(NAMESPACE)
