"""Tests for ``plugins/filter/preflight.py``'s auto-attach gate checks (``sriov_auto_attach_gate``)."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.sriovnet.dra.plugins.filter import preflight

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
