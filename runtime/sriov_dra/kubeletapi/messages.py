"""Typed values for the DRA kubelet messages and their conversion to and from the wire.

The frozen dataclasses the plugin server and the kubelet simulator exchange with the layer above
(claim references, prepared devices, per-claim errors, health identifiers), and the only code
that builds or reads the generated v1, v1beta1 and health messages. Converting to v1beta1 drops
``share_id``, as the kubelet's own conversion does. No I/O, no policy (which claims to send,
what an error means).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sriov_dra.core import device_health
from sriov_dra.kubeletapi import dra_v1_pb2, dra_v1beta1_pb2, drahealth_v1alpha1_pb2

AnyClaimMessage = dra_v1_pb2.Claim | dra_v1beta1_pb2.Claim
AnyDeviceMessage = dra_v1_pb2.Device | dra_v1beta1_pb2.Device


@dataclass(frozen=True)
class ClaimRef:
    """The identity of a ResourceClaim as the kubelet sends it: namespace, name and UID.

    Shapes: ``uid`` is the ``metadata.uid`` string; it keys every response map.
    """

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"ResourceClaim {self.namespace}/{self.name} (uid {self.uid})"


@dataclass(frozen=True)
class Device:
    """One prepared device of a claim, as returned to the kubelet.

    Shapes: ``request_names`` are top-level request names (empty = every request of the claim);
    ``cdi_device_ids`` are fully qualified CDI names ``<vendor>/<class>=<name>``; ``share_id`` is
    the allocation's share ID, or ``None`` (v1 only; lost on v1beta1).
    """

    pool_name: str
    device_name: str
    request_names: tuple[str, ...] = ()
    cdi_device_ids: tuple[str, ...] = ()
    share_id: str | None = None


@dataclass(frozen=True)
class Prepared:
    """A claim prepared successfully, with its devices (possibly none)."""

    devices: tuple[Device, ...] = ()


@dataclass(frozen=True)
class ClaimError:
    """A claim that failed; ``message`` becomes the response entry's ``error`` string.

    Raises: ``ValueError`` if ``message`` is blank, because an empty ``error`` means success on
    the wire.
    """

    message: str

    def __post_init__(self) -> None:
        if not self.message.strip():
            raise ValueError("ClaimError needs a non-empty message: an empty error string means success")

    @classmethod
    def from_exception(cls, exc: BaseException) -> ClaimError:
        """Describe ``exc`` as a claim error: its text, or its class name when the text is empty."""
        text = str(exc).strip()
        return cls(text if text else type(exc).__name__)


PrepareOutcome = Prepared | ClaimError
UnprepareOutcome = ClaimError | None


@dataclass(frozen=True)
class DeviceId:
    """A device within the driver's scope, as the health stream names it."""

    pool_name: str
    device_name: str


def claim_from_wire(message: AnyClaimMessage) -> ClaimRef:
    """Read a v1 or v1beta1 ``Claim`` message."""
    return ClaimRef(namespace=message.namespace, name=message.name, uid=message.uid)


def claim_to_v1(claim: ClaimRef) -> dra_v1_pb2.Claim:
    """Build a v1 ``Claim`` message."""
    return dra_v1_pb2.Claim(namespace=claim.namespace, name=claim.name, uid=claim.uid)


def claim_to_v1beta1(claim: ClaimRef) -> dra_v1beta1_pb2.Claim:
    """Build a v1beta1 ``Claim`` message."""
    return dra_v1beta1_pb2.Claim(namespace=claim.namespace, name=claim.name, uid=claim.uid)


def device_from_wire(message: AnyDeviceMessage) -> Device:
    """Read a v1 or v1beta1 ``Device``; ``share_id`` only when the v1 field is present."""
    share_id = None
    if isinstance(message, dra_v1_pb2.Device) and message.HasField("share_id"):
        share_id = message.share_id
    return Device(
        pool_name=message.pool_name,
        device_name=message.device_name,
        request_names=tuple(message.request_names),
        cdi_device_ids=tuple(message.cdi_device_ids),
        share_id=share_id,
    )


def _device_to_v1(device: Device) -> dra_v1_pb2.Device:
    message = dra_v1_pb2.Device(
        request_names=device.request_names,
        pool_name=device.pool_name,
        device_name=device.device_name,
        cdi_device_ids=device.cdi_device_ids,
    )
    if device.share_id is not None:
        message.share_id = device.share_id
    return message


def _device_to_v1beta1(device: Device) -> dra_v1beta1_pb2.Device:
    return dra_v1beta1_pb2.Device(
        request_names=device.request_names,
        pool_name=device.pool_name,
        device_name=device.device_name,
        cdi_device_ids=device.cdi_device_ids,
    )


