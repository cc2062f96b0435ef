"""IPAM through shadows: every shadow of one template shares the template's address pool.

- host-local, same node, a template without a CNI ``name`` (multus-dynamic-networks-controller #45,
  whereabouts #256): every shadow
  is rendered with the template NAD's name, so host-local keeps one store per node and hands out
  distinct addresses to two VFs of one Pod and to a second Pod, then frees them all;
- whereabouts across both nodes: one IPPool for the rail, distinct addresses for Pods on
  different nodes (no duplicates), and no allocation or reservation left after deletion.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from tests.e2e.helpers import (
    SRIOV_CLASS,
    claim_template,
    in_namespace,
    interfaces,
    on_pf,
    shadows_of,
    template,
    vf_pod,
    wait_clean,
)

from sriov_dra.kube import objects
from sriov_dra_lab import leftovers, workloads


def _unnamed(name: str, ipam: dict[str, Any]) -> dict[str, Any]:
    config = {"cniVersion": "1.0.0", "type": "sriov", "ipam": ipam}
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name},
        "spec": {"config": json.dumps(config)},
    }


def _vf_addresses(lab: Any, pod: dict[str, Any]) -> list[str]:
    found = interfaces(lab, pod)
    return [a for name, addrs in sorted(found.items()) if name.startswith("dra") for a in addrs]


def test_host_local_shadows_of_one_unnamed_template_get_distinct_addresses(
    lab: Any, rails: Any, namespace: str
) -> None:
    node = lab.nodes[0]
    subnet = ipaddress.ip_network("10.90.0.0/24")
    docs = in_namespace(
        namespace,
        _unnamed("rail-a-net", {"type": "host-local", "ranges": [[{"subnet": str(subnet)}]]}),
        claim_template("two-rail-a", [("vfs", SRIOV_CLASS)], selector=on_pf("ens1f0"), count=2),
        claim_template("one-rail-a", [("vf", SRIOV_CLASS)], selector=on_pf("ens1f0")),
        vf_pod("double", "two-rail-a", node=node.name),
        vf_pod("single", "one-rail-a", node=node.name),
    )
    workloads.apply_docs(lab.api, docs)
    double = workloads.wait_running(lab.api, namespace, "double")
    single = workloads.wait_running(lab.api, namespace, "single")
    assert sorted(interfaces(lab, double)) == ["dra0", "dra1", "eth0", "lo"]

    shadows = shadows_of(lab, double) + shadows_of(lab, single)
    assert len(shadows) == 3
    assert {json.loads(s["spec"]["config"])["name"] for s in shadows} == {"rail-a-net"}, (
        "the template NAD's name"
    )
    addresses = _vf_addresses(lab, double) + _vf_addresses(lab, single)
    ips = [ipaddress.ip_interface(a).ip for a in addresses]
    assert len(ips) == 3 and len(set(ips)) == 3, f"distinct addresses: {addresses}"
    assert all(ip in subnet for ip in ips)
    store = node.layout.cni_state_dir / "networks" / "rail-a-net"
    assert sorted(p.name for p in store.iterdir() if p.name[0].isdigit()) == sorted(str(ip) for ip in ips)

    workloads.delete_docs(lab.api, [d for d in docs if d["kind"] == "Pod"])
    found = wait_clean(lab)
    assert found.empty, found.describe()


def test_whereabouts_across_two_nodes_never_duplicates(lab: Any, rails: Any, namespace: str) -> None:
    network = f"{namespace}-wb"[:60]
    ipam = {"type": "whereabouts", "range": "10.91.0.0/24", "network_name": network}
    pods = [vf_pod(f"wb-{n.name}-{i}", "rail-a-vf", node=n.name) for n in lab.nodes for i in range(2)]
    docs = in_namespace(
        namespace,
        template("rail-a-net", f"{namespace}-a", ipam),
        claim_template("rail-a-vf", [("vf", SRIOV_CLASS)], selector=on_pf("ens1f0")),
        *pods,
    )
    workloads.apply_docs(lab.api, docs)
    addresses = []
    for pod in pods:
        running = workloads.wait_running(lab.api, namespace, pod["metadata"]["name"])
        addresses += _vf_addresses(lab, running)
    ips = [ipaddress.ip_interface(a).ip for a in addresses]
    assert len(ips) == 4 and len(set(ips)) == 4, f"no duplicates across nodes: {addresses}"
    assert {pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] for pod in pods} == {
        n.name for n in lab.nodes
    }

    client = objects.Objects(lab.api, field_manager="e2e")
    pools = [p for p in client.list(leftovers.IPPOOL).items if p["metadata"]["name"].startswith(network)]
    assert len(pools) == 1
    owners = sorted(e["podref"] for e in pools[0]["spec"]["allocations"].values())
    assert owners == sorted(f"{namespace}/{p['metadata']['name']}" for p in pods)

    workloads.delete_docs(lab.api, [d for d in docs if d["kind"] == "Pod"])
    found = wait_clean(lab)
    assert found.empty, found.describe()
    assert not client.get(leftovers.IPPOOL, pools[0]["metadata"]["name"], pools[0]["metadata"]["namespace"])[
        "spec"
    ].get("allocations")
