"""CDI spec files for prepared VFs under the CDI root (default ``/var/run/cdi``).

The container runtime reads every spec file in its CDI directories and resolves the fully-qualified
device IDs the kubelet passes it (``<vendor>/<class>=<name>``). This module writes and removes the
two kinds of file the plugin owns (names and content come from ``core.plugin.cdi_spec``):

- one per claim, ``sriovnetwork.k8snetworkplumbingwg.io-vf_<claimUID>.json``, written at prepare
  and removed at unprepare;
- one per Pod, ``sriovnetwork.k8snetworkplumbingwg.io-vf_<podUID>.json``, carrying
  ``SRIOVNETWORK_PCI_ADDRESSES`` for every VF of the Pod's locally unreleased claims; it is kept
  (rebuilt) while any such claim remains and removed after the last one (spec §8.4 step 5; compute
  the address list with ``core.plugin.checkpoint_lifecycle.pod_cdi_pci_addresses``).

Writes are atomic (``host.atomic_file``) and idempotent: re-writing identical content leaves the
file untouched, so a runtime watching the directory sees no churn. Removing an absent file
succeeds. This module must never touch a file whose name it did not generate.

Durability: spec files are *derived* state, not a record. Their content is a function of the
checkpoint record (persisted durably before the first host change, spec §8.1 step 2) and of the
host, and every NodePrepare, first or repeated, rewrites them when they differ
(``driver.prepare.ensure_host``). So the default writer replaces a file atomically but without
``fsync``: a killed plugin still leaves the old or the new complete file (the rename is atomic),
and only a power loss or kernel crash can lose or empty an unsynced write. Such a reboot kills
every container (and the default root ``/var/run/cdi`` is a tmpfs on common distributions, so
fsync would not keep it anyway); the kubelet, whose ``prepared`` flag lives only in memory,
calls NodePrepare again before it starts a container of the Pod, and that call rewrites the
file from the record first. No file without a record can appear this way: writes follow the
record, and removals (unprepare, rollback) stay durable and happen before the record is
deleted. Reference ``dra-protocol.md`` §3.2.
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
"""Atomic replacement without ``fsync``: specs are rebuilt from the record by every prepare."""


class CdiSpecs:
    """Writer and remover of this driver's CDI spec files under ``root``.

    ``write``/``remove`` are injectable (keyword-only) for failure tests.
    Source: reference ``dra-driver-sriov.md`` §4.6; ``dra-protocol.md`` §6.
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
        Source: spec §8.4 step 5 (preserve/rebuild while another unreleased claim needs it).
        """
        addresses = sorted(set(pci_addresses))
        if not addresses:
            self.remove_pod_spec(pod_uid)
            return None
        return self.write_pod_spec(pod_uid, addresses)

    def list_spec_files(self) -> list[Path]:
        """Return this driver's spec files under the root (sorted), e.g. for orphan reports."""
        prefix = f"{cdi_spec.VENDOR}-{cdi_spec.CLASS}_"
        try:
            entries = list(self._root.iterdir())
        except FileNotFoundError:
            return []
        return sorted(
            e for e in entries if e.name.startswith(prefix) and e.name.endswith(".json") and e.is_file()
        )
