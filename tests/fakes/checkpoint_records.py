"""Builders of valid checkpoint records for tests (unit and host tiers).

Every builder returns a record that ``checkpoint_model.record_problems`` accepts: attachmentIDs are
computed from the real identity, shadow names derived from them, config hashes from the rendered
text. Tests then change one thing to prove one rule.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from sriov_dra.core import binding_annotation, identities
from sriov_dra.core.plugin import cdi_spec
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra_rules import errors

NODE_NAME = "node-a"
NODE_UID = "0b7c6f2e-5a1d-4c3e-9f10-2a3b4c5d6e7f"
POD_A = "11111111-2222-3333-4444-555555555555"
POD_B = "22222222-3333-4444-5555-666666666666"
CLAIM_1 = "c1a1c1a1-0000-4000-8000-000000000001"
CLAIM_2 = "c1a1c1a1-0000-4000-8000-000000000002"
CLAIM_3 = "c1a1c1a1-0000-4000-8000-000000000003"
SOURCE_UID = "5a5a5a5a-0000-4000-8000-00000000000a"
SHADOW_UID = "5d5d5d5d-0000-4000-8000-00000000000d"
OTHER_SHADOW_UID = "5d5d5d5d-0000-4000-8000-00000000000e"
VF_CONFIG: model.JsonObject = {
    "apiVersion": "sriovnetwork.k8snetworkplumbingwg.io/v1alpha1",
    "kind": "VfConfig",
    "netAttachDefName": "rail-a-net",
}


def pci(index: int) -> str:
    """Return the VF BDF number ``index`` (0-63) on bus 3b."""
    return f"0000:3b:{2 + index // 8:02x}.{index % 8}"


def device_name(index: int) -> str:
    """Return the DRA device name of VF ``index`` (BDF with ``:``/``.`` → ``-``)."""
    return pci(index).replace(":", "-").replace(".", "-")


def rendered_config(index: int) -> str:
    """Return a frozen CNI config text for VF ``index``."""
    return (
        '{"cniVersion":"1.0.0","name":"rail-a","type":"sriov","deviceID":"' + pci(index) + '",'
        '"ipam":{"type":"whereabouts","range":"192.0.2.0/24","network_name":"rail-a"}}'
    )


def binding(
    claim_uid: str,
    pod_uid: str,
    index: int,
    *,
    namespace: str = "ns-a",
    phase: model.Phase = model.Phase.READY,
    shadow_uid: str = SHADOW_UID,
    node_uid: str = NODE_UID,
) -> model.ManagedBinding:
    """Return a valid managed binding for VF ``index`` of the claim."""
    identity = identities.build_binding_identity(
        node_uid=node_uid, pod_uid=pod_uid, claim_uid=claim_uid, pool=NODE_NAME, device=device_name(index)
    )
    aid = identities.attachment_id(identity)
    text = rendered_config(index)
    return model.ManagedBinding(
        phase=phase,
        attachment_id=aid,
        shadow_namespace=namespace,
        shadow_name=identities.shadow_name(aid),
        shadow_uid=shadow_uid,
        source=model.SourceRef(
            namespace=namespace,
            name="rail-a-net",
            uid=identities.ObjectUid(SOURCE_UID),
            resource_version="4711",
        ),
        rendered_config=text,
        config_sha256=binding_annotation.config_sha256(text),
        interface=f"dra{index}",
        node_name=NODE_NAME,
        node_uid=identities.NodeUid(node_uid),
    )


def device(
    claim_uid: str,
    pod_uid: str,
    index: int,
    *,
    namespace: str = "ns-a",
    managed: bool = True,
    phase: model.Phase = model.Phase.READY,
    shadow_uid: str = SHADOW_UID,
) -> model.PreparedDevice:
    """Return a valid prepared VF ``index`` of the claim, with a managed binding when asked."""
    return model.PreparedDevice(
        request_names=("vf",),
        pool=NODE_NAME,
        device=device_name(index),
        pci_address=identities.PciAddress(pci(index)),
        original_driver="",
        vf_config=dict(VF_CONFIG),
        interface_name=f"dra{index}",
        cdi_device_ids=cdi_spec.prepared_device_ids(claim_uid, pod_uid, device_name(index)),
        net_attach_def_config="",
        managed=(
            binding(claim_uid, pod_uid, index, namespace=namespace, phase=phase, shadow_uid=shadow_uid)
            if managed
            else None
        ),
    )


def record(
    claim_uid: str = CLAIM_1,
    pod_uid: str = POD_A,
    *,
    indexes: tuple[int, ...] = (0,),
    namespace: str = "ns-a",
    name: str = "claim-a",
    managed: bool = True,
    phase: model.Phase = model.Phase.READY,
    shadow_uid: str = SHADOW_UID,
) -> model.ClaimRecord:
    """Return a valid claim record with one prepared VF per entry of ``indexes``."""
    return model.ClaimRecord(
        claim_uid=identities.ClaimUid(claim_uid),
        namespace=namespace,
        name=name,
        pod_uid=identities.PodUid(pod_uid),
        devices=tuple(
            device(
                claim_uid,
                pod_uid,
                i,
                namespace=namespace,
                managed=managed,
                phase=phase,
                shadow_uid=shadow_uid,
            )
            for i in indexes
        ),
    )


def with_phase(rec: model.ClaimRecord, phase: model.Phase) -> model.ClaimRecord:
    """Return ``rec`` with every managed binding in ``phase``."""
    return replace(
        rec,
        devices=tuple(
            replace(d, managed=replace(d.managed, phase=phase)) if d.managed is not None else d
            for d in rec.devices
        ),
    )


def checkpoint(*records: model.ClaimRecord) -> model.Checkpoint:
    """Return a checkpoint holding ``records`` keyed by their claim UIDs."""
    return model.Checkpoint(claims={r.claim_uid: r for r in records})


def count_validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Wrap the model's record validator (for this test only) to log each claim UID it validates.

    Returns the list the wrapper appends to, in call order; the real validator still decides.
    """
    seen: list[str] = []
    real = model.record_problems

    def counting(rec: model.ClaimRecord, path: str = "") -> list[errors.FieldError]:
        seen.append(rec.claim_uid)
        return real(rec, path)

    monkeypatch.setattr(model, "record_problems", counting)
    return seen
