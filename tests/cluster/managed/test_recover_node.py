"""Cluster tier: ``sriov-dra recover-node`` against a real apiserver, garbage collector and Pod GC.

A gpu-nic-pairs workload is prepared on a simulated node by the real plugin code; its two shadows
name whereabouts pools, and the test writes the allocations and reservations whereabouts would
have made for the Pod's ``dra0``/``dra1`` (in the test namespace: recovery looks in every
namespace), beside an unrelated Pod's. The node then "dies": its heartbeat stops and its Ready
condition goes Unknown, as the node lifecycle controller sets it. Each refusal (Ready, not
fenced, plugin Pod still ready) changes nothing; once fenced with the out-of-service taint
(``NoSchedule`` here, so the Pod stays and its selections are visibly removed; the e2e test uses
``NoExecute``), the dry run changes nothing and ``--apply`` recovers everything.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

from sriov_dra.cli import main as cli
from sriov_dra.cli import recover_node
from sriov_dra.core.plugin import node_fencing
from sriov_dra.kube import objects
from sriov_dra.kube import whereabouts as wb
from sriov_dra.kubeletapi import messages
from sriov_dra_lab import multus
from sriov_dra_rules import names

from .conftest import PLUGIN_NS, ClusterPlugin, eventually, nads_in
from .test_auto_attach import annotations, start_pair_workload

POD = "gpu-sriov-pairs-demo"


@dataclass
class Lost:
    """A prepared workload on a node about to be lost, and what whereabouts holds for it."""

    namespace: str
    shadows: list[dict[str, Any]]
    pools: list[str]


def _pool_name(network: str, cidr: str) -> str:
    return f"{network}-{cidr.replace('/', '-')}"


def lost_workload(api: client.ApiClient, plugin: ClusterPlugin, namespace: str) -> Lost:
    multus.install_whereabouts_crds(api)
    ref = start_pair_workload(api, plugin, namespace, POD)
    assert isinstance(plugin.prepare(ref), messages.Prepared)
    shadows = nads_in(api, namespace)
    assert len(shadows) == 2
    objs = objects.Objects(api, field_manager="test")
    pools = []
    for i, shadow in enumerate(shadows):
        config = json.loads(shadow["spec"]["config"])
        ipam = config["ipam"]
        interface = json.loads(shadow["metadata"]["annotations"][names.BINDING_ANNOTATION])["interface"]
        name = _pool_name(ipam["network_name"], ipam["range"])
        pools.append(name)
        podref = f"{namespace}/{POD}"
        allocations = {
            "7": {"id": "c-dead", "podref": podref, "ifname": interface},
            "9": {"id": "c-other", "podref": f"{namespace}/other", "ifname": interface},
        }
        body = {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"range": ipam["range"], "allocations": allocations},
        }
        objs.create(wb.IPPOOL, {"apiVersion": wb.IPPOOL.api_version, "kind": "IPPool", **body})
        prefix = ipam["range"].rsplit(".", 1)[0]
        for ip, owner in ((f"{prefix}.7", podref), (f"{prefix}.9", f"{namespace}/other")):
            objs.create(
                wb.OVERLAPPING_RESERVATION,
                {
                    "apiVersion": wb.OVERLAPPING_RESERVATION.api_version,
                    "kind": "OverlappingRangeIPReservation",
                    "metadata": {"name": f"{ipam['network_name']}-{ip}", "namespace": namespace},
                    "spec": {"containerid": f"c{i}", "podref": owner, "ifname": interface},
                },
            )
    return Lost(namespace, shadows, pools)


def run(control_plane: Any, node: str, *extra: str) -> tuple[int, str]:
    args = cli.build_parser().parse_args(
        ["recover-node", node, "--kubeconfig", str(control_plane.kubeconfig), *extra]
    )
    out = io.StringIO()
    return recover_node.run(args, out), out.getvalue()


def lose(api: client.ApiClient, plugin: ClusterPlugin) -> None:
    """The node stops reporting: no heartbeat, Ready Unknown (what the node lifecycle controller writes)."""
    plugin.node.stop()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    condition = {
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }
    client.CoreV1Api(api).patch_node_status(plugin.node.name, {"status": {"conditions": [condition]}})


def fence(api: client.ApiClient, node: str) -> None:
    taint = {"key": node_fencing.OUT_OF_SERVICE_TAINT, "value": "nodeshutdown", "effect": "NoSchedule"}
    client.CoreV1Api(api).patch_node(node, {"spec": {"taints": [taint]}})


@contextlib.contextmanager
def plugin_pod(api: client.ApiClient, node: str, *, ready: bool) -> Iterator[None]:
    """A plugin Pod bound to ``node`` with the given Ready condition (as its kubelet last wrote it)."""
    core = client.CoreV1Api(api)
    name = f"sriov-dra-plugin-{node}"
    body = {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "sriov-dra-plugin"}},
        "spec": {"nodeName": node, "containers": [{"name": "plugin", "image": "registry.invalid/sriov-dra"}]},
    }
    core.create_namespaced_pod(PLUGIN_NS, body)
    try:
        status = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
        core.patch_namespaced_pod_status(name, PLUGIN_NS, {"status": status})
        yield
    finally:
        core.delete_namespaced_pod(name, PLUGIN_NS, grace_period_seconds=0)


@contextlib.contextmanager
def fenced(
    api: client.ApiClient, plugin: ClusterPlugin, namespace: str, *, plugin_ready: bool
) -> Iterator[Lost]:
    """A prepared workload whose node is lost and fenced, with a plugin Pod of the given readiness."""
    lost = lost_workload(api, plugin, namespace)
    lose(api, plugin)
    fence(api, plugin.node.name)
    with plugin_pod(api, plugin.node.name, ready=plugin_ready):
        yield lost


def snapshot(api: client.ApiClient, lost: Lost) -> Any:
    """Everything recovery may change: the shadows' metadata, the Pod's annotations, the whereabouts objects."""
    objs = objects.Objects(api, field_manager="test")
    shadows = sorted(
        (s["metadata"]["name"], s["metadata"].get("finalizers"), bool(s["metadata"].get("deletionTimestamp")))
        for s in nads_in(api, lost.namespace)
    )
    pools = {
        p["metadata"]["name"]: p["spec"]["allocations"] for p in objs.list(wb.IPPOOL, lost.namespace).items
    }
    orips = sorted(o["metadata"]["name"] for o in objs.list(wb.OVERLAPPING_RESERVATION, lost.namespace).items)
    return shadows, annotations(api, lost.namespace, POD), pools, orips


def refused(control_plane: Any, node: str, capsys: pytest.CaptureFixture[str]) -> str:
    status, _ = run(control_plane, node, "--apply")
    err = capsys.readouterr().err
    assert status == 1 and "NodeNotFenced" in err and "nothing was changed" in err
    return err


def test_recover_node_refuses_a_ready_node_and_changes_nothing(api, control_plane, plugin, namespace, capsys):
    lost = lost_workload(api, plugin, namespace)
    before = snapshot(api, lost)
    err = refused(control_plane, plugin.node.name, capsys)
    assert "status.conditions[Ready]: is True" in err and "spec.taints" in err
    assert snapshot(api, lost) == before


def test_recover_node_refuses_a_lost_node_that_is_not_fenced(api, control_plane, plugin, namespace, capsys):
    lost = lost_workload(api, plugin, namespace)
    lose(api, plugin)
    before = snapshot(api, lost)
    err = refused(control_plane, plugin.node.name, capsys)
    assert f"has no {node_fencing.OUT_OF_SERVICE_TAINT} taint" in err and "is True" not in err
    assert snapshot(api, lost) == before


def test_recover_node_refuses_while_the_nodes_plugin_pod_is_ready(
    api, control_plane, plugin, namespace, capsys
):
    with fenced(api, plugin, namespace, plugin_ready=True) as lost:
        before = snapshot(api, lost)
        err = refused(control_plane, plugin.node.name, capsys)
        assert f"Pod {PLUGIN_NS}/sriov-dra-plugin-{plugin.node.name}" in err and "still answers" in err
        assert snapshot(api, lost) == before


def test_recover_node_releases_a_fenced_nodes_shadows_selections_and_whereabouts_entries(
    api, control_plane, plugin, namespace, capsys
):
    with fenced(api, plugin, namespace, plugin_ready=False) as lost:
        before = snapshot(api, lost)

        status, text = run(control_plane, plugin.node.name)
        assert status == 0, capsys.readouterr().err
        assert "dry run: rerun with --apply to recover the 2 shadow(s)" in text
        assert all(s["metadata"]["name"] in text for s in lost.shadows)
        assert snapshot(api, lost) == before

        status, text = run(control_plane, plugin.node.name, "--apply", "-o", "json")
        assert status == 0, capsys.readouterr().err
        doc = json.loads(text)
        assert doc["applied"] and doc["refusals"] == [] and len(doc["shadows"]) == 2
        for row in doc["shadows"]:
            assert row["pod"] == f"{POD} (present)"
            assert "claim's selections removed" in row["action"] and row["action"].endswith("shadow deleted")
            assert "released " in row["action"] and "reservation " in row["action"]
        assert eventually("the shadows gone", lambda: nads_in(api, namespace) == [] or None)
        left = annotations(api, namespace, POD)
        assert names.MANAGED_NETWORKS_ANNOTATION not in left
        assert "dra-sriov-" not in left.get("k8s.v1.cni.cncf.io/networks", "")
        _, _, pools, orips = snapshot(api, lost)
        assert {name: sorted(allocs) for name, allocs in pools.items()} == {
            name: ["9"] for name in lost.pools
        }
        assert all(a["podref"] == f"{namespace}/other" for allocs in pools.values() for a in allocs.values())
        assert len(orips) == 2 and all(o.endswith(".9") for o in orips)

        status, text = run(control_plane, plugin.node.name, "--apply")
        assert status == 0 and f"no shadow NAD of node {plugin.node.name} is left" in text


def test_recover_node_keeps_whereabouts_entries_whose_pod_name_a_new_pod_took(
    api, control_plane, plugin, namespace, capsys
):
    lost = lost_workload(api, plugin, namespace)
    lose(api, plugin)
    fence(api, plugin.node.name)
    core = client.CoreV1Api(api)
    core.delete_namespaced_pod(POD, namespace, grace_period_seconds=0)
    eventually(
        "the old Pod gone",
        lambda: not any(p.metadata.name == POD for p in core.list_namespaced_pod(namespace).items) or None,
    )
    # A StatefulSet-style replacement under the same name: whereabouts hands it the old allocation.
    core.create_namespaced_pod(
        namespace,
        {"metadata": {"name": POD}, "spec": {"containers": [{"name": "c", "image": "registry.invalid/x"}]}},
    )
    _, _, pools_before, orips_before = snapshot(api, lost)

    status, text = run(control_plane, plugin.node.name, "--apply")
    assert status == 0, capsys.readouterr().err
    assert text.count(f"{POD} (replaced)") == 2 and "kept: the name now belongs to another Pod" in text
    assert eventually("the shadows gone", lambda: nads_in(api, namespace) == [] or None)
    _, _, pools, orips = snapshot(api, lost)
    assert (pools, orips) == (pools_before, orips_before)
