"""Multus's primary-only success for a selection it did not attach becomes a failure.

multus-cni #492: Multus can answer ADD with success while a selected network never reached the
sandbox, and the Pod starts with its primary alone. Here the real Multus v4.3.0 (thin and thick)
does exactly that for a reason it handles that way by design: the selected NAD ``net-a`` is an
IPAM-only config (``"type": "host-local"``, a common slip for a delegate). Multus runs it as a
delegate, host-local reserves an address and returns a result without interfaces, and Multus
(which accepts "some CNI plugin does not create any interface and just returns empty result")
returns success with ``eth0`` only and no network-status entry for ``net-a``. ``eth1`` never
exists.

On a node with ``guard.verifyOrdinarySelections`` (installed here into a variant conf dir), the
guard checks every selection, managed or not, and after Multus's success finds ``eth1`` missing
in the sandbox and in network-status: it runs Multus DEL (which releases net-a's and the
primary's addresses from Multus's delegate cache, and the lab VF of a managed shadow) and fails
the ADD with ``InterfacesMissing`` naming ``eth1``, the Pod and the NAD. Nothing stays reserved.
Without the option (the default) such a Pod gets Multus's own success (``test_ordinary_pods.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cni.world import RAIL_A, World

from sriov_dra.host import netlink
from sriov_dra_lab import cni
from sriov_dra_rules import names

MODES = ["thin", "thick"]
PRIMARY = "lab-primary"
NET_A = "net-a"
NET_A_SUBNET = "203.0.113.0/25"


@pytest.fixture
def verifying(world: World, tmp_path: Path) -> dict[str, Path]:
    """Per mode, a runtime conf dir whose guard config turns on ``guard.verifyOrdinarySelections``."""
    dirs = {mode: tmp_path / f"net.d-verify-{mode}" for mode in MODES}
    for mode, conf_dir in dirs.items():
        world.node.install_guard(mode, conf_dir=conf_dir, verify_ordinary_selections=True)
    return dirs


@pytest.fixture
def ns_a(world: World) -> str:
    """Another namespace holding NAD ``net-a`` (see :func:`_ipam_only_nad`)."""
    namespace = world.extra_namespace()
    _ipam_only_nad(world, namespace)
    return namespace


def _ipam_only_nad(world: World, namespace: str) -> None:
    """NAD ``net-a`` whose config is an IPAM plugin alone: it reserves an address, creates no interface."""
    ipam = {
        "type": "host-local",
        "dataDir": str(world.node.host_local_dir),
        "ranges": [[{"subnet": NET_A_SUBNET}]],
    }
    config = {"cniVersion": "1.0.0", "name": NET_A, "type": "host-local", "ipam": ipam}
    world.create_nad(
        {
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": NET_A, "namespace": namespace},
            "spec": {"config": json.dumps(config)},
        }
    )


def _selection(namespace: str) -> str:
    return json.dumps({"name": NET_A, "namespace": namespace, "interface": "eth1"}, separators=(",", ":"))


def _held_by(world: World, att: cni.Attachment) -> list[str]:
    return [
        net
        for net in (PRIMARY, NET_A, RAIL_A.cni_name)
        if att.container_id in world.host_local_reservations(net).values()
    ]


def _assert_undone(world: World, mode: str, tried: list[tuple[cni.Attachment, cni.CniResult]]) -> None:
    """The last sandbox got Multus DEL after Multus's ADD; no attempt left an interface or address."""
    for earlier, _ in tried:
        assert set(netlink.link_names(earlier.netns)) == {"lo"} and _held_by(world, earlier) == []
    att = tried[-1][0]
    calls = [(c.plugin, c.command, c.ifname) for c in world.node.recorded(att.container_id)]
    multus = "multus" if mode == "thin" else "multus-shim"
    assert ("host-local", "ADD", "eth1") in calls  # Multus did run net-a's delegate ...
    first_del = calls.index((multus, "DEL", "eth0"))
    assert calls.index(("host-local", "ADD", "eth1")) < first_del  # ... and then the guard's Multus DEL
    undone = calls[first_del:]
    assert ("host-local", "DEL", "eth1") in undone and ("macvlan", "DEL", "eth0") in undone
    assert not (world.multus_cache_dir(mode) / att.container_id).exists()


