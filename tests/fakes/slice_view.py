"""What a consumer of a ResourceSlice pool sees, for tests and benchmarks.

A test oracle, not part of the product: the scheduler reads a pool's devices from the slices at
its highest generation; :func:`pool_devices` computes that view, so tests of the plugin's slice
writes (``sriov_dra.core.plugin.slices``) check what a consumer would see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Slice = Mapping[str, Any]


def pool_devices(current: Sequence[Slice]) -> dict[str, dict[str, Any]]:
    """The devices a consumer sees in a pool: those of the slices at the highest generation.

    Shapes: device name → device JSON; later slices (by name) win a duplicate name.
    """
    if not current:
        return {}
    top = max(_generation(s) for s in current)
    out: dict[str, dict[str, Any]] = {}
    for s in sorted(current, key=_name):
        if _generation(s) == top:
            for device in (s.get("spec") or {}).get("devices") or []:
                out[str(device.get("name"))] = dict(device)
    return out


def _name(s: Slice) -> str:
    return str((s.get("metadata") or {}).get("name", ""))


def _generation(s: Slice) -> int:
    pool = (s.get("spec") or {}).get("pool")
    value = pool.get("generation", 0) if isinstance(pool, Mapping) else 0
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
