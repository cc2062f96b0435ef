"""Typed views of the API objects the services and the CLI decide on, decoded once at the boundary.

Code that decides on a Pod, ResourceClaim, ResourceSlice or NetworkAttachmentDefinition reads it
through these frozen dataclasses instead of ``dict[str, Any]``: one type per field, an absent field
reads as its empty value, a value of the wrong JSON kind reads as absent (the views never raise on
a body the server returned). Pure; keeps only the fields it names, never coerces a number or
boolean into a string, never drops an entry because a sibling is malformed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


def mapping(value: object) -> Mapping[str, object]:
    """``value`` when it is a JSON object, else ``{}``."""
    return value if isinstance(value, Mapping) else {}


def items(value: object) -> tuple[object, ...]:
    """``value``'s entries when it is a JSON array, else ``()``."""
    return tuple(value) if isinstance(value, list) else ()


def text(value: object) -> str:
    """``value`` when it is a JSON string, else ``""``."""
    return value if isinstance(value, str) else ""


def optional_text(value: object) -> str | None:
    """``value`` when it is a JSON string, else ``None`` (an unset namespace, UID or precondition)."""
    return value if isinstance(value, str) else None


def _strings(value: object) -> dict[str, str]:
    """The string-valued entries of a JSON object (labels, annotations)."""
    return {str(k): v for k, v in mapping(value).items() if isinstance(v, str)}


@dataclass(frozen=True)
class OwnerRef:
    """One ``metadata.ownerReferences`` entry."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool


@dataclass(frozen=True)
class Meta:
    """The ``metadata`` fields the services read.

    Shapes: ``deleting`` is true when ``deletionTimestamp`` is set (any non-empty value).
    """

    namespace: str = ""
    name: str = ""
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    finalizers: tuple[str, ...] = ()
    owners: tuple[OwnerRef, ...] = ()
    deleting: bool = False

    @property
    def ref(self) -> str:
        """``namespace/name`` for messages."""
        return f"{self.namespace}/{self.name}"


def decode_meta(obj: Mapping[str, object]) -> Meta:
    """The :class:`Meta` of an API object (its ``metadata``)."""
    meta = mapping(obj.get("metadata"))
    owners = tuple(
        OwnerRef(
            api_version=text(ref.get("apiVersion")),
            kind=text(ref.get("kind")),
            name=text(ref.get("name")),
            uid=text(ref.get("uid")),
            controller=ref.get("controller") is True,
        )
        for ref in (mapping(r) for r in items(meta.get("ownerReferences")))
    )
    return Meta(
        namespace=text(meta.get("namespace")),
        name=text(meta.get("name")),
        uid=text(meta.get("uid")),
        labels=_strings(meta.get("labels")),
        annotations=_strings(meta.get("annotations")),
        finalizers=tuple(f for f in items(meta.get("finalizers")) if isinstance(f, str)),
        owners=owners,
        deleting=bool(meta.get("deletionTimestamp")),
    )


@dataclass(frozen=True)
class PodClaimEntry:
    """One ``pod.spec.resourceClaims`` entry: ``name`` (the alias) and the claim or template it names."""

    name: str
    claim_name: str
    template_name: str


@dataclass(frozen=True)
class ExtendedRequest:
    """One ``status.extendedResourceClaimStatus.requestMappings`` entry: which container's extended
    resource the scheduler's claim request ``request`` satisfies (``""`` for a missing field)."""

    container: str
    resource: str
    request: str


@dataclass(frozen=True)
class Pod:
    """The Pod fields the plugin and the CLI decide on.

    Shapes: ``claim_statuses`` maps ``status.resourceClaimStatuses[].name`` to its
    ``resourceClaimName`` (``None`` when the controller recorded that no claim is needed, or the
    name is not a string); ``extended_claim_name`` is
    ``status.extendedResourceClaimStatus.resourceClaimName`` (``""`` when unset) and
    ``extended_requests`` its ``requestMappings`` in order.
    """

    meta: Meta
    node_name: str
    host_network: bool
    claims: tuple[PodClaimEntry, ...]
    claim_statuses: Mapping[str, str | None]
    extended_claim_name: str
    extended_requests: tuple[ExtendedRequest, ...] = ()
    ready: bool = False
    """The ``Ready`` condition is ``True``."""


