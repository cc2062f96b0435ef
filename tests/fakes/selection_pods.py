"""Pods, registry entries and managed bindings for the selection merging tests (docs/design.md#selections).

Shared by the unit tests of :mod:`sriov_dra.core.plugin.selections` and its sub-concern modules
(``selection_ownership``, ``selection_update``): three bindings of two claims in namespace ``ai``,
Pod snapshots and plain Pod dicts, and :func:`merged`, which runs the real merge.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from sriov_dra.core import identities, networks, registry
from sriov_dra.core.plugin import selection_ownership, selection_update, selections
from sriov_dra_rules import names

NS = "ai"
POD_UID = "bbbbbbbb-0000-4000-8000-000000000001"
OTHER_POD_UID = "bbbbbbbb-0000-4000-8000-000000000002"
CLAIM_A = "c1a1c1a1-0000-4000-8000-00000000000a"
CLAIM_B = "c1a1c1a1-0000-4000-8000-00000000000b"
NETS = names.NETWORKS_ANNOTATION
REG = names.MANAGED_NETWORKS_ANNOTATION


def entry(claim: str, device: int, interface: str, *, namespace: str = NS) -> registry.RegistryEntry:
    aid = hashlib.sha256(f"{claim}/{device}".encode()).hexdigest()
    return registry.RegistryEntry(
        attachment_id=identities.AttachmentId(aid),
        claim_uid=identities.ClaimUid(claim),
        namespace=namespace,
        name=identities.shadow_name(aid),
        uid=identities.ObjectUid(f"d0d0d0d0-0000-4000-8000-{device:012d}"),
        interface=interface,
        config_sha256=hashlib.sha256(f"config/{device}".encode()).hexdigest(),
    )


def binding(
    claim: str, device: int, interface: str, source: str = "rail-a-net"
) -> selection_ownership.ManagedBinding:
    return selection_ownership.ManagedBinding(
        entry(claim, device, interface), source_namespace=NS, source_name=source
    )


A0 = binding(CLAIM_A, 0, "dra0", "rail-a-net")
A1 = binding(CLAIM_A, 1, "dra1", "rail-b-net")
B2 = binding(CLAIM_B, 2, "dra2", "rail-c-net")


def pod(
    annotations: Mapping[str, str] | None = None, *, rv: str = "7", uid: str = POD_UID
) -> selection_update.PodSnapshot:
    return selection_update.PodSnapshot(
        namespace=NS,
        name="demo",
        uid=uid,
        resource_version=rv,
        annotations=dict(annotations) if annotations is not None else None,
    )


def after(update: selection_update.SelectionUpdate, rv: str = "8") -> selection_update.PodSnapshot:
    return pod(update.annotations, rv=rv)


def tuple_text(b: selection_ownership.ManagedBinding) -> str:
    e = b.entry
    return json.dumps(
        {"name": e.name, "namespace": e.namespace, "interface": e.interface}, separators=(",", ":")
    )


def reg_text(*bindings: selection_ownership.ManagedBinding, pod_uid: str = POD_UID) -> str:
    return registry.encode_registry(
        registry.Registry(pod_uid=identities.PodUid(pod_uid), entries=tuple(b.entry for b in bindings))
    )


def merged(
    *bindings: selection_ownership.ManagedBinding, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Annotations of a Pod on which ``bindings`` were merged (built through the code under test)."""
    return dict(selections.merge_managed_selections(pod(base or {}), bindings).annotations)


def texts(value: str | None) -> list[str]:
    return [s.raw_text for s in networks.parse_networks(value, pod_namespace=NS)]


def pod_dict(annotations: Mapping[str, str] | None, rv: str = "7") -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": NS, "name": "demo", "uid": POD_UID, "resourceVersion": rv}
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


def edited(b: selection_ownership.ManagedBinding, **changes: Any) -> str:
    """``b``'s selection tuple with ``changes`` applied (``None`` drops a key), as compact JSON."""
    obj: dict[str, Any] = {
        "name": b.entry.name,
        "namespace": b.entry.namespace,
        "interface": b.entry.interface,
    }
    obj.update(changes)
    return json.dumps({k: v for k, v in obj.items() if v is not None}, separators=(",", ":"))
