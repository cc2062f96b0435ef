"""FAKE boundary: the plugin's real checkpoint files with every write routed through a test's function.

The function gets the files object and the bytes; it may raise before or after calling the real
:meth:`sriov_dra.host.checkpoint_files.CheckpointFiles.write` (a failed or a lost write, docs/design.md#fault-injection).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sriov_dra.host import checkpoint_files


class FaultyCheckpointFiles(checkpoint_files.CheckpointFiles):
    """The real files of the checkpoint at ``path``; each write goes through ``write(files, data)``."""

    def __init__(self, path: Path, write: Callable[[checkpoint_files.CheckpointFiles, bytes], None]) -> None:
        super().__init__(path)
        self._faulty_write = write

    def write(self, data: bytes) -> None:
        """Route the write through the injected function (see the class docstring)."""
        self._faulty_write(self, data)
