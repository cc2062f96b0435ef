"""The KEP-5304 device metadata document as its file holds it: read, network part, generation. Pure.

Shared by the two writers of one file (docs/design.md#device-metadata): the plugin builds it at
prepare (``core.plugin.device_metadata``) and keeps an existing file's network part on a repeated
prepare (:func:`keep_network_data`); the guard, after a verified Multus ADD, sets each VF's
``networkData`` by PCI address (:func:`with_network_data`). Every change of content bumps the
document's ``metadata.generation``, which the first write sets to 1, as the 1.36 kubelet-plugin
helper counts it. A document that does not decode is a ``ContractViolation``, never edited.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sriov_dra_rules import errors, names, strict_json

API_VERSION: Final = "metadata.resource.k8s.io/v1alpha1"
KIND: Final = "DeviceMetadata"
HOST_SUBDIR: Final = "dra-device-metadata"
"""Below the plugin data dir: ``<namespace>_<claim>/<request>/metadata.json``."""
HOST_FILE_NAME: Final = "metadata.json"
FIRST_GENERATION: Final = 1
PCI_ADDRESS_ATTRIBUTES: Final = ("resource.kubernetes.io/pciBusID", f"{names.DOMAIN}/pciAddress")
"""Attributes naming a listed VF's PCI address (``0000:03:00.1``), the first one present wins."""


@dataclass(frozen=True)
class NetworkData:
    """The ``networkData`` of one device: interface in the Pod, canonical CIDRs, MAC.

    Shapes: ``ips`` canonical interface CIDRs (``192.0.2.5/24``), unique; ``hardware_address``
    as reported (``""``: none). The same form as the claim's ``status.devices[].networkData``.
    """

    interface_name: str
    ips: tuple[str, ...]
    hardware_address: str

    def to_json(self) -> dict[str, object]:
        """The API object; empty fields left out (the server omits them too)."""
        out: dict[str, object] = {"interfaceName": self.interface_name}
        if self.ips:
            out["ips"] = list(self.ips)
        if self.hardware_address:
            out["hardwareAddress"] = self.hardware_address
        return out


def encode(doc: Mapping[str, object]) -> bytes:
    """The file bytes: the document pretty-printed as one JSON stream entry ending in a newline.

    The helper writes one entry per configured version, newest first; this driver writes the one
    version 1.36 defines, so readers that take the first ``apiVersion`` they know read it.
    """
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def decode(data: bytes, *, source: str) -> dict[str, object]:
    """The document of a file this driver wrote; ``source`` names the file in errors.

    Raises: ContractViolation when the bytes are not strict JSON, or the document is not a
    ``DeviceMetadata`` of :data:`API_VERSION` with ``metadata.uid`` (string),
    ``metadata.generation`` (integer) and ``requests[].devices[]`` objects.
    """
    try:
        doc = strict_json.decode_file(data, what="device metadata file", source=source)
    except errors.InvalidSpec as exc:
        raise errors.ContractViolation(
            f"{exc.summary}; it was not written by this driver or was edited", errors=exc.errors
        ) from None
    problems: list[errors.FieldError] = []
    if not isinstance(doc, dict):
        problems.append(errors.FieldError("$", f"must be a JSON object, got {strict_json.kind(doc)}"))
        doc = {}
    for key, want in (("apiVersion", API_VERSION), ("kind", KIND)):
        if doc.get(key) != want:
            problems.append(errors.FieldError(key, f"must be {want!r}, got {doc.get(key)!r}"))
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    if not isinstance(meta.get("uid"), str):
        problems.append(errors.FieldError("metadata.uid", "must be a string (the claim's UID)"))
    if type(meta.get("generation")) is not int:
        problems.append(errors.FieldError("metadata.generation", "must be an integer"))
    requests = doc.get("requests")
    if not isinstance(requests, list):
        problems.append(errors.FieldError("requests", "must be a list"))
        requests = []
    for i, request in enumerate(requests):
        devices = request.get("devices") if isinstance(request, dict) else None
        if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
            problems.append(errors.FieldError(f"requests[{i}].devices", "must be a list of objects"))
    errors.raise_if_any(
        problems,
        f"device metadata file {source} is not a {KIND} document; it was not written by this driver or was edited",
        cls=errors.ContractViolation,
    )
    return doc


def claim_uid(doc: Mapping[str, object]) -> str:
    """``metadata.uid`` of a decoded document (the claim's UID)."""
    meta = doc["metadata"]
    assert isinstance(meta, Mapping)
    return str(meta["uid"])


def pci_address(device: Mapping[str, object]) -> str | None:
    """The PCI address a listed device's attributes give, or ``None``."""
    attrs = device.get("attributes")
    for key in PCI_ADDRESS_ATTRIBUTES:
        value = attrs.get(key) if isinstance(attrs, Mapping) else None
        text = value.get("string") if isinstance(value, Mapping) else None
        if isinstance(text, str):
            return text
    return None


def with_network_data(
    doc: Mapping[str, object], by_pci: Mapping[str, NetworkData]
) -> dict[str, object] | None:
    """``doc`` with ``networkData`` set on each device whose PCI address ``by_pci`` has.

    Returns the new document with its generation bumped, or ``None`` when nothing changes
    (no device listed, or each already holds that data). Shapes: ``doc`` as :func:`decode` gives it.
    """
    out = copy.deepcopy(dict(doc))
    changed = False
    for device in _devices(out):
        pci = pci_address(device)
        data = by_pci.get(pci) if pci is not None else None
        if data is not None and device.get("networkData") != data.to_json():
            device["networkData"] = data.to_json()
            changed = True
    return _bumped(out, _generation(doc)) if changed else None


def keep_network_data(fresh: Mapping[str, object], old: Mapping[str, object]) -> dict[str, object]:
    """A repeated prepare's document ``fresh`` with the network part ``old`` (the file) holds.

    Each device of ``fresh`` takes the ``networkData`` of the device of ``old`` with the same
    driver, pool and name; the generation is ``old``'s, bumped when anything else differs.
    Shapes: both as :func:`decode` gives them; ``fresh`` without ``networkData``.
    """
    held = {_key(d): d["networkData"] for d in _devices(old) if "networkData" in d}
    out = copy.deepcopy(dict(fresh))
    for device in _devices(out):
        if _key(device) in held:
            device["networkData"] = copy.deepcopy(held[_key(device)])
    generation = _generation(old)
    out["metadata"] = {**_meta(out), "generation": generation}
    return out if out == dict(old) else _bumped(out, generation)


def _meta(doc: Mapping[str, object]) -> dict[str, object]:
    meta = doc.get("metadata")
    return dict(meta) if isinstance(meta, Mapping) else {}


def _generation(doc: Mapping[str, object]) -> int:
    value = _meta(doc).get("generation")
    return value if type(value) is int else FIRST_GENERATION - 1


def _bumped(doc: dict[str, object], generation: int) -> dict[str, object]:
    doc["metadata"] = {**_meta(doc), "generation": generation + 1}
    return doc


def _devices(doc: Mapping[str, object]) -> list[dict[str, object]]:
    requests = doc.get("requests")
    out: list[dict[str, object]] = []
    for request in requests if isinstance(requests, list) else []:
        devices = request.get("devices") if isinstance(request, dict) else None
        if isinstance(devices, list):
            out.extend(d for d in devices if isinstance(d, dict))
    return out


def _key(device: Mapping[str, object]) -> tuple[object, object, object]:
    return device.get("driver"), device.get("pool"), device.get("name")
