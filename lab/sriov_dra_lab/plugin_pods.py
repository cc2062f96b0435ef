"""LAB ONLY: the DRA plugin as the plugin role's DaemonSet on real lab nodes.

On real nodes the plugin is not a lab process: the plugin role renders its DaemonSet from the product
image (``sriov-dra-plugin``, the shipped entrypoint with no lab seam), and this module gives the stack
the few things a cluster operator would do around it:

- **which nodes run it**: the DaemonSet selects :data:`SRIOV_READY_LABEL` (the role's
  ``plugin_node_selector``, as an operator labels the nodes that have SR-IOV NICs), and the lab sets the
  label on a node only once its fake sysfs tree and VF veths exist (:func:`mark_ready`), so a plugin
  Pod never starts on a node without its hardware;
- **the tree it reads**: each node's fake sysfs tree is bound at the one node path
  :data:`SYSFS_ROOT` (``plugin_sysfs_root``); the node's CDI directory, which containerd reads, at
  :data:`CDI_ROOT` (``plugin_cdi_root``), and the checkpoint is the role's default
  ``<kubelet>/plugins/<driver>/checkpoint.json``;
- **waiting for it**: the Pod on a node Ready (its readiness probe is the plugin's ``/readyz``:
  registered with the kubelet) and the registration socket in the kubelet's registry
  (:func:`wait_running`);
- **changing it**: the policy namespace of an operator-managed install is a DaemonSet edit and a
  rollout (:func:`set_policy_namespace`); deleting a Pod by hand (:func:`delete_pod`) is what the
  checkpoint recovery test does (docs/design.md#repair);
- **its log**: the plugin Pod's container log through the API (:func:`log_lines`), as
  ``kubectl logs`` reads it.

The product's kernel seams are not available to the DaemonSet (the image ships none), so driver
binding through the fake tree changes nothing and every PF reads as eswitch mode legacy: the lab's
examples keep each VF's driver (``VfConfig.driver`` empty), so nothing needs a kernel.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Final

from kubernetes import client

from sriov_dra.kubeletapi import endpoints
from sriov_dra_lab import processes
from sriov_dra_rules import names

SYSFS_ROOT: Final = "/run/sriov-dra-lab/sysfs"
"""The node path of each real node's fake sysfs tree (under the node's private tmpfs ``/run``, so
nothing is created on the machine's own filesystem)."""
CDI_ROOT: Final = "/run/cdi"
"""The node path the plugin writes CDI specs to (``plugin_cdi_root``; the role's default ``/var/run/cdi`` is
the same place only where ``/var/run`` links to ``/run``: binding at ``/run`` never creates a directory on
the machine's own filesystem)."""
SRIOV_READY_LABEL: Final = "lab.sriov-dra.dev/sriov-vfs"
"""Node label the plugin DaemonSet selects (``plugin_node_selector``)."""
DAEMONSET: Final = "sriov-dra-plugin"
CONTAINER: Final = "plugin"
POD_LABEL: Final = "app.kubernetes.io/name=sriov-dra-plugin"
SERVICE_PODS: Final = {
    "plugin": (POD_LABEL, CONTAINER),
    "guard": ("app.kubernetes.io/name=sriov-dra-guard", "guard"),
}
"""The roles' node DaemonSets whose logs the lab reads: service → (Pod label selector, container)."""


def mark_ready(api: Any, node: str) -> None:
    """Label Node ``node`` with :data:`SRIOV_READY_LABEL` (its VFs exist): the DaemonSet schedules a Pod there."""
    client.CoreV1Api(api).patch_node(node, {"metadata": {"labels": {SRIOV_READY_LABEL: "true"}}})


def node_pod(api: Any, namespace: str, node: str, *, selector: str = POD_LABEL) -> client.V1Pod | None:
    """The Pod matching ``selector`` (default: the plugin's) on ``node`` that is not being deleted, or None."""
    pods = client.CoreV1Api(api).list_namespaced_pod(
        namespace, label_selector=selector, field_selector=f"spec.nodeName={node}"
    )
    live = [p for p in pods.items if p.metadata.deletion_timestamp is None]
    return live[0] if live else None


def _ready(pod: client.V1Pod, revision: str) -> bool:
    """True when ``pod`` runs the DaemonSet's template ``revision`` (its hash) and is Ready."""
    if pod.status is None or (pod.metadata.labels or {}).get("controller-revision-hash") != revision:
        return False
    conditions = {c.type: c.status for c in pod.status.conditions or []}
    return conditions.get("Ready") == "True"


def _current_revision(api: Any, namespace: str) -> str | None:
    """The controller-revision hash of the DaemonSet's current template (None before the controller saw it)."""
    apps = client.AppsV1Api(api)
    ds = apps.read_namespaced_daemon_set(DAEMONSET, namespace)
    if (ds.status.observed_generation or 0) < (ds.metadata.generation or 0):
        return None
    revisions = apps.list_namespaced_controller_revision(namespace, label_selector=POD_LABEL).items
    newest = max(revisions, key=lambda r: r.revision, default=None)
    return None if newest is None else (newest.metadata.labels or {}).get("controller-revision-hash")


