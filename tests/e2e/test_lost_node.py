"""A lost node is fenced and recovered with the collection's playbook (docs/operations.md).

A Pod with a rail-A VF and a whereabouts address runs on lab node 2. The node then loses power
(``RealNode.power_off``: SIGKILL of its kubelet and containerd, then of the shims and containers
they leave behind). Once the node lifecycle controller reports it not Ready, recovery still refuses
(not fenced); fenced with the ``node.kubernetes.io/out-of-service`` taint, Kubernetes force-deletes
the node's Pods, their shadow stays ``Terminating`` under the protection finalizer, and so does
the workload namespace once deleted. ``sriov-dra recover-node`` (dry run) lists the shadow and its
address; the ``sriovnet.dra.recover_node`` playbook recovers it; the namespace goes, the address
leaves the pool, and a new Pod asking for a rail-A VF runs on node 1 with that very address
(whereabouts hands out the lowest free one).

The node stays dead, so the test runs after the rest of the e2e tier (``tests/ordering.py``). It
prints how long each phase took.
"""

from __future__ import annotations

import ipaddress
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.e2e.helpers import (
    SRIOV_CLASS,
    claim_template,
    in_namespace,
    interfaces,
    on_pf,
    shadows_of,
    template,
    vf_pod,
)

from sriov_dra.core.plugin import node_fencing
from sriov_dra.kube import objects, whereabouts
from sriov_dra_lab import roles, workloads
from sriov_dra_rules import names

pytestmark = pytest.mark.leaves_lab_node_dead


def _rail_a_address(lab: Any, pod: dict[str, Any]) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    [address] = [a for name, addrs in interfaces(lab, pod).items() if name.startswith("dra") for a in addrs]
    return ipaddress.ip_interface(address).ip


def _new_namespace(core: client.CoreV1Api, name: str) -> str:
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    workloads.eventually(
        f"ServiceAccount {name}/default",
        lambda: any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(name).items),
        timeout_s=30,
    )
    return name


def _allocations(lab: Any, podref: str) -> list[str]:
    """``pool/offset`` of every whereabouts allocation and reservation of ``podref``."""
    objs = objects.Objects(lab.api, field_manager="e2e")
    found = [
        f"{p['metadata']['name']}/{key}"
        for p in objs.list(whereabouts.IPPOOL).items
        for key, entry in (p["spec"].get("allocations") or {}).items()
        if entry.get("podref") == podref
    ]
    found += [
        f"reservation {o['metadata']['name']}"
        for o in objs.list(whereabouts.OVERLAPPING_RESERVATION).items
        if o["spec"].get("podref") == podref
    ]
    return found


