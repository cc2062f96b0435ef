"""Stable binding identity: the attachmentID of one managed VF binding and its shadow NAD name.

Owns the typed canonical encoding of the identity tuple (protocolVersion, nodeUID, podUID,
claimUID, driver, pool, device), its SHA-256 ``attachmentID``, the shadow name derived from it,
and the check that a recorded attachmentID belongs to an identity (docs/design.md#identity);
also the ``NewType`` ids the codecs share. Nothing time- or version-dependent is part of the
identity. Pure; accepts no identity field it has not validated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, NewType

from sriov_dra_rules import errors, names

AttachmentId = NewType("AttachmentId", str)
"""Full SHA-256 of the canonical identity encoding, 64 lowercase hex characters."""
NodeUid = NewType("NodeUid", str)
PodUid = NewType("PodUid", str)
ClaimUid = NewType("ClaimUid", str)
ObjectUid = NewType("ObjectUid", str)
"""``metadata.uid`` of any other object (a source or shadow NAD)."""
PciAddress = NewType("PciAddress", str)
"""Plain normalized PCI BDF such as ``0000:03:00.1``."""

ENCODING_DOMAIN: Final = b"sriov-dra/binding-identity\n"
"""Domain tag that starts every canonical encoding (keeps these digests apart from any other)."""

IDENTITY_FIELDS: Final = ("protocolVersion", "nodeUID", "podUID", "claimUID", "driver", "pool", "device")
"""The identity's field names, in encoding order (docs/design.md#identity)."""


@dataclass(frozen=True)
class BindingIdentity:
    """The tuple that names one managed binding of one allocated device to one Pod.

    Shapes: UIDs are lowercase UUIDs; ``driver`` a DNS-1123 subdomain; ``pool`` DNS-1123
    subdomains joined by ``/``; ``device`` a DNS-1123 label. Build it with
    :func:`build_binding_identity` or :func:`identity_from_fields`, which validate.
    Source: docs/design.md#identity.
    """

    protocol_version: int
    node_uid: NodeUid
    pod_uid: PodUid
    claim_uid: ClaimUid
    driver: str
    pool: str
    device: str

    def fields(self) -> dict[str, str | int]:
        """Return the identity as a mapping with the spec's field names (checkpoint form)."""
        return {
            "protocolVersion": self.protocol_version,
            "nodeUID": self.node_uid,
            "podUID": self.pod_uid,
            "claimUID": self.claim_uid,
            "driver": self.driver,
            "pool": self.pool,
            "device": self.device,
        }


def build_binding_identity(
    *,
    node_uid: str,
    pod_uid: str,
    claim_uid: str,
    pool: str,
    device: str,
    driver: str = names.DRIVER_NAME,
    protocol_version: int = names.PROTOCOL_VERSION,
) -> BindingIdentity:
    """Validate the inputs and return the :class:`BindingIdentity` they name.

    Raises: ``ContractViolation`` (reason ``UnsupportedVersion``) for a protocol version other
    than :data:`names.PROTOCOL_VERSION`; ``InvalidSpec`` listing every malformed field otherwise.
    Source: docs/design.md#identity.
    """
    return identity_from_fields(
        {
            "protocolVersion": protocol_version,
            "nodeUID": node_uid,
            "podUID": pod_uid,
            "claimUID": claim_uid,
            "driver": driver,
            "pool": pool,
            "device": device,
        }
    )


