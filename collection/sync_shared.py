#!/usr/bin/env python3
"""Copy the runtime modules the collection shares into ``plugins/module_utils``, or check that they match.

The preflight's checks have one implementation: ``sriov_dra.host.preflight_node`` (node checks)
and ``sriov_dra.core.preflight_rules`` (cluster decisions) are canonical, standard-library only,
and the collection carries byte-identical copies, because the collection cannot import the
runtime package on a managed node or the controller. ``--check`` (used by
``tests/unit/plugins/module_utils/test_shared_sync.py``) reports every copy that is missing or stale.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAIRS: tuple[tuple[str, str], ...] = (
    ("runtime/sriov_dra/host/preflight_node.py", "plugins/module_utils/checks.py"),
    ("runtime/sriov_dra/core/preflight_rules.py", "plugins/module_utils/preflight_rules.py"),
)
"""(canonical runtime module, its copy in the collection), relative to the repository root."""


def problems() -> list[str]:
    """Every missing or stale copy, as sentences that name the fix."""
    found = []
    for src, copy in PAIRS:
        if not (REPO / copy).exists():
            found.append(f"{copy} is missing (copy of {src}); run collection/sync_shared.py")
        elif (REPO / copy).read_bytes() != (REPO / src).read_bytes():
            found.append(f"{copy} differs from {src}; edit {src} and run collection/sync_shared.py")
    return found


def sync() -> list[str]:
    """Make every copy equal its source; return what changed."""
    changed = []
    for src, copy in PAIRS:
        if not (REPO / copy).exists() or (REPO / copy).read_bytes() != (REPO / src).read_bytes():
            shutil.copyfile(REPO / src, REPO / copy)
            changed.append(f"copied {src} -> {copy}")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report differences, change nothing")
    args = parser.parse_args(argv)
    if args.check:
        found = problems()
        print("\n".join(found) or "shared modules are in sync")
        return 1 if found else 0
    print("\n".join(sync()) or "nothing to do")
    return 0


if __name__ == "__main__":
    sys.exit(main())
