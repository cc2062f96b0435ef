"""The device metadata files of prepared claims and the CDI specs that mount them.

Writes, reads and removes what ``core.plugin.device_metadata`` names: per (claim, request) the
file under ``<data dir>/dra-device-metadata/<namespace>_<claim>/<request>/metadata.json``
(directories 0755, file 0644) and the spec ``<cdi root>/<driver>_metadata_<claimUID>_<request>.json``
(docs/design.md#device-metadata). A write with identical content leaves the file untouched; the
file is replaced by a rename while no container has it mounted (prepare), and rewritten in place
(same inode) by :meth:`DeviceMetadataFiles.rewrite_in_place`, which a running container sees.
Removing what is absent succeeds. Never touches a name it did not generate.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from sriov_dra.core.plugin import cdi_spec, device_metadata
from sriov_dra.host import atomic_file

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
        self, claim: device_metadata.ClaimIdentity, request: str, doc: bytes, env: Sequence[str] = ()
    ) -> str:
        """Write a request's file and its mount spec; return the CDI device ID to hand the kubelet.

        ``env`` joins the spec's edits (the claim's NCCL variables). The file comes first, so a
        spec never names a missing mount source.
        Raises: ContractViolation for unsafe names or an unloadable spec; ``OSError``.
        """
        path = self.file_path(claim.namespace, claim.name, request)
        path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        _write_if_changed(path, doc)
        spec = device_metadata.mount_spec(self._driver, claim, request, str(path), env)
        _write_if_changed(self.spec_path(claim.uid, request), cdi_spec.encode_spec(spec))
        return device_metadata.cdi_device_id(self._driver, claim.uid, request)

    def read(self, namespace: str, name: str, request: str) -> bytes | None:
        """A request's file as it is on the host, or ``None`` when there is none."""
        return atomic_file.read_optional(self.file_path(namespace, name, request))

    def rewrite_in_place(self, namespace: str, name: str, request: str, doc: bytes) -> bool:
        """Rewrite an existing file on the same inode (a started container sees the new bytes).

        Returns False, writing nothing, when the file is absent (no mount names it) or already
        holds ``doc``. Raises: ``OSError``.
        """
        path = self.file_path(namespace, name, request)
        current = atomic_file.read_optional(path)
        if current is None or current == doc:
            return False
        with open(path, "r+b") as f:
            f.write(doc)
            f.truncate()
        return True

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


def _write_if_changed(path: Path, data: bytes) -> None:
    if atomic_file.read_optional(path) != data:
        _write(path, data)
