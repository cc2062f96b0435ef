"""The kubelet simulator drives the real plugin and the real CNI chain as a kubelet and a runtime do.

A Pod with a VF claim is prepared over the plugin's socket, gets a sandbox with the node's CNI
chain (guard → Multus → primary), runs with its IP, and on deletion is torn down in the
kubelet's order (CNI DEL, NodeUnprepareResources, namespace removed, Pod deleted) leaving no
claim in the plugin's checkpoint, no CDI file and no address reservation. A restarted simulator
keeps its prepared claims, and a recreated sandbox needs no new prepare. A plugin restarted while
the Pod runs changes nothing for it, and its teardown still works.
"""

from __future__ import annotations

from typing import Any

from tests.e2e.helpers import claim_template, in_namespace, template, vf_pod, wait_clean

from sriov_dra_lab import workloads

DRIVER = "sriovnetwork.k8snetworkplumbingwg.io"


def _one_vf(namespace: str, name: str) -> list[dict[str, Any]]:
    ipam = {"type": "host-local", "ranges": [[{"subnet": "10.77.0.0/24"}]]}
    return in_namespace(
        namespace,
        template("rail-a-net", f"{namespace}-a", ipam),
        template("rail-b-net", f"{namespace}-b", ipam),
        claim_template("one-vf", [("vf", "sriovnetwork.k8snetworkplumbingwg.io")]),
        vf_pod(name, "one-vf"),
    )


def _addresses(netns: str, ifname: str) -> list[str]:
    from sriov_dra.cli import inspect

    return inspect.read_netns(netns).get(ifname, [])


def _started(lab: Any, namespace: str, name: str) -> tuple[dict[str, Any], Any]:
    pod = workloads.wait_running(lab.api, namespace, name, timeout_s=120)
    return pod, lab.node(pod["spec"]["nodeName"])


def test_pod_runs_with_prepared_claim_and_leaves_nothing_after_deletion(
    lab: Any, rails: Any, namespace: str
) -> None:
    docs = _one_vf(namespace, "runner")
    workloads.apply_docs(lab.api, docs)
    pod, node = _started(lab, namespace, "runner")
    uid = pod["metadata"]["uid"]
    record = node.kubelet.record(uid)
    assert [c.driver for c in record.prepare_calls] == [DRIVER]
    assert pod["status"]["podIP"].startswith(f"10.244.{node.layout.index}.")
    box = node.kubelet.sandbox(uid)
    assert box is not None and box.network_file == "00-multus-guard.conflist"
    assert any(box.cdi_devices.values()), "the kubelet got CDI device IDs for the VF"
    assert _addresses(box.netns, "dra0")[0].startswith("10.77.0."), (
        "the VF is dra0 with its template's address"
    )

    workloads.delete_docs(lab.api, [d for d in docs if d["kind"] == "Pod"])

    assert [c.driver for c in record.unprepare_calls] == [DRIVER]
    found = wait_clean(lab)
    assert found.empty, found.describe()


def test_restarted_simulator_recreates_sandbox_without_new_prepare(
    lab: Any, rails: Any, namespace: str
) -> None:
    docs = _one_vf(namespace, "survivor")
    workloads.apply_docs(lab.api, docs)
    pod, node = _started(lab, namespace, "survivor")
    uid = pod["metadata"]["uid"]
    first = node.kubelet.sandbox(uid)
    claims_before = node.kubelet.prepared_claims()

    lab.stop_kubelet(node)
    sim = lab.start_kubelet(node)
    assert sim.prepared_claims() == claims_before, "the checkpoint restored the prepared claims"
    sim.kill_sandbox(uid)
    workloads.eventually(
        "a new sandbox",
        lambda: (b := sim.sandbox(uid)) and b.container_id != first.container_id,
        timeout_s=60,
    )

    record = sim.record(uid)
    assert record.sandboxes_started == 1
    assert record.prepare_calls == [], "no NodePrepareResources for an already prepared claim"
    assert _addresses(sim.sandbox(uid).netns, "dra0"), "the recreated sandbox has its VF again"
    assert workloads.wait_running(lab.api, namespace, "survivor")["status"]["phase"] == "Running"

    workloads.delete_docs(lab.api, [d for d in docs if d["kind"] == "Pod"])
    assert [c.driver for c in record.unprepare_calls] == [DRIVER]


def test_plugin_restart_mid_workload_keeps_pod_and_teardown(lab: Any, rails: Any, namespace: str) -> None:
    docs = _one_vf(namespace, "steady")
    workloads.apply_docs(lab.api, docs)
    pod, node = _started(lab, namespace, "steady")
    checkpoint = (node.layout.plugin_state_dir / "checkpoint.json").read_text()

    lab.stop_plugin(node)
    lab.start_plugin(node)
    assert node.kubelet.wait_registered(DRIVER, timeout_s=60)

    assert (node.layout.plugin_state_dir / "checkpoint.json").read_text() == checkpoint
    assert workloads.wait_running(lab.api, namespace, "steady")["metadata"]["uid"] == pod["metadata"]["uid"]
    workloads.delete_docs(lab.api, [d for d in docs if d["kind"] == "Pod"])
    found = wait_clean(lab)
    assert found.empty, found.describe()
