"""Ordinary Pods behave as if this project were not installed (docs/design.md#rules, item 12).

A differential test: each Pod of the table has no managed binding on the node, and its ADD runs
three ways on the same real stack (Multus v4.3.0, thin and thick): stock Multus alone, with the
config it would have without the guard; the runtime's chain through the guard with the guard
daemon up; and the same with the daemon stopped. What each ADD leaves must be equal: its result
(interfaces, addresses, routes, DNS) or its CNI error (code, message, details), the interfaces
and addresses in the sandbox, and the Pod's ``network-status`` as Multus wrote it.

Normalised, because it legitimately differs: between two sandboxes, the container ID and the
sandbox's netns path (wherever they appear), MAC addresses (macvlan makes a new one each time)
and the host part of each address (host-local hands each sandbox the next free one; the network,
prefix, gateway and routes are compared as they are); and in thick mode the copy of its own stdin
that ``multus-shim`` appends to an error (``StdinData: {...}``): the guard hands Multus its
synthesized config (the primary inlined, ``retryDeleteOnError`` set: multus-cni #1449, #355), not
the thick daemon's generated file, whose keys the daemon's own config overrides either way. After
a failed ADD the sandbox is not compared: the runtime tears it down, and thick Multus's own
rollback leaves the primary's interface behind when it reads the primary from the daemon's
``clusterNetwork`` file (re-marshalled lossily, multus-cni #1449), which the guard's inlined
primary avoids. Every sandbox is torn down by its own path's DEL before the next one starts.

The table holds what upstream reports show Pods carry: well-formed selections in both notations,
keys Multus ignores or reads its own way (``interfaceRequest``, case variants, unknown keys),
annotations Multus refuses (malformed JSON, a wrong type, a bad comma entry), a NAD that does not
exist, a passthru-style delegate that creates no interface (Multus's success with the primary
alone, multus-cni #492), an IPAM failure, and the default-network override. Pods with managed
bindings keep every check and fail closed: ``test_rejections.py`` and the tests below.
"""

from __future__ import annotations

import ipaddress
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.cni.world import World

from sriov_dra.host import netlink
from sriov_dra_lab import cni
from sriov_dra_rules import names

MODES = ["thin", "thick"]
DEFAULT_NETWORK = "v1.multus-cni.io/default-network"
STDIN_ECHO = re.compile(r"': StdinData: \{.*\}$", re.S)
"""``multus-shim``'s copy of its stdin at the end of an error message (see the module docstring)."""
NETWORKS = names.NETWORKS_ANNOTATION


def _macvlan(world: World, name: str, subnet: str, **ipam: Any) -> dict[str, Any]:
    assert world.node.uplink is not None
    return {
        "cniVersion": "1.0.0",
        "name": name,
        "type": "macvlan",
        "master": world.node.uplink.ifname,
        "mode": "bridge",
        "ipam": {
            "type": "host-local",
            "dataDir": str(world.node.host_local_dir),
            "ranges": [[{"subnet": subnet, **ipam}]],
            "routes": [{"dst": "198.18.0.0/15"}],
        },
        "dns": {"nameservers": ["192.0.2.53"], "search": ["ordinary.example"]},
    }


def _nads(world: World) -> dict[str, dict[str, Any]]:
    """The ordinary NADs the table selects (CNI configs by NAD name)."""
    one = {"rangeStart": "203.0.113.193", "rangeEnd": "203.0.113.193"}
    return {
        "ord-a": _macvlan(world, "ord-a", "203.0.113.0/26"),
        "ord-b": _macvlan(world, "ord-b", "203.0.113.64/26"),
        # A passthru-style delegate: IPAM alone, it reserves an address and creates no interface.
        "ipam-only": {
            "cniVersion": "1.0.0",
            "name": "ipam-only",
            "type": "host-local",
            "ipam": {
                "type": "host-local",
                "dataDir": str(world.node.host_local_dir),
                "ranges": [[{"subnet": "203.0.113.128/26"}]],
            },
        },
        # A range of one address, held by another container (:func:`table`): host-local has none left.
        "ipam-full": _macvlan(world, "ipam-full", "203.0.113.192/30", **one),
    }


