"""Device health on a real kubelet v1.36: a PF's link down shows its VF Unhealthy in the consuming Pod's status.

The plugin runs as ``test_dra_plugin.py`` runs it (a fake sysfs tree for the PCI side, inside the
real node's namespaces). Each fake PF's interface is a real veth of the same name in the node's
network namespace, where the plugin reads links through netlink as it reads a real PF in the host
namespace. The real kubelet opens ``v1alpha1.DRAResourceHealth/NodeWatchResources`` (gate
``ResourceHealthStatus``, beta and on by default in 1.36, for the kubelet and the apiserver alike)
and writes what it receives into ``status.containerStatuses[].allocatedResourcesStatus``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.e2e.realnode.pods import busybox_pod, delete_pod, run_pod
from tests.e2e.realnode.test_dra_plugin import DRIVER, claim_records, log_events

# The plugin on the real node and its cluster objects, exactly as test_dra_plugin.py runs them (fixtures).
from tests.e2e.realnode.test_dra_plugin import dra_objects as dra_objects
from tests.e2e.realnode.test_dra_plugin import plugin as plugin
from tests.waiting import eventually

from sriov_dra.host import sysfs as sysfs_mod


def _ip(node: Any, *args: str) -> None:
    done = node.run_in_node(["ip", *args])
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr}"


def _delete_quietly(core: client.CoreV1Api, namespace: str, name: str) -> None:
    with contextlib.suppress(client.ApiException):
        delete_pod(core, namespace, name)


def set_pf(node: Any, pf: str, *, up: bool) -> None:
    """Set the fake PF's interface (a veth in the node's namespace) up or down."""
    _ip(node, "link", "set", pf, "up" if up else "down")


@contextlib.contextmanager
def pf_links(node: Any, pf_names: list[str]) -> Iterator[None]:
    """Each fake PF's interface as a veth of that name, up with carrier, in the node's namespace."""
    try:
        for name in pf_names:
            _ip(node, "link", "add", name, "type", "veth", "peer", "name", f"{name}p")
            _ip(node, "link", "set", f"{name}p", "up")
            _ip(node, "link", "set", name, "up")
        yield
    finally:
        for name in pf_names:
            node.run_in_node(["ip", "link", "del", name])


def _device_health(core: client.CoreV1Api, namespace: str, pod: str, resource_ids: set[str]) -> str | None:
    """The health the Pod's ``claim:vfs`` entry shows for the device (``Healthy``, ``Unhealthy``, ``Unknown``).

    The kubelet 1.36 names a device by its first CDI device ID, else ``<driver>/<pool>/<device>``
    (``buildResourceHealth`` in ``pkg/kubelet/cm/dra/manager.go``); ``resource_ids`` holds both.
    """
    live = core.read_namespaced_pod(pod, namespace)
    for status in live.status.container_statuses or []:
        for entry in status.allocated_resources_status or []:
            for resource in entry.resources or []:
                if entry.name == "claim:vfs" and resource.resource_id in resource_ids:
                    return f"{resource.health}: {resource.message or ''}"
    return None


def test_pf_link_down_shows_its_vf_unhealthy_in_the_pod_status_and_link_up_healthy_again(
    real_node: Any, plugin: Path, api: client.ApiClient, namespace: str
) -> None:
    host = sysfs_mod.Sysfs(plugin.parent / "host")
    pf_names = [pf.ifname for pf in host.pfs()]
    resource, core = client.ResourceV1Api(api), client.CoreV1Api(api)
    with pf_links(real_node, pf_names), contextlib.ExitStack() as cleanup:
        # Before the plugin fixture stops the plugin: the kubelet needs it to unprepare the claim.
        cleanup.callback(_delete_quietly, core, namespace, "vf-health")
        # One ResourceClaim the Pod names (the scheduler allocates it once the node's slice exists).
        claim_spec = {"devices": {"requests": [{"name": "vf", "exactly": {"deviceClassName": DRIVER}}]}}
        resource.create_namespaced_resource_claim(
            namespace,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "vf"},
                "spec": claim_spec,
            },
        )
        pod = busybox_pod("vf-health", real_node.name, "exec sleep 3600")
        pod["spec"]["resourceClaims"] = [{"name": "vfs", "resourceClaimName": "vf"}]
        pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "vfs"}]}
        run_pod(core, namespace, pod)
        claim = resource.read_namespaced_resource_claim("vf", namespace)
        result = claim.status.allocation.devices.results[0]
        device = result.device
        (prepared,) = claim_records(plugin)[claim.metadata.uid].devices
        resource_ids = {prepared.cdi_device_ids[0], f"{DRIVER}/{result.pool}/{device}"}
        pci = device.replace("-", ":", 2).replace("-", ".")
        pf_bdf = host.physfn(pci)
        assert pf_bdf is not None, f"{pci} is a VF of the fake tree"
        pf = host.pf_netdev(pf_bdf)
        assert pf in pf_names

        def wait_health(want: str, what: str) -> None:
            seen: list[str | None] = [None]

            def shows() -> bool:
                seen[0] = _device_health(core, namespace, "vf-health", resource_ids)
                return seen[0] is not None and seen[0].startswith(want)

            try:
                eventually(what, shows, timeout_s=90, interval_s=0.5)
            except pytest.fail.Exception:
                health_log = [e for e in log_events(real_node) if e.get("op") == "health"][-4:]
                pytest.fail(
                    f"{what}: the Pod status showed {seen[0]!r}; the plugin's health log: {health_log}"
                )

        wait_health("Healthy: VF ", f"VF {device} Healthy in the Pod status")
        logged_before = len(log_events(real_node))  # the node's plugin.log holds earlier tests' plugins too
        started = time.monotonic()
        set_pf(real_node, pf, up=False)
        wait_health(
            f"Unhealthy: PF {pf} is down (operstate down)", f"VF {device} Unhealthy after PF {pf} down"
        )
        print(f"PF {pf} down -> Pod status Unhealthy in {time.monotonic() - started:.1f}s")
        started = time.monotonic()
        set_pf(real_node, pf, up=True)
        wait_health(f"Healthy: VF {pci} bound to ", f"VF {device} Healthy after PF {pf} up")
        print(f"PF {pf} up -> Pod status Healthy in {time.monotonic() - started:.1f}s")

        changes = [
            (e.get("outcome"), e.get("reason"))
            for e in log_events(real_node)[logged_before:]
            if e.get("msg") == "device health changed" and e.get("device") == device
        ]
        assert ("HEALTHY -> UNHEALTHY", f"PF {pf} is down (operstate down)") in changes
        assert [o for o, _ in changes].count("HEALTHY -> UNHEALTHY") == 1, "one log line per transition"
