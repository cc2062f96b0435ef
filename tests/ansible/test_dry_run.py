"""Server-side dry run of every role's cluster objects against the real test control plane.

Check mode (``--check``) of ``kubernetes.core.k8s`` is a server dry run, so running the cluster parts of the
``multus`` (thick and thin), ``guard``, ``plugin`` and ``operator`` roles in check mode sends every
rendered template and shipped manifest through the API server's validation and admission
without persisting anything.
"""

from __future__ import annotations

from pathlib import Path

from kubernetes import client as k8s
from tests.ansible.conftest import LOCAL_PLAYBOOK, run

NAMESPACE = "sriovnet-dry-run"
IMAGE = f"localhost/sriov-dra:0.1.0@sha256:{'0' * 63}5"
PLAYBOOK = f"""
- hosts: localhost
  gather_facts: false
  vars:
    sriov_dra_image: "{IMAGE}"
    multus_image: "ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0@sha256:{"0" * 63}6"
    multus_node: false
    multus_primary_cni: 10-flannel.conflist
    guard_node: false
    guard_primary_cni: 10-flannel.conflist
    guard_namespace: {NAMESPACE}
    plugin_namespace: {NAMESPACE}
    plugin_extended_resources: [rail_a, rail_b]
    operator_namespace: {NAMESPACE}
  tasks:
    - name: Multus thick
      ansible.builtin.include_role:
        name: sriovnet.dra.multus
      vars:
        multus_mode: thick
    - name: Multus thin
      ansible.builtin.include_role:
        name: sriovnet.dra.multus
      vars:
        multus_mode: thin
    - name: Guard
      ansible.builtin.include_role:
        name: sriovnet.dra.guard
    - name: Plugin
      ansible.builtin.include_role:
        name: sriovnet.dra.plugin
    - name: Operator
      ansible.builtin.include_role:
        name: sriovnet.dra.operator
"""


def test_every_role_manifest_passes_a_server_dry_run(control_plane, api, ansible_env, tmp_path: Path) -> None:
    core = k8s.CoreV1Api(api)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE)))
    try:
        playbook = tmp_path / "dry-run.yml"
        playbook.write_text(PLAYBOOK)
        env = {**ansible_env, "K8S_AUTH_KUBECONFIG": str(control_plane.kubeconfig)}
        proc = run(
            [*LOCAL_PLAYBOOK, "--check", str(playbook)],
            env,
        )
        assert "failed=0" in proc.stdout
        # nothing was persisted
        apps = k8s.AppsV1Api(api)
        assert apps.list_namespaced_daemon_set(NAMESPACE).items == []
        assert apps.list_namespaced_deployment(NAMESPACE).items == []
        classes = k8s.ResourceV1Api(api).list_device_class().items
        assert [c.metadata.name for c in classes if c.spec.extended_resource_name] == []
        multus = [d.metadata.name for d in apps.list_namespaced_daemon_set("kube-system").items]
        assert "multus-thick" not in multus and "multus-thin" not in multus
    finally:
        core.delete_namespace(NAMESPACE, propagation_policy="Background")
