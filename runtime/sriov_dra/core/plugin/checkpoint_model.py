"""The plugin's checkpoint data model: claim records, prepared VFs and managed bindings.

Per prepared claim (keyed by claim UID, one record each), what the plugin did on the node
(prepared VFs, original host driver, CDI IDs) and, for auto-attached networks, one versioned
managed binding per VF whose ``phase`` is persisted before any external effect it permits
(docs/design.md#checkpoint). Owns the frozen dataclasses, the ``Phase`` names and the validity
rules of every record (formats, and identity fields that must agree: attachmentID, shadow name,
config hash). ``checkpoint_codec`` encodes; ``checkpoint_lifecycle`` moves phases. Pure.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from sriov_dra.core import binding_annotation, identities
from sriov_dra.core.plugin import cdi_spec
from sriov_dra_rules import errors, names, strict_json

MANAGED_BINDING_VERSION: Final = 1
"""``bindingVersion`` of the managed-binding record this build reads and writes."""

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"


class Phase(enum.StrEnum):
    """Persisted phase of one managed binding (docs/design.md#prepare; values are the persisted strings)."""

    PENDING = "Pending"
    READY = "Ready"
    DELETING = "Deleting"
    RELEASE_COMPLETE = "ReleaseComplete"


FORWARD_PHASES: Final = frozenset({Phase.PENDING, Phase.READY})
RELEASE_PHASES: Final = frozenset({Phase.DELETING, Phase.RELEASE_COMPLETE})


@dataclass(frozen=True)
class SourceRef:
    """The source (template) NAD a binding was rendered from, as read at first prepare.

    Shapes: namespace a DNS-1123 label, name a DNS-1123 subdomain, uid a lowercase UUID,
    resource_version a non-empty opaque string (diagnostic only, never part of the identity).
    """

    namespace: str
    name: str
    uid: identities.ObjectUid
    resource_version: str


@dataclass(frozen=True)
class ManagedBinding:
    """One managed binding of one prepared VF (bindingVersion 1; docs/design.md#checkpoint).

    ``rendered_config`` holds the exact frozen CNI bytes (as text) of the shadow's
    ``spec.config``; ``config_sha256`` is their lowercase hex SHA-256. ``shadow_uid`` is ``""``
    until the shadow's UID is observed (a lost create response leaves it empty).

    Shapes: ``shadow_name`` = ``dra-sriov-`` + first 32 hex of ``attachment_id``;
    ``shadow_namespace`` = the claim (and Pod) namespace; ``interface`` = the device's
    ``interface_name``. Decode and encode reject a record breaking any of these.
    """

    phase: Phase
    attachment_id: identities.AttachmentId
    shadow_namespace: str
    shadow_name: str
    shadow_uid: str
    source: SourceRef
    rendered_config: str
    config_sha256: str
    interface: str
    node_name: str
    node_uid: identities.NodeUid


@dataclass(frozen=True)
class PreparedDevice:
    """One VF prepared for a claim: allocation identity, host state to restore, CDI IDs.

    ``vf_config`` is the effective VfConfig as a plain JSON object; treat it as read-only (the
    checkpoint store hands out deep copies). ``original_driver`` is ``""`` when the driver was
    left alone. ``net_attach_def_config`` is the NAD config text used, or ``""``.
    """

    request_names: tuple[str, ...]
    pool: str
    device: str
    pci_address: identities.PciAddress
    original_driver: str
    vf_config: JsonObject
    interface_name: str
    cdi_device_ids: tuple[str, ...]
    net_attach_def_config: str
    managed: ManagedBinding | None = None


@dataclass(frozen=True)
class ClaimRecord:
    """Everything the plugin recorded for one prepared claim (one consumer Pod)."""

    claim_uid: identities.ClaimUid
    namespace: str
    name: str
    pod_uid: identities.PodUid
    devices: tuple[PreparedDevice, ...]

    def managed_bindings(self) -> tuple[ManagedBinding, ...]:
        """Return the managed-binding records of this claim's devices, in device order."""
        return tuple(d.managed for d in self.devices if d.managed is not None)


@dataclass(frozen=True)
class Checkpoint:
    """The whole checkpoint: claim records keyed by claim UID. Treat ``claims`` as read-only."""

    claims: dict[identities.ClaimUid, ClaimRecord] = field(default_factory=dict)


# --- validation shared by encode and decode ---------------------------------------------------------


def _problem(out: list[errors.FieldError], path: str, problem: str | None) -> None:
    if problem is not None:
        out.append(errors.FieldError(path, problem))


def _binding_problems(
    rec: ClaimRecord, dev: PreparedDevice, b: ManagedBinding, path: str
) -> list[errors.FieldError]:
    out: list[errors.FieldError] = []
    _problem(out, f"{path}.nodeName", names.dns1123_subdomain_problem(b.node_name))
    _problem(out, f"{path}.nodeUID", names.uuid_problem(b.node_uid))
    _problem(out, f"{path}.attachmentID", names.hex64_problem(b.attachment_id))
    _problem(out, f"{path}.source.namespace", names.dns1123_label_problem(b.source.namespace))
    _problem(out, f"{path}.source.name", names.dns1123_subdomain_problem(b.source.name))
    _problem(out, f"{path}.source.uid", names.uuid_problem(b.source.uid))
    if not b.source.resource_version:
        out.append(errors.FieldError(f"{path}.source.resourceVersion", "must not be empty"))
    if b.shadow_uid:
        _problem(out, f"{path}.shadowUID", names.uuid_problem(b.shadow_uid))
    if b.shadow_namespace != rec.namespace:
        out.append(
            errors.FieldError(
                f"{path}.shadowNamespace", f"{b.shadow_namespace!r} must equal the claim namespace"
            )
        )
    if b.interface != dev.interface_name:
        out.append(
            errors.FieldError(f"{path}.interface", f"{b.interface!r} must equal the device's interfaceName")
        )
    _problem(out, f"{path}.interface", names.ifname_problem(b.interface))
    if not b.rendered_config:
        out.append(errors.FieldError(f"{path}.renderedConfig", "must not be empty"))
    elif not strict_json.has_utf8_form(b.rendered_config):
        out.append(errors.FieldError(f"{path}.renderedConfig", "contains text that is not valid UTF-8"))
    elif b.config_sha256 != binding_annotation.config_sha256(b.rendered_config):
        out.append(errors.FieldError(f"{path}.configSHA256", "is not the SHA-256 of renderedConfig"))
    if out:
        return out
    try:
        identity = identities.build_binding_identity(
            node_uid=b.node_uid,
            pod_uid=rec.pod_uid,
            claim_uid=rec.claim_uid,
            pool=dev.pool,
            device=dev.device,
        )
    except errors.SriovDraError as exc:
        return [errors.FieldError(path, f"binding identity is invalid: {exc}")]
    expected = identities.attachment_id(identity)
    if b.attachment_id != expected:
        out.append(
            errors.FieldError(f"{path}.attachmentID", f"does not match the recorded identity ({expected})")
        )
    elif b.shadow_name != identities.shadow_name(expected):
        out.append(errors.FieldError(f"{path}.shadowName", f"must be {identities.shadow_name(expected)}"))
    return out


def _device_problems(rec: ClaimRecord, dev: PreparedDevice, path: str) -> list[errors.FieldError]:
    out: list[errors.FieldError] = []
    if not dev.request_names or any(not r for r in dev.request_names):
        out.append(errors.FieldError(f"{path}.requestNames", "must be a non-empty list of non-empty names"))
    elif len(set(dev.request_names)) != len(dev.request_names):
        out.append(errors.FieldError(f"{path}.requestNames", "must not repeat a name"))
    _problem(out, f"{path}.pool", names.pool_name_problem(dev.pool))
    _problem(out, f"{path}.device", names.dns1123_label_problem(dev.device))
    _problem(out, f"{path}.pciAddress", names.pci_address_problem(dev.pci_address))
    if not isinstance(dev.vf_config, dict):
        out.append(errors.FieldError(f"{path}.vfConfig", "must be a JSON object"))
    else:
        _problem(out, f"{path}.vfConfig", json_value_problem(dev.vf_config))
    if dev.interface_name:
        _problem(out, f"{path}.interfaceName", names.ifname_problem(dev.interface_name))
    for i, cdi_id in enumerate(dev.cdi_device_ids):
        _problem(out, f"{path}.cdiDeviceIDs[{i}]", cdi_spec.qualified_name_problem(cdi_id))
    if dev.managed is not None:
        out.extend(_binding_problems(rec, dev, dev.managed, f"{path}.managedBinding"))
    return out


def record_problems(rec: ClaimRecord, path: str = "") -> list[errors.FieldError]:
    """Return every rule ``rec`` breaks, with field paths under ``path`` (empty when valid).

    Rules: UUID claim/Pod UIDs, DNS-1123 namespace and name, at least one device, unique
    (pool, device), and per device the formats above plus the managed-binding identity checks.
    """
    out: list[errors.FieldError] = []
    _problem(out, f"{path}claimUID", names.uuid_problem(rec.claim_uid))
    _problem(out, f"{path}namespace", names.dns1123_label_problem(rec.namespace))
    _problem(out, f"{path}name", names.dns1123_subdomain_problem(rec.name))
    _problem(out, f"{path}podUID", names.uuid_problem(rec.pod_uid))
    if not rec.devices:
        out.append(errors.FieldError(f"{path}devices", "must list at least one prepared device"))
    seen: set[tuple[str, str]] = set()
    for i, dev in enumerate(rec.devices):
        if (dev.pool, dev.device) in seen:
            out.append(
                errors.FieldError(f"{path}devices[{i}]", f"device {dev.pool}/{dev.device} is listed twice")
            )
        seen.add((dev.pool, dev.device))
        out.extend(_device_problems(rec, dev, f"{path}devices[{i}]"))
    return out


def json_value_problem(value: object, *, depth: int = 0) -> str | None:
    """Say why ``value`` is not plain JSON data, or return ``None``.

    Shapes: dicts with str keys, lists, str, int, finite float, bool, None; at most 64 levels.
    Tuples and sets are refused because they would not survive a round trip.
    """
    if depth > 64:
        return "is nested more than 64 levels deep"
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if value == value and value not in (float("inf"), float("-inf")) else "NaN/Infinity"
    if isinstance(value, list):
        for item in value:
            problem = json_value_problem(item, depth=depth + 1)
            if problem is not None:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"object key {key!r} is not a string"
            problem = json_value_problem(item, depth=depth + 1)
            if problem is not None:
                return problem
        return None
    return f"{type(value).__name__} is not a JSON type"


def checkpoint_problems(cp: Checkpoint) -> list[errors.FieldError]:
    """Return every rule ``cp`` breaks (see :func:`record_problems`), with ``data.claims`` paths."""
    out: list[errors.FieldError] = []
    for uid, rec in cp.claims.items():
        path = f"data.claims[{json.dumps(uid)}]."
        if rec.claim_uid != uid:
            out.append(
                errors.FieldError(f"{path}claimUID", f"record UID {rec.claim_uid!r} differs from its key")
            )
        out.extend(record_problems(rec, path))
    return out