CASES: dict[str, dict[str, str]] = {
    "no-annotation": {},
    "json-selection": {NETWORKS: '[{"name":"ord-a","interface":"eth1"}]'},
    "comma-selections": {NETWORKS: "ord-a@eth1, ord-b"},
    "interface-request-key": {NETWORKS: '[{"name":"ord-a","interfaceRequest":"eth7"}]'},
    "case-variant-and-unknown-keys": {NETWORKS: '[{"Name":"ord-a","INTERFACE":"eth2","foo":{"x":1}}]'},
    "malformed-json": {NETWORKS: '[{"name":"ord-a","ips":["10.1.1.104/24"]]'},
    "wrong-type": {NETWORKS: '[{"name":"ord-a","ips":"10.0.0.5/24"}]'},
    "bad-comma-entry": {NETWORKS: "ord-a@eth1@eth2"},
    "trailing-comma": {NETWORKS: "ord-a,"},
    "missing-nad": {NETWORKS: '[{"name":"no-such-nad"}]'},
    "passthru-style-delegate": {NETWORKS: '[{"name":"ipam-only","interface":"eth1"}]'},
    "ipam-failure": {NETWORKS: "ipam-full"},
    "interface-collision": {NETWORKS: '[{"name":"ord-a"},{"name":"ord-b","interface":"net1"}]'},
    "default-network-override": {DEFAULT_NETWORK: "{ns}/ord-a"},
    "default-network-override-and-selection": {DEFAULT_NETWORK: "{ns}/ord-a", NETWORKS: "ord-b@eth1"},
    "default-network-from-multus-namespace": {DEFAULT_NETWORK: "ord-a"},
}
"""Annotations per case; ``{ns}`` is the test's namespace."""

SUCCEEDING = {
    "no-annotation",
    "json-selection",
    "comma-selections",
    "interface-request-key",
    "case-variant-and-unknown-keys",
    "passthru-style-delegate",
    "default-network-override",
    "default-network-override-and-selection",
}
"""The cases stock Multus starts; it refuses every other one."""


def _network(address: str) -> str:
    return f"<host in {ipaddress.ip_interface(address).network}>"


def _normalised(result: cni.CniResult, att: cni.Attachment) -> Any:
    """The result or error of one ADD, normalised (see the module docstring for what and why)."""
    text = result.stdout.replace(att.container_id, "<container>").replace(att.netns, "<netns>")
    if not result.ok:
        error = json.loads(text) if text.strip().startswith("{") else {"msg": text}
        msg = STDIN_ECHO.sub("': StdinData: <its stdin>", str(error.get("msg", "")))
        return {
            "exit": result.exit_code,
            "code": error.get("code"),
            "msg": msg,
            "details": error.get("details"),
        }
    doc = json.loads(text)
    for interface in doc.get("interfaces", []):
        if "mac" in interface:
            interface["mac"] = "<mac>"
    for ip in doc.get("ips", []):
        ip["address"] = _network(ip["address"])
    return doc


def _left(world: World, pod: str, att: cni.Attachment) -> dict[str, Any]:
    """What an ADD left: the sandbox's interfaces and addresses, and the Pod's network-status."""
    status = world.status_entries(pod)
    for entry in status:
        entry["ips"] = [
            "<address>" for _ in entry.get("ips", [])
        ]  # without prefix; the sandbox shows its network
        entry.pop("mac", None)
    links = sorted((link.name, [_network(a) for a in link.addresses]) for link in netlink.links(att.netns))
    return {"sandbox": links, "network-status": status}


def _run(world: World, mode: str, pod: str, uid: str | None, path: str) -> dict[str, Any]:
    """One sandbox of ``pod``: ADD by ``path`` (``alone`` or ``guard``), what it left, then that path's DEL."""
    att = world.attachment(pod, uid=uid)
    world.annotate_pod(pod, {names.NETWORK_STATUS_ANNOTATION: None})  # Multus writes it on success
    run = world.node.run_multus_alone if path == "alone" else (lambda m, c, a: world.node.run(m, c, a))
    added = run(mode, "ADD", att)
    seen = {"add": _normalised(added, att), **_left(world, pod, att)}
    if not added.ok:
        del seen["sandbox"]  # the runtime's to tear down (see the module docstring)
    deleted = run(mode, "DEL", att)
    assert deleted.ok, deleted.stdout + deleted.stderr
    return seen


