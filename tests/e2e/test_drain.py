"""Day-2 drain of a real lab node with the collection's playbook (docs/design.md#rollout).

``ansible-playbook sriovnet.dra.drain --limit lab-node-2`` with the lab's own inventory: modules run
inside the node's mount namespace (the inventory's interpreter wrapper), so the drain reads the
plugin's checkpoint where the plugin DaemonSet writes it, at the role's default path. A bare Pod
with a managed VF (refused by ``k8s_drain`` unless ``drain_force``) is deleted, the kubelet
unprepares its claim, the plugin releases the shadow, and the drain passes naming the durable
``checkpoint.slots``; nothing is left and the node stays cordoned until uncordoned.
"""

from __future__ import annotations

import subprocess
from typing import Any

from kubernetes import client
from tests.e2e.helpers import (
    SRIOV_CLASS,
    claim_template,
    in_namespace,
    on_pf,
    shadows_of,
    template,
    vf_pod,
    wait_clean,
)

from sriov_dra_lab import roles, workloads

CHECKPOINT_SLOTS = "/var/lib/kubelet/plugins/sriovnetwork.k8snetworkplumbingwg.io/checkpoint.slots"


def _drain(lab: Any, node: str, *extra: str) -> subprocess.CompletedProcess[str]:
    inventory = lab.workdir / "ansible" / "inventory.yml"
    env = roles.PlaybookRun(
        inventory.parent, inventory, kubeconfig=lab.cp.kubeconfig, limit=node, name="drain"
    ).env
    argv = ["ansible-playbook", "-i", str(inventory), "--limit", node, *extra, "sriovnet.dra.drain"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_drain_evicts_a_managed_pod_waits_for_the_plugins_release_and_leaves_nothing(
    lab: Any, rails: Any, namespace: str
) -> None:
    node = lab.nodes[1].name
    docs = in_namespace(
        namespace,
        template("rail-a-net", "rail-a", {"type": "host-local", "ranges": [[{"subnet": "10.91.0.0/24"}]]}),
        claim_template("one-rail-a", [("vf", SRIOV_CLASS)], selector=on_pf("ens1f0")),
        vf_pod("drained", "one-rail-a", node=node),
    )
    workloads.apply_docs(lab.api, docs)
    pod = workloads.wait_running(lab.api, namespace, "drained")
    assert len(shadows_of(lab, pod)) == 1
    core = client.CoreV1Api(lab.api)
    try:
        refused = _drain(lab, node, "-e", "drain_release_delay=1")
        assert refused.returncode != 0
        assert f"{namespace}/drained" in refused.stdout  # k8s_drain names the bare Pod it will not delete
        assert "Set drain_force=true to delete those Pods" in refused.stdout
        assert core.read_node(node).spec.unschedulable is not True  # the refusal changed nothing

        drained = _drain(lab, node, "-e", "drain_force=true", "-e", "drain_release_delay=1")
        assert drained.returncode == 0, drained.stdout[-4000:]
        assert f"{node} is drained: no managed binding in {CHECKPOINT_SLOTS}" in drained.stdout
        assert core.read_node(node).spec.unschedulable is True
        found = wait_clean(lab)
        assert found.empty, found.describe()
    finally:
        core.patch_node(node, {"spec": {"unschedulable": None}})
