"""Cluster tier: ``--multus-auto-attach-node-label`` runs auto-attach only on a Node labelled for it.

The plugin process (the lab's launcher, the product's ``main``) on a fake-sysfs node with
``--multus-auto-attach`` and the gate label: without the label on its Node it logs the gate's
decision ``off`` with the reason and starts in manual mode (auto-attach's wiring never runs); once
the Node carries ``<label>=true`` a restarted plugin logs ``on`` and starts auto-attach.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client
from tests.cluster.driver import test_prepare as tp
from tests.cluster.driver.test_prepare import PluginNode, eventually

installed = tp.installed
plugin_node = tp.plugin_node

LABEL = "sriovnetwork.k8snetworkplumbingwg.io/multus-auto-attach"
FLAGS = ("--multus-auto-attach", f"--multus-auto-attach-node-label={LABEL}")


def _records(pn: PluginNode) -> list[dict[str, Any]]:
    out = []
    for line in pn.log().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _gate(pn: PluginNode) -> dict[str, Any] | None:
    return next((r for r in _records(pn) if r.get("msg") == "auto-attach gate"), None)


def _serving(pn: PluginNode) -> bool:
    return pn.probe("/readyz")[1].startswith("registered: waiting")


def test_the_plugin_runs_auto_attach_only_once_its_node_carries_the_gate_label(
    plugin_node: PluginNode,
) -> None:
    pn = plugin_node
    proc = pn.launch(*FLAGS)
    gate = eventually("the gate's decision in the log", lambda: _gate(pn))
    assert (gate["auto_attach"], gate["node"]) == ("off", pn.name), pn.log_tail()
    assert gate["reason"].startswith(f"Node {pn.name} does not carry {LABEL}: manual mode")
    eventually("the manual-mode plugin to serve its sockets", lambda: _serving(pn) or proc.popen.poll())
    assert proc.popen is not None and proc.popen.poll() is None, pn.log_tail()
    assert not any(r.get("msg") == "auto-attach enabled" for r in _records(pn)), pn.log_tail()
    pn.stop()

    client.CoreV1Api(pn.api).patch_node(pn.name, {"metadata": {"labels": {LABEL: "true"}}})
    pn.launch(*FLAGS)
    eventually("the restarted plugin's gate decision", lambda: _gate(pn))
    gate = _gate(pn)
    assert gate is not None and gate["auto_attach"] == "on", pn.log_tail()
    assert gate["reason"] == f"Node {pn.name} carries {LABEL}=true"
    eventually(
        "auto-attach to start", lambda: any(r.get("msg") == "auto-attach enabled" for r in _records(pn))
    )