@pytest.fixture
def table(world: World) -> Iterator[dict[str, str]]:
    """The NADs and one Pod per case (name → UID), seen by thick Multus's informers before the runs."""
    for name, config in _nads(world).items():
        world.create_nad(
            {
                "apiVersion": "k8s.cni.cncf.io/v1",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": name},
                "spec": {"config": json.dumps(config)},
            }
        )
    held = world.node.host_local_dir / "ipam-full" / "203.0.113.193"
    held.parent.mkdir(parents=True, exist_ok=True)
    held.write_text("another-container\neth1")
    pods = {}
    for case, wanted in CASES.items():
        written = {key: value.replace("{ns}", world.namespace) for key, value in wanted.items()}
        pods[case] = world.pod(case, annotations=written)["metadata"]["uid"]
    time.sleep(2.0)  # the thick daemon reads Pods and NADs from informers
    yield pods
    held.unlink()


@pytest.mark.parametrize("mode", MODES)
def test_ordinary_pods_get_stock_multus_outcome_with_the_guard_daemon_up_and_down(
    world: World, table: dict[str, str], mode: str
) -> None:
    outcomes: dict[str, dict[str, Any]] = {case: {} for case in CASES}
    for case, uid in table.items():
        outcomes[case]["alone"] = _run(world, mode, case, uid, "alone")
        outcomes[case]["daemon up"] = _run(world, mode, case, uid, "guard")
    assert world.node.guard is not None
    world.node.guard.stop()
    try:
        for case, uid in table.items():
            outcomes[case]["daemon down"] = _run(world, mode, case, uid, "guard")
    finally:
        world.node.guard.start()

    differ = {
        case: seen
        for case, seen in outcomes.items()
        if not seen["alone"] == seen["daemon up"] == seen["daemon down"]
    }
    assert differ == {}, json.dumps(differ, indent=1)
    # The table exercises what it says: successes and Multus's own refusals alike.
    alone = {case: seen["alone"] for case, seen in outcomes.items()}
    assert {case for case, seen in alone.items() if "exit" not in seen["add"]} == SUCCEEDING, alone
    links = {case: [name for name, _ in alone[case]["sandbox"]] for case in SUCCEEDING}
    assert links["comma-selections"] == ["eth0", "eth1", "lo", "net2"]
    assert "eth7" in links["interface-request-key"] and "eth2" in links["case-variant-and-unknown-keys"]
    assert links["passthru-style-delegate"] == ["eth0", "lo"]  # Multus's success with the primary alone
    assert links["default-network-override-and-selection"] == ["eth0", "eth1", "lo"]


def test_managed_pod_fails_closed_while_the_daemon_is_down_and_names_the_pod_and_checkpoint(
    world: World,
) -> None:
    pod = world.managed_pod("managed")
    assert world.node.guard is not None
    world.node.guard.stop()
    try:
        for mode in MODES:
            att = world.attachment(pod.name, uid=pod.uid)
            error = world.add(mode, att).error or {}
            assert error.get("code") == 11 and "guard daemon is not reachable" in error.get("msg", ""), error
            assert (
                f"Pod UID {pod.uid} has managed bindings in {world.node.plugin_checkpoint}"
                in error["details"]
            )
            assert world.node.recorded(att.container_id) == []  # not Multus, not a delegate
    finally:
        world.node.guard.start()
    att, added = world.attach("thin", pod.name, uid=pod.uid)  # with the daemon back: attached and verified
    assert added.ok, added.stdout
    assert world.delete("thin", att).ok


def test_without_a_pod_uid_the_shim_cannot_tell_while_bindings_exist_and_the_daemon_decides(
    world: World,
) -> None:
    """No ``K8S_POD_UID`` on a node with managed bindings: the daemon decides; it must be up."""
    world.managed_pod("managed")
    uid = world.pod("plain")["metadata"]["uid"]
    time.sleep(1.0)
    alone = _run(world, "thin", "plain", uid, "alone")
    assert _run(world, "thin", "plain", None, "guard") == alone  # an ordinary Pod, found so by the daemon
    assert world.node.guard is not None
    world.node.guard.stop()
    try:
        refused = world.add("thin", world.attachment("plain", uid=None))
    finally:
        world.node.guard.start()
    error = refused.error or {}
    assert error.get("code") == 11 and "name no K8S_POD_UID" in error.get("details", ""), refused.stdout
