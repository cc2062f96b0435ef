"""NCCL hints from the scheduler's pairing: which GPU each VF serves, and the NCCL variables.

A claim pairs a GPU with a VF when one of its ``matchAttribute`` constraints covers a result of
another driver and a result of this driver (docs/design.md#nccl-hints); nothing is inferred from
addresses or names. For a claim with such a pair and at least one RDMA VF, the container gets
``NCCL_IB_HCA==<rdma dev>,...`` (``=``: exact names, so ``mlx5_1`` never matches ``mlx5_10``)
listing the claim's RDMA VFs, and ``NCCL_SOCKET_IFNAME==<if>,...`` listing their interfaces. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

IB_HCA: Final = "NCCL_IB_HCA"
SOCKET_IFNAME: Final = "NCCL_SOCKET_IFNAME"


@dataclass(frozen=True)
class Gpu:
    """An allocation result of another driver that a constraint pairs with a VF."""

    driver: str
    pool: str
    device: str
    request: str
    attribute: str
    """The ``matchAttribute`` that pairs them (``resource.kubernetes.io/pcieRoot``)."""


@dataclass(frozen=True)
class HintVf:
    """One prepared VF of the claim as the hints need it.

    Shapes: ``rdma_device`` ``""`` for a VF without exactly one RDMA device; ``interface``
    ``""`` when no interface name is known at prepare (manual mode without ``ifName``).
    """

    device: str
    rdma_device: str = ""
    interface: str = ""


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _covers(requests: Sequence[str], request: str) -> bool:
    """Whether a constraint's ``requests`` (empty: every request) covers a result's request."""
    return not requests or request in requests or request.split("/", 1)[0] in requests


def paired_gpus(claim: Mapping[str, object], driver: str) -> dict[str, tuple[Gpu, ...]]:
    """This driver's device → the other drivers' results a ``matchAttribute`` constraint pairs with it.

    Shapes: devices without a pair are absent; GPUs in result order, each once per device.
    """
    constraints = _list(_mapping(_mapping(claim.get("spec")).get("devices")).get("constraints"))
    allocation = _mapping(_mapping(claim.get("status")).get("allocation"))
    results = [_mapping(r) for r in _list(_mapping(allocation.get("devices")).get("results"))]
    out: dict[str, list[Gpu]] = {}
    for constraint in (_mapping(c) for c in constraints):
        attribute = constraint.get("matchAttribute")
        if not isinstance(attribute, str) or not attribute:
            continue
        requests = [r for r in _list(constraint.get("requests")) if isinstance(r, str)]
        covered = [
            r for r in results if isinstance(r.get("request"), str) and _covers(requests, str(r["request"]))
        ]
        ours = [r for r in covered if r.get("driver") == driver]
        others = [r for r in covered if isinstance(r.get("driver"), str) and r.get("driver") != driver]
        for vf in ours:
            for other in others:
                gpu = Gpu(
                    str(other.get("driver")),
                    str(other.get("pool", "")),
                    str(other.get("device", "")),
                    str(other.get("request")),
                    attribute,
                )
                listed = out.setdefault(str(vf.get("device", "")), [])
                if gpu not in listed:
                    listed.append(gpu)
    return {device: tuple(gpus) for device, gpus in out.items()}


def environment(vfs: Sequence[HintVf], paired: Mapping[str, object]) -> list[str]:
    """The NCCL variables for the claim's containers, or ``[]`` when no RDMA VF is paired.

    Shapes: ``["NCCL_IB_HCA==mlx5_3,mlx5_7", "NCCL_SOCKET_IFNAME==dra0,dra1"]``, VFs in the
    given (allocation) order, each name once; ``NCCL_SOCKET_IFNAME`` only when an RDMA VF has an
    interface name.
    """
    rdma = [v for v in vfs if v.rdma_device]
    if not any(v.device in paired for v in rdma):
        return []
    hcas = list(dict.fromkeys(v.rdma_device for v in rdma))
    interfaces = list(dict.fromkeys(v.interface for v in rdma if v.interface))
    out = [f"{IB_HCA}=={','.join(hcas)}"]
    if interfaces:
        out.append(f"{SOCKET_IFNAME}=={','.join(interfaces)}")
    return out
