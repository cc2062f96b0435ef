"""Whether a node may be recovered: fenced by its administrator, not Ready, its plugin silent.

Recovery releases what a node's plugin owns without that plugin (docs/operations.md), so it must
be sure the node is gone for good (docs/design.md#orphans: a finalizer is never removed because of
a stale heartbeat). Fenced means the Node object was deleted, or carries the
``node.kubernetes.io/out-of-service`` taint, the taint Kubernetes' non-graceful node shutdown asks
the administrator to set after confirming the node is shut down (its Pods are then force-deleted
by the Pod garbage collector). Beyond that, recovery refuses while the Node is ``Ready`` (its
kubelet still reports) and while a plugin Pod on it is ready and not terminating: the plugin keeps
no heartbeat of its own in the API, and its Pod's ``Ready`` condition is what the API server
holds about it (written by the kubelet from the plugin's ``/readyz``, set false by the node
lifecycle controller once the node stops reporting). Pure: no API calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from sriov_dra_rules import errors

OUT_OF_SERVICE_TAINT: Final = "node.kubernetes.io/out-of-service"
"""The taint key of Kubernetes' non-graceful node shutdown; its value and effect are not checked,
as Kubernetes' own controllers check only the key."""


@dataclass(frozen=True)
class NodeState:
    """The Node fields fencing decides on.

    Shapes: ``ready`` the ``Ready`` condition's status (``"True"``, ``"False"``, ``"Unknown"``,
    ``""`` without one); ``taints`` the taint keys.
    """

    name: str
    uid: str
    ready: str
    taints: tuple[str, ...]


@dataclass(frozen=True)
class PluginPod:
    """A plugin Pod bound to the node: its readiness and whether it is being deleted."""

    namespace: str
    name: str
    ready: bool
    terminating: bool


def refusals(
    node_name: str, node: NodeState | None, plugin_pods: Sequence[PluginPod]
) -> list[errors.FieldError]:
    """Every reason ``node_name`` may not be recovered now (empty: it may).

    ``node`` is ``None`` when the Node object no longer exists (fenced by deletion).
    """
    found = []
    if node is not None:
        if node.ready == "True":
            found.append(
                errors.FieldError(
                    f"Node {node_name} status.conditions[Ready]",
                    "is True: its kubelet still reports, so the node is not lost; only a node whose Ready "
                    "condition is False or Unknown is recovered",
                )
            )
        if OUT_OF_SERVICE_TAINT not in node.taints:
            found.append(
                errors.FieldError(
                    f"Node {node_name} spec.taints",
                    f"has no {OUT_OF_SERVICE_TAINT} taint: confirm the node is powered off or cut off, then "
                    f"`kubectl taint nodes {node_name} {OUT_OF_SERVICE_TAINT}=nodeshutdown:NoExecute` "
                    "(or delete the Node object) and run this again",
                )
            )
    for pod in plugin_pods:
        if pod.ready and not pod.terminating:
            found.append(
                errors.FieldError(
                    f"Pod {pod.namespace}/{pod.name} status.conditions[Ready]",
                    f"is True: the plugin on {node_name} still answers its readiness probe and may still release "
                    "or restore these bindings itself; wait until it is not ready or gone",
                )
            )
    return found


def check_fenced(node_name: str, node: NodeState | None, plugin_pods: Sequence[PluginPod]) -> None:
    """Return when ``node_name`` may be recovered.

    Raises: errors.LifecycleBlocked (reason ``NodeNotFenced``) listing every :func:`refusals` entry.
    """
    errors.raise_if_any(
        refusals(node_name, node, plugin_pods),
        f"node {node_name} may not be recovered now; nothing was changed",
        cls=errors.LifecycleBlocked,
        reason=errors.Reason.NODE_NOT_FENCED,
    )
