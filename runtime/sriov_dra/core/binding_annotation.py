"""Codec of the shadow NAD's binding annotation (version 1), and our contracts' strict JSON reader.

Owns the exact JSON of ``sriovnetwork.k8snetworkplumbingwg.io/binding``
(docs/design.md#ownership): the frozen :class:`Binding`, its deterministic compact encoding, and
a decoder that accepts only known, well-typed fields of version 1 without duplicate keys. The
plugin writes it on shadow creation; the guard and the repair worker read it (shared fixtures in
``tests/fixtures/contract/``). Also :func:`strict_json_loads` and :func:`config_sha256`. Anything
else is a ``ContractViolation`` naming the field, never a best-effort parse. Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, cast

from sriov_dra.core import identities
from sriov_dra_rules import errors, names, strict_json

RESOURCE_VERSION_MAX: Final = 128
"""Longest ``source.resourceVersion`` accepted (the API treats it as an opaque short string)."""


def strict_json_loads(text: object, *, what: str, path: str = "$") -> object:
    """Parse ``text`` as strict JSON for one of our contracts, with the shared strict reader.

    ``what`` names the annotation or object for the error message; ``path`` names the text in
    field paths. Duplicate object keys (anywhere, each with its path), ``NaN``/``Infinity``,
    lone surrogates, nesting too deep to decode and non-string input are rejected; floats are
    returned as ``float`` so that callers reject them where an integer is required.

    Raises: ``ContractViolation`` naming ``what`` and carrying each problem of
    :func:`sriov_dra_rules.strict_json.decode_plain` with its path.
    """
    if not isinstance(text, str):
        raise errors.ContractViolation(f"{what} must be a JSON string, got {type(text).__name__}")
    try:
        return strict_json.decode_plain(text, path=path)
    except errors.InvalidSpec as exc:
        raise errors.ContractViolation(
            f"{what} is not valid JSON; it was not written by this driver or was edited", errors=exc.errors
        ) from exc


def config_sha256(config: str | bytes) -> str:
    """Return the configSHA256 of a shadow's ``spec.config``.

    Shapes: 64 lowercase hex; computed over the exact UTF-8 bytes (no re-serialization).
    Source: docs/design.md#ownership.
    """
    raw = config.encode("utf-8") if isinstance(config, str) else config
    return hashlib.sha256(raw).hexdigest()


def annotation_path(key: str, field: str = "") -> str:
    """Return the field path of ``field`` inside the JSON of annotation ``key`` (for FieldError)."""
    base = f'metadata.annotations["{key}"]'
    if not field:
        return base
    return base + ("" if field.startswith("[") else ".") + field


def check_version(obj: dict[str, object], *, supported: int, what: str, key: str) -> None:
    """Check the ``version`` member of a decoded contract object before anything else.

    Raises: ``ContractViolation`` (reason ``UnsupportedVersion``) for an integer version other
    than ``supported``; ``ContractViolation`` when it is missing or not an integer (a boolean or a
    float such as ``1.0`` is not an integer).
    """
    if "version" not in obj:
        raise errors.ContractViolation(
            f"{what} has no version",
            errors=[
                errors.FieldError(annotation_path(key, "version"), f"is required (expected {supported})")
            ],
        )
    version = obj["version"]
    if type(version) is not int:
        raise errors.ContractViolation(
            f"{what} has a malformed version",
            errors=[
                errors.FieldError(
                    annotation_path(key, "version"), f"must be the integer {supported}, got {version!r}"
                )
            ],
        )
    if version != supported:
        raise errors.ContractViolation(
            f"{what} has version {version}, but this build understands only version {supported}; "
            "nothing was changed: upgrade this component to the version that wrote it, "
            "or drain and clean the node before downgrading",
            reason=errors.Reason.UNSUPPORTED_VERSION,
        )


def check_fields(
    obj: dict[str, object],
    checks: dict[str, Callable[[object], str | None]],
    *,
    path: Callable[[str], str],
) -> list[errors.FieldError]:
    """Return problems of ``obj`` against ``checks`` (exact key set; one checker per key)."""
    problems = [
        errors.FieldError(path(key), "unknown field; this contract version does not define it")
        for key in sorted(set(obj) - set(checks))
    ]
    for key, check in checks.items():
        if key not in obj:
            problems.append(errors.FieldError(path(key), "is required"))
            continue
        problem = check(obj[key])
        if problem is not None:
            problems.append(errors.FieldError(path(key), problem))
    return problems


def resource_version_problem(value: object) -> str | None:
    """Say why ``value`` is not an opaque resourceVersion string, or return ``None``.

    Shapes: 1-128 printable ASCII characters without whitespace.
    """
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value or len(value) > RESOURCE_VERSION_MAX:
        return f"must be 1-{RESOURCE_VERSION_MAX} characters, got {len(value)}"
    if not all("!" <= c <= "~" for c in value):
        return f"{value!r} must be printable ASCII without whitespace"
    return None


@dataclass(frozen=True)
class SourceRef:
    """The source (template) NAD a shadow was rendered from; diagnostic provenance only.

    Shapes: ``namespace`` DNS-1123 label; ``name`` DNS-1123 subdomain; ``uid`` lowercase UUID;
    ``resource_version`` opaque string (JSON ``resourceVersion``).
    """

    namespace: str
    name: str
    uid: identities.ObjectUid
    resource_version: str


@dataclass(frozen=True)
class Binding:
    """Decoded ``binding`` annotation (version 1) of one shadow NAD.

    Shapes: ``attachment_id`` and ``config_sha256`` 64 lowercase hex; UIDs lowercase UUIDs;
    ``node_name`` DNS-1123 subdomain; ``pci_address`` plain BDF ``0000:03:00.1``; ``interface``
    a Linux interface name. Source: docs/design.md#ownership.
    """

    attachment_id: identities.AttachmentId
    pod_uid: identities.PodUid
    claim_uid: identities.ClaimUid
    node_name: str
    node_uid: identities.NodeUid
    source: SourceRef
    pci_address: identities.PciAddress
    interface: str
    config_sha256: str


_SOURCE_CHECKS: Final[dict[str, Callable[[object], str | None]]] = {
    "namespace": names.dns1123_label_problem,
    "name": names.dns1123_subdomain_problem,
    "uid": names.uuid_problem,
    "resourceVersion": resource_version_problem,
}


def _source_problem(value: object) -> str | None:
    return None if isinstance(value, dict) else f"must be an object, got {type(value).__name__}"


_BINDING_CHECKS: Final[dict[str, Callable[[object], str | None]]] = {
    "version": lambda _v: None,  # checked first by check_version
    "attachmentID": names.hex64_problem,
    "podUID": names.uuid_problem,
    "claimUID": names.uuid_problem,
    "nodeName": names.dns1123_subdomain_problem,
    "nodeUID": names.uuid_problem,
    "source": _source_problem,
    "pciAddress": names.pci_address_problem,
    "interface": names.ifname_problem,
    "configSHA256": names.hex64_problem,
}


def _binding_dict(binding: Binding) -> dict[str, object]:
    return {
        "version": names.BINDING_VERSION,
        "attachmentID": binding.attachment_id,
        "podUID": binding.pod_uid,
        "claimUID": binding.claim_uid,
        "nodeName": binding.node_name,
        "nodeUID": binding.node_uid,
        "source": {
            "namespace": binding.source.namespace,
            "name": binding.source.name,
            "uid": binding.source.uid,
            "resourceVersion": binding.source.resource_version,
        },
        "pciAddress": binding.pci_address,
        "interface": binding.interface,
        "configSHA256": binding.config_sha256,
    }


def _binding_problems(obj: dict[str, object]) -> list[errors.FieldError]:
    key = names.BINDING_ANNOTATION
    problems = check_fields(obj, _BINDING_CHECKS, path=lambda f: annotation_path(key, f))
    source = obj.get("source")
    if isinstance(source, dict):
        problems += check_fields(source, _SOURCE_CHECKS, path=lambda f: annotation_path(key, f"source.{f}"))
    return problems


def encode_binding(binding: Binding) -> str:
    """Return the annotation value for ``binding``: compact JSON with the spec's field order.

    Deterministic: equal bindings always give identical strings, and
    ``decode_binding(encode_binding(b)) == b``.

    Raises: ``ContractViolation`` listing every field that would not decode (refuses to publish
    an invalid annotation). Source: docs/design.md#ownership.
    """
    obj = _binding_dict(binding)
    errors.raise_if_any(
        _binding_problems(obj),
        "refusing to encode an invalid binding annotation",
        cls=errors.ContractViolation,
    )
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True)


def decode_binding(text: object, *, owner: str = "shadow NAD") -> Binding:
    """Decode and validate the ``binding`` annotation value ``text``.

    ``owner`` names the object carrying it (``"NAD ns/name"``) for the error message.

    Raises: ``ContractViolation`` with reason ``UnsupportedVersion`` for another integer version
    (nothing else is interpreted), and with reason ``ContractViolation`` for malformed JSON,
    duplicate keys, a non-object, unknown or missing fields, wrong types (booleans or floats
    included) and malformed UUIDs, digests, names, PCI address or interface.
    Source: docs/design.md#ownership.
    """
    what = f"annotation {names.BINDING_ANNOTATION} on {owner}"
    obj = strict_json_loads(text, what=what, path=annotation_path(names.BINDING_ANNOTATION))
    if not isinstance(obj, dict):
        raise errors.ContractViolation(f"{what} must be a JSON object, got {type(obj).__name__}")
    check_version(obj, supported=names.BINDING_VERSION, what=what, key=names.BINDING_ANNOTATION)
    errors.raise_if_any(
        _binding_problems(obj),
        f"{what} is malformed; it was not written by this driver or was edited",
        cls=errors.ContractViolation,
    )
    source = cast(dict[str, object], obj["source"])  # an object: checked by _binding_problems
    return Binding(
        attachment_id=identities.AttachmentId(str(obj["attachmentID"])),
        pod_uid=identities.PodUid(str(obj["podUID"])),
        claim_uid=identities.ClaimUid(str(obj["claimUID"])),
        node_name=str(obj["nodeName"]),
        node_uid=identities.NodeUid(str(obj["nodeUID"])),
        source=SourceRef(
            namespace=str(source["namespace"]),
            name=str(source["name"]),
            uid=identities.ObjectUid(str(source["uid"])),
            resource_version=str(source["resourceVersion"]),
        ),
        pci_address=identities.PciAddress(str(obj["pciAddress"])),
        interface=str(obj["interface"]),
        config_sha256=str(obj["configSHA256"]),
    )
