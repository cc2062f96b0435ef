"""100 Pod create/delete cycles leave nothing behind: no shadow and no IPAM leak
(docs/design.md#completion).

25 rounds of 4 Pods (two per node, one VF each, any rail: rail A through whereabouts, rail B
through host-local) are created, run with their VF attached, and deleted; afterwards no shadow,
finalizer, selection, checkpoint record, CDI file, IP reservation, kubelet claim or sandbox is
left, and every lab VF is back in its node namespace.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client
from tests.e2e.helpers import (
    SRIOV_CLASS,
    claim_template,
    in_namespace,
    interfaces,
    template,
    vf_pod,
    wait_clean,
)

from sriov_dra_lab import workloads

ROUNDS = 25
PODS_PER_ROUND = 4


@pytest.mark.timeout(1500)  # 100 real CNI ADD/DEL pairs; about 4 minutes on an idle 2-core machine
def test_hundred_create_delete_cycles_leak_nothing(lab: Any, rails: Any, namespace: str) -> None:
    admin = in_namespace(
        namespace,
        template("rail-a-net", f"{namespace}-a", {"type": "whereabouts", "range": "10.92.0.0/24"}),
        template(
            "rail-b-net", f"{namespace}-b", {"type": "host-local", "ranges": [[{"subnet": "10.93.0.0/24"}]]}
        ),
        claim_template("any-vf", [("vf", SRIOV_CLASS)]),
    )
    workloads.apply_docs(lab.api, admin)
    core = client.CoreV1Api(lab.api)
    started = time.monotonic()
    cycles = 0
    for round_ in range(ROUNDS):
        pods = in_namespace(
            namespace,
            *(
                vf_pod(f"churn-{round_}-{i}", "any-vf", node=lab.nodes[i % len(lab.nodes)].name)
                for i in range(PODS_PER_ROUND)
            ),
        )
        workloads.apply_docs(lab.api, pods)
        for pod in pods:
            running = workloads.wait_running(lab.api, namespace, pod["metadata"]["name"])
            assert interfaces(lab, running).get("dra0"), (
                f"round {round_}: {pod['metadata']['name']} has its VF"
            )
        workloads.delete_docs(lab.api, pods)
        cycles += len(pods)
    assert cycles == 100
    assert not core.list_namespaced_pod(namespace).items
    found = wait_clean(lab)
    assert found.empty, f"after {cycles} cycles in {time.monotonic() - started:.0f}s:\n{found.describe()}"
