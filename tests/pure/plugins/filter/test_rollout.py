"""Tests for ``plugins/filter/rollout.py``: why a rollout did not finish, one line per Pod, from the Pods.

The Pod shapes are the kubelet's: an image pull backing off, a container crash-looping (its last log line
read from the previous instance), a container running but not ready, a Pod the scheduler could not place.
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sriovnet.dra.plugins.filter import rollout
from hypothesis import given
from hypothesis import strategies as st

DAEMONSET = {
    "kind": "DaemonSet",
    "metadata": {"namespace": "dra-driver-sriov", "name": "sriov-dra-plugin"},
    "status": {"desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberReady": 0},
}
PULL_MESSAGE = (
    'Back-off pulling image "registry.example.com/sriov-dra:0.1.0@sha256:' + "ab" * 32 + '": ErrImagePull: '
    "failed to resolve reference: not found"
)


def _pod(
    name: str, node: str | None, *statuses: dict[str, Any], ready: bool = False, **status: Any
) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}, *status.pop("conditions", [])]
    return {
        "metadata": {"namespace": "dra-driver-sriov", "name": name},
        "spec": {"nodeName": node} if node else {},
        "status": {
            "phase": "Pending",
            "conditions": conditions,
            "containerStatuses": list(statuses),
            **status,
        },
    }


PULLING = _pod(
    "sriov-dra-plugin-a", "worker-1",
    {"name": "plugin", "ready": False, "restartCount": 0,
     "state": {"waiting": {"reason": "ImagePullBackOff", "message": PULL_MESSAGE}}},
)  # fmt: skip
CRASHING = _pod(
    "sriov-dra-plugin-b", "worker-2",
    {"name": "plugin", "ready": False, "restartCount": 4,
     "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 1m20s restarting failed container"}},
     "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}},
)  # fmt: skip
UNREADY = _pod(
    "sriov-dra-plugin-c", "worker-3",
    {"name": "plugin", "ready": False, "restartCount": 0, "state": {"running": {"startedAt": "2026-12-06T00:00:00Z"}}},
)  # fmt: skip
UNSCHEDULED = _pod(
    "sriov-dra-operator-d", None,
    conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."}],
)  # fmt: skip
READY = _pod(
    "sriov-dra-plugin-e", "worker-4",
    {"name": "plugin", "ready": True, "state": {"running": {}}},
    ready=True,
)  # fmt: skip


def _log(pod: dict[str, Any], container: str, previous: bool, *lines: str) -> dict[str, Any]:
    target = {"namespace": "dra-driver-sriov", "pod": pod["metadata"]["name"], "container": container}
    return {"item": {**target, "previous": previous}, "log_lines": list(lines)}


def test_log_targets_are_the_crashed_containers_previous_instance_and_the_unready_ones_current_one() -> None:
    targets = rollout.sriov_rollout_log_targets([PULLING, CRASHING, UNREADY, UNSCHEDULED, READY])
    assert targets == [
        {
            "namespace": "dra-driver-sriov",
            "pod": "sriov-dra-plugin-b",
            "container": "plugin",
            "previous": True,
        },
        {
            "namespace": "dra-driver-sriov",
            "pod": "sriov-dra-plugin-c",
            "container": "plugin",
            "previous": False,
        },
    ]


def test_problems_name_each_pods_reason_and_the_crashed_containers_last_log_line() -> None:
    logs = [
        _log(
            CRASHING,
            "plugin",
            True,
            '{"msg": "starting"}',
            '{"level": "error", "msg": "cannot read /sys/bus/pci"}',
        ),
        _log(UNREADY, "plugin", False, '{"msg": "waiting for the kubelet to accept the registration"}'),
    ]
    text = rollout.sriov_rollout_problems([PULLING, CRASHING, UNREADY, UNSCHEDULED, READY], DAEMONSET, logs)
    assert text == (
        "DaemonSet dra-driver-sriov/sriov-dra-plugin did not finish its rollout (2 of 2 Pods up to date, 0 ready): "
        f"Pod dra-driver-sriov/sriov-dra-plugin-a on worker-1: container plugin ImagePullBackOff: {PULL_MESSAGE} | "
        "Pod dra-driver-sriov/sriov-dra-plugin-b on worker-2: container plugin CrashLoopBackOff (exit code 1, "
        '4 restarts); last log line: {"level": "error", "msg": "cannot read /sys/bus/pci"} | '
        "Pod dra-driver-sriov/sriov-dra-plugin-c on worker-3: container plugin running, not ready; last log line: "
        '{"msg": "waiting for the kubelet to accept the registration"} | '
        "Pod dra-driver-sriov/sriov-dra-operator-d: not scheduled: 0/2 nodes are available: 2 node(s) didn't "
        "match Pod's node affinity/selector."
    )


def test_a_log_that_could_not_be_read_gives_the_reason_alone() -> None:
    failed_read = {"item": {"namespace": "dra-driver-sriov", "pod": "sriov-dra-plugin-b", "container": "plugin"},
                   "failed": True, "msg": "previous terminated container not found"}  # fmt: skip
    text = rollout.sriov_rollout_problems([CRASHING], DAEMONSET, [failed_read])
    assert text.endswith("container plugin CrashLoopBackOff (exit code 1, 4 restarts)")


def test_a_deployment_counts_replicas_and_a_finished_set_of_ready_pods_says_so() -> None:
    deployment = {
        "kind": "Deployment",
        "metadata": {"namespace": "sriov-network-operator", "name": "sriov-dra-operator"},
        "spec": {"replicas": 2},
        "status": {"updatedReplicas": 1, "readyReplicas": 2},
    }
    assert rollout.sriov_rollout_problems([READY], deployment, []) == (
        "Deployment sriov-network-operator/sriov-dra-operator did not finish its rollout (1 of 2 replicas up to "
        "date, 2 ready); every Pod it has is ready (the rollout was still replacing Pods when the wait ended)"
    )


def test_a_kubelet_message_of_any_length_is_cut_to_one_short_line() -> None:
    long = _pod(
        "p", "n", {"name": "c", "state": {"waiting": {"reason": "ErrImagePull", "message": "x\n" * 5000}}}
    )
    text = rollout.sriov_rollout_problems([long], None, [])
    assert len(text) < 2 * rollout.MAX_LINE and "\n" not in text


def test_pods_that_are_not_a_list_are_refused() -> None:
    with pytest.raises(AnsibleFilterError, match="a list"):
        rollout.sriov_rollout_problems({"items": []}, DAEMONSET)
    with pytest.raises(AnsibleFilterError, match="a list"):
        rollout.sriov_rollout_log_targets(None)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
STATUS_KEYS = st.sampled_from(["state", "lastState", "name", "ready", "restartCount"])
CONTAINER = st.dictionaries(STATUS_KEYS, JSON, max_size=5)
POD = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries({"name": st.text(max_size=10)}),
        "spec": st.dictionaries(st.just("nodeName"), JSON),
    },
    optional={"status": st.dictionaries(st.sampled_from(["phase", "conditions", "containerStatuses"]), JSON)},
)


@given(
    st.lists(
        POD
        | st.fixed_dictionaries(
            {"status": st.fixed_dictionaries({"containerStatuses": st.lists(CONTAINER)})}
        ),
        max_size=4,
    )
)
def test_any_pod_shape_gives_one_message_and_never_raises(pods: list[dict[str, Any]]) -> None:
    """What the API returns mid-rollout can lack any field; the message is still one line."""
    try:
        targets = rollout.sriov_rollout_log_targets(pods)
        text = rollout.sriov_rollout_problems(
            pods, DAEMONSET, [{"item": t, "log_lines": ["x"]} for t in targets]
        )
    except (
        AttributeError,
        TypeError,
    ) as exc:  # a non-dict where a dict belongs: the filter must say so instead
        pytest.fail(f"filter crashed on {pods!r}: {exc!r}")
    assert text.startswith("DaemonSet dra-driver-sriov/sriov-dra-plugin did not finish its rollout")
    assert "\n" not in text
