"""DEL with an unreadable Multus delegate cache and the Pod alive releases everything.

Multus v4.3.0 reads ``<cniDir>/<container ID>`` on DEL. A file that is not valid JSON (0 bytes,
or cut short by a crash: multus-cni #948, #1087) makes it answer DEL with success without running
any delegate, the primary included, and leave the file in place: every repeated DEL does the
same, and the sandbox's host-local and whereabouts addresses and its VFs leak. The first DEL
below, stock Multus alone (thin and thick), shows exactly that with the real binaries.

Through the guard the shim sees the unreadable file before DEL, keeps it as
``<file>.corrupt-<time>`` next to it, removes the original and logs that with the container ID
and both paths. Multus then takes its cache-missing path: with the Pod alive it rebuilds the
delegates from the live Pod and the frozen shadows (held by their protection finalizer) and runs
every delegate's DEL; no address stays reserved and both lab VFs are back on the node.
"""

from __future__ import annotations

import pytest
from tests.cni.world import DELEGATE_DELS, RAIL_A, RAIL_B, World

from sriov_dra.host import netlink

MODES = ["thin", "thick"]
PRIMARY = "lab-primary"


def _held(world: World, container_id: str) -> dict[str, bool]:
    held = {
        net: container_id in world.host_local_reservations(net).values() for net in (PRIMARY, RAIL_A.cni_name)
    }
    held["whereabouts"] = any(a.get("id") == container_id for a in world.ippool_allocations(RAIL_B).values())
    return held


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("damage", ["zero-bytes", "half-written"])
def test_unreadable_cache_with_the_pod_alive_is_set_aside_and_del_runs_every_delegate(
    world: World, mode: str, damage: str
) -> None:
    _, att = world.attached(mode, "corrupt")
    cache = world.multus_cache_dir(mode) / att.container_id
    written = cache.read_bytes()
    damaged = b"" if damage == "zero-bytes" else written[: len(written) // 2]
    cache.write_bytes(damaged)
    assert _held(world, att.container_id) == {PRIMARY: True, RAIL_A.cni_name: True, "whereabouts": True}

    # Stock Multus v4.3.0 alone: success, no delegate DEL at all, the damaged file left as it was.
    before = len(world.node.recorded(att.container_id))
    log = world.node.thick.workdir / "multus-daemon.log" if mode == "thick" and world.node.thick else None
    log_start = log.stat().st_size if log else 0
    alone = world.node.run_multus_alone(mode, "DEL", att)
    assert alone.ok, alone.stdout + alone.stderr
    multus = "multus" if mode == "thin" else "multus-shim"
    assert [(c.plugin, c.command) for c in world.node.recorded(att.container_id)[before:]] == [
        (multus, "DEL")
    ]
    assert cache.read_bytes() == damaged and all(_held(world, att.container_id).values())
    assert {"eth0", "dra0", "dra1"} <= netlink.link_names(att.netns)
    if log is not None:
        with log.open("rb") as f:
            f.seek(log_start)
            logged = f.read().decode(errors="replace")
        assert "Multus: failed to load netconf: unexpected end of JSON input" in logged, logged[-2000:]
        assert "cannot properly delete" in logged, logged[-2000:]

    # Through the guard: the file is set aside, Multus rebuilds from the Pod and the frozen shadows.
    before = len(world.node.recorded(att.container_id))
    deleted = world.delete(mode, att)

    assert deleted.ok, deleted.stdout + deleted.stderr
    copies = sorted(cache.parent.glob(f"{att.container_id}.corrupt-*"))
    assert [c.read_bytes() for c in copies] == [damaged] and not cache.exists()
    assert f"op=DEL container={att.container_id} cache={cache} copy={copies[0]}:" in deleted.stderr
    dels = [c.plugin for c in world.node.recorded(att.container_id)[before:] if c.command == "DEL"]
    assert dels == [multus, *DELEGATE_DELS]
    assert set(netlink.link_names(att.netns)) == {"lo"}
    assert {vf.ifname for vf in world.vfs} <= netlink.link_names(None)  # both lab VFs back on the node
    assert _held(world, att.container_id) == {PRIMARY: False, RAIL_A.cni_name: False, "whereabouts": False}
    assert world.host_local_files(RAIL_A) == [] and world.ippool_allocations(RAIL_B) == {}

    again = world.delete(mode, att)  # the kubelet may repeat DEL: nothing left to release, no new copy
    assert again.ok, again.stdout + again.stderr
    assert sorted(cache.parent.glob(f"{att.container_id}.corrupt-*")) == copies
