"""``ansible-playbook sriovnet.dra.cleanup`` against the real test control plane, with the admission policy on.

The plugin role (no DaemonSet) installs the plugin's RBAC and the admission policy. While the
node's durable checkpoint (``checkpoint.slots``, its readable copy removed) holds a managed binding,
or while a shadow
NAD still carries the protection finalizer the playbook refuses and removes nothing, the policy
included. Once the shadow is released (the finalizer removed by cluster-admin, a binding manager,
as the plugin would), the playbook passes through the policy with the admin's kubeconfig and
removes the policy, its binding and its ClusterRoles with the rest of the plugin's RBAC, and the
guard's shim with every version of its rules from the node's CNI bin directory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from tests.ansible.conftest import existing, node_inventory, run
from tests.fakes import checkpoint_records as fx

from sriov_dra.guard import install
from sriov_dra.host import checkpoint as store_mod
from sriov_dra_rules import checkpoint_doc, names

NAMESPACE = "sriovnet-cleanup-playbook"
POLICY = "sriov-dra-binding-protection"
SHADOW = "dra-sriov-" + "c" * 32


def _policy_objects(api: Any) -> list[str]:
    """Which of the policy, its binding and its two ClusterRoles exist."""
    admission, rbac = k8s.AdmissionregistrationV1Api(api), k8s.RbacAuthorizationV1Api(api)
    reads = {
        "ValidatingAdmissionPolicy": lambda: admission.read_validating_admission_policy(POLICY),
        "ValidatingAdmissionPolicyBinding": lambda: admission.read_validating_admission_policy_binding(
            POLICY
        ),
        "ClusterRole/sriov-dra-binding-node-writer": lambda: rbac.read_cluster_role(
            "sriov-dra-binding-node-writer"
        ),
        "ClusterRole/sriov-dra-binding-manager": lambda: rbac.read_cluster_role("sriov-dra-binding-manager"),
    }
    return existing(reads)


def test_cleanup_refuses_while_a_shadow_is_protected_then_removes_the_policy_with_the_rbac(
    control_plane: Any, api: Any, ansible_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**ansible_env, "K8S_AUTH_KUBECONFIG": str(control_plane.kubeconfig)}
    inventory = node_inventory(tmp_path / "inventory.yml")
    setup = tmp_path / "setup.yml"
    setup.write_text(
        "- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: sriovnet.dra.plugin\n"
        f"      plugin_namespace: {NAMESPACE}\n      plugin_deploy_daemonset: false\n"
    )
    run(["ansible-playbook", "-i", str(inventory), str(setup)], env)
    assert len(_policy_objects(api)) == 4
    (tmp_path / "net.d").mkdir()
    bin_dir = tmp_path / "bin"
    install.write_shim(bin_dir, interpreter="/usr/bin/python3")  # what the guard's init container leaves
    (bin_dir / "host-local").write_text("not the guard's")
    extra = tmp_path / "vars.json"
    extra.write_text(
        json.dumps(
            {
                "cleanup_plugin_namespace": NAMESPACE,
                "cleanup_guard_namespace": NAMESPACE,
                "cleanup_operator_namespace": NAMESPACE,
                "cleanup_guard_cni_conf_dir": str(tmp_path / "net.d"),
                "cleanup_guard_cni_bin_dir": str(bin_dir),
                "cleanup_checkpoint_missing_ok": True,  # no plugin ran here
            }
        )
    )
    cleanup = ["ansible-playbook", "-i", str(inventory), "-e", f"@{extra}"]
    cleanup += [
        "-e",
        f"cleanup_checkpoint={tmp_path / 'no-plugin' / 'checkpoint.json'}",
        "sriovnet.dra.cleanup",
    ]
    prepared = tmp_path / "plugin" / checkpoint_doc.CHECKPOINT_FILE_NAME
    prepared.parent.mkdir()
    store = store_mod.CheckpointStore(prepared)
    store.load()
    binding = store.set_claim(fx.record()).devices[0].managed
    store.close()
    assert binding is not None
    prepared.unlink()  # only the durable checkpoint.slots is left
    two_nodes = tmp_path / "two-nodes.yml"  # node-a still holds a binding, node-b never ran the plugin
    two_nodes.write_text(
        "all:\n  children:\n    sriov_dra_nodes:\n      hosts:\n"
        + "".join(
            f"        {host}:\n          ansible_connection: local\n"
            f"          ansible_python_interpreter: {sys.executable}\n          cleanup_checkpoint: {path}\n"
            for host, path in (("node-a", prepared), ("node-b", tmp_path / "none" / "checkpoint.json"))
        )
    )
    node_held = run(
        ["ansible-playbook", "-i", str(two_nodes), "-e", f"@{extra}", "sriovnet.dra.cleanup"],
        env,
        check=False,
    )
    assert node_held.returncode != 0
    assert (
        f"node-a still has 1 managed binding(s) in {prepared.with_name(checkpoint_doc.SLOTS_FILE_NAME)} "
        f"({binding.shadow_namespace}/{binding.shadow_name})"
    ) in node_held.stdout
    assert "Remove the operator" not in node_held.stdout  # node-b did not go on alone
    limited = run(
        [
            "ansible-playbook",
            "-i",
            str(two_nodes),
            "--limit",
            "node-b",
            "-e",
            f"@{extra}",
            "sriovnet.dra.cleanup",
        ],
        env,
        check=False,
    )
    assert limited.returncode != 0  # node-a's checkpoint would never be read
    assert "so it runs on every node of sriov_dra_nodes: node-a would be neither checked" in limited.stdout
    assert len(_policy_objects(api)) == 4  # nothing was removed
    assert (bin_dir / "multus-guard").exists()
    custom = k8s.CustomObjectsApi(api)
    shadow = {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {
            "name": SHADOW,
            "namespace": NAMESPACE,
            "labels": {names.LABEL_MANAGED_BY: names.MANAGED_BY_VALUE},
            "finalizers": [names.FINALIZER_ATTACHMENT_PROTECTION],
        },
        "spec": {"config": "{}"},
    }
    custom.create_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", NAMESPACE, "network-attachment-definitions", shadow
    )
    try:
        refused = run(cleanup, env, check=False)
        assert refused.returncode != 0
        assert (
            f"shadow NADs {NAMESPACE}/{SHADOW} still carry {names.FINALIZER_ATTACHMENT_PROTECTION}"
            in refused.stdout
        )
        assert len(_policy_objects(api)) == 4  # nothing was removed
        assert (bin_dir / "multus-guard").exists()
    finally:
        custom.patch_namespaced_custom_object(
            "k8s.cni.cncf.io",
            "v1",
            NAMESPACE,
            "network-attachment-definitions",
            SHADOW,
            {"metadata": {"finalizers": None}},
        )  # as cluster-admin, a binding manager; the policy lets it through
    custom.delete_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", NAMESPACE, "network-attachment-definitions", SHADOW
    )
    try:
        passed = run(cleanup, env)
        assert "failed=0" in passed.stdout
        assert _policy_objects(api) == []
        assert sorted(p.name for p in bin_dir.iterdir()) == ["host-local"]  # no shim, no rules version left
    finally:
        k8s.CoreV1Api(api).delete_namespace(NAMESPACE, propagation_policy="Background")