def _sriov_dra(lab: Any, *argv: str) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).parent / "sriov-dra"), *argv, "--kubeconfig", str(lab.cp.kubeconfig)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def _playbook(lab: Any, node: str) -> subprocess.CompletedProcess[str]:
    inventory = lab.workdir / "ansible" / "inventory.yml"
    env = roles.PlaybookRun(
        inventory.parent, inventory, kubeconfig=lab.cp.kubeconfig, limit="localhost", name="recover-node"
    ).env
    argv = [
        "ansible-playbook",
        "-i",
        str(inventory),
        "-e",
        f"recover_node_name={node}",
        "sriovnet.dra.recover_node",
    ]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_a_killed_node_is_fenced_and_recovered_and_its_rail_served_by_the_other_node(
    lab: Any, rails: Any, namespace: str
) -> None:
    core = client.CoreV1Api(lab.api)
    dead, alive = lab.nodes[1], lab.nodes[0]
    assert dead.real is not None, "the e2e lab runs real nodes"
    network = f"lost-{uuid.uuid4().hex[:8]}"
    ipam = {"type": "whereabouts", "range": "10.94.0.0/24", "network_name": network}
    lost = _new_namespace(core, f"lost-node-{uuid.uuid4().hex[:6]}")

    def rail_a(ns: str, pod: str, node: str | None) -> list[dict[str, Any]]:
        return in_namespace(
            ns,
            template("rail-a-net", network, ipam),
            claim_template("rail-a-vf", [("vf", SRIOV_CLASS)], selector=on_pf("ens1f0")),
            vf_pod(pod, "rail-a-vf", node=node),
        )

    workloads.apply_docs(lab.api, rail_a(lost, "victim", dead.name))
    victim = workloads.wait_running(lab.api, lost, "victim")
    address = _rail_a_address(lab, victim)
    [shadow] = shadows_of(lab, victim)
    shadow_name = shadow["metadata"]["name"]
    assert len(_allocations(lab, f"{lost}/victim")) == 2  # the pool's allocation and its reservation

    phases: dict[str, float] = {}
    started = time.monotonic()
    dead.real.power_off()
    workloads.eventually(
        f"Node {dead.name} not Ready",
        lambda: (
            not any(
                c.type == "Ready" and c.status == "True" for c in core.read_node(dead.name).status.conditions
            )
        ),
        timeout_s=180,
    )
    phases["not Ready"] = time.monotonic() - started

    refused = _sriov_dra(lab, "recover-node", dead.name, "--apply")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "NodeNotFenced" in refused.stderr and node_fencing.OUT_OF_SERVICE_TAINT in refused.stderr

    taint = {"key": node_fencing.OUT_OF_SERVICE_TAINT, "value": "nodeshutdown", "effect": "NoExecute"}
    core.patch_node(dead.name, {"spec": {"taints": [*(core.read_node(dead.name).spec.taints or []), taint]}})
    fenced = time.monotonic()
    workloads.eventually(
        "the dead node's Pod force-deleted", lambda: not core.list_namespaced_pod(lost).items, timeout_s=120
    )
    phases["Pod force-deleted after the taint"] = time.monotonic() - fenced
    nads = objects.Objects(lab.api, field_manager="e2e")

    def shadow_held() -> bool:
        # The garbage collector deletes the shadow after its claim, a moment after the Pod: wait for it.
        held = nads.get(objects.NAD, shadow_name, lost)
        return bool(held["metadata"].get("deletionTimestamp"))

    workloads.eventually(f"shadow {lost}/{shadow_name} being deleted", shadow_held, timeout_s=60)
    held = nads.get(objects.NAD, shadow_name, lost)
    assert names.FINALIZER_ATTACHMENT_PROTECTION in held["metadata"]["finalizers"], held["metadata"]
    core.delete_namespace(lost)
    assert core.read_namespace(lost).status.phase == "Terminating"

    dry = _sriov_dra(lab, "recover-node", dead.name)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert shadow_name in dry.stdout and f"whereabouts: {address}" in dry.stdout and "dry run" in dry.stdout
    assert nads.get(objects.NAD, shadow_name, lost)["metadata"]["finalizers"]  # the dry run changed nothing

    recovering = time.monotonic()
    run = _playbook(lab, dead.name)
    assert run.returncode == 0, run.stdout[-6000:]
    assert shadow_name in run.stdout and "shadow deleted" in run.stdout
    phases["playbook"] = time.monotonic() - recovering

    def namespace_gone() -> bool:
        try:
            core.read_namespace(lost)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    workloads.eventually(f"namespace {lost} deleted", namespace_gone, timeout_s=180)
    phases["namespace deleted after the playbook"] = time.monotonic() - recovering
    assert _allocations(lab, f"{lost}/victim") == []

    replacing = time.monotonic()
    workloads.apply_docs(lab.api, rail_a(namespace, "successor", None))
    successor = workloads.wait_running(lab.api, namespace, "successor")
    assert successor["spec"]["nodeName"] == alive.name
    assert _rail_a_address(lab, successor) == address, (
        "the recovered address is free: whereabouts gives it again"
    )
    phases["new Pod running on the other node"] = time.monotonic() - replacing
    phases["total from power-off"] = time.monotonic() - started
    print("\nlost node recovery: " + ", ".join(f"{k} {v:.0f} s" for k, v in phases.items()))
