"""A delegate DEL that fails keeps Multus's cache, so a later DEL still releases (``retryDeleteOnError``).

Multus v4.3.0 removes ``<cniDir>/<container ID>`` after DEL even when a delegate's DEL failed,
unless its config sets ``retryDeleteOnError`` (``pkg/multus/multus.go`` ``CmdDel``; multus-cni
#355); the config the guard synthesizes sets it. Here whereabouts cannot reach its datastore
during the first DEL (its kubeconfig path is broken), so rail B's IPAM DEL fails while rail A and
the primary are released (the failure must not say "no such file or directory": Multus counts a
delegate error with those words as a completed DEL and removes the cache regardless). Thin Multus reports the failure to the runtime; the thick shim always
answers DEL with success. Either way the cache stays. The Pod is then deleted, so Multus could no
longer rebuild the delegates from it: the repeated DEL, with whereabouts healthy again, releases
rail B's address and VF from the kept cache alone.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from tests.cni.world import RAIL_A, RAIL_B, World, eventually

from sriov_dra.host import netlink

MODES = ["thin", "thick"]
PRIMARY = "lab-primary"


@pytest.mark.parametrize("mode", MODES)
def test_failed_delegate_del_keeps_the_cache_and_the_repeated_del_releases_after_pod_deletion(
    world: World, mode: str
) -> None:
    pod, att = world.attached(mode, "retry-del")
    cache = world.multus_cache_dir(mode) / att.container_id
    flat = world.node.whereabouts_conf
    healthy = flat.read_text()
    # A kubeconfig whereabouts cannot load. Not a missing file: Multus removes the cache anyway when
    # the delegate's error says "no such file or directory" (its CmdDel treats that as done).
    garbled = flat.parent / "garbled.kubeconfig"
    garbled.write_text("apiVersion: [v1\n")
    broken = dict(json.loads(healthy), kubernetes={"kubeconfig": str(garbled)})
    rail_b_vf = next(vf.ifname for vf in world.vfs if vf.pci == RAIL_B.pci)
    try:
        flat.write_text(json.dumps(broken))
        first = world.delete(mode, att)
    finally:
        flat.write_text(healthy)
        garbled.unlink()

    if mode == "thin":
        # sriov-cni relays its IPAM plugin's error unchanged; Multus names the delegate.
        assert not first.ok and "IPAM client initialization error" in first.stdout, first.stdout
    else:
        assert first.ok, first.stdout  # multus-shim answers every DEL with success
    assert cache.exists()  # kept: rail B's delegate DEL failed
    assert [a["id"] for a in world.ippool_allocations(RAIL_B).values()] == [att.container_id]
    assert world.host_local_reservations(RAIL_A.cni_name) == {}
    assert att.container_id not in world.host_local_reservations(PRIMARY).values()

    client.CoreV1Api(world.api).delete_namespaced_pod(pod.name, world.namespace, grace_period_seconds=0)
    eventually("the Pod to be gone", lambda: not world.pod_exists(pod.name))
    again = world.delete(mode, att)

    assert again.ok, again.stdout + again.stderr
    assert world.ippool_allocations(RAIL_B) == {}
    assert not cache.exists()
    assert set(netlink.link_names(att.netns)) == {"lo"}
    assert rail_b_vf in netlink.link_names(None)
