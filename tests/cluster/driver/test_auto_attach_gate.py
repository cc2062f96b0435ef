"""Cluster tier: ``--multus-auto-attach-node-label`` runs auto-attach only on a Node labelled for it.

The plugin process (the lab's launcher, the product's ``main``) on a fake-sysfs node with
``--multus-auto-attach`` and the gate label: without the label on its Node it logs the gate's
decision ``off`` with the reason and starts in manual mode (auto-attach's wiring never runs); once
the Node carries ``<label>=true`` a restarted plugin logs ``on`` and starts auto-attach. Each
process reports the mode it runs on its Pod (``--pod-name``, ``--pod-namespace``): a Pod object
that no kubelet runs stands for the plugin's Pod. A node without the label whose checkpoint holds
auto-attached bindings is release-only (``driver.managed_wiring.gated_settings`` against the API
server, a real checkpoint file) and reports so, and full again once the label is back.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client
from tests.cluster.driver import test_prepare as tp
from tests.cluster.driver.test_prepare import PluginNode, eventually
from tests.fakes import checkpoint_records as records

from sriov_dra.core.plugin import auto_attach_gate
from sriov_dra.driver import managed_wiring, settings
from sriov_dra.host import checkpoint
from sriov_dra_rules import names

installed = tp.installed
plugin_node = tp.plugin_node

LABEL = "sriovnetwork.k8snetworkplumbingwg.io/multus-auto-attach"
FLAGS = ("--multus-auto-attach", f"--multus-auto-attach-node-label={LABEL}")
POD = "sriov-dra-plugin-test"


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


def _reported(pn: PluginNode) -> str | None:
    pod = client.CoreV1Api(pn.api).read_namespaced_pod(POD, pn.policy_namespace)
    return (pod.metadata.annotations or {}).get(names.AUTO_ATTACH_MODE_ANNOTATION)


def _plugin_pod(pn: PluginNode) -> tuple[str, ...]:
    """The Pod object standing for the plugin's Pod (no kubelet runs it); the flags naming it."""
    body = {
        "metadata": {"name": POD, "annotations": {"kept": "yes"}},
        "spec": {"nodeName": pn.name, "containers": [{"name": "plugin", "image": "registry.invalid/plugin"}]},
    }
    client.CoreV1Api(pn.api).create_namespaced_pod(pn.policy_namespace, body)
    return (f"--pod-name={POD}", f"--pod-namespace={pn.policy_namespace}")


def test_the_plugin_runs_auto_attach_only_once_its_node_carries_the_gate_label_and_reports_the_mode_on_its_pod(
    plugin_node: PluginNode,
) -> None:
    pn = plugin_node
    pod_flags = _plugin_pod(pn)
    proc = pn.launch(*FLAGS, *pod_flags)
    gate = eventually("the gate's decision in the log", lambda: _gate(pn))
    assert (gate["auto_attach"], gate["mode"], gate["node"]) == ("off", "off", pn.name), pn.log_tail()
    assert gate["reason"].startswith(f"Node {pn.name} does not carry {LABEL}: manual mode")
    eventually("the manual-mode plugin to serve its sockets", lambda: _serving(pn) or proc.popen.poll())
    assert proc.popen is not None and proc.popen.poll() is None, pn.log_tail()
    assert not any(r.get("msg") == "auto-attach enabled" for r in _records(pn)), pn.log_tail()
    assert _reported(pn) == "off", pn.log_tail()
    pn.stop()

    client.CoreV1Api(pn.api).patch_node(pn.name, {"metadata": {"labels": {LABEL: "true"}}})
    pn.launch(*FLAGS, *pod_flags)
    eventually("the restarted plugin's gate decision", lambda: _gate(pn))
    gate = _gate(pn)
    assert gate is not None and (gate["auto_attach"], gate["mode"]) == ("on", "full"), pn.log_tail()
    assert gate["reason"] == f"Node {pn.name} carries {LABEL}=true"
    eventually(
        "auto-attach to start", lambda: any(r.get("msg") == "auto-attach enabled" for r in _records(pn))
    )
    eventually("the full mode reported on the plugin's Pod", lambda: _reported(pn) == "full")
    pod = client.CoreV1Api(pn.api).read_namespaced_pod(POD, pn.policy_namespace)
    assert pod.metadata.annotations["kept"] == "yes"  # the report changes only its own annotation


def test_a_node_without_the_label_whose_checkpoint_holds_bindings_is_release_only_and_says_so_on_its_pod(
    plugin_node: PluginNode,
) -> None:
    pn = plugin_node
    pod_flags = _plugin_pod(pn)
    cfg = settings.parse([*FLAGS, *pod_flags, f"--node-name={pn.name}", f"--state-dir={pn.state}"], {})
    pn.state.mkdir(parents=True, exist_ok=True)
    store = checkpoint.CheckpointStore(pn.checkpoint_path)
    try:
        store.load()
        store.set_claim(records.record())
        gated = managed_wiring.gated_settings(pn.api, cfg, store)
        assert gated.auto_attach_mode is auto_attach_gate.Mode.RELEASE_ONLY
        assert (
            f"the checkpoint holds auto-attached bindings (claims {records.CLAIM_1})"
            in gated.auto_attach_gate_closed
        )
        assert managed_wiring.claim_fields(None, gated)["gate_closed"] == gated.auto_attach_gate_closed
        assert _reported(pn) == "release-only"

        client.CoreV1Api(pn.api).patch_node(pn.name, {"metadata": {"labels": {LABEL: "true"}}})
        reopened = managed_wiring.gated_settings(pn.api, cfg, store)
        assert (reopened.auto_attach_mode, reopened.auto_attach_gate_closed) == (
            auto_attach_gate.Mode.FULL,
            "",
        )
        assert _reported(pn) == "full"
    finally:
        store.close()
