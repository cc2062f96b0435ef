"""The plugin role's DaemonSet is Ready only when the plugin says it is registered with the kubelet.

Rendered from ``roles/plugin/templates/daemonset.yaml.j2`` (the render helper of
``test_plugin_daemonset_sysfs_root``). The probes read the plugin's own ``/readyz`` (registered with
the kubelet, not stopping) and ``/healthz`` (no essential worker crashed) on the metrics address it
serves on the node's network, so the role's rollout wait and a DaemonSet rollout after an edit
mean "the kubelet can call NodePrepare on this node", not "the process started".
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.pure.plugins.test_plugin_daemonset_sysfs_root import _render


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = doc["spec"]["template"]["spec"]["containers"][0]
    return container


def test_readiness_reads_readyz_and_liveness_reads_healthz_on_the_metrics_address() -> None:
    container = _container(_render())
    assert "--metrics-bind-address=127.0.0.1:9402" in container["args"]
    ready = container["readinessProbe"]["httpGet"]
    alive = container["livenessProbe"]["httpGet"]
    assert (ready["host"], ready["port"], ready["path"]) == ("127.0.0.1", 9402, "/readyz")
    assert (alive["host"], alive["port"], alive["path"]) == ("127.0.0.1", 9402, "/healthz")
    assert _render()["spec"]["template"]["spec"]["hostNetwork"] is True  # the probe's 127.0.0.1 is the node's


@pytest.mark.parametrize(
    ("address", "host", "port"),
    [
        (":9555", "127.0.0.1", 9555),
        ("0.0.0.0:9402", "127.0.0.1", 9402),
        ("192.0.2.7:9000", "192.0.2.7", 9000),
    ],
)
def test_an_all_interfaces_address_is_probed_on_loopback_and_a_named_one_on_that_address(
    address: str, host: str, port: int
) -> None:
    probe = _container(_render(plugin_metrics_bind_address=address))["readinessProbe"]["httpGet"]
    assert (probe["host"], probe["port"]) == (host, port)


@pytest.mark.parametrize("address", ["0", "", 0])
def test_with_metrics_off_there_is_no_endpoint_to_probe_and_no_probe(address: object) -> None:
    # 0 unquoted in an inventory is YAML's integer: still "off", rendered as before.
    container = _container(_render(plugin_metrics_bind_address=address))
    assert "--metrics-bind-address=0" in container["args"] or "--metrics-bind-address=" in container["args"]
    assert not {"startupProbe", "readinessProbe", "livenessProbe"} & container.keys()


def test_a_free_port_address_has_no_fixed_port_to_probe_and_no_probe() -> None:
    container = _container(_render(plugin_metrics_bind_address="127.0.0.1:0"))
    assert "--metrics-bind-address=127.0.0.1:0" in container["args"]
    assert not {"startupProbe", "readinessProbe", "livenessProbe"} & container.keys()


def test_a_slow_start_is_given_two_minutes_before_liveness_counts() -> None:
    startup = _container(_render())["startupProbe"]
    assert startup["httpGet"]["path"] == "/healthz"
    assert startup["periodSeconds"] * startup["failureThreshold"] == 120


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
