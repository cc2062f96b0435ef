"""A call held at a new plugin instance's gate, seen from the kubelet's side (docs/plugin.md#rolling-update).

A real kubelet plugin server serves a :class:`rolling_update.Gate` on unix sockets; the kubelet's
side is the lab's DRA client with the kubelet's own call deadline (``defaultClientCallTimeout``,
45 s). The old instance's drain may take that whole deadline, so the gate must hold a call as
long as the kubelet still takes an answer, and answer retryably just before it gives up. Real
time: the test runs about as long as one kubelet deadline.
"""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
from tests.fakes.claim_handler import FakeClaimHandler

from sriov_dra.driver import rolling_update
from sriov_dra.kubeletapi import endpoints, messages, plugin_server
from sriov_dra_lab import kubelet_plugins

DRIVER = "gate.example.com"


def _serve(directory: Path, instance: str, gate: rolling_update.Gate) -> plugin_server.KubeletPluginServer:
    sockets = endpoints.plugin_sockets(
        DRIVER, plugins_dir=directory / "plugins", registry_dir=directory / "registry", instance=instance
    )
    server = plugin_server.KubeletPluginServer(
        driver_name=DRIVER, handler=gate, sockets=sockets, health_source=gate.reports, serialize_calls=False
    )
    server.start()
    return server


def test_a_call_held_at_the_gate_is_served_when_the_node_is_handed_over_until_just_before_the_kubelets_deadline(
    short_dir: Path,
) -> None:
    """Two new instances each hold one kubelet call at their gate. One gets the node 2 s before the
    kubelet's deadline (the old instance's drain took nearly all of it): its call is prepared, not
    answered with an error it did not need. The other never gets it: its call is answered with the
    retryable error naming the wait while the kubelet still takes the answer (not a deadline error)."""
    handed_over_at_s = endpoints.PREPARE_CALL_TIMEOUT_S - rolling_update.GATE_ANSWER_MARGIN_S - 1.0
    gates = {"late": rolling_update.Gate(), "never": rolling_update.Gate()}
    servers = {name: _serve(short_dir, name, gate) for name, gate in gates.items()}
    clients = {  # the kubelet's side, with its deadline (PREPARE_CALL_TIMEOUT_S)
        name: kubelet_plugins.DraPluginClient(
            kubelet_plugins.unregistered(DRIVER, server.sockets, server.supported_versions)
        )
        for name, server in servers.items()
    }
    claims = {
        "late": messages.ClaimRef("ns", "claim-a", "uid-a"),
        "never": messages.ClaimRef("ns", "claim-b", "uid-b"),
    }
    results: dict[str, object] = {}

    def call(name: str) -> None:
        try:
            results[name] = clients[name].node_prepare_resources([claims[name]])
        except grpc.RpcError as err:
            results[name] = err.code()

    calls = [threading.Thread(target=call, args=(name,)) for name in gates]
    handler = FakeClaimHandler()
    handing_over = threading.Timer(handed_over_at_s, gates["late"].open, args=(handler, lambda: ()))
    try:
        for thread in calls:
            thread.start()
        handing_over.start()
        for thread in calls:
            thread.join(timeout=endpoints.PREPARE_CALL_TIMEOUT_S + 30)
    finally:
        handing_over.cancel()
        for client in clients.values():
            client.close()
        for server in servers.values():
            server.stop(grace_s=0)
    assert results["late"] == {"uid-a": messages.Prepared((messages.Device("pool-a", "dev-claim-a"),))}
    never = results["never"]
    assert isinstance(never, dict) and isinstance(never["uid-b"], messages.ClaimError), never
    assert "still taking the node over" in never["uid-b"].message
