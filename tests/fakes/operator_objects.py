"""Builders of the operator's API objects as plain dicts, shared by unit and cluster tests.

The defaults reproduce the operator-two-rails example (docs/design.md#example-operator-two-rails):
operator namespace ``sriov-network-operator``, target namespace ``ai-workloads``, two rails
(``rail-a-net``/``rail-b-net``) whose node policies share ``resourceName: sriov_vfs`` and select
disjoint PFs (``ens1f0``/``ens2f0``) on nodes labelled ``networking.example.com/dual-rail=true``.
"""

from __future__ import annotations

import copy
from typing import Any

OP_NS = "sriov-network-operator"
TARGET_NS = "ai-workloads"
DUAL_RAIL = {"networking.example.com/dual-rail": "true"}
NAME_KEY = "sriovnetwork.openshift.io/sriovNetworkName"
NS_KEY = "sriovnetwork.openshift.io/sriovNetworkNamespace"
RAIL_IPAM = {
    "rail-a-net": (
        '{\n  "type": "whereabouts",\n  "network_name": "ai-workloads-rail-a",\n  "range": "192.0.2.0/24",\n'
        '  "range_start": "192.0.2.10",\n  "range_end": "192.0.2.200"\n}'
    ),
    "rail-b-net": (
        '{\n  "type": "whereabouts",\n  "network_name": "ai-workloads-rail-b",\n  "range": "198.51.100.0/24",\n'
        '  "range_start": "198.51.100.10",\n  "range_end": "198.51.100.200"\n}'
    ),
}
UNRENDERABLE_SPECS: dict[str, tuple[dict[str, Any], str]] = {
    "ipam-list": ({"ipam": "[]"}, "spec.ipam: expected a JSON object, got a list"),
    "ipam-string": ({"ipam": '"host-local"'}, "spec.ipam: expected a JSON object, got a string"),
    "ipam-number": ({"ipam": "5"}, "spec.ipam: expected a JSON object, got a number"),
    "ipam-null": ({"ipam": "null"}, "spec.ipam: expected a JSON object, got null"),
    "ipam-true": ({"ipam": "true"}, "spec.ipam: expected a JSON object, got a boolean"),
    "ipam-adds-a-second-vlan": (
        {"ipam": '{"type":"host-local","subnet":"10.0.0.0/24"},"vlan":300', "vlan": 100},
        "spec.ipam: malformed JSON at line 1 column 45 (offset 44): Extra data",
    ),
    "ipam-subnet-twice": (
        {"ipam": '{"type":"host-local","subnet":"10.0.0.0/24","subnet":"10.1.0.0/24"}'},
        'spec.ipam.subnet: duplicate key "subnet"',
    ),
}
"""SriovNetwork specs that must not become a NAD: spec fields -> start of the problem."""
UID_A = "aaaaaaaa-0000-4000-8000-00000000000a"
UID_B = "bbbbbbbb-0000-4000-8000-00000000000b"


def sriov_network(
    name: str,
    *,
    namespace: str = OP_NS,
    network_namespace: str | None = TARGET_NS,
    uid: str | None = None,
    generation: int = 1,
    ready: str | None = None,
    observed: int | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A SriovNetwork; ``ready`` adds a Ready condition (status string) at ``observed`` generation."""
    body: dict[str, Any] = {"resourceName": "sriov_vfs", "logLevel": "info"}
    if network_namespace:
        body["networkNamespace"] = network_namespace
    if name in RAIL_IPAM:
        body["ipam"] = RAIL_IPAM[name]
    body.update(spec)
    obj: dict[str, Any] = {
        "apiVersion": "sriovnetwork.openshift.io/v1",
        "kind": "SriovNetwork",
        "metadata": {"name": name, "namespace": namespace, "generation": generation},
        "spec": body,
    }
    if uid is not None:
        obj["metadata"]["uid"] = uid
    if ready is not None:
        obj["status"] = {
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "NetworkReady" if ready == "True" else "NamespaceNotFound",
                    "message": "",
                    "observedGeneration": generation if observed is None else observed,
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
    return obj


def reference(name: str, namespace: str = OP_NS) -> dict[str, Any]:
    """The two operator reference keys of ``spec.dra.attributes``."""
    return {NAME_KEY: {"string": name}, NS_KEY: {"string": namespace}}


def node_policy(
    name: str,
    *,
    uid: str,
    pf: str | None = None,
    dra: dict[str, Any] | None = None,
    namespace: str = OP_NS,
    generation: int = 1,
    resource_name: str = "sriov_vfs",
    node_selector: dict[str, str] | None = None,
    priority: int | None = 99,
    nic: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A SriovNetworkNodePolicy; ``dra`` is the whole ``spec.dra`` block (``None``: absent)."""
    body: dict[str, Any] = {
        "resourceName": resource_name,
        "nodeSelector": dict(DUAL_RAIL if node_selector is None else node_selector),
        "numVfs": 16,
        "nicSelector": nic if nic is not None else {"vendor": "15b3", "pfNames": [pf or "ens1f0"]},
        "deviceType": "netdevice",
        "linkType": "eth",
    }
    if priority is not None:
        body["priority"] = priority
    if dra is not None:
        body["dra"] = copy.deepcopy(dra)
    body.update(spec)
    return {
        "apiVersion": "sriovnetwork.openshift.io/v1",
        "kind": "SriovNetworkNodePolicy",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "generation": generation},
        "spec": body,
    }


def rail_policies() -> list[dict[str, Any]]:
    """The two node policies of the operator-two-rails example."""
    return [
        node_policy("rail-a-policy", uid=UID_A, pf="ens1f0", dra={"attributes": reference("rail-a-net")}),
        node_policy("rail-b-policy", uid=UID_B, pf="ens2f0", dra={"attributes": reference("rail-b-net")}),
    ]


def node(name: str, labels: dict[str, str] | None = None, *, hostname: str | None = None) -> dict[str, Any]:
    """A Node with ``kubernetes.io/hostname`` (unless ``hostname=""``) and ``labels``."""
    all_labels = dict(DUAL_RAIL if labels is None else labels)
    if hostname != "":
        all_labels["kubernetes.io/hostname"] = hostname or name
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": all_labels}}
