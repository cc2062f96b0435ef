"""Device taints on a real control plane and kubelet v1.36: a PF's link down taints its VFs in the slice.

The plugin runs as ``test_dra_plugin.py`` runs it (a fake sysfs tree of two PFs with two VFs each,
inside the real node's namespaces; each PF's interface a real veth of its name, read through
netlink), with ``--taint-clear-after-s=5`` so recovery is quick. The real scheduler
(``DRADeviceTaints``, on by default in 1.36) then keeps new claims off the tainted VFs, and with
``--unhealthy-taint-effect=NoExecute`` the real kube-controller-manager evicts the Pod using one;
the kubelet unprepares its claim and the plugin releases the VF.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from tests.e2e.realnode.pods import busybox_pod, delete_pod, run_pod
from tests.e2e.realnode.test_device_health import pf_links, set_pf
from tests.e2e.realnode.test_dra_plugin import DRIVER, claim_records

# The plugin on the real node and its cluster objects, exactly as test_dra_plugin.py runs them (fixtures).
from tests.e2e.realnode.test_dra_plugin import dra_objects as dra_objects
from tests.e2e.realnode.test_dra_plugin import plugin as plugin
from tests.waiting import eventually

from sriov_dra.core.plugin import device_taints
from sriov_dra.host import discovery
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra.kube import resource_slices

KEY = device_taints.taint_key(DRIVER)


def _taints(api: client.ApiClient, node: str) -> dict[str, list[dict[str, Any]]]:
    """The taints of every device of ``node``'s slices, by device name (untainted devices left out)."""
    return {
        d["name"]: d["taints"]
        for s in resource_slices.list_slices(api, driver=DRIVER, node=node)
        for d in s["spec"].get("devices") or []
        if d.get("taints")
    }


def _claim_pod(
    resource: Any, core: client.CoreV1Api, namespace: str, node: str, name: str
) -> tuple[str, Any]:
    """A ResourceClaim for one VF and a running Pod using it; returns the allocated device and the Pod."""
    resource.create_namespaced_resource_claim(
        namespace,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "vf", "exactly": {"deviceClassName": DRIVER}}]}},
        },
    )
    pod = busybox_pod(name, node, "exec sleep 3600")
    pod["spec"]["resourceClaims"] = [{"name": "vfs", "resourceClaimName": name}]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "vfs"}]}
    live, _ = run_pod(core, namespace, pod)
    claim = resource.read_namespaced_resource_claim(name, namespace)
    return str(claim.status.allocation.devices.results[0].device), live


def _vfs_of(host: sysfs_mod.Sysfs, pf: str) -> set[str]:
    """The DRA device names of the VFs of the PF whose interface is ``pf``."""
    info = next(p for p in host.pfs() if p.ifname == pf)
    return {discovery.device_name(str(vf.bdf)) for vf in host.vfs(info)}


@pytest.fixture
def pfs(real_node: Any, plugin: Any) -> Iterator[tuple[sysfs_mod.Sysfs, list[str]]]:
    """The plugin's fake tree and its PF interface names, each a veth up with carrier on the node."""
    host = sysfs_mod.Sysfs(plugin.parent / "host")
    pf_names = [pf.ifname for pf in host.pfs()]
    with pf_links(real_node, pf_names):
        yield host, pf_names


@pytest.mark.parametrize("plugin", [("--taint-clear-after-s=5",)], indirect=True)
def test_pf_down_taints_its_vfs_new_claims_go_elsewhere_and_pf_up_clears_the_taint(
    real_node: Any, plugin: Any, pfs: tuple[sysfs_mod.Sysfs, list[str]], api: client.ApiClient, namespace: str
) -> None:
    host, pf_names = pfs
    resource, core = client.ResourceV1Api(api), client.CoreV1Api(api)
    try:
        eventually(
            "the slice to publish four untainted VFs",
            lambda: (
                len(resource_slices.list_slices(api, driver=DRIVER, node=real_node.name)) == 1
                and not _taints(api, real_node.name)
            ),
            timeout_s=60,
            interval_s=0.5,
        )
        pf = pf_names[0]
        down = _vfs_of(host, pf)
        started = time.monotonic()
        set_pf(real_node, pf, up=False)
        marked = eventually(
            f"the VFs of PF {pf} tainted",
            lambda: _taints(api, real_node.name) or None,
            timeout_s=30,
            interval_s=0.1,
        )
        print(f"PF {pf} down -> slice taint in {time.monotonic() - started:.1f}s")
        assert set(marked) == down
        (taint,) = marked[next(iter(down))]
        assert (taint["key"], taint["value"], taint["effect"]) == (KEY, "PfDown", "NoSchedule")
        assert taint["timeAdded"]

        device, _ = _claim_pod(resource, core, namespace, real_node.name, "after-down")
        assert device not in down, f"the scheduler allocated tainted {device}"

        time.sleep(3)
        assert _taints(api, real_node.name)[next(iter(down))] == [taint], "timeAdded stays while tainted"
        started = time.monotonic()
        set_pf(real_node, pf, up=True)
        eventually(
            "the taint removed", lambda: not _taints(api, real_node.name), timeout_s=60, interval_s=0.2
        )
        print(f"PF {pf} up -> taint removed in {time.monotonic() - started:.1f}s (clear after 5 s)")
    finally:
        with contextlib.suppress(client.ApiException):
            delete_pod(core, namespace, "after-down")


@pytest.mark.parametrize(
    "plugin", [("--unhealthy-taint-effect=NoExecute", "--taint-clear-after-s=5")], indirect=True
)
def test_no_execute_evicts_the_pod_on_a_tainted_vf_and_its_vf_is_released(
    real_node: Any, plugin: Any, pfs: tuple[sysfs_mod.Sysfs, list[str]], api: client.ApiClient, namespace: str
) -> None:
    host, pf_names = pfs
    resource, core = client.ResourceV1Api(api), client.CoreV1Api(api)
    try:
        device, live = _claim_pod(resource, core, namespace, real_node.name, "evicted")
        uid = resource.read_namespaced_resource_claim("evicted", namespace).metadata.uid
        assert uid in claim_records(plugin)
        pf = next(p for p in pf_names if device in _vfs_of(host, p))
        started = time.monotonic()
        set_pf(real_node, pf, up=False)

        def gone() -> bool:
            try:
                pod = core.read_namespaced_pod("evicted", namespace)
            except client.ApiException as exc:
                return bool(exc.status == 404)
            return bool(pod.metadata.uid != live.metadata.uid)

        eventually("the Pod on the tainted VF evicted", gone, timeout_s=120, interval_s=0.5)
        print(f"PF {pf} down -> Pod evicted in {time.monotonic() - started:.1f}s")
        (taint,) = _taints(api, real_node.name)[device]
        assert (taint["key"], taint["effect"]) == (KEY, "NoExecute")
        eventually(
            "the claim unprepared", lambda: uid not in claim_records(plugin), timeout_s=60, interval_s=0.5
        )
        claim = resource.read_namespaced_resource_claim("evicted", namespace)
        eventually(
            "the claim deallocated",
            lambda: resource.read_namespaced_resource_claim("evicted", namespace).status.allocation is None,
            timeout_s=60,
            interval_s=0.5,
        )
        assert claim.metadata.uid == uid
    finally:
        set_pf(real_node, pf_names[0], up=True)
