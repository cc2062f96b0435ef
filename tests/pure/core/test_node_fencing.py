"""Tests of sriov_dra.core.plugin.node_fencing: when a lost node may be recovered."""

from __future__ import annotations

import pytest

from sriov_dra.core.plugin import node_fencing as fencing
from sriov_dra_rules import errors

TAINT = fencing.OUT_OF_SERVICE_TAINT


def node(ready: str, *taints: str) -> fencing.NodeState:
    return fencing.NodeState(name="worker-b", uid="u", ready=ready, taints=taints)


def plugin_pod(ready: bool, terminating: bool = False) -> fencing.PluginPod:
    return fencing.PluginPod("dra-driver-sriov", "sriov-dra-plugin-x", ready, terminating)


@pytest.mark.parametrize(
    ("state", "pods"),
    [
        (node("Unknown", TAINT), []),
        (node("False", "node.kubernetes.io/unreachable", TAINT), [plugin_pod(False)]),
        (node("", TAINT), [plugin_pod(True, terminating=True)]),
        (None, []),
        (None, [plugin_pod(False)]),
    ],
    ids=[
        "tainted-unknown",
        "tainted-not-ready-plugin-not-ready",
        "plugin-terminating",
        "node-deleted",
        "deleted-plugin-gone",
    ],
)
def test_a_fenced_silent_node_may_be_recovered(
    state: fencing.NodeState | None, pods: list[fencing.PluginPod]
) -> None:
    assert fencing.refusals("worker-b", state, pods) == []
    fencing.check_fenced("worker-b", state, pods)


@pytest.mark.parametrize(
    ("state", "pods", "paths"),
    [
        (node("True", TAINT), [], ["Node worker-b status.conditions[Ready]"]),
        (node("Unknown"), [], ["Node worker-b spec.taints"]),
        (node("Unknown", "node.kubernetes.io/unreachable"), [], ["Node worker-b spec.taints"]),
        (
            node("Unknown", TAINT),
            [plugin_pod(True)],
            ["Pod dra-driver-sriov/sriov-dra-plugin-x status.conditions[Ready]"],
        ),
        (None, [plugin_pod(True)], ["Pod dra-driver-sriov/sriov-dra-plugin-x status.conditions[Ready]"]),
        (
            node("True"),
            [plugin_pod(True)],
            [
                "Node worker-b status.conditions[Ready]",
                "Node worker-b spec.taints",
                "Pod dra-driver-sriov/sriov-dra-plugin-x status.conditions[Ready]",
            ],
        ),
    ],
    ids=[
        "node-ready",
        "not-fenced",
        "only-unreachable",
        "plugin-answers",
        "deleted-node-plugin-answers",
        "all-at-once",
    ],
)
def test_recovery_is_refused_with_every_reason_at_once(
    state: fencing.NodeState | None, pods: list[fencing.PluginPod], paths: list[str]
) -> None:
    with pytest.raises(errors.LifecycleBlocked) as info:
        fencing.check_fenced("worker-b", state, pods)
    assert info.value.reason is errors.Reason.NODE_NOT_FENCED
    assert [e.path for e in info.value.errors] == paths
    assert "nothing was changed" in str(info.value)


def test_the_unfenced_refusal_says_how_to_fence() -> None:
    [problem] = fencing.refusals("worker-b", node("Unknown"), [])
    assert f"kubectl taint nodes worker-b {TAINT}=nodeshutdown:NoExecute" in problem.message
