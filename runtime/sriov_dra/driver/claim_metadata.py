"""The device metadata step of prepare and unprepare (docs/design.md#device-metadata).

At prepare, after the host stage (and in auto-attach mode the ensure pass), one file per
top-level request of this driver with each prepared VF's published attributes, its RDMA device,
the interface name it gets and the GPUs the claim's constraints pair it with, mounted through
CDI together with the claim's NCCL variables (docs/design.md#nccl-hints); the CDI IDs go to the
first device of each request in the kubelet answer. Its own failures never fail a prepare: the request then gets no
mount and a warning names the claim and the reason. At unprepare the files and specs go with the
claim's other CDI files; a failed removal fails the unprepare, which the kubelet retries.
"""

from __future__ import annotations

from collections.abc import Mapping

from sriov_dra.core import attributes
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.core.plugin import device_metadata, nccl_hints
from sriov_dra.driver import claim_context


def request_names(claim: Mapping[str, object], driver: str, pool: str) -> dict[str, str]:
    """Top-level request → the request as allocated (``req`` or ``req/sub``), for this driver's
    results from ``pool``, in result order."""
    status = claim.get("status")
    allocation = status.get("allocation") if isinstance(status, Mapping) else None
    devices = allocation.get("devices") if isinstance(allocation, Mapping) else None
    results = devices.get("results") if isinstance(devices, Mapping) else None
    out: dict[str, str] = {}
    for result in results if isinstance(results, list) else []:
        if not isinstance(result, Mapping) or result.get("driver") != driver or result.get("pool") != pool:
            continue
        request = result.get("request")
        if isinstance(request, str) and request:
            out.setdefault(device_metadata.base_request(request), request)
    return out


def hint_vf(ctx: claim_context.ClaimContext, device: model.PreparedDevice) -> nccl_hints.HintVf:
    """The VF's RDMA device (when it has exactly one) and the interface name it gets."""
    rdma = ctx.sysfs.rdma_devices(device.pci_address)
    interface = device.managed.interface if device.managed is not None else device.interface_name
    return nccl_hints.HintVf(device.device, rdma[0] if len(rdma) == 1 else "", interface)


def device_attributes(
    ctx: claim_context.ClaimContext,
    device: model.PreparedDevice,
    gpus: tuple[nccl_hints.Gpu, ...] = (),
) -> dict[str, attributes.AttributeValue]:
    """What the file says about one VF: its published attributes, RDMA device, interface name
    and the GPUs the claim's constraints pair it with."""
    published = ctx.published(device.device) if ctx.published is not None else None
    if published is None:
        vf = ctx.inventory.vfs().get(device.device)
        published = vf.attributes if vf is not None else {}
    out = dict(published)
    hint = hint_vf(ctx, device)
    if hint.rdma_device:
        out[device_metadata.RDMA_DEVICE_ATTRIBUTE] = attributes.string_value(hint.rdma_device)
    if hint.interface:
        out[device_metadata.INTERFACE_NAME_ATTRIBUTE] = attributes.string_value(hint.interface)
    out.update(device_metadata.pairing_attributes(gpus))
    return out


def nccl_environment(
    ctx: claim_context.ClaimContext, record: model.ClaimRecord, paired: Mapping[str, object]
) -> list[str]:
    """The claim's NCCL variables; none when a VfConfig of the claim sets ``disableNcclHints``."""
    if any(d.vf_config.get("disableNcclHints") is True for d in record.devices):
        return []
    return nccl_hints.environment([hint_vf(ctx, d) for d in record.devices], paired)


def write_claim_metadata(
    ctx: claim_context.ClaimContext, record: model.ClaimRecord, claim: Mapping[str, object]
) -> dict[str, str]:
    """Write the claim's files and mount specs; return top-level request → metadata CDI ID.

    A request whose file or spec could not be written is left out (logged as the warning
    ``device metadata not written``); nothing here raises.
    """
    metadata = ctx.metadata
    if metadata is None:
        return {}
    out: dict[str, str] = {}
    try:
        identity = device_metadata.claim_identity(claim)
        requests = request_names(claim, ctx.driver_name, ctx.node_name)
        paired = nccl_hints.paired_gpus(claim, ctx.driver_name)
        devices = {
            d.device: device_metadata.MetadataDevice(
                ctx.driver_name, d.pool, d.device, device_attributes(ctx, d, paired.get(d.device, ()))
            )
            for d in record.devices
        }
        env = nccl_environment(ctx, record, paired)
    except Exception as exc:
        _warn(ctx, record, "", exc)
        return out
    for top, request in requests.items():
        listed = [devices[d.device] for d in record.devices if top in d.request_names]
        if not listed:
            continue
        try:
            doc = device_metadata.document(identity, request, listed)
            out[top] = metadata.write(identity, request, doc, env)
        except Exception as exc:
            _warn(ctx, record, top, exc)
    return out


def remove_claim_metadata(ctx: claim_context.ClaimContext, record: model.ClaimRecord) -> None:
    """Remove the claim's files and mount specs. Raises: ``OSError`` (the record is kept)."""
    if ctx.metadata is not None:
        ctx.metadata.remove_claim(record.namespace, record.name, record.claim_uid)


def _warn(ctx: claim_context.ClaimContext, record: model.ClaimRecord, request: str, exc: Exception) -> None:
    ctx.log.warning(
        "device metadata not written",
        extra={
            "claim": f"{record.namespace}/{record.name}",
            "claim_uid": record.claim_uid,
            "request": request,
            "op": "prepare",
            "reason": str(exc),
        },
    )