def registration_socket(registry_dir: Path, pod: client.V1Pod) -> Path:
    """The registration socket of plugin Pod ``pod`` under the node's registry directory (host path).

    The role sets ``POD_UID``, so each Pod registers under its own name (docs/plugin.md#rolling-update).
    """
    instance = endpoints.instance_name(str(pod.metadata.uid))
    return registry_dir / f"{names.DRIVER_NAME}-{instance}-reg.sock"


def wait_running(
    api: Any, namespace: str, node: str, registry_dir: Path, *, timeout_s: float, after_uid: str = ""
) -> client.V1Pod:
    """Wait until ``node``'s plugin Pod of the DaemonSet's current revision is Ready and registered.

    ``registry_dir`` is the kubelet's registry directory (host path), which holds the Pod's
    registration socket (:func:`registration_socket`); ``after_uid`` a Pod UID that must not be the
    answer (the Pod deleted before). Returns the Pod. Raises: ``processes.ProcessFailed`` naming the
    Pod's state and how to see its log.
    """
    found: list[client.V1Pod | None] = [None]

    def running() -> bool:
        revision = _current_revision(api, namespace)
        pod = found[0] = node_pod(api, namespace, node)
        if revision is None or pod is None or pod.metadata.uid == after_uid:
            return False
        return _ready(pod, revision) and registration_socket(registry_dir, pod).exists()

    try:
        processes.wait_until(f"the plugin Pod on {node} Ready and registered", running, timeout_s=timeout_s)
    except processes.ProcessFailed as exc:
        raise processes.ProcessFailed(f"{exc}; {describe(found[0])}") from exc
    pod = found[0]
    assert pod is not None
    return pod


def describe(pod: client.V1Pod | None) -> str:
    """One line on a plugin Pod for a failure message (phase, container states, where its log is)."""
    if pod is None:
        return "no plugin Pod was scheduled on the node (is it labelled and the DaemonSet applied?)"
    states = []
    for status in (pod.status.container_statuses if pod.status else None) or []:
        state = status.state
        if state.waiting is not None:
            states.append(
                f"{status.name} waiting: {state.waiting.reason} {state.waiting.message or ''}".strip()
            )
        elif state.terminated is not None:
            states.append(
                f"{status.name} terminated: {state.terminated.reason} exit {state.terminated.exit_code}"
            )
        else:
            states.append(f"{status.name} running, ready={status.ready}, restarts={status.restart_count}")
    phase = pod.status.phase if pod.status else "?"
    return (
        f"Pod {pod.metadata.namespace}/{pod.metadata.name} {phase}: {'; '.join(states) or 'no container yet'} "
        f"(kubectl -n {pod.metadata.namespace} logs {pod.metadata.name})"
    )


def set_policy_namespace(api: Any, namespace: str, policy_namespace: str) -> bool:
    """Point the DaemonSet's ``--namespace`` at ``policy_namespace``; True when that changed its template.

    The edit an operator makes when policies move to the operator's namespace (docs/operator.md): the
    DaemonSet controller then replaces each Pod (``maxSurge: 1``: the new one beside the old one).
    """
    apps = client.AppsV1Api(api)
    ds = apps.read_namespaced_daemon_set(DAEMONSET, namespace)
    container = next(c for c in ds.spec.template.spec.containers if c.name == CONTAINER)
    flag = f"--namespace={policy_namespace}"
    args = [flag if a.startswith("--namespace=") else a for a in container.args]
    if flag not in args:
        args.append(flag)
    if args == container.args:
        return False
    patch = {"spec": {"template": {"spec": {"containers": [{"name": CONTAINER, "args": args}]}}}}
    apps.patch_namespaced_daemon_set(DAEMONSET, namespace, patch)
    return True


def delete_pod(api: Any, namespace: str, node: str) -> str:
    """Delete ``node``'s plugin Pod (as ``kubectl delete pod`` does); return its UID.

    Raises: ``LookupError`` when the node has no plugin Pod.
    """
    pod = node_pod(api, namespace, node)
    if pod is None:
        raise LookupError(f"no plugin Pod on node {node}")
    client.CoreV1Api(api).delete_namespaced_pod(pod.metadata.name, namespace)
    return str(pod.metadata.uid)


def log_lines(
    api: Any, namespace: str, node: str, *, service: str = "plugin", attempts: int = 3
) -> list[str]:
    """The container log of ``service``'s Pod on ``node`` (:data:`SERVICE_PODS`; ``kubectl logs``), by line.

    Empty when the node has no such Pod. Retries a transient API error ``attempts`` times.
    Raises: ``KeyError`` for a service not in :data:`SERVICE_PODS`.
    """
    selector, container = SERVICE_PODS[service]
    for attempt in range(attempts):
        pod = node_pod(api, namespace, node, selector=selector)
        if pod is None:
            return []
        try:
            # Raw bytes: the client would parse a one-line JSON log into a dict and return its repr.
            answer = client.CoreV1Api(api).read_namespaced_pod_log(
                pod.metadata.name, namespace, container=container, _preload_content=False
            )
        except client.ApiException:
            if attempt + 1 == attempts:
                raise
            time.sleep(1.0)
            continue
        return bytes(answer.data).decode("utf-8", errors="replace").splitlines()
    return []
