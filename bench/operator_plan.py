"""Benchmark: ``build_dra_policy_plan`` for 500 node policies × 100 nodes, as a ratio to a deep copy.

``bench_plan()`` builds a worst-case-sized operator inventory: 500 SriovNetworkNodePolicies (400
with a ``dra`` block referencing one of 100 ready SriovNetworks plus two custom attributes, 100
legacy ones over 10 resource pools), every policy selecting every one of 100 nodes with disjoint
PFs, so each node's SriovResourcePolicy carries 500 configs and the overlap check sees 124,750
policy pairs. It times the plan and, in the same run, ``copy.deepcopy`` of the same inputs
(policies, nodes and resolutions), and returns both: the ratio is what is comparable across
machines, the seconds are checked against :data:`GOAL_S`. Nothing here is a test assertion.

Run as a script (``make bench`` or ``.venv/bin/python bench/operator_plan.py``; the file is not named ``operator.py``
because a script of that name shadows the standard library's ``operator`` module).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.benchkit import timing

from sriov_dra.core.operator import dra_policy, network_refs, sriov_network

GOAL_S: Final = 2.0
"""The plan for 500 policies × 100 nodes must take at most this many seconds."""
POLICIES: Final = 500
NODES: Final = 100
NETWORKS: Final = 100
OP_NS: Final = "sriov-network-operator"


def inputs() -> tuple[
    list[dict[str, Any]], list[dict[str, Any]], dict[network_refs.ObjectRef, sriov_network.SourceResolution]
]:
    """The benchmark inventory (see the module docstring)."""
    policies: list[dict[str, Any]] = []
    for i in range(POLICIES):
        spec: dict[str, Any] = {
            "resourceName": f"pool_{i % 10}" if i >= 400 else "sriov_vfs",
            "nodeSelector": {"networking.example.com/dual-rail": "true"},
            "priority": i % 100,
            "numVfs": 16,
            "nicSelector": {"vendor": "15b3", "pfNames": [f"pf{i}"]},
            "deviceType": "netdevice",
            "linkType": "eth",
        }
        if i < 400:
            spec["dra"] = {
                "attributes": {
                    "sriovnetwork.openshift.io/sriovNetworkName": {"string": f"net-{i % NETWORKS}"},
                    "sriovnetwork.openshift.io/sriovNetworkNamespace": {"string": OP_NS},
                    "example.com/rail": {"string": f"rail-{i % 8}"},
                    "example.com/index": {"int": i},
                }
            }
        policies.append(
            {
                "metadata": {
                    "name": f"policy-{i:03d}",
                    "namespace": OP_NS,
                    "uid": f"{i:08x}-0000-4000-8000-000000000000",
                    "generation": 1,
                },
                "spec": spec,
            }
        )
    nodes = [
        {
            "metadata": {
                "name": f"node-{n:03d}",
                "labels": {
                    "kubernetes.io/hostname": f"node-{n:03d}",
                    "networking.example.com/dual-rail": "true",
                },
            }
        }
        for n in range(NODES)
    ]
    resolutions = {
        network_refs.ObjectRef(OP_NS, f"net-{k}"): sriov_network.SourceResolution(
            network_refs.ObjectRef(OP_NS, f"net-{k}"),
            network_refs.ObjectRef("ai-workloads", f"net-{k}"),
            None,
            "",
        )
        for k in range(NETWORKS)
    }
    return policies, nodes, resolutions


def bench_plan(*, repeats: int = 3) -> tuple[float, float]:
    """Return ``(plan seconds, plan / deepcopy ratio)``, best of ``repeats`` each, measured now."""
    policies, nodes, resolutions = inputs()
    settings = dra_policy.PlanSettings(namespace=OP_NS)

    def plan() -> object:
        result = dra_policy.build_dra_policy_plan(policies, nodes, resolutions, settings)
        assert len(result.resource_policies) == NODES and len(result.device_attributes) == 410
        return result

    def plain() -> object:
        return copy.deepcopy((policies, nodes, resolutions))

    plan_s = timing.best_per_call(plan, repeats=repeats)
    copy_s = timing.best_per_call(plain, repeats=repeats)
    return plan_s, plan_s / copy_s


def main() -> None:
    """Print the plan time, the ratio and whether the time meets :data:`GOAL_S`."""
    seconds, ratio = bench_plan()
    verdict = "meets" if seconds <= GOAL_S else "MISSES"
    print(
        f"build_dra_policy_plan({POLICIES} policies x {NODES} nodes): {seconds:.3f}s ({verdict} goal <= "
        f"{GOAL_S:.0f}s), {ratio:.1f}x a deepcopy of the same inputs"
    )


if __name__ == "__main__":
    main()
