"""The device metadata files of prepared claims and the CDI specs that mount them.

Writes, reads and removes what ``core.plugin.device_metadata`` names: per (claim, request) the
file under ``<data dir>/dra-device-metadata/<namespace>_<claim>/<request>/metadata.json``
(directories 0755, file 0644) and the spec ``<cdi root>/<driver>_metadata_<claimUID>_<request>.json``
(docs/design.md#device-metadata). A write keeps the network part the guard set in an existing
file (``core.metadata_document.keep_network_data``, under the lock the guard takes) and leaves
identical content untouched; the file is replaced by a rename. Removing what is absent succeeds.
Never touches a name it did not generate.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from sriov_dra.core import metadata_document
from sriov_dra.core.plugin import cdi_spec, device_metadata
from sriov_dra.host import atomic_file, pod_metadata_files
from sriov_dra_rules import errors

DIR_MODE: Final = 0o755
FILE_MODE: Final = 0o644

_write: Final = functools.partial(atomic_file.write_atomic, mode=FILE_MODE, durable=False)
"""Derived files: every prepare rebuilds them from the record and the claim, as the CDI specs."""


class DeviceMetadataFiles:
    """The metadata files of this driver under ``data_dir`` and their CDI specs under ``cdi_root``.

    Shapes: ``data_dir`` is the plugin's data directory (``<kubelet plugins dir>/<driver>``); its
    path must be the same on the host and in the plugin's container, because the runtime reads
    the spec's ``hostPath`` on the host.
    """

    def __init__(self, data_dir: Path, cdi_root: Path, driver: str) -> None:
        self._data_dir = data_dir
        self._cdi_root = cdi_root
        self._driver = driver

    @property
    def driver(self) -> str:
        """The driver whose files these are."""
        return self._driver

    def file_path(self, namespace: str, name: str, request: str) -> Path:
        """The host path of a request's file. Raises: ContractViolation for unsafe names."""
        return self._data_dir.joinpath(*device_metadata.host_file_parts(namespace, name, request))

    def claim_dir(self, namespace: str, name: str) -> Path:
        """The host directory holding every request's file of one claim."""
        return self._data_dir / device_metadata.HOST_SUBDIR / device_metadata.host_claim_dir(namespace, name)

    def spec_path(self, claim_uid: str, request: str) -> Path:
        """The CDI spec path of a request's mount."""
        return self._cdi_root / device_metadata.cdi_spec_file_name(self._driver, claim_uid, request)

    def write(
        self,
        claim: device_metadata.ClaimIdentity,
        request: str,
        doc: Mapping[str, object],
        env: Sequence[str] = (),
    ) -> str:
        """Write a request's file and its mount spec; return the CDI device ID to hand the kubelet.

        ``doc`` is the prepare's document; an existing file's network part and generation carry
        over (a file that does not decode is rebuilt from ``doc``: the claim status keeps the
        network data). ``env`` joins the spec's edits (the claim's NCCL variables). The file comes
        first, so a spec never names a missing mount source.
        Raises: ContractViolation for unsafe names or an unloadable spec; ``OSError``.
        """
        path = self.file_path(claim.namespace, claim.name, request)
        path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        with pod_metadata_files.request_lock(path.parent):
            _write_if_changed(path, metadata_document.encode(_kept(path, doc)))
        spec = device_metadata.mount_spec(self._driver, claim, request, str(path), env)
        _write_if_changed(self.spec_path(claim.uid, request), cdi_spec.encode_spec(spec))
        return device_metadata.cdi_device_id(self._driver, claim.uid, request)

    def read(self, namespace: str, name: str, request: str) -> bytes | None:
        """A request's file as it is on the host, or ``None`` when there is none."""
        return atomic_file.read_optional(self.file_path(namespace, name, request))

    def remove_claim(self, namespace: str, name: str, claim_uid: str) -> list[Path]:
        """Remove the claim's directory and every metadata spec of its UID; return what went.

        Raises: ContractViolation for unsafe names; ``OSError`` when a removal fails.
        """
        removed: list[Path] = []
        prefix = device_metadata.cdi_spec_file_prefix(self._driver, claim_uid)
        try:
            entries = sorted(self._cdi_root.iterdir())
        except FileNotFoundError:
            entries = []
        for entry in entries:
            ours = entry.name.startswith(prefix) and entry.name.endswith(".json")
            if ours and atomic_file.remove_durable(entry):
                removed.append(entry)
        directory = self.claim_dir(namespace, name)
        if directory.exists():
            shutil.rmtree(directory)
            removed.append(directory)
        return removed


def _kept(path: Path, doc: Mapping[str, object]) -> Mapping[str, object]:
    data = atomic_file.read_optional(path)
    if data is None:
        return doc
    try:
        old = metadata_document.decode(data, source=str(path))
    except errors.ContractViolation:
        return doc
    return metadata_document.keep_network_data(doc, old)


def _write_if_changed(path: Path, data: bytes) -> None:
    if atomic_file.read_optional(path) != data:
        _write(path, data)
