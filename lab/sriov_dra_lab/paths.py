"""Where the lab finds the repository, the product's manifests and its own.

The lab runs from a checkout (``make setup`` installs this distribution in editable mode next to
the product), so the repository root is two levels above this package. The product's manifests are
read from the installed ``sriov_dra`` package (its ``manifests/`` entries link to the files the
roles own; the wheel and the image carry them as regular files); the lab-only manifests
(whereabouts CRDs, node-component RBAC) live in this package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import sriov_dra

REPO: Final = Path(__file__).resolve().parents[2]
"""The repository checkout (``examples/``, ``roles/``, ``tools/``)."""

MANIFESTS: Final = Path(sriov_dra.__file__).resolve().parent / "manifests"
"""The product's manifests (CRDs, DeviceClass, RBAC, admission policy) as the image ships them."""

LAB_MANIFESTS: Final = Path(__file__).resolve().parent / "manifests"
"""Manifests only the lab applies (whereabouts CRDs, RBAC of the node components it runs)."""
