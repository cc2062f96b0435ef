"""The CDI spec files this driver wrote under a CDI root, for tests.

A test oracle, not part of the product: the plugin only writes and removes its files by name
(``sriov_dra.host.cdi``); tests list what a prepare or unprepare left behind with :func:`spec_files`.
"""

from __future__ import annotations

from pathlib import Path

from sriov_dra.core.plugin import cdi_spec


def spec_files(root: Path) -> list[Path]:
    """This driver's spec files directly under ``root``, sorted; none when ``root`` is absent."""
    return sorted(p for p in root.glob(f"{cdi_spec.VENDOR}-{cdi_spec.CLASS}_*.json") if p.is_file())
