"""The plugin's and the guard's DaemonSets request CPU and memory, and set no limits, by default.

With a CPU request the Pod is in the Burstable QoS class and its cgroup gets a CPU weight in
proportion to the request; a BestEffort Pod gets the minimal weight, so its NodePrepare (the plugin)
or managed ADD (the guard runs Multus and its delegates as its children) waits for CPU whenever the
node is busy starting Pods. No CPU limit: a quota would throttle the same work instead. An empty
``*_resources`` renders no ``resources`` at all (the Pod is then BestEffort, as the user asked).
Rendered with each role's defaults by the render helpers of the roles' other DaemonSet tests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.pure.plugins import test_guard_daemonset, test_plugin_daemonset_sysfs_root

REPO = Path(__file__).resolve().parents[3]
ROLES: dict[str, Callable[..., dict[str, Any]]] = {
    "plugin": test_plugin_daemonset_sysfs_root._render,
    "guard": test_guard_daemonset._render,
}


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = doc["spec"]["template"]["spec"]["containers"][0]
    return container


@pytest.mark.parametrize("role", sorted(ROLES))
def test_by_default_the_container_requests_cpu_and_memory_without_limits(role: str) -> None:
    resources = _container(ROLES[role]())["resources"]
    assert set(resources) == {"requests"}  # no limits: Burstable, never CPU-throttled
    assert set(resources["requests"]) == {"cpu", "memory"}


@pytest.mark.parametrize("role", sorted(ROLES))
def test_the_argument_spec_default_is_the_roles_default(role: str) -> None:
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    assert options[f"{role}_resources"]["default"] == defaults[f"{role}_resources"]


@pytest.mark.parametrize("role", sorted(ROLES))
def test_resources_are_rendered_as_given_and_left_out_when_empty(role: str) -> None:
    given = {"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}}
    assert _container(ROLES[role](**{f"{role}_resources": given}))["resources"] == given
    assert "resources" not in _container(ROLES[role](**{f"{role}_resources": {}}))
