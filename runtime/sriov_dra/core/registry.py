"""Codec of the Pod's managed-networks registry annotation (version 1).

Owns the exact JSON of ``sriovnetwork.k8snetworkplumbingwg.io/managed-networks``
(docs/design.md#ownership): the frozen :class:`Registry` of one Pod's driver-owned selections,
its deterministic compact encoding and a strict decoder. With the checkpoint it is how the plugin
recognises its own ``k8s.v1.cni.cncf.io/networks`` entries, and how the guard knows which
interfaces must exist after ADD. Entry order is kept exactly; :func:`encode_registry` lists the
invariants. A malformed or unknown-version registry is an error, never a guess. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, cast

from sriov_dra.core import binding_annotation, identities
from sriov_dra_rules import errors, names

_KEY: Final = names.MANAGED_NETWORKS_ANNOTATION


@dataclass(frozen=True)
class RegistryEntry:
    """One driver-owned network selection of the Pod.

    Shapes: ``attachment_id``, ``config_sha256`` 64 lowercase hex; ``claim_uid``, ``uid`` (the
    shadow NAD's UID) lowercase UUIDs; ``namespace`` the Pod namespace; ``name`` the shadow name
    ``dra-sriov-<32 hex>``; ``interface`` a Linux interface name. Source: docs/design.md#ownership.
    """

    attachment_id: identities.AttachmentId
    claim_uid: identities.ClaimUid
    namespace: str
    name: str
    uid: identities.ObjectUid
    interface: str
    config_sha256: str


@dataclass(frozen=True)
class Registry:
    """Decoded registry (version 1) of one Pod; ``entries`` in managed selection order."""

    pod_uid: identities.PodUid
    entries: tuple[RegistryEntry, ...] = ()


_ENTRY_CHECKS: Final[dict[str, Callable[[object], str | None]]] = {
    "attachmentID": names.hex64_problem,
    "claimUID": names.uuid_problem,
    "namespace": names.dns1123_label_problem,
    "name": names.dns1123_label_problem,
    "uid": names.uuid_problem,
    "interface": names.ifname_problem,
    "configSHA256": names.hex64_problem,
}


def _entries_problem(value: object) -> str | None:
    return None if isinstance(value, list) else f"must be a list, got {type(value).__name__}"


_REGISTRY_CHECKS: Final[dict[str, Callable[[object], str | None]]] = {
    "version": lambda _v: None,  # checked first by binding_annotation.check_version
    "podUID": names.uuid_problem,
    "entries": _entries_problem,
}


def _entry_dict(entry: RegistryEntry) -> dict[str, object]:
    return {
        "attachmentID": entry.attachment_id,
        "claimUID": entry.claim_uid,
        "namespace": entry.namespace,
        "name": entry.name,
        "uid": entry.uid,
        "interface": entry.interface,
        "configSHA256": entry.config_sha256,
    }


def _registry_dict(registry: Registry) -> dict[str, object]:
    return {
        "version": names.REGISTRY_VERSION,
        "podUID": registry.pod_uid,
        "entries": [_entry_dict(e) for e in registry.entries],
    }


def _path(field: str) -> str:
    return binding_annotation.annotation_path(_KEY, field)


def _entry_path(index: int) -> Callable[[str], str]:
    return lambda field: _path(f"entries[{index}].{field}")


def _cross_entry_problems(entries: list[dict[str, object]]) -> list[errors.FieldError]:
    """Problems between entries: name/ID agreement, one namespace, no duplicates.

    Values that are not strings were already reported per field and are not compared here.
    """
    problems: list[errors.FieldError] = []
    seen: dict[tuple[str, str], int] = {}
    for i, entry in enumerate(entries):
        aid, name, namespace = entry.get("attachmentID"), entry.get("name"), entry.get("namespace")
        if names.is_hex64(aid) and isinstance(name, str):
            expected = identities.shadow_name(str(aid))
            if name != expected:
                problems.append(
                    errors.FieldError(
                        _path(f"entries[{i}].name"),
                        f"{name!r} is not the shadow name of attachmentID {aid} (expected {expected!r})",
                    )
                )
        if i > 0 and namespace != entries[0].get("namespace"):
            problems.append(
                errors.FieldError(
                    _path(f"entries[{i}].namespace"),
                    f"{namespace!r} differs from entries[0].namespace {entries[0].get('namespace')!r}; "
                    "every shadow lives in the Pod namespace",
                )
            )
        keys: list[tuple[str, str, object]] = [
            ("attachmentID", "attachmentID", aid),
            ("selection", "selection (namespace, name)", f"{namespace}/{name}"),
            ("interface", "interface", entry.get("interface")),
        ]
        for kind, label, value in keys:
            if not isinstance(value, str) or (
                kind == "selection" and not (isinstance(name, str) and isinstance(namespace, str))
            ):
                continue
            if (kind, value) in seen:
                problems.append(
                    errors.FieldError(
                        _path(f"entries[{i}]"),
                        f"duplicate {label} {value!r}, already in entries[{seen[(kind, value)]}]",
                    )
                )
            else:
                seen[(kind, value)] = i
    return problems


def _registry_problems(obj: dict[str, object]) -> list[errors.FieldError]:
    problems = binding_annotation.check_fields(obj, _REGISTRY_CHECKS, path=_path)
    raw_entries = obj.get("entries")
    if not isinstance(raw_entries, list):
        return problems
    entries: list[dict[str, object]] = []
    for i, raw in enumerate(raw_entries):
        if not isinstance(raw, dict):
            problems.append(errors.FieldError(_path(f"entries[{i}]"), "must be an object"))
            continue
        problems += binding_annotation.check_fields(raw, _ENTRY_CHECKS, path=_entry_path(i))
        entries.append(raw)
    if len(entries) == len(raw_entries):
        problems += _cross_entry_problems(entries)
    return problems


def encode_registry(registry: Registry) -> str:
    """Return the annotation value for ``registry``: compact JSON, entries in their given order.

    Deterministic: equal registries always give identical strings, and
    ``decode_registry(encode_registry(r)) == r``.

    Invariants (checked on encode and decode): every field well-formed; each entry's ``name`` is
    the shadow name of its ``attachmentID``; all entries share the Pod's namespace; no two share
    an attachmentID, a ``(namespace, name)`` selection or an interface.
    Raises: ``ContractViolation`` listing every problem (malformed field, name not derived from
    the attachmentID, mixed namespaces, duplicate attachmentID / selection / interface).
    Source: docs/design.md#ownership.
    """
    obj = _registry_dict(registry)
    errors.raise_if_any(
        _registry_problems(obj), "refusing to encode an invalid registry", cls=errors.ContractViolation
    )
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True)


def decode_registry(text: object, *, owner: str = "Pod") -> Registry:
    """Decode and validate the registry annotation value ``text``.

    ``owner`` names the Pod (``"Pod ns/name"``) for the error message.

    Raises: ``ContractViolation`` with reason ``UnsupportedVersion`` for another integer version
    (nothing else is interpreted), and with reason ``ContractViolation`` for malformed JSON,
    duplicate keys, unknown or missing fields, wrong types, malformed values and every
    cross-entry problem listed in :func:`encode_registry`; the caller then deletes nothing
    (docs/design.md#selections). Source: docs/design.md#ownership.
    """
    what = f"annotation {_KEY} on {owner}"
    obj = binding_annotation.strict_json_loads(text, what=what, path=binding_annotation.annotation_path(_KEY))
    if not isinstance(obj, dict):
        raise errors.ContractViolation(f"{what} must be a JSON object, got {type(obj).__name__}")
    binding_annotation.check_version(obj, supported=names.REGISTRY_VERSION, what=what, key=_KEY)
    errors.raise_if_any(
        _registry_problems(obj),
        f"{what} is malformed; nothing was changed: fix or remove the annotation only after "
        "checking the plugin checkpoint for this Pod",
        cls=errors.ContractViolation,
    )
    raw_entries = cast(list[dict[str, object]], obj["entries"])
    return Registry(
        pod_uid=identities.PodUid(str(obj["podUID"])),
        entries=tuple(
            RegistryEntry(
                attachment_id=identities.AttachmentId(str(e["attachmentID"])),
                claim_uid=identities.ClaimUid(str(e["claimUID"])),
                namespace=str(e["namespace"]),
                name=str(e["name"]),
                uid=identities.ObjectUid(str(e["uid"])),
                interface=str(e["interface"]),
                config_sha256=str(e["configSHA256"]),
            )
            for e in raw_entries
        ),
    )


def entries_for_claim(registry: Registry, claim_uid: str) -> tuple[RegistryEntry, ...]:
    """Return the entries of ``registry`` owned by ``claim_uid``, in registry order."""
    return tuple(e for e in registry.entries if e.claim_uid == claim_uid)


def without_claim(registry: Registry, claim_uid: str) -> Registry:
    """Return ``registry`` without the entries of ``claim_uid``; other entries keep their order.

    Release drops only this claim's exact owned entries (docs/design.md#selections).
    """
    return Registry(
        pod_uid=registry.pod_uid, entries=tuple(e for e in registry.entries if e.claim_uid != claim_uid)
    )