def prepare_response_v1(outcomes: Mapping[str, PrepareOutcome]) -> dra_v1_pb2.NodePrepareResourcesResponse:
    """Build a v1 ``NodePrepareResourcesResponse`` with one entry per claim UID in ``outcomes``."""
    response = dra_v1_pb2.NodePrepareResourcesResponse()
    for uid, outcome in outcomes.items():
        entry = response.claims[uid]
        if isinstance(outcome, ClaimError):
            entry.error = outcome.message
        else:
            entry.devices.extend(_device_to_v1(d) for d in outcome.devices)
    return response


def prepare_response_v1beta1(
    outcomes: Mapping[str, PrepareOutcome],
) -> dra_v1beta1_pb2.NodePrepareResourcesResponse:
    """Build a v1beta1 ``NodePrepareResourcesResponse``; share IDs are dropped (no such field)."""
    response = dra_v1beta1_pb2.NodePrepareResourcesResponse()
    for uid, outcome in outcomes.items():
        entry = response.claims[uid]
        if isinstance(outcome, ClaimError):
            entry.error = outcome.message
        else:
            entry.devices.extend(_device_to_v1beta1(d) for d in outcome.devices)
    return response


def prepare_outcomes_from_wire(
    response: dra_v1_pb2.NodePrepareResourcesResponse | dra_v1beta1_pb2.NodePrepareResourcesResponse,
) -> dict[str, PrepareOutcome]:
    """Read a v1 or v1beta1 ``NodePrepareResourcesResponse``: non-empty ``error`` wins over devices."""
    outcomes: dict[str, PrepareOutcome] = {}
    for uid, entry in response.claims.items():
        if entry.error:
            outcomes[uid] = ClaimError(entry.error)
        else:
            outcomes[uid] = Prepared(tuple(device_from_wire(d) for d in entry.devices))
    return outcomes


def unprepare_response_v1(
    outcomes: Mapping[str, UnprepareOutcome],
) -> dra_v1_pb2.NodeUnprepareResourcesResponse:
    """Build a v1 ``NodeUnprepareResourcesResponse``; a success is an empty entry, never a missing one."""
    response = dra_v1_pb2.NodeUnprepareResourcesResponse()
    for uid, outcome in outcomes.items():
        response.claims[uid].error = outcome.message if outcome is not None else ""
    return response


def unprepare_response_v1beta1(
    outcomes: Mapping[str, UnprepareOutcome],
) -> dra_v1beta1_pb2.NodeUnprepareResourcesResponse:
    """Build a v1beta1 ``NodeUnprepareResourcesResponse``, one (possibly empty) entry per claim."""
    response = dra_v1beta1_pb2.NodeUnprepareResourcesResponse()
    for uid, outcome in outcomes.items():
        response.claims[uid].error = outcome.message if outcome is not None else ""
    return response


def unprepare_outcomes_from_wire(
    response: dra_v1_pb2.NodeUnprepareResourcesResponse | dra_v1beta1_pb2.NodeUnprepareResourcesResponse,
) -> dict[str, UnprepareOutcome]:
    """Read a v1 or v1beta1 ``NodeUnprepareResourcesResponse``."""
    return {uid: (ClaimError(entry.error) if entry.error else None) for uid, entry in response.claims.items()}


MAX_HEALTH_MESSAGE = 1024
"""The kubelet keeps at most this many characters of ``DeviceHealth.message``."""


@dataclass(frozen=True)
class DeviceHealthReport:
    """One device's entry in a health report: ``health`` the enum name, ``message`` its reason."""

    device: DeviceId
    health: device_health.Health
    message: str


def health_response(
    reports: Iterable[DeviceHealthReport], *, now_s: int
) -> drahealth_v1alpha1_pb2.NodeWatchResourcesResponse:
    """A complete health report of ``reports`` as of ``now_s``.

    Units: ``now_s`` is Unix time in whole seconds (``DeviceHealth.last_updated_time``; the kubelet
    1.36 stamps its own receive time instead). The per-device timeout is left at 0, which selects
    the kubelet default of 30 s after which an unreported device reads Unknown. Messages longer
    than :data:`MAX_HEALTH_MESSAGE` are cut to it, ending in ``...``.
    """
    return drahealth_v1alpha1_pb2.NodeWatchResourcesResponse(
        devices=[
            drahealth_v1alpha1_pb2.DeviceHealth(
                device=drahealth_v1alpha1_pb2.DeviceIdentifier(
                    pool_name=r.device.pool_name, device_name=r.device.device_name
                ),
                health=r.health.value,
                last_updated_time=now_s,
                message=r.message
                if len(r.message) <= MAX_HEALTH_MESSAGE
                else r.message[: MAX_HEALTH_MESSAGE - 3] + "...",
            )
            for r in reports
        ]
    )
