"""What a workload can leave behind, counted from the live cluster and the lab nodes.

After the demo (and every e2e teardown) deletes its workloads, nothing of theirs may remain:

- **shadows**: NADs labelled ``managed-by=sriov-dra-plugin`` (any namespace);
- **finalizers**: objects still carrying the attachment-protection finalizer;
- **selections**: Pods whose ``k8s.v1.cni.cncf.io/networks`` names a ``dra-sriov-*`` shadow, or
  that carry the managed-networks registry annotation;
- **checkpoint records**: claims in a node plugin's checkpoint (``checkpoint.slots``, else ``checkpoint.json``);
- **CDI files**: spec files in a node's CDI root;
- **IP reservations**: whereabouts ``IPPool`` allocations and ``OverlappingRangeIPReservation``
  objects; host-local reservation files in each node's ``/var/lib/cni/networks``;
- **kubelet claims / sandboxes**: the kubelet simulators' prepared claims and Pod sandboxes (on real
  nodes the sandboxes containerd holds, but the lab's own service Pods and their host-local addresses,
  and the stopped sandboxes of deleted Pods, which the kubelet's container GC removes within a minute:
  :func:`~sriov_dra_lab.real_stack.sandboxes`);
- **VFs away**: lab VF netdevs not back in their node namespace.

Read-only: it reports, never cleans. ``scope`` restricts Pod- and NAD-level checks to namespaces
(other tests may be running in other namespaces of the same lab).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from sriov_dra.core.plugin import checkpoint_codec
from sriov_dra.host import checkpoint_files
from sriov_dra.kube import objects
from sriov_dra_lab import real_stack, stack_base
from sriov_dra_lab import stack as stack_mod
from sriov_dra_rules import names

IPPOOL = objects.Resource("whereabouts.cni.cncf.io", "v1alpha1", "ippools", "IPPool")
ORIP = objects.Resource(
    "whereabouts.cni.cncf.io", "v1alpha1", "overlappingrangeipreservations", "OverlappingRangeIPReservation"
)
POD = objects.Resource("", "v1", "pods", "Pod")
HOST_LOCAL_BOOKKEEPING = frozenset({"lock"})


@dataclass
class Leftovers:
    """Everything found; each entry is one human-readable line naming the object or file."""

    shadows: list[str] = field(default_factory=list)
    finalizers: list[str] = field(default_factory=list)
    selections: list[str] = field(default_factory=list)
    checkpoint_records: list[str] = field(default_factory=list)
    cdi_files: list[str] = field(default_factory=list)
    ip_reservations: list[str] = field(default_factory=list)
    kubelet_claims: list[str] = field(default_factory=list)
    sandboxes: list[str] = field(default_factory=list)
    vfs_away: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Number of leftovers per kind, in a fixed order."""
        return {k: len(v) for k, v in vars(self).items()}

    @property
    def empty(self) -> bool:
        """True when nothing is left."""
        return not any(vars(self).values())

    def describe(self) -> str:
        """One line per kind: ``kind: N`` and the first entries."""
        lines = []
        for kind, items in vars(self).items():
            shown = ", ".join(items[:5]) + (" …" if len(items) > 5 else "")
            lines.append(f"{kind}: {len(items)}" + (f" ({shown})" if items else ""))
        return "\n".join(lines)


def _in_scope(namespace: str | None, scope: Collection[str] | None) -> bool:
    return scope is None or namespace in scope


