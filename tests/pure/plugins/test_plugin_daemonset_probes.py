"""The plugin role's DaemonSet is Ready only when the plugin says it is registered with the kubelet.

Rendered from ``roles/plugin/templates/daemonset.yaml.j2`` (the render helper of
``test_plugin_daemonset_sysfs_root``). The probes read the plugin's own ``/readyz`` (registered with
the kubelet, not stopping) and ``/healthz`` (no essential worker crashed) on the metrics address it
serves on the node's network, so the role's rollout wait and a DaemonSet rollout after an edit
mean "the kubelet can call NodePrepare on this node", not "the process started". Both Pods of a
rollout probe the one address only the node's owner binds: the probes send the Pod's UID and another
instance answers 503 (docs/plugin.md#rolling-update); they are run here against a real server.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.pure.plugins import exec_probes
from tests.pure.plugins.test_plugin_daemonset_sysfs_root import _render

PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = doc["spec"]["template"]["spec"]["containers"][0]
    return container


def test_each_probe_is_answered_only_by_its_own_pods_instance() -> None:
    """The old instance owning the address answers the new Pod's probes 503, its own Pod's 200."""
    with exec_probes.health_server("old-pod") as (state, port):
        state.set("registered", True)
        container = _container(_render(plugin_metrics_bind_address=f"127.0.0.1:{port}"))
        for name in PROBES:
            assert exec_probes.run(container[name], "old-pod") == (0, ""), name
            status, output = exec_probes.run(container[name], "new-pod")
            assert status != 0 and "served by another instance" in output, name
    assert _render()["spec"]["template"]["spec"]["hostNetwork"] is True  # the probe's 127.0.0.1 is the node's


def test_readiness_reads_readyz_and_liveness_reads_healthz() -> None:
    with exec_probes.health_server("pod-a") as (state, port):
        container = _container(_render(plugin_metrics_bind_address=f"127.0.0.1:{port}"))
        assert f"--metrics-bind-address=127.0.0.1:{port}" in container["args"]
        status, output = exec_probes.run(container["readinessProbe"], "pod-a")
        assert status != 0 and "registered: starting" in output
        assert exec_probes.run(container["livenessProbe"], "pod-a")[0] == 0
        assert exec_probes.run(container["startupProbe"], "pod-a")[0] == 0
        state.worker_crashed("repair", RuntimeError("lost"))
        assert exec_probes.run(container["livenessProbe"], "pod-a")[0] != 0


def test_no_probe_passes_when_nothing_serves_the_address() -> None:
    with exec_probes.health_server("pod-a") as (_, port):
        pass
    container = _container(_render(plugin_metrics_bind_address=f"127.0.0.1:{port}"))
    assert exec_probes.run(container["startupProbe"], "pod-a")[0] != 0


@pytest.mark.parametrize(
    ("address", "target"),
    [
        (":9555", "/dev/tcp/127.0.0.1/9555 "),
        ("0.0.0.0:9402", "/dev/tcp/127.0.0.1/9402 "),
        ("192.0.2.7:9000", "/dev/tcp/192.0.2.7/9000 "),
    ],
)
def test_an_all_interfaces_address_is_probed_on_loopback_and_a_named_one_on_that_address(
    address: str, target: str
) -> None:
    for name in PROBES:
        command = _container(_render(plugin_metrics_bind_address=address))[name]["exec"]["command"]
        assert command[:2] == ["bash", "-c"] and target in command[2]


@pytest.mark.parametrize("address", ["0", "", 0])
def test_with_metrics_off_there_is_no_endpoint_to_probe_and_no_probe(address: object) -> None:
    # 0 unquoted in an inventory is YAML's integer: still "off", rendered as before.
    container = _container(_render(plugin_metrics_bind_address=address))
    assert "--metrics-bind-address=0" in container["args"] or "--metrics-bind-address=" in container["args"]
    assert not set(PROBES) & container.keys()


def test_a_free_port_address_has_no_fixed_port_to_probe_and_no_probe() -> None:
    container = _container(_render(plugin_metrics_bind_address="127.0.0.1:0"))
    assert "--metrics-bind-address=127.0.0.1:0" in container["args"]
    assert not set(PROBES) & container.keys()


def test_a_start_is_given_the_registration_and_hand_over_waits_before_liveness_counts() -> None:
    """The instance serves its health address only once it owns the node (docs/plugin.md#rolling-update)."""
    startup = _container(_render())["startupProbe"]
    assert "GET /healthz " in startup["exec"]["command"][2]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 30 + 90


def test_the_plugin_rolls_with_a_surge_pod_named_by_its_uid_and_no_node_without_a_ready_plugin() -> None:
    """docs/plugin.md#rolling-update: the new Pod starts beside the old one, with per-instance sockets."""
    doc = _render()
    assert doc["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    env = {e["name"]: e for e in _container(doc)["env"]}
    assert env["POD_UID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.uid"}}
    assert doc["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > 45  # the kubelet's deadline