def identity_from_fields(fields: Mapping[str, object]) -> BindingIdentity:
    """Build an identity from a mapping keyed by the spec's field names (e.g. a checkpoint record).

    The key order of ``fields`` does not matter. Every key of :data:`IDENTITY_FIELDS` is required
    and no other key is accepted.

    Raises: ``ContractViolation`` (reason ``UnsupportedVersion``) when ``protocolVersion`` is an
    int other than :data:`names.PROTOCOL_VERSION`; ``InvalidSpec`` listing every missing, unknown
    or malformed field otherwise.
    """
    problems: list[errors.FieldError] = []
    for key in sorted(set(fields) - set(IDENTITY_FIELDS)):
        problems.append(errors.FieldError(key, "unknown identity field; remove it"))
    for key in IDENTITY_FIELDS:
        if key not in fields:
            problems.append(errors.FieldError(key, "is required"))
    errors.raise_if_any(problems, "binding identity has missing or unknown fields")

    version = fields["protocolVersion"]
    if type(version) is not int:
        problems.append(errors.FieldError("protocolVersion", f"must be an integer, got {version!r}"))
    elif version != names.PROTOCOL_VERSION:
        raise errors.ContractViolation(
            f"binding identity protocolVersion {version} is not supported by this build "
            f"(supported: {names.PROTOCOL_VERSION}); upgrade the component or drain and clean the node",
            reason=errors.Reason.UNSUPPORTED_VERSION,
        )
    checks = (
        ("nodeUID", names.uuid_problem),
        ("podUID", names.uuid_problem),
        ("claimUID", names.uuid_problem),
        ("driver", names.dns1123_subdomain_problem),
        ("pool", names.pool_name_problem),
        ("device", names.dns1123_label_problem),
    )
    for key, check in checks:
        problem = check(fields[key])
        if problem is not None:
            problems.append(errors.FieldError(key, problem))
    errors.raise_if_any(problems, "binding identity is malformed; fix the allocation or consumer data")
    return BindingIdentity(
        protocol_version=names.PROTOCOL_VERSION,
        node_uid=NodeUid(str(fields["nodeUID"])),
        pod_uid=PodUid(str(fields["podUID"])),
        claim_uid=ClaimUid(str(fields["claimUID"])),
        driver=str(fields["driver"]),
        pool=str(fields["pool"]),
        device=str(fields["device"]),
    )


def canonical_encoding(identity: BindingIdentity) -> bytes:
    """Return the typed canonical bytes of ``identity`` that :func:`attachment_id` hashes.

    Shapes: :data:`ENCODING_DOMAIN`, then for each field of :data:`IDENTITY_FIELDS` in order:
    ``u32be(len(name)) name tag u32be(len(value)) value`` where ``tag`` is ``i`` (value = decimal
    ASCII of an integer) or ``s`` (value = UTF-8 of a string). Injective: distinct identities
    always give distinct bytes: no separator can be smuggled into a value, and the bytes do
    not depend on how the caller gathered the inputs (map order, RPC batch order).
    """
    out = bytearray(ENCODING_DOMAIN)
    for key, value in identity.fields().items():
        if isinstance(value, int):
            tag, raw = b"i", str(value).encode("ascii")
        else:
            tag, raw = b"s", value.encode("utf-8")
        encoded_key = key.encode("ascii")
        out += len(encoded_key).to_bytes(4, "big") + encoded_key
        out += tag + len(raw).to_bytes(4, "big") + raw
    return bytes(out)


def attachment_id(identity: BindingIdentity) -> AttachmentId:
    """Return the full attachmentID of ``identity``.

    Shapes: 64 lowercase hex characters (SHA-256 of :func:`canonical_encoding`).
    Source: docs/design.md#identity.
    """
    return AttachmentId(hashlib.sha256(canonical_encoding(identity)).hexdigest())


def shadow_name(aid: str) -> str:
    """Return the shadow NAD name for the attachmentID ``aid``.

    Shapes: ``dra-sriov-`` + the first 32 lowercase hex characters of ``aid``; 42 characters,
    a DNS-1123 label (≤ 63). Raises: ``ContractViolation`` if ``aid`` is not 64 lowercase hex.
    Source: docs/design.md#identity.
    """
    problem = names.hex64_problem(aid)
    if problem is not None:
        raise errors.ContractViolation(
            "cannot derive a shadow NAD name", errors=[errors.FieldError("attachmentID", problem)]
        )
    return names.SHADOW_NAME_PREFIX + aid[: names.SHADOW_NAME_HEX_CHARS]


def shadow_name_for(identity: BindingIdentity) -> str:
    """Return the shadow NAD name of ``identity`` (``shadow_name(attachment_id(identity))``)."""
    return shadow_name(attachment_id(identity))