def decode_pod(obj: Mapping[str, object]) -> Pod:
    """The :class:`Pod` view of a Pod body (GET, LIST item or watch event object)."""
    spec, status = mapping(obj.get("spec")), mapping(obj.get("status"))
    statuses: dict[str, str | None] = {}
    extended = mapping(status.get("extendedResourceClaimStatus"))
    for entry in (s for s in items(status.get("resourceClaimStatuses")) if isinstance(s, Mapping)):
        claim = entry.get("resourceClaimName")
        statuses[str(entry.get("name"))] = claim if isinstance(claim, str) else None
    return Pod(
        meta=decode_meta(obj),
        node_name=text(spec.get("nodeName")),
        host_network=spec.get("hostNetwork") is True,
        claims=tuple(
            PodClaimEntry(
                name=text(entry.get("name")),
                claim_name=text(entry.get("resourceClaimName")),
                template_name=text(entry.get("resourceClaimTemplateName")),
            )
            for entry in (mapping(e) for e in items(spec.get("resourceClaims")))
        ),
        claim_statuses=statuses,
        extended_claim_name=text(extended.get("resourceClaimName")),
        extended_requests=tuple(
            ExtendedRequest(
                container=text(m.get("containerName")),
                resource=text(m.get("resourceName")),
                request=text(m.get("requestName")),
            )
            for m in (mapping(e) for e in items(extended.get("requestMappings")))
        ),
        ready=_condition(status, "Ready") == "True",
    )


def _condition(status: Mapping[str, object], kind: str) -> str:
    """The ``status`` of the ``status.conditions`` entry of type ``kind`` (``""`` without one)."""
    for cond in (mapping(c) for c in items(status.get("conditions"))):
        if cond.get("type") == kind:
            return text(cond.get("status"))
    return ""


@dataclass(frozen=True)
class Node:
    """The Node fields node recovery decides on.

    Shapes: ``ready`` the ``Ready`` condition's status (``"True"``, ``"False"``, ``"Unknown"``,
    ``""`` without one); ``taints`` the ``spec.taints`` keys.
    """

    meta: Meta
    ready: str
    taints: tuple[str, ...]


def decode_node(obj: Mapping[str, object]) -> Node:
    """The :class:`Node` view of a Node body."""
    spec = mapping(obj.get("spec"))
    return Node(
        meta=decode_meta(obj),
        ready=_condition(mapping(obj.get("status")), "Ready"),
        taints=tuple(text(mapping(t).get("key")) for t in items(spec.get("taints"))),
    )


@dataclass(frozen=True)
class AllocationResult:
    """One ``status.allocation.devices.results`` entry."""

    request: str
    driver: str
    pool: str
    device: str

    @property
    def key(self) -> tuple[str, str, str]:
        """``(driver, pool, device)``: the device's identity across slices and device statuses."""
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True)
class Constraint:
    """One ``spec.devices.constraints`` entry: the requests it binds and the attribute they share."""

    requests: tuple[str, ...]
    match_attribute: str


@dataclass(frozen=True)
class NetworkData:
    """``status.devices[].networkData`` of one device, as the plugin (or another driver) wrote it."""

    interface_name: str
    ips: tuple[str, ...]
    hardware_address: str


@dataclass(frozen=True)
class DeviceStatus:
    """One ``status.devices`` entry: its device identity, ``shareID`` and ``networkData``.

    Shapes: ``network_data`` is ``None`` when the entry has none or an empty object.
    """

    driver: str
    pool: str
    device: str
    share_id: str
    network_data: NetworkData | None


@dataclass(frozen=True)
class Reservation:
    """One ``status.reservedFor`` entry: the consumer's ``apiGroup`` (``""`` core), resource, name, UID."""

    api_group: str
    resource: str
    name: str
    uid: str


