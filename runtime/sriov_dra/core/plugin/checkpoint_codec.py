"""The checkpoint file codec: one versioned, checksummed, deterministic JSON document.

Version 1 is ``{"checksum", "data", "version": 1}`` written as compact sorted-key JSON plus a
newline, so equal checkpoints encode to equal bytes; ``checksum`` is the SHA-256 of the canonical
JSON of ``data`` (:func:`checkpoint_data` gives its shape). The decoder reads any whitespace
layout (fixture ``v1-indented-managed.json``). Decoding is strict: anything but valid version-1
UTF-8 JSON meeting the model's rules is a ``ContractViolation`` naming the file, the field and the
fix; nothing is repaired or dropped. Encoding applies the same rules, so the plugin never writes
what it could not read back. Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable
from typing import Final

from sriov_dra.core import identities
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra_rules import checkpoint_doc, errors, names
from sriov_dra_rules.checkpoint_doc import canonical_json, checksum

_TOP_KEYS: Final = frozenset({"version", "checksum", "data"})
_CLAIM_KEYS: Final = frozenset({"namespace", "name", "podUID", "devices"})
_DEVICE_KEYS: Final = frozenset(
    {"requestNames", "pool", "device", "pciAddress", "originalDriver", "vfConfig", "interfaceName"}
    | {"cdiDeviceIDs", "netAttachDefConfig"}
)
_BINDING_KEYS: Final = frozenset(
    {"bindingVersion", "phase", "attachmentID", "shadowNamespace", "shadowName", "shadowUID", "source"}
    | {"renderedConfig", "configSHA256", "interface", "nodeName", "nodeUID"}
)
_SOURCE_KEYS: Final = frozenset({"namespace", "name", "uid", "resourceVersion"})

_RECOVERY_HINT: Final = (
    "The file was left untouched. Without it the plugin cannot tell which VFs and networks it prepared: "
    "restore it from a backup, or drain the node and clean up its managed bindings first "
    "(release the workloads, resolve owned finalizers), then move the file aside and restart"
)


def _binding_data(b: model.ManagedBinding) -> model.JsonObject:
    return {
        "bindingVersion": model.MANAGED_BINDING_VERSION,
        "phase": str(b.phase),
        "attachmentID": b.attachment_id,
        "shadowNamespace": b.shadow_namespace,
        "shadowName": b.shadow_name,
        "shadowUID": b.shadow_uid,
        "source": {
            "namespace": b.source.namespace,
            "name": b.source.name,
            "uid": b.source.uid,
            "resourceVersion": b.source.resource_version,
        },
        "renderedConfig": b.rendered_config,
        "configSHA256": b.config_sha256,
        "interface": b.interface,
        "nodeName": b.node_name,
        "nodeUID": b.node_uid,
    }


def _device_data(d: model.PreparedDevice) -> model.JsonObject:
    out: model.JsonObject = {
        "requestNames": list(d.request_names),
        "pool": d.pool,
        "device": d.device,
        "pciAddress": d.pci_address,
        "originalDriver": d.original_driver,
        "vfConfig": d.vf_config,
        "interfaceName": d.interface_name,
        "cdiDeviceIDs": list(d.cdi_device_ids),
        "netAttachDefConfig": d.net_attach_def_config,
    }
    if d.managed is not None:
        out["managedBinding"] = _binding_data(d.managed)
    return out


def checkpoint_data(cp: model.Checkpoint) -> model.JsonObject:
    """Return the ``data`` object of ``cp`` (the part the checksum covers).

    Shapes::

        {"claims": {"<claimUID>": {"namespace", "name", "podUID", "devices": [{"requestNames",
            "pool", "device", "pciAddress", "originalDriver", "vfConfig", "interfaceName",
            "cdiDeviceIDs", "netAttachDefConfig", "managedBinding"?: {"bindingVersion": 1,
            "phase", "attachmentID", "shadowNamespace", "shadowName", "shadowUID", "source":
            {"namespace", "name", "uid", "resourceVersion"}, "renderedConfig", "configSHA256",
            "interface", "nodeName", "nodeUID"}}]}}}

    ``managedBinding`` is omitted (never ``null``) for a device without one, so a checkpoint
    without managed bindings keeps its checksum (fixture
    ``tests/fixtures/checkpoint/v1-no-managed.json``).
    """
    claims: model.JsonObject = {}
    for uid, rec in cp.claims.items():
        claims[uid] = {
            "namespace": rec.namespace,
            "name": rec.name,
            "podUID": rec.pod_uid,
            "devices": [_device_data(d) for d in rec.devices],
        }
    return {"claims": claims}


def encode_checkpoint(cp: model.Checkpoint, *, changed: Collection[str] | None = None) -> bytes:
    """Return the file bytes of ``cp``: deterministic for equal checkpoints, whatever the dict order.

    Every claim is validated first (the model's rules), unless ``changed`` names the claims this
    write changes: then only those of them still in ``cp`` are validated (a removed claim needs
    none), with the same errors. The caller vouches for the others: they were validated when
    they were written or loaded and are immutable since (the store's records), so a write does
    not cost time proportional to the node's claims.
    Shapes: ``{"checksum", "data", "version"}`` as compact sorted-key JSON (the canonical JSON of
    the whole document: ``data`` is embedded as the very bytes the checksum covers), UTF-8, plus
    a newline.
    Raises: ``ContractViolation`` listing every invalid field of the validated claims (nothing
    is written by the caller).
    """
    checked = cp
    if changed is not None:
        wanted = {identities.ClaimUid(uid) for uid in changed}
        checked = model.Checkpoint(claims={uid: r for uid, r in cp.claims.items() if uid in wanted})
    errors.raise_if_any(
        model.checkpoint_problems(checked),
        "refusing to write a checkpoint this plugin could not read back; fix the record",
        cls=errors.ContractViolation,
    )
    data = canonical_json(checkpoint_data(cp))
    digest = hashlib.sha256(data).hexdigest()
    # sorted keys: "checksum" < "data" < "version"; equal to canonical_json(document) + newline
    return b'{"checksum":"%s","data":%s,"version":%d}\n' % (
        digest.encode("ascii"),
        data,
        checkpoint_doc.VERSION,
    )


def _reject_duplicates(pairs: list[tuple[str, model.JsonValue]]) -> model.JsonObject:
    out: model.JsonObject = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str) -> model.JsonValue:
    raise ValueError(f"non-finite number {name}")


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text} is out of range")
    return value


class _Reader:
    """Collects every structural problem of a decoded document, with field paths."""

    def __init__(self) -> None:
        self.problems: list[errors.FieldError] = []
        self.unsupported: list[errors.FieldError] = []

    def obj(
        self, value: model.JsonValue, path: str, keys: frozenset[str], optional: frozenset[str] = frozenset()
    ) -> model.JsonObject:
        if not isinstance(value, dict):
            self.problems.append(errors.FieldError(path, "must be an object"))
            return {}
        for key in sorted(set(value) - keys - optional):
            self.problems.append(
                errors.FieldError(f"{path}.{key}", "unknown field; this build does not understand it")
            )
        for key in sorted(keys - set(value)):
            self.problems.append(errors.FieldError(f"{path}.{key}", "is required"))
        return value

    def text(self, obj: model.JsonObject, key: str, path: str) -> str:
        value = obj.get(key, "")
        if not isinstance(value, str):
            self.problems.append(
                errors.FieldError(f"{path}.{key}", f"must be a string, got {type(value).__name__}")
            )
            return ""
        return value

    def texts(self, obj: model.JsonObject, key: str, path: str) -> tuple[str, ...]:
        value = obj.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.problems.append(errors.FieldError(f"{path}.{key}", "must be a list of strings"))
            return ()
        return tuple(str(v) for v in value)

    def binding(self, value: model.JsonValue, path: str) -> model.ManagedBinding | None:
        if isinstance(value, dict) and "bindingVersion" in value:
            version = value["bindingVersion"]
            if type(version) is not int:
                self.problems.append(errors.FieldError(f"{path}.bindingVersion", "must be an integer"))
                return None
            if version != model.MANAGED_BINDING_VERSION:
                self.unsupported.append(
                    errors.FieldError(
                        f"{path}.bindingVersion",
                        f"is {version}; this build reads {model.MANAGED_BINDING_VERSION}",
                    )
                )
                return None
        obj = self.obj(value, path, _BINDING_KEYS)
        src = self.obj(obj.get("source", {}), f"{path}.source", _SOURCE_KEYS)
        phase_text = self.text(obj, "phase", path)
        try:
            phase = model.Phase(phase_text)
        except ValueError:
            allowed = ", ".join(p.value for p in model.Phase)
            self.problems.append(
                errors.FieldError(f"{path}.phase", f"{phase_text!r} is not one of {allowed}")
            )
            phase = model.Phase.PENDING
        return model.ManagedBinding(
            phase=phase,
            attachment_id=identities.AttachmentId(self.text(obj, "attachmentID", path)),
            shadow_namespace=self.text(obj, "shadowNamespace", path),
            shadow_name=self.text(obj, "shadowName", path),
            shadow_uid=self.text(obj, "shadowUID", path),
            source=model.SourceRef(
                namespace=self.text(src, "namespace", f"{path}.source"),
                name=self.text(src, "name", f"{path}.source"),
                uid=identities.ObjectUid(self.text(src, "uid", f"{path}.source")),
                resource_version=self.text(src, "resourceVersion", f"{path}.source"),
            ),
            rendered_config=self.text(obj, "renderedConfig", path),
            config_sha256=self.text(obj, "configSHA256", path),
            interface=self.text(obj, "interface", path),
            node_name=self.text(obj, "nodeName", path),
            node_uid=identities.NodeUid(self.text(obj, "nodeUID", path)),
        )

    def device(self, value: model.JsonValue, path: str) -> model.PreparedDevice:
        obj = self.obj(value, path, _DEVICE_KEYS, frozenset({"managedBinding"}))
        vf_config = obj.get("vfConfig", {})
        if not isinstance(vf_config, dict):
            self.problems.append(errors.FieldError(f"{path}.vfConfig", "must be an object"))
            vf_config = {}
        managed = (
            self.binding(obj["managedBinding"], f"{path}.managedBinding") if "managedBinding" in obj else None
        )
        return model.PreparedDevice(
            request_names=self.texts(obj, "requestNames", path),
            pool=self.text(obj, "pool", path),
            device=self.text(obj, "device", path),
            pci_address=identities.PciAddress(self.text(obj, "pciAddress", path)),
            original_driver=self.text(obj, "originalDriver", path),
            vf_config=vf_config,
            interface_name=self.text(obj, "interfaceName", path),
            cdi_device_ids=self.texts(obj, "cdiDeviceIDs", path),
            net_attach_def_config=self.text(obj, "netAttachDefConfig", path),
            managed=managed,
        )

    def claim(self, uid: str, value: model.JsonValue, path: str) -> model.ClaimRecord:
        obj = self.obj(value, path, _CLAIM_KEYS)
        devices = obj.get("devices", [])
        if not isinstance(devices, list):
            self.problems.append(errors.FieldError(f"{path}.devices", "must be a list"))
            devices = []
        return model.ClaimRecord(
            claim_uid=identities.ClaimUid(uid),
            namespace=self.text(obj, "namespace", path),
            name=self.text(obj, "name", path),
            pod_uid=identities.PodUid(self.text(obj, "podUID", path)),
            devices=tuple(self.device(d, f"{path}.devices[{i}]") for i, d in enumerate(devices)),
        )


def _corrupt(source: str, detail: str, found: Iterable[errors.FieldError] = ()) -> errors.ContractViolation:
    return errors.ContractViolation(
        f"checkpoint {source} is corrupt: {detail}. {_RECOVERY_HINT}", errors=list(found)
    )


def decode_checkpoint(raw: bytes, *, source: str = "checkpoint") -> model.Checkpoint:
    """Parse and verify checkpoint file bytes; ``source`` names the file in error messages.

    Raises: ``ContractViolation`` (reason ``UnsupportedVersion``) for an unknown top-level
    ``version`` or ``bindingVersion`` (a newer plugin wrote it: run that plugin, or drain the
    node and clean up first); ``ContractViolation`` (reason ``ContractViolation``) for bytes that
    are not UTF-8 JSON, duplicate keys, a checksum mismatch, or any missing, unknown or malformed
    field. Nothing is repaired or dropped.
    """
    try:
        doc: model.JsonValue = json.loads(
            raw.decode("utf-8"),
            object_pairs_hook=_reject_duplicates,
            parse_constant=_reject_constant,
            parse_float=_parse_float,
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _corrupt(source, f"not valid UTF-8 JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise _corrupt(source, "the document is not a JSON object")
    version = doc.get("version")
    if type(version) is not int:
        raise _corrupt(source, f"top-level 'version' must be an integer, got {version!r}")
    if version != checkpoint_doc.VERSION:
        newer = version > checkpoint_doc.VERSION
        raise errors.ContractViolation(
            f"checkpoint {source} has version {version}, but this build reads version {checkpoint_doc.VERSION}"
            + ("; a newer plugin wrote it and downgrading over its state is not supported" if newer else "")
            + ". The file was left untouched: run the plugin version that wrote it, or drain the node and "
            "clean up first (release managed workloads, resolve owned finalizers), then remove the file",
            reason=errors.Reason.UNSUPPORTED_VERSION,
        )
    reader = _Reader()
    reader.obj(doc, "$", _TOP_KEYS)
    if reader.problems:
        raise _corrupt(source, "unexpected top-level layout", reader.problems)
    recorded, data = doc["checksum"], doc["data"]
    if not isinstance(recorded, str) or names.hex64_problem(recorded) is not None:
        raise _corrupt(source, f"'checksum' must be 64 lowercase hex characters, got {recorded!r}")
    try:
        computed = checksum(data)
    except errors.ContractViolation as exc:
        raise _corrupt(source, exc.summary) from exc
    if computed != recorded:
        raise _corrupt(
            source, f"checksum mismatch (recorded {recorded}, computed {computed}): it was edited or damaged"
        )
    claims_obj = reader.obj(data, "data", frozenset({"claims"})).get("claims", {})
    if not isinstance(claims_obj, dict):
        reader.problems.append(errors.FieldError("data.claims", "must be an object keyed by claim UID"))
        claims_obj = {}
    claims = {
        identities.ClaimUid(uid): reader.claim(uid, value, f"data.claims[{json.dumps(uid)}]")
        for uid, value in claims_obj.items()
    }
    if reader.unsupported:
        raise errors.ContractViolation(
            f"checkpoint {source} holds managed bindings of a version this build does not understand. "
            "The file was left untouched: run the plugin version that wrote it, or drain the node and "
            "clean up first (release managed workloads, resolve owned finalizers)",
            reason=errors.Reason.UNSUPPORTED_VERSION,
            errors=reader.unsupported,
        )
    if reader.problems:
        raise _corrupt(source, "fields are missing or malformed", reader.problems)
    cp = model.Checkpoint(claims=claims)
    problems = model.checkpoint_problems(cp)
    if problems:
        raise _corrupt(source, "records are inconsistent", problems)
    return cp
