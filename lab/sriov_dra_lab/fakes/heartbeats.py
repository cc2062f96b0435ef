"""Simulated Node heartbeats: register a Node, keep it Ready, renew its Lease (lab and tests only).

A real kubelet does this; the lab's simulated nodes and the cluster tests have none, so they do
it themselves. The product does not ship this module (no service fakes a Node). Owns only these
API calls; the thread that repeats them lives in ``sriov_dra_lab.nodes``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from kubernetes import client
from kubernetes.client.rest import ApiException

LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_S = 40


def ensure_node(api: client.ApiClient, name: str, *, labels: Mapping[str, str] | None = None) -> str:
    """Create Node ``name`` if absent (labels merged if present) and return its UID.

    Raises: ``ApiException`` for anything but a create race (409 is resolved by reading).
    """
    core = client.CoreV1Api(api)
    body = client.V1Node(metadata=client.V1ObjectMeta(name=name, labels=dict(labels or {})))
    try:
        node = core.create_node(body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        node = core.read_node(name)
        if labels:
            node = core.patch_node(name, {"metadata": {"labels": dict(labels)}})
    uid: str = node.metadata.uid
    return uid


def mark_ready(api: client.ApiClient, name: str, *, now: dt.datetime, pods: int = 110) -> None:
    """Patch Node ``name`` status: Ready=True with fresh heartbeat times and pod capacity.

    Units: ``now`` is a timezone-aware wall-clock time supplied by the caller.
    """
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "sriov-dra lab node heartbeat",
                    "lastHeartbeatTime": stamp,
                    "lastTransitionTime": stamp,
                }
            ],
            "capacity": {"pods": str(pods), "cpu": "64", "memory": "256Gi"},
            "allocatable": {"pods": str(pods), "cpu": "64", "memory": "256Gi"},
        }
    }
    client.CoreV1Api(api).patch_node_status(name, status)


def renew_lease(api: client.ApiClient, name: str, node_uid: str, *, now: dt.datetime) -> None:
    """Create or renew the node Lease ``kube-node-lease/<name>`` owned by the Node.

    Units: ``now`` timezone-aware; lease duration :data:`LEASE_DURATION_S` seconds.
    """
    coord = client.CoordinationV1Api(api)
    spec = {
        "holderIdentity": name,
        "leaseDurationSeconds": LEASE_DURATION_S,
        "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    try:
        coord.patch_namespaced_lease(name, LEASE_NAMESPACE, {"spec": spec})
    except ApiException as exc:
        if exc.status != 404:
            raise
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": LEASE_NAMESPACE,
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}],
            },
            "spec": spec,
        }
        try:
            coord.create_namespaced_lease(LEASE_NAMESPACE, body)
        except ApiException as exc2:
            if exc2.status != 409:
                raise


def taint_keys(api: client.ApiClient, name: str) -> list[str]:
    """The keys of Node ``name``'s taints (empty when it has none)."""
    node = client.CoreV1Api(api).read_node(name)
    return [t.key for t in (node.spec.taints or [])] if node.spec else []


def delete_node(api: client.ApiClient, name: str) -> None:
    """Delete Node ``name``; absent counts as done."""
    try:
        client.CoreV1Api(api).delete_node(name)
    except ApiException as exc:
        if exc.status != 404:
            raise
