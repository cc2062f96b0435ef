"""Builders of consistent checkpoint records and their shadows for driver.managed unit tests."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from sriov_dra.core import binding_annotation, identities
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import shadow_lifecycle

NODE_UID = "0a0a0a0a-0000-4000-8000-00000000000a"
POD_UID = "11111111-2222-3333-4444-555555555555"
CLAIM_UID = "c1a1c1a1-0000-4000-8000-000000000001"
SOURCE_UID = "5005e000-0000-4000-8000-000000000001"
NS = "ns-a"


def record(
    *devices: str,
    phase: model.Phase = model.Phase.READY,
    claim_uid: str = CLAIM_UID,
    pod_uid: str = POD_UID,
    first_interface: int = 0,
) -> model.ClaimRecord:
    """A valid record with one managed binding per device name (``0000-03-02-<n>``)."""
    out = []
    for index, device in enumerate(devices):
        pci = identities.PciAddress(device.replace("-", ":", 2).replace("-", "."))
        identity = identities.build_binding_identity(
            node_uid=NODE_UID, pod_uid=pod_uid, claim_uid=claim_uid, pool="node-a", device=device
        )
        aid = identities.attachment_id(identity)
        config = json.dumps({"cniVersion": "1.0.0", "name": "rail-a", "type": "sriov", "deviceID": pci})
        binding = model.ManagedBinding(
            phase=phase,
            attachment_id=aid,
            shadow_namespace=NS,
            shadow_name=identities.shadow_name(aid),
            shadow_uid=f"5ad0c000-0000-4000-8000-{index:012d}",
            source=model.SourceRef(NS, "rail-a-net", identities.ObjectUid(SOURCE_UID), "7"),
            rendered_config=config,
            config_sha256=binding_annotation.config_sha256(config),
            interface=f"dra{index + first_interface}",
            node_name="node-a",
            node_uid=identities.NodeUid(NODE_UID),
        )
        out.append(
            model.PreparedDevice(
                request_names=("nic",),
                pool="node-a",
                device=device,
                pci_address=pci,
                original_driver="",
                vf_config={},
                interface_name=f"dra{index + first_interface}",
                cdi_device_ids=(),
                net_attach_def_config=config,
                managed=binding,
            )
        )
    return model.ClaimRecord(
        claim_uid=identities.ClaimUid(claim_uid),
        namespace=NS,
        name="vf-claim",
        pod_uid=identities.PodUid(pod_uid),
        devices=tuple(out),
    )


def live_shadow(rec: model.ClaimRecord, index: int = 0, **meta: Any) -> dict[str, Any]:
    """The live object of binding ``index`` as the API returns it (uid, resourceVersion set)."""
    target = shadow_lifecycle.targets(rec)[index]
    obj = shadow_lifecycle.expected_shadow(target, pod_name="consumer")
    obj["metadata"].update(uid=target.binding.shadow_uid, resourceVersion="10", **meta)
    return obj


def with_phase(rec: model.ClaimRecord, phase: model.Phase) -> model.ClaimRecord:
    return replace(
        rec,
        devices=tuple(
            replace(d, managed=replace(d.managed, phase=phase)) if d.managed else d for d in rec.devices
        ),
    )