def _add_like_the_kubelet(
    world: World, mode: str, pod: str, uid: str, *, done: str, conf_dir: Path
) -> list[tuple[cni.Attachment, cni.CniResult]]:
    """ADD in a new sandbox per attempt until the guard's failure message shows ``done``.

    Thick Multus reads NADs and the Pod from informers that can lag the objects this test just
    wrote: a NAD not seen yet fails Multus's ADD (``cannot find a network-attachment-definition``;
    the kubelet then tears the sandbox down with DEL and retries), a Pod annotation not seen yet
    leaves the managed interfaces out too (the guard's failure names them; it ran Multus DEL
    itself). Shapes: every attempt, oldest first; the last one shows ``done``.
    """
    tried: list[tuple[cni.Attachment, cni.CniResult]] = []
    msg = ""
    for _ in range(5):
        att = world.attachment(pod, uid=uid)
        result = world.add(mode, att, conf_dir=conf_dir)
        tried.append((att, result))
        assert not result.ok, result.stdout
        msg = str((result.error or {}).get("msg", ""))
        if "cannot find a network-attachment-definition" in msg:
            assert world.delete(mode, att, conf_dir=conf_dir).ok
            continue
        assert msg.startswith("multus-guard: InterfacesMissing:"), result.stdout
        if done in msg:
            return tried
    raise AssertionError(f"no attempt failed naming {done!r}; the last said: {msg}")


@pytest.mark.parametrize("mode", MODES)
def test_primary_only_success_for_a_manual_selection_fails_interfaces_missing_after_multus_del(
    world: World, mode: str, ns_a: str, verifying: dict[str, Path]
) -> None:
    pod = world.pod("manual-only", annotations={names.NETWORKS_ANNOTATION: f"[{_selection(ns_a)}]"})

    tried = _add_like_the_kubelet(
        world, mode, "manual-only", pod["metadata"]["uid"], done="eth1", conf_dir=verifying[mode]
    )

    result = tried[-1][1]
    error = result.error or {}
    assert error.get("code") == 101, result.stdout
    msg = str(error.get("msg", ""))
    assert f"requested by Pod {world.namespace}/manual-only" in msg, msg
    assert f"eth1 (NAD {ns_a}/{NET_A})" in msg, msg
    details = str(error.get("details", ""))
    assert f"{ns_a}/{NET_A} on eth1" in details and "NetworkStatusMissing" in details, details
    assert "Multus ran; Multus DEL succeeded" in details, details
    # What Multus itself reported in network-status: the primary alone.
    assert [e.get("interface") for e in world.status_entries("manual-only")] == ["eth0"]
    _assert_undone(world, mode, tried)


@pytest.mark.parametrize("mode", MODES)
def test_managed_pod_whose_manual_selection_is_missing_is_undone_with_its_vf_back_on_the_node(
    world: World, mode: str, ns_a: str, verifying: dict[str, Path]
) -> None:
    pod = world.managed_pod("mixed", rails=(RAIL_A,), manual=[_selection(ns_a)])
    rail_a_vf = next(vf.ifname for vf in world.vfs if vf.pci == RAIL_A.pci)

    tried = _add_like_the_kubelet(
        world, mode, pod.name, pod.uid, done=f"eth1 (NAD {ns_a}/{NET_A});", conf_dir=verifying[mode]
    )

    att, result = tried[-1]
    msg = str((result.error or {}).get("msg", ""))
    assert "dra0" not in msg, msg  # dra0 was attached and verified; only eth1 is missing
    calls = [(c.plugin, c.command) for c in world.node.recorded(att.container_id)]
    assert ("sriov", "ADD") in calls and ("sriov", "DEL") in calls
    _assert_undone(world, mode, tried)
    assert rail_a_vf in netlink.link_names(None)  # the lab VF is back on the node
