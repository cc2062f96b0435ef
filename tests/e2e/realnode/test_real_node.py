"""A real kubelet v1.36 with containerd 2.2 and runc, as ``sriov_dra_lab.real_node`` starts it, runs Pods.

Each test names what it proves; measurements (Ready time, apply→Running, RSS) are printed, never
asserted.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client
from tests.e2e.realnode.pods import busybox_pod, delete_pod, run_pod
from tests.waiting import eventually

KUBELET_VERSION = "v1.36.3"
RUNTIME_VERSION = "containerd://2.2.9"
HOST_SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")


def pod_sandboxes(node: Any, namespace: str) -> list[str]:
    """IDs of the node's CRI sandboxes of ``namespace`` (any state)."""
    done = node.crictl("pods", "-q", f"--namespace={namespace}")
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def pod_veths(node: Any) -> list[str]:
    """veth links in the node network namespace (the bridge plugin's host ends)."""
    from sriov_dra_lab import iproute

    return sorted(n for n in iproute.link_names(node.netns_path) if n.startswith("veth"))


def reservations(node: Any) -> list[str]:
    """host-local reservation files of the node's Pod network (bookkeeping files left out)."""
    from sriov_dra_lab import real_node

    d = node.node_dir("/var/lib/cni") / "networks" / real_node.POD_NETWORK
    if not d.is_dir():
        return []
    return sorted(
        p.name for p in d.iterdir() if p.name != "lock" and not p.name.startswith("last_reserved_ip")
    )


def pod_cgroups(node: Any, uid: str) -> list[str]:
    """Cgroup directories of the Pod ``uid`` under the node's cgroup root, in any hierarchy."""
    from sriov_dra_lab import real_node

    needle = "pod" + uid
    found = []
    for hierarchy in real_node.cgroup_hierarchies():
        top = hierarchy / node.cgroup_root.strip("/")
        for dirpath, _dirs, _files in os.walk(top):
            if Path(dirpath).name.startswith(needle):
                found.append(dirpath)
    return found


def test_real_node_registers_ready_reporting_kubelet_v1_36_3_and_containerd_2_2_9(
    real_node: Any, api: client.ApiClient
) -> None:
    node = client.CoreV1Api(api).read_node(real_node.name)
    info = node.status.node_info
    ready = {c.type: c.status for c in node.status.conditions}
    addresses = {a.type: a.address for a in node.status.addresses}
    print(
        f"{real_node.name}: Ready {real_node.ready_after_s:.1f}s after the kubelet started; RSS KiB {real_node.rss_kib()}"
    )
    assert ready["Ready"] == "True"
    assert info.kubelet_version == KUBELET_VERSION
    assert info.container_runtime_version == RUNTIME_VERSION
    assert addresses["InternalIP"] == real_node.node_ip
    assert ipaddress.ip_address(real_node.node_ip) in ipaddress.ip_network("203.0.113.0/24")


def test_pod_on_the_bridge_network_runs_with_an_ip_and_its_container_output_is_read_through_the_kubelet(
    real_node: Any, api: client.ApiClient, namespace: str, kubectl: Callable[..., Any]
) -> None:
    core = client.CoreV1Api(api)
    pod = busybox_pod("hello", real_node.name, "echo hello-from-$(hostname); exec sleep 3600")
    live, took = run_pod(core, namespace, pod)
    print(f"Pod apply→Running {took:.1f}s on {real_node.name}; RSS KiB {real_node.rss_kib()}")
    assert live.spec.node_name == real_node.name
    assert ipaddress.ip_address(live.status.pod_ip) in ipaddress.ip_network(real_node.pod_subnet)
    log = eventually(
        "the container's log through the apiserver and kubelet",
        lambda: (
            core.read_namespaced_pod_log("hello", namespace, _preload_content=False).data.decode() or None
        ),
        timeout_s=30,
        interval_s=0.2,
    )
    assert log.strip() == "hello-from-hello"
    shown = kubectl("exec", "-n", namespace, "hello", "--", "ip", "-4", "-o", "addr", "show", "eth0")
    assert shown.returncode == 0, shown.stderr
    assert f" {live.status.pod_ip}/24 " in shown.stdout


def test_pod_deletion_leaves_no_sandbox_veth_ip_reservation_or_pod_cgroup(
    real_node: Any, api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api)
    before_veths = pod_veths(real_node)
    live, _ = run_pod(core, namespace, busybox_pod("short", real_node.name, "exec sleep 3600"))
    uid = live.metadata.uid
    assert pod_sandboxes(real_node, namespace), "the running Pod has a sandbox"
    assert live.status.pod_ip in reservations(real_node)
    assert pod_cgroups(real_node, uid), "the running Pod has a cgroup"
    assert len(pod_veths(real_node)) == len(before_veths) + 1
    delete_pod(core, namespace, "short")
    eventually(
        "the Pod's sandbox to be removed",
        lambda: not pod_sandboxes(real_node, namespace),
        timeout_s=120,
        interval_s=0.5,
    )
    assert pod_veths(real_node) == before_veths
    assert live.status.pod_ip not in reservations(real_node)
    eventually(
        "the Pod's cgroups to be removed",
        lambda: not pod_cgroups(real_node, uid),
        timeout_s=60,
        interval_s=0.5,
    )


def test_two_real_nodes_run_pods_at_once_each_in_its_own_pod_range(
    real_node: Any, node_factory: Callable[[int], Any], api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api)
    second = node_factory(2)
    print(f"{second.name}: Ready {second.ready_after_s:.1f}s after the kubelet started")
    try:
        pods = {}
        for node in (real_node, second):
            pods[node.name], took = run_pod(
                core, namespace, busybox_pod(f"on-{node.index}", node.name, "exec sleep 3600")
            )
            print(f"Pod apply→Running {took:.1f}s on {node.name}; RSS KiB {node.rss_kib()}")
        for node in (real_node, second):
            assert pods[node.name].spec.node_name == node.name
            assert ipaddress.ip_address(pods[node.name].status.pod_ip) in ipaddress.ip_network(
                node.pod_subnet
            )
        ready = {
            n.metadata.name
            for n in core.list_node().items
            if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions)
        }
        assert {real_node.name, second.name} <= ready
        for node in (real_node, second):
            delete_pod(core, namespace, f"on-{node.index}")
    finally:
        second.stop()
    assert second.leftovers() == []


def test_a_stopped_node_leaves_no_process_mount_netns_veth_or_cgroup_and_host_sysctls_unchanged(
    node_factory: Callable[[int], Any], api: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(api)
    host_before = {k: Path("/proc/sys", k).read_text() for k in HOST_SYSCTLS}
    node = node_factory(3)
    # The kubelet set its tunables, in the node's private copies only.
    assert (node.root / "sysctl" / "vm.overcommit_memory").read_text().strip() == "1"
    assert {k: Path("/proc/sys", k).read_text() for k in HOST_SYSCTLS} == host_before
    run_pod(core, namespace, busybox_pod("left-running", node.name, "exec sleep 3600"))
    assert node.leftovers(), "a running node is visible to the leftover check"
    node.stop()
    assert node.leftovers() == []
    assert {k: Path("/proc/sys", k).read_text() for k in HOST_SYSCTLS} == host_before
    core.delete_namespaced_pod("left-running", namespace, grace_period_seconds=0)
    eventually(
        "the Node object to be deleted",
        lambda: node.name not in {n.metadata.name for n in core.list_node().items},
        timeout_s=30,
        interval_s=0.2,
    )