def _api_leftovers(client: objects.Objects, found: Leftovers, scope: Collection[str] | None) -> None:
    for nad in client.list(objects.NAD).items:
        meta = nad.get("metadata") or {}
        if not _in_scope(meta.get("namespace"), scope):
            continue
        ref = f"{meta.get('namespace')}/{meta.get('name')}"
        if (meta.get("labels") or {}).get(names.LABEL_MANAGED_BY) == names.MANAGED_BY_VALUE:
            found.shadows.append(ref)
        if names.FINALIZER_ATTACHMENT_PROTECTION in (meta.get("finalizers") or []):
            found.finalizers.append(f"NetworkAttachmentDefinition {ref}")
    for pod in client.list(POD).items:
        meta = pod.get("metadata") or {}
        if not _in_scope(meta.get("namespace"), scope):
            continue
        notes = meta.get("annotations") or {}
        ref = f"Pod {meta.get('namespace')}/{meta.get('name')}"
        if names.FINALIZER_ATTACHMENT_PROTECTION in (meta.get("finalizers") or []):
            found.finalizers.append(ref)
        if names.MANAGED_NETWORKS_ANNOTATION in notes or names.SHADOW_NAME_PREFIX in notes.get(
            names.NETWORKS_ANNOTATION, ""
        ):
            found.selections.append(ref)
    for pool in client.list(IPPOOL).items:
        allocations = ((pool.get("spec") or {}).get("allocations")) or {}
        for offset, entry in sorted(allocations.items()):
            podref = str((entry or {}).get("podref", ""))
            if scope is None or podref.split("/")[0] in scope:
                found.ip_reservations.append(f"IPPool {pool['metadata']['name']} offset {offset} ({podref})")
    for orip in client.list(ORIP).items:
        podref = str((orip.get("spec") or {}).get("podref", ""))
        if scope is None or podref.split("/")[0] in scope:
            found.ip_reservations.append(
                f"OverlappingRangeIPReservation {orip['metadata']['name']} ({podref})"
            )


def _checkpoint_claims(path: str) -> list[str]:
    """Claim UIDs of a plugin checkpoint, from its durable slot file when present (read only)."""
    try:
        raw, source = checkpoint_files.read_only(Path(path))
    except FileNotFoundError:
        return []
    return sorted(checkpoint_codec.decode_checkpoint(raw, source=str(source)).claims)


def _holder(reservation: os.PathLike[str]) -> str:
    """The container ID a host-local reservation file names (its first line); "" when unreadable."""
    try:
        with open(reservation, encoding="utf-8", errors="replace") as f:
            return f.readline().strip()
    except OSError:
        return ""


def _node_leftovers(node: stack_base.NodeStack, found: Leftovers, live_pod_uids: Collection[str]) -> None:
    lay = node.layout
    for uid in _checkpoint_claims(str(lay.plugin_state_dir / "checkpoint.json")):
        found.checkpoint_records.append(f"{node.name}: claim {uid}")
    if lay.cdi_root.is_dir():
        for name in sorted(os.listdir(lay.cdi_root)):
            if not name.startswith("."):
                found.cdi_files.append(f"{node.name}: {lay.cdi_root / name}")
    networks = lay.cni_state_dir / "networks"
    services = real_stack.service_sandbox_ids(node.real) if node.real is not None else set()
    if networks.is_dir():
        for net in sorted(os.listdir(networks)):
            for entry in sorted(os.listdir(networks / net)):
                if entry in HOST_LOCAL_BOOKKEEPING or entry.startswith("last_reserved_ip"):
                    continue
                if services and _holder(networks / net / entry) in services:
                    continue  # the lab's own service Pods (real_stack.SERVICE_NAMESPACES)
                found.ip_reservations.append(f"{node.name}: host-local {net}/{entry}")
    if node.real is not None:
        found.sandboxes.extend(
            f"{node.name}: {box}" for box in real_stack.sandboxes(node.real, live_pod_uids)
        )
    if node.kubelet is not None:
        for claim in node.kubelet.prepared_claims():
            found.kubelet_claims.append(f"{node.name}: {claim.namespace}/{claim.name}")
        for box in node.kubelet.state.all_sandboxes():
            found.sandboxes.append(f"{node.name}: {box.pod_namespace}/{box.pod_name} {box.netns}")
    away = sorted({vf.ifname for vf in node.machine.vfs} - node.machine.vfs_at_home())
    found.vfs_away.extend(f"{node.name}: {name}" for name in away)


def collect(lab: stack_mod.LabStack, *, scope: Collection[str] | None = None) -> Leftovers:
    """Count every leftover in the lab (Pod/NAD/IPAM checks limited to ``scope`` namespaces).

    Node-level checks (checkpoints, CDI, host-local files, VFs) always cover the whole node, so
    call this with ``scope`` only when no other workload is running on the lab.
    """
    found = Leftovers()
    client = objects.Objects(lab.api, field_manager="sriov-dra-lab")
    _api_leftovers(client, found, scope)
    live = {str((p.get("metadata") or {}).get("uid")) for p in client.list(POD).items}
    for node in lab.nodes:
        _node_leftovers(node, found, live)
    return found
