"""CDI spec files for prepared VFs under the CDI root (default ``/var/run/cdi``).

Writes and removes the two kinds of file the plugin owns (names and content from
``core.plugin.cdi_spec``): one per claim, written at prepare and removed at unprepare, and one per
Pod with ``SRIOVNETWORK_PCI_ADDRESSES``, kept while any locally unreleased claim of the Pod
remains (docs/design.md#release). Writes are atomic and idempotent (identical content leaves the
file untouched, so a watching runtime sees no churn); removing an absent file succeeds. Never
touches a file whose name it did not generate.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Final

from sriov_dra.core.plugin import cdi_spec
from sriov_dra.host import atomic_file

DEFAULT_CDI_ROOT: Final = Path("/var/run/cdi")
"""Dynamic CDI directory (higher priority than ``/etc/cdi``); upstream ``--cdi-root`` default."""

CDI_FILE_MODE: Final = 0o644
"""Permission bits of spec files: the runtime reads them; only root writes the directory."""

WriteFn = Callable[[Path, bytes], None]
RemoveFn = Callable[[Path], bool]

default_write: Final[WriteFn] = functools.partial(atomic_file.write_atomic, mode=CDI_FILE_MODE, durable=False)
"""Atomic replacement without ``fsync``: specs are rebuilt from the record by every prepare.

Spec files are derived state: their content follows from the checkpoint record (durable before
the first host change) and the host, and every NodePrepare rewrites them when they differ. A
killed plugin still leaves the old or the new complete file (the rename is atomic); only a power
loss or kernel crash can lose an unsynced write, and that kills every container (the default
root is a tmpfs on common distributions anyway), after which the kubelet, whose ``prepared``
flag lives in memory, calls NodePrepare again before starting a container of the Pod. Removals
(unprepare, rollback) stay durable and happen before the record is deleted.
"""


class CdiSpecs:
    """Writer and remover of this driver's CDI spec files under ``root``.

    ``write``/``remove`` are injectable (keyword-only) for failure tests.
    Source: upstream dra-driver-sriov's CDI files (device names).
    """

    def __init__(
        self,
        root: Path = DEFAULT_CDI_ROOT,
        *,
        write: WriteFn = default_write,
        remove: RemoveFn = atomic_file.remove_durable,
    ) -> None:
        self._root = root
        self._write = write
        self._remove = remove

    @property
    def root(self) -> Path:
        """The CDI directory this writer owns files in."""
        return self._root

    def ensure_root(self) -> None:
        """Create the CDI root (mode 0755, parents included) when it is missing.

        Raises: ``NotADirectoryError`` if the root exists but is not a directory (fix the
        ``--cdi-root`` setting or the host path); ``OSError`` when it cannot be created.
        """
        if self._root.exists() and not self._root.is_dir():
            raise NotADirectoryError(f"CDI root {self._root} exists but is not a directory; fix --cdi-root")
        self._root.mkdir(mode=0o755, parents=True, exist_ok=True)

    def claim_spec_path(self, claim_uid: str) -> Path:
        """Return the path of the claim's spec file. Raises: ``ContractViolation`` for an unsafe UID."""
        return self._root / cdi_spec.spec_file_name(claim_uid)

    def pod_spec_path(self, pod_uid: str) -> Path:
        """Return the path of the Pod-global spec file. Raises: ``ContractViolation`` for an unsafe UID."""
        return self._root / cdi_spec.spec_file_name(pod_uid)

    def _write_if_changed(self, path: Path, data: bytes) -> bool:
        if atomic_file.read_optional(path) == data:
            return False
        self._write(path, data)
        return True

    def write_claim_spec(self, claim_uid: str, vfs: Sequence[cdi_spec.VfEdits]) -> Path:
        """Write (or re-write identically) the claim's spec with one device per prepared VF.

        Returns the file path. The devices' IDs are ``cdi_spec.prepared_device_ids(...)[0]``.
        Raises: ``ContractViolation`` for invalid names or edits (nothing written); ``OSError``
        when the write fails (the previous file, if any, is intact).
        """
        path = self.claim_spec_path(claim_uid)
        self._write_if_changed(path, cdi_spec.encode_spec(cdi_spec.claim_spec(claim_uid, vfs)))
        return path

    def remove_claim_spec(self, claim_uid: str) -> bool:
        """Remove the claim's spec; return whether a file was removed (absent is success).

        Raises: ``ContractViolation`` for an unsafe UID; ``OSError`` if the removal fails.
        """
        return self._remove(self.claim_spec_path(claim_uid))

    def write_pod_spec(self, pod_uid: str, pci_addresses: Iterable[str]) -> Path:
        """Write (or re-write identically) the Pod-global spec listing ``pci_addresses``.

        Raises: ``ContractViolation`` for no or malformed addresses or an unsafe UID; ``OSError``
        when the write fails (the previous file, if any, is intact).
        """
        path = self.pod_spec_path(pod_uid)
        self._write_if_changed(path, cdi_spec.encode_spec(cdi_spec.pod_spec(pod_uid, pci_addresses)))
        return path

    def remove_pod_spec(self, pod_uid: str) -> bool:
        """Remove the Pod-global spec; return whether a file was removed (absent is success)."""
        return self._remove(self.pod_spec_path(pod_uid))

    def sync_pod_spec(self, pod_uid: str, pci_addresses: Iterable[str]) -> Path | None:
        """Make the Pod-global spec match ``pci_addresses``: write it, or remove it when empty.

        Returns the path when a spec remains, ``None`` when it was removed (or was absent).
        Kept (rebuilt) while another locally unreleased claim needs it (docs/design.md#release).
        """
        addresses = sorted(set(pci_addresses))
        if not addresses:
            self.remove_pod_spec(pod_uid)
            return None
        return self.write_pod_spec(pod_uid, addresses)
