"""The objects ``bench/scale.py`` creates for Pods it does not prepare: exactly the plugin's.

For the Pods of the simulated nodes (every node but the one whose plugin really runs) the
benchmark writes what the plugin would have written after a NodePrepare, without running it:
one shadow NAD per allocated VF and one JSON Patch of the Pod (selections + registry). Nothing
here re-implements a product rule; each step calls the code the plugin's prepare calls:

- interface names: ``core.interface_naming.assign_interfaces`` over every allocation of the Pod (as
  ``driver.managed.planning.interface_names`` does);
- frozen config: ``core.render.render_shadow_config`` of the source NAD with the VF's PCI
  address; identity and shadow name: ``core.identities``;
- the checkpoint records the plugin would hold (``Pending`` bindings, then the shadow UIDs),
  built like ``planning.PlannedBinding.managed``;
- the shadow body: ``driver.managed.shadow_lifecycle.expected_shadow`` (the body of the plugin's create
  call, built by ``core.plugin.shadow_object.build_shadow_nad``: labels, finalizer, ownerReference, binding
  annotation);
- the Pod patch: ``driver.managed.pod_selections.plan_merge`` over ``pod_selections.intended_entries`` (the
  ``core.plugin.selections`` merge and the ``core.registry`` codec, with the UID/resourceVersion tests).

``tests/pure/bench/test_scale_objects.py`` runs the real prepare on a fake node and checks that
these builders produce the same shadows and the same Pod annotations. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sriov_dra.core import identities, interface_naming, render
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.core.plugin import json_patch, selection_update, selections
from sriov_dra.driver.managed import pod_selections, shadow_lifecycle


@dataclass(frozen=True)
class Vf:
    """One allocated VF: its DRA request, pool, device, PCI address and its live source NAD.

    Shapes: ``source`` is the source NAD as read from the API server (``metadata.uid`` and
    ``resourceVersion`` set), in the Pod's namespace.
    """

    request: str
    pool: str
    device: str
    pci: str
    source: Mapping[str, Any]


@dataclass(frozen=True)
class Claim:
    """One ResourceClaim of the Pod: its name, UID, the Pod's alias for it and its VFs."""

    name: str
    uid: str
    alias: str
    vfs: tuple[Vf, ...]


def interface_names(claims: Sequence[Claim]) -> dict[tuple[str, str], str]:
    """``(pool, device) → interface`` over every allocation of the Pod (docs/design.md#interface-names)."""
    devices = [
        interface_naming.AllocatedDevice(
            claim_uid=identities.ClaimUid(c.uid),
            claim_alias=c.alias,
            request=v.request,
            pool=v.pool,
            device=v.device,
        )
        for c in claims
        for v in c.vfs
    ]
    return {(a.pool, a.device): a.ifname for a in interface_naming.assign_interfaces(devices)}


def records(
    *, node_name: str, node_uid: str, namespace: str, pod_uid: str, claims: Sequence[Claim]
) -> list[model.ClaimRecord]:
    """The checkpoint records the plugin holds for this Pod after planning (``Pending``, no shadow UID).

    Raises: the ``core.render`` / ``core.identities`` errors for malformed inputs.
    """
    names_by_device = interface_names(claims)
    out = []
    for claim in claims:
        devices = []
        for vf in claim.vfs:
            rendered = render.render_shadow_config(vf.source, identities.PciAddress(vf.pci))
            identity = identities.build_binding_identity(
                node_uid=node_uid, pod_uid=pod_uid, claim_uid=claim.uid, pool=vf.pool, device=vf.device
            )
            aid = identities.attachment_id(identity)
            meta = vf.source["metadata"]
            interface = names_by_device[(vf.pool, vf.device)]
            binding = model.ManagedBinding(
                phase=model.Phase.PENDING,
                attachment_id=aid,
                shadow_namespace=namespace,
                shadow_name=identities.shadow_name(aid),
                shadow_uid="",
                source=model.SourceRef(
                    meta["namespace"],
                    meta["name"],
                    identities.ObjectUid(meta["uid"]),
                    meta["resourceVersion"],
                ),
                rendered_config=rendered.config_text,
                config_sha256=rendered.config_sha256,
                interface=interface,
                node_name=node_name,
                node_uid=identities.NodeUid(node_uid),
            )
            devices.append(
                model.PreparedDevice(
                    request_names=(vf.request,),
                    pool=vf.pool,
                    device=vf.device,
                    pci_address=identities.PciAddress(vf.pci),
                    original_driver="",
                    vf_config={},
                    interface_name=interface,
                    cdi_device_ids=(),
                    net_attach_def_config=rendered.config_text,
                    managed=binding,
                )
            )
        out.append(
            model.ClaimRecord(
                claim_uid=identities.ClaimUid(claim.uid),
                namespace=namespace,
                name=claim.name,
                pod_uid=identities.PodUid(pod_uid),
                devices=tuple(devices),
            )
        )
    return out


def shadow_bodies(recs: Sequence[model.ClaimRecord], *, pod_name: str) -> list[dict[str, Any]]:
    """The body of every shadow create call the plugin sends for ``recs``, in device order."""
    return [
        shadow_lifecycle.expected_shadow(t, pod_name=pod_name)
        for r in recs
        for t in shadow_lifecycle.targets(r)
    ]


def with_shadow_uids(recs: Sequence[model.ClaimRecord], uids: Mapping[str, str]) -> list[model.ClaimRecord]:
    """``recs`` with each binding's shadow UID set from ``uids`` (shadow name → UID of the created object)."""
    out = []
    for rec in recs:
        devices = tuple(
            replace(d, managed=replace(d.managed, shadow_uid=uids[d.managed.shadow_name]))
            if d.managed is not None
            else d
            for d in rec.devices
        )
        out.append(replace(rec, devices=devices))
    return out


def pod_patch(
    pod: Mapping[str, Any],
    recs: Sequence[model.ClaimRecord],
    *,
    layout: interface_naming.MultusLayout = interface_naming.DEFAULT_LAYOUT,
) -> tuple[json_patch.PatchOp, ...]:
    """The JSON Patch the plugin sends to the live ``pod`` to select every binding of ``recs``."""
    return pod_selections.plan_merge(pod, pod_selections.intended_entries(recs), layout=layout)


def pod_annotations(
    pod: Mapping[str, Any],
    recs: Sequence[model.ClaimRecord],
    *,
    layout: interface_naming.MultusLayout = interface_naming.DEFAULT_LAYOUT,
) -> dict[str, str]:
    """The Pod's annotations after that patch (for sizes; the same merge as :func:`pod_patch`)."""
    update = selections.merge_managed_selections(
        selection_update.pod_snapshot(pod), pod_selections.intended_entries(recs), layout=layout
    )
    return dict(
        update.annotations if update.changed else (pod.get("metadata") or {}).get("annotations") or {}
    )
