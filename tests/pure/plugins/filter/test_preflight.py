"""Tests for ``plugins/filter/preflight.py``'s auto-attach gate checks (``sriov_auto_attach_gate``) and its
comparison of the mode the plugin reports with the mode the gate wants (``sriov_auto_attach_mode_mismatch``)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sriovnet.dra.plugins.filter import preflight

from sriov_dra.core.plugin.auto_attach_gate import Mode
from sriov_dra_rules import names

IMAGE = f"registry.example.com/sriov-dra:0.1.0@sha256:{'a' * 64}"
MULTUS = f"registry.example.com/multus-cni:v4.3.0@sha256:{'b' * 64}"


def _pod(name: str, image: str, *, ready: bool = True, image_id: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": image}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [
                {
                    "name": "main",
                    "imageID": image_id or image,
                    "state": {"running": {}} if ready else {"waiting": {"reason": "CrashLoopBackOff"}},
                }
            ],
        },
    }


def _components(**pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The registered loop results the role passes: ``item`` the component, ``resources`` its Pods."""
    spec = {
        "guard": ("sriov-dra-guard", IMAGE),
        "multus": ("multus-thick", MULTUS),
        "plugin": ("sriov-dra-plugin", IMAGE),
    }
    return [
        {
            "item": {"component": c, "namespace": "ns", "daemonset": ds, "image": image, "deployed": "True"},
            "resources": pods.get(c, [_pod(f"{c}-1", image)]),
        }
        for c, (ds, image) in spec.items()
    ]


def _gate(components: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in preflight.sriov_auto_attach_gate(components, "worker-1")}


def test_a_ready_guard_and_installed_images_everywhere_pass_both_gate_checks() -> None:
    got = _gate(_components())
    assert got["guard-daemon"] == {
        "name": "guard-daemon",
        "status": "pass",
        "detail": "the guard daemon runs on worker-1 (guard-1)",
        "fix": "",
    }
    assert got["running-images"]["status"] == "pass"
    assert got["running-images"]["detail"] == (
        f"every Pod on worker-1 runs the installed image: guard {IMAGE}, multus {MULTUS}, plugin {IMAGE}"
    )


def test_a_guard_without_a_pod_on_the_node_fails_both_checks_naming_the_daemonset() -> None:
    got = _gate(_components(guard=[]))
    assert (got["guard-daemon"]["status"], got["guard-daemon"]["detail"]) == (
        "fail",
        "DaemonSet ns/sriov-dra-guard has no Pod on worker-1",
    )
    assert got["running-images"]["detail"] == "guard ns/sriov-dra-guard has no Pod on worker-1"


@pytest.mark.parametrize(
    ("pod", "problem"),
    [
        (
            _pod("multus-1", f"registry.example.com/multus-cni:v4.2.0@sha256:{'c' * 64}"),
            "container main runs ",
        ),
        (
            _pod("multus-1", MULTUS, image_id=f"registry.example.com/multus-cni@sha256:{'d' * 64}"),
            "runtime reports",
        ),
        (_pod("multus-1", MULTUS, ready=False), "phase Running, not Ready: container main CrashLoopBackOff"),
    ],
    ids=["spec-image", "runtime-digest", "not-ready"],
)
def test_a_pod_not_running_the_installed_image_ready_fails_running_images_naming_it(
    pod: dict[str, Any], problem: str
) -> None:
    got = _gate(_components(multus=[pod]))["running-images"]
    assert got["status"] == "fail"
    assert got["detail"].startswith("ns/multus-1: ") and problem in got["detail"]
    assert got["fix"].startswith("wait until each DaemonSet's rollout reached worker-1")


def test_a_component_the_roles_did_not_deploy_is_not_checked_and_says_so() -> None:
    components = _components(multus=[])
    components[1]["item"]["deployed"] = "False"
    got = _gate(components)["running-images"]
    assert got["status"] == "pass"
    assert got["detail"].endswith("(not deployed by the roles, not checked: multus ns/multus-thick)")


def test_the_guard_entry_is_required() -> None:
    with pytest.raises(AnsibleFilterError, match="needs the guard's entry"):
        preflight.sriov_auto_attach_gate(_components()[1:], "worker-1")


MODE = "sriovnetwork.k8snetworkplumbingwg.io/auto-attach-mode"


