"""A rollout that does not finish fails with its Pods' reasons, not with the objects.

The operator role against the real test control plane, whose scheduler has no Node to place the
Deployment's Pods on: the rollout wait ends after its timeout and the task names the Deployment, its
counts and each Pod's reason (the scheduler's message), in a few hundred characters instead of the
kilobytes of JSON ``kubernetes.core.k8s``'s own wait prints.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from tests.ansible.conftest import LOCAL_PLAYBOOK, run

NAMESPACE = "sriovnet-rollout-reasons"
PLAYBOOK = f"""
- hosts: localhost
  gather_facts: false
  roles:
    - role: sriovnet.dra.operator
      operator_namespace: {NAMESPACE}
      operator_image: "localhost/sriov-dra:0.1.0@sha256:{"0" * 63}7"
      operator_replicas: 1
      operator_wait_timeout: 15
"""


def test_an_unfinished_rollout_names_each_pods_reason_in_one_short_message(
    control_plane: Any, api: Any, ansible_env: dict[str, str], tmp_path: Path
) -> None:
    playbook = tmp_path / "operator.yml"
    playbook.write_text(PLAYBOOK)
    env = {**ansible_env, "K8S_AUTH_KUBECONFIG": str(control_plane.kubeconfig)}
    try:
        done = run([*LOCAL_PLAYBOOK, str(playbook)], env, check=False)
    finally:
        k8s.CoreV1Api(api).delete_namespace(NAMESPACE, propagation_policy="Background")
    assert done.returncode != 0
    [message] = re.findall(r'"msg": "(Deployment .*?)"\}?\n', done.stdout)
    assert message.startswith(
        f"Deployment {NAMESPACE}/sriov-dra-operator did not finish its rollout (1 of 1 replicas up to date, 0 ready): "
        f"Pod {NAMESPACE}/sriov-dra-operator-"
    ), message
    assert ": not scheduled: " in message and message.endswith("; waited 15 s"), message
    assert len(message) < 600
    assert "Timed out waiting on resource" not in done.stdout
