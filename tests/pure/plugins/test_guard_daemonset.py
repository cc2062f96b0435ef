"""The guard role's DaemonSet runs the daemon against the node's own root and reports readiness it can prove.

Rendered from ``roles/guard/templates/daemonset.yaml.j2`` with the role's defaults and Jinja2 (the
Ansible filters the template uses are given their Ansible meaning: ``dirname``, ``to_json``). What is checked:
the daemon runs Multus chrooted into the node's ``/`` (mounted with HostToContainer propagation, so
netns and IPAM mounts made later are visible), its probes read the endpoint it serves, and the init
container installs the shim into the node's CNI bin dir.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jinja2
import yaml
from tests.pure.plugins import exec_probes

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "guard"


def _render(**overrides: Any) -> dict[str, Any]:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    values = {**defaults, "guard_image": "r/sriov-dra:1@sha256:" + "0" * 64, **overrides}
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["dirname"] = os.path.dirname
    env.filters["to_json"] = json.dumps
    docs = list(
        yaml.safe_load_all(
            env.from_string((ROLE / "templates" / "daemonset.yaml.j2").read_text()).render(**values)
        )
    )
    daemonset: dict[str, Any] = next(d for d in docs if d["kind"] == "DaemonSet")
    return daemonset


def _pod(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def test_the_daemon_runs_multus_chrooted_into_the_nodes_root_mounted_with_host_to_container_propagation() -> (
    None
):
    pod = _pod(_render())
    guard = pod["containers"][0]
    assert "--host-root=/host" in guard["args"]
    mount = next(m for m in guard["volumeMounts"] if m["mountPath"] == "/host")
    assert mount.get("mountPropagation") == "HostToContainer" and not mount.get("readOnly")
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["hostPath"]["path"] == "/"
    assert pod["hostNetwork"] is True  # the probes and the socket are the node's


def test_the_metadata_dir_is_the_plugins_data_dir_under_the_host_root_mount_or_left_out() -> None:
    guard = _pod(_render(guard_plugin_data_dir="/var/lib/k/plugins/d"))["containers"][0]
    assert "--metadata-dir=/host/var/lib/k/plugins/d" in guard["args"]
    assert any(m["mountPath"] == "/host" for m in guard["volumeMounts"])
    plain = _pod(_render(guard_plugin_data_dir=""))["containers"][0]
    assert not any(a.startswith("--metadata-dir") for a in plain["args"])


def test_the_socket_is_the_nodes_socket_directory_at_the_same_path() -> None:
    pod = _pod(_render(guard_socket="/run/custom/guard.sock"))
    guard = pod["containers"][0]
    assert "--socket=/run/custom/guard.sock" in guard["args"]
    mount = next(m for m in guard["volumeMounts"] if m["mountPath"] == "/run/custom")
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["hostPath"] == {"path": "/run/custom", "type": "DirectoryOrCreate"}


def test_the_probes_read_the_endpoint_the_daemon_serves_on_the_nodes_loopback() -> None:
    with exec_probes.health_server("pod-a") as (state, port):
        guard = _pod(_render(guard_metrics_port=port))["containers"][0]
        assert f"--metrics-address=127.0.0.1:{port}" in guard["args"]
        status, output = exec_probes.run(guard["readinessProbe"], "pod-a")
        assert status != 0 and "registered: starting" in output
        state.set("registered", True)
        assert exec_probes.run(guard["readinessProbe"], "pod-a") == (0, "")
        assert exec_probes.run(guard["livenessProbe"], "pod-a") == (0, "")


def test_each_probe_is_answered_only_by_its_own_pods_daemon() -> None:
    """docs/guard.md#rolling-update: the old daemon holding the address answers the new Pod's probes 503."""
    with exec_probes.health_server("old-pod") as (state, port):
        state.set("registered", True)
        guard = _pod(_render(guard_metrics_port=port))["containers"][0]
        env = {e["name"]: e for e in guard["env"]}
        assert env["POD_UID"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.uid"}}
        for name in ("readinessProbe", "livenessProbe"):
            status, output = exec_probes.run(guard[name], "new-pod")
            assert status != 0 and "served by another instance" in output, name


def test_a_superseded_pods_liveness_probe_passes_against_the_newer_daemon_and_its_readiness_fails() -> None:
    """docs/guard.md#rolling-update: the old Pod, left idle after the new daemon took the socket over
    and the health address, is never restarted by its liveness probe into taking the socket back."""
    with exec_probes.health_server("new-pod") as (state, port):
        state.set("registered", True)
        state.vouch_for(["old-pod"])
        guard = _pod(_render(guard_metrics_port=port))["containers"][0]
        assert exec_probes.run(guard["livenessProbe"], "old-pod")[0] == 0
        status, output = exec_probes.run(guard["readinessProbe"], "old-pod")
        assert status != 0 and "served by another instance" in output


def test_the_init_container_installs_the_shim_into_the_nodes_cni_bin_dir_for_the_nodes_python() -> None:
    pod = _pod(
        _render(guard_cni_bin_dir="/opt/other/bin", guard_shim_interpreter="/usr/local/bin/python3.12")
    )
    init = pod["initContainers"][0]
    assert init["command"][-2:] == ["/host/opt/other/bin", "/usr/local/bin/python3.12"]
    mount = next(m for m in init["volumeMounts"] if m["mountPath"] == "/host/opt/other/bin")
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["hostPath"]["path"] == "/opt/other/bin"


def test_the_guard_rolls_with_a_surge_pod_and_no_node_without_a_ready_daemon() -> None:
    """docs/guard.md#rolling-update: the new daemon takes the socket over beside the old one."""
    assert _render()["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