def _plugin(name: str, mode: str | None, *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if mode is not None:
        meta["annotations"] = {MODE: mode, "other": "x"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


BINDING = {"claim_uid": "uid-1", "namespace": "ns", "name": "claim-1", "pod_uid": "pod-1", "device": "vf-0",
           "phase": "Ready", "shadow": "ns/dra-sriov-x"}  # fmt: skip
HELD = " (its checks failed, and the node's checkpoint holds 1 auto-attached binding(s) to release)"
NONE_LEFT = " (its checks failed, and the node's checkpoint holds no auto-attached binding: manual mode)"


@pytest.mark.parametrize(
    ("gate_on", "bindings", "mode"),
    [
        (True, None, "full"),
        (True, [BINDING], "full"),
        (False, [BINDING], "release-only"),
        (False, [], "off"),
        (False, None, "release-only"),
        (False, None, "off"),
        ("True", None, "full"),
        ("False", [], "off"),
    ],
    ids=[
        "open-full",
        "open-full-with-bindings",
        "closed-release-only-with-bindings",
        "closed-off-without-bindings",
        "closed-release-only-checkpoint-not-read",
        "closed-off-checkpoint-not-read",
        "open-as-text",
        "closed-as-text",
    ],
)
def test_a_plugin_that_runs_a_mode_the_gate_wants_is_not_restarted(
    gate_on: Any, bindings: Any, mode: str
) -> None:
    assert preflight.sriov_auto_attach_mode_mismatch([_plugin("plugin-1", mode)], gate_on, bindings) == []


@pytest.mark.parametrize(
    ("gate_on", "bindings", "mode", "said"),
    [
        (True, None, "off", "ns/plugin-1 reports auto-attach mode off, the gate wants full"),
        (
            True,
            [BINDING],
            "release-only",
            "ns/plugin-1 reports auto-attach mode release-only, the gate wants full",
        ),
        (
            False,
            None,
            "full",
            "ns/plugin-1 reports auto-attach mode full, the gate wants release-only or off",
        ),
        (False, [], "full", f"ns/plugin-1 reports auto-attach mode full, the gate wants off{NONE_LEFT}"),
        (
            False,
            [],
            "release-only",
            f"ns/plugin-1 reports auto-attach mode release-only, the gate wants off{NONE_LEFT}",
        ),
        (
            False,
            [BINDING],
            "off",
            f"ns/plugin-1 reports auto-attach mode off, the gate wants release-only{HELD}",
        ),
        (
            True,
            None,
            None,
            f"ns/plugin-1 reports no auto-attach mode ({MODE} absent: it did not start, or cannot patch its Pod), "
            "the gate wants full",
        ),
    ],
    ids=[
        "label-set-plugin-still-manual",
        "label-set-plugin-release-only",
        "gate-failed-plugin-full",
        "gate-failed-plugin-full-no-bindings",
        "gate-failed-release-only-with-every-binding-released",
        "gate-failed-plugin-off-while-bindings-are-held",
        "no-report",
    ],
)
def test_a_plugin_that_reports_another_mode_than_the_gate_wants_is_named_for_a_restart(
    gate_on: bool, bindings: Any, mode: str | None, said: str
) -> None:
    got = preflight.sriov_auto_attach_mode_mismatch([_plugin("plugin-1", mode)], gate_on, bindings)
    assert [(g["namespace"], g["name"], g["reported"], g["detail"]) for g in got] == [
        ("ns", "plugin-1", mode or "", said)
    ]


def test_a_release_only_plugin_is_left_while_bindings_are_held_and_restarted_once_all_are_released() -> None:
    pods = [_plugin("plugin-1", "release-only")]
    assert (
        preflight.sriov_auto_attach_mode_mismatch(pods, False, [BINDING, dict(BINDING, device="vf-1")]) == []
    )
    assert [g["wanted"] for g in preflight.sriov_auto_attach_mode_mismatch(pods, False, [])] == [["off"]]


def test_bindings_that_are_not_the_checkpoint_list_are_refused() -> None:
    with pytest.raises(
        AnsibleFilterError, match=r"bindings must be the list checkpoint_info returns .* got 3"
    ):
        preflight.sriov_auto_attach_mode_mismatch([_plugin("plugin-1", "off")], False, 3)


def test_a_plugin_pod_being_deleted_is_left_out() -> None:
    pods = [_plugin("old", "off", deleting=True), _plugin("new", "full")]
    assert preflight.sriov_auto_attach_mode_mismatch(pods, True, None) == []


def test_the_modes_the_gate_accepts_are_the_modes_the_plugin_reports() -> None:
    assert names.AUTO_ATTACH_MODE_ANNOTATION == MODE
    accepted = {
        m for gate_on in (True, False) for bindings in (None, [], [BINDING])
        for m in preflight.wanted_modes(gate_on, bindings)[0]
    }  # fmt: skip
    assert accepted == {str(m) for m in Mode}
