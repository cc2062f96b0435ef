"""What a reader outside the plugin may know of its checkpoint: file names, version, checksum, bindings.

The plugin's codec (``sriov_dra.core.plugin.checkpoint_codec``) owns the format (version 1, a
SHA-256 ``checksum`` over the canonical JSON of ``data``) and computes the checksum here; the
``checkpoint_info`` module and the ``sriov_checkpoint_bindings`` filter list the managed
bindings from here, so the drain and cleanup roles wait for exactly what the plugin recorded
(docs/design.md#rollout). A document that is not a valid version-1 checkpoint raises
``ContractViolation``, never a guess. Pure functions of bytes and values.
"""

from __future__ import annotations

import hashlib
import json

from . import errors, strict_json

VERSION = 1
"""The checkpoint document's ``version``: the one the plugin writes and these readers understand."""

CHECKPOINT_FILE_NAME = "checkpoint.json"
"""The readable copy's name in the plugin directory, as upstream's checkpoint."""

SLOTS_FILE_NAME = "checkpoint.slots"
"""The durable record's name in the plugin directory (``slot_format``)."""


def canonical_json(value: object) -> bytes:
    """Return the canonical JSON bytes of ``value`` that the checksum is computed over.

    Shapes: UTF-8, sorted keys, separators ``,`` and ``:``, non-ASCII as itself.
    Raises: ``ContractViolation`` for NaN/Infinity, text that is not encodable as UTF-8, or
    nesting too deep to encode.
    """
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return text.encode("utf-8")
    except (ValueError, TypeError, UnicodeEncodeError, RecursionError) as exc:
        raise errors.ContractViolation(f"checkpoint data is not canonical JSON: {exc}") from exc


def checksum(data: object) -> str:
    """Return the checksum of the checkpoint ``data`` object: SHA-256 hex of :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(data)).hexdigest()


def bindings_of(document: object, *, source: str) -> list[dict[str, object]]:
    """List the managed bindings of a decoded checkpoint document (its checksum is not checked here).

    ``source`` names the document in errors. Shapes: ``[{"claim_uid", "namespace", "name",
    "pod_uid", "device", "phase", "shadow"}]`` (``shadow`` is ``<namespace>/<name>``), sorted by
    claim UID, then device order.
    Raises: ``ContractViolation`` (reason ``UnsupportedVersion`` for another ``version``) when it
    is not a version-1 checkpoint whose ``data.claims`` is an object of claim objects.
    """
    if not isinstance(document, dict):
        raise _corrupt(source, f"the document is {strict_json.kind(document)}, not an object")
    version = document.get("version")
    if isinstance(version, bool) or version != VERSION:
        raise errors.ContractViolation(
            f"checkpoint {source} has version {version!r}; this reader understands version {VERSION}. "
            "Nothing was guessed: run the plugin version that wrote it, and read it with "
            "'sriov-dra orphans --checkpoint <file>' from that version",
            reason=errors.Reason.UNSUPPORTED_VERSION,
        )
    data = document.get("data")
    claims = data.get("claims", {}) if isinstance(data, dict) else None
    if not isinstance(claims, dict):
        raise _corrupt(source, "'data.claims' is not an object keyed by claim UID")
    found: list[dict[str, object]] = []
    for uid in sorted(claims):
        claim = claims[uid]
        devices = claim.get("devices") if isinstance(claim, dict) else None
        if not isinstance(devices, list):
            raise _corrupt(source, f"claim {uid} has no 'devices' list")
        for index, device in enumerate(devices):
            binding = device.get("managedBinding") if isinstance(device, dict) else None
            if binding is None:
                continue
            if not isinstance(binding, dict):
                raise _corrupt(source, f"claim {uid} device {index}: 'managedBinding' is not an object")
            found.append(
                {
                    "claim_uid": uid,
                    "namespace": claim.get("namespace"),
                    "name": claim.get("name"),
                    "pod_uid": claim.get("podUID"),
                    "device": device.get("device"),
                    "phase": binding.get("phase"),
                    "shadow": f"{binding.get('shadowNamespace')}/{binding.get('shadowName')}",
                }
            )
    return found


def managed_bindings(raw: bytes, *, source: str) -> list[dict[str, object]]:
    """Decode checkpoint bytes strictly, verify the checksum, and list the managed bindings.

    ``raw`` is a whole checkpoint document (``checkpoint.json``, or the newest slot of
    ``checkpoint.slots``); ``source`` names it in errors. Shapes: as :func:`bindings_of`.
    Raises: ``ContractViolation`` for bytes that are not strict UTF-8 JSON (a repeated key, NaN),
    a ``checksum`` that does not match ``data`` (edited or damaged), or as :func:`bindings_of`.
    """
    try:
        document = strict_json.decode_file(raw, what="checkpoint", source=source)
    except errors.InvalidSpec as exc:
        raise errors.ContractViolation(exc.summary, errors=exc.errors) from None
    if isinstance(document, dict) and document.get("version") == VERSION:
        recorded = document.get("checksum")
        computed = checksum(document.get("data"))
        if recorded != computed:
            raise _corrupt(
                source, f"checksum mismatch (recorded {recorded!r}, computed {computed!r}): edited or damaged"
            )
    return bindings_of(document, source=source)


def _corrupt(source: str, detail: str) -> errors.ContractViolation:
    return errors.ContractViolation(
        f"checkpoint {source} is corrupt: {detail}. Nothing was guessed: compare it with 'jq . <file>' and "
        "'sriov-dra orphans --checkpoint <file>', and never delete or edit it while the node has prepared claims "
        "(docs/plugin.md, 'Files the plugin writes')"
    )