@dataclass(frozen=True)
class Claim:
    """The ResourceClaim fields the plugin and the CLI read besides ``core.plugin.claim_plan``'s checks."""

    meta: Meta
    constraints: tuple[Constraint, ...]
    results: tuple[AllocationResult, ...]
    devices: tuple[DeviceStatus, ...]
    reserved_for: tuple[Reservation, ...] = ()

    def network_data(self, key: tuple[str, str, str]) -> NetworkData | None:
        """The ``networkData`` of the unshared device status of ``key`` (``None`` when it has none)."""
        for entry in self.devices:
            if (entry.driver, entry.pool, entry.device) == key and not entry.share_id and entry.network_data:
                return entry.network_data
        return None


def _network_data(value: object) -> NetworkData | None:
    """``None`` for an absent, empty or non-object ``networkData`` (nothing was reported)."""
    if not isinstance(value, Mapping) or not value:
        return None
    return NetworkData(
        interface_name=text(value.get("interfaceName")),
        ips=tuple(str(ip) for ip in items(value.get("ips"))),
        hardware_address=text(value.get("hardwareAddress")),
    )


def decode_claim(obj: Mapping[str, object]) -> Claim:
    """The :class:`Claim` view of a ResourceClaim body."""
    spec, status = mapping(mapping(obj.get("spec")).get("devices")), mapping(obj.get("status"))
    results = mapping(mapping(status.get("allocation")).get("devices")).get("results")
    return Claim(
        meta=decode_meta(obj),
        constraints=tuple(
            Constraint(
                requests=tuple(r for r in items(c.get("requests")) if isinstance(r, str)),
                match_attribute=text(c.get("matchAttribute")),
            )
            for c in (mapping(c) for c in items(spec.get("constraints")))
        ),
        results=tuple(
            AllocationResult(
                request=text(r.get("request")),
                driver=text(r.get("driver")),
                pool=text(r.get("pool")),
                device=text(r.get("device")),
            )
            for r in (mapping(r) for r in items(results))
        ),
        devices=tuple(
            DeviceStatus(
                driver=text(d.get("driver")),
                pool=text(d.get("pool")),
                device=text(d.get("device")),
                share_id=text(d.get("shareID")),
                network_data=_network_data(d.get("networkData")),
            )
            for d in (mapping(d) for d in items(status.get("devices")))
        ),
        reserved_for=tuple(
            Reservation(
                api_group=text(r.get("apiGroup")),
                resource=text(r.get("resource")),
                name=text(r.get("name")),
                uid=text(r.get("uid")),
            )
            for r in items(status.get("reservedFor"))
            if isinstance(r, Mapping)
        ),
    )


AttributeValue = str | int | bool
"""A device attribute's plain value (``string``, ``int``, ``bool`` or ``version``)."""


def slice_devices(obj: Mapping[str, object]) -> dict[tuple[str, str, str], dict[str, AttributeValue]]:
    """``{(driver, pool, device): {qualified attribute: plain value}}`` of one ResourceSlice.

    An attribute name without a domain is qualified with the slice's driver (Kubernetes
    ``QualifiedName`` semantics); an attribute whose value is not a one-key object is left out.
    """
    spec = mapping(obj.get("spec"))
    driver, pool = text(spec.get("driver")), text(mapping(spec.get("pool")).get("name"))
    out: dict[tuple[str, str, str], dict[str, AttributeValue]] = {}
    for device in (mapping(d) for d in items(spec.get("devices"))):
        attributes: dict[str, AttributeValue] = {}
        for key, value in mapping(device.get("attributes")).items():
            if isinstance(value, Mapping) and len(value) == 1:
                plain = next(iter(value.values()))
                if isinstance(plain, str | int | bool):
                    attributes[key if "/" in key else f"{driver}/{key}"] = plain
        out[(driver, pool, text(device.get("name")))] = attributes
    return out


@dataclass(frozen=True)
class Nad:
    """A NetworkAttachmentDefinition: its metadata and ``spec.config`` text (``""`` when unset)."""

    meta: Meta
    config: str


def decode_nad(obj: Mapping[str, object]) -> Nad:
    """The :class:`Nad` view of a NetworkAttachmentDefinition body."""
    return Nad(meta=decode_meta(obj), config=text(mapping(obj.get("spec")).get("config")))
