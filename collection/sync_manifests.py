#!/usr/bin/env python3
"""Copy the runtime's static manifests into the roles that apply them, or check that they match.

The services' manifests live in ``runtime/sriov_dra/manifests/`` (written with the services and
tested by the cluster tier); the collection cannot read that package at run time (it is not in the
collection tarball), so each role carries byte-identical copies under ``files/manifests/``.
:data:`OWNERS` says which role applies which manifest; ``--check`` (used by
``tests/ansible/test_manifest_sync.py``) reports every copy that is missing, stale or orphaned.
"""

from __future__ import annotations

import argparse
import fnmatch
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "runtime" / "sriov_dra" / "manifests"

OWNERS: tuple[tuple[str, str], ...] = (
    ("crds/network-attachment-definitions.yaml", "multus"),
    ("crds/sriovnetwork.k8snetworkplumbingwg.io_*.yaml", "plugin"),
    ("deviceclasses/*.yaml", "plugin"),
    ("plugin/*.yaml", "plugin"),
    ("crds/sriovnetwork.openshift.io_*.yaml", "operator"),
    ("operator/*.yaml", "operator"),
    ("guard/*.yaml", "guard"),
)
"""Manifest path pattern (relative to ``SOURCE``) -> the role that applies it. ``lab/`` is the lab's own."""


def owner(rel: str) -> str | None:
    """The role that carries ``rel``, or None for manifests no role applies (the lab's)."""
    for pattern, role in OWNERS:
        if fnmatch.fnmatch(rel, pattern):
            return role
    return None


def expected() -> dict[Path, Path]:
    """Role copy -> runtime source, for every manifest a role owns."""
    pairs: dict[Path, Path] = {}
    for src in sorted(SOURCE.rglob("*.yaml")):
        rel = src.relative_to(SOURCE).as_posix()
        role = owner(rel)
        if role is not None:
            pairs[REPO / "roles" / role / "files" / "manifests" / rel] = src
    return pairs


def problems() -> list[str]:
    """Every missing, stale or orphaned copy, as sentences that name the fix."""
    found: list[str] = []
    pairs = expected()
    for copy, src in pairs.items():
        if not copy.exists():
            found.append(f"{copy.relative_to(REPO)} is missing (copy of {src.relative_to(REPO)})")
        elif copy.read_bytes() != src.read_bytes():
            found.append(f"{copy.relative_to(REPO)} differs from {src.relative_to(REPO)}")
    for copy in sorted(REPO.glob("roles/*/files/manifests/**/*.yaml")):
        if copy not in pairs:
            found.append(f"{copy.relative_to(REPO)} has no source in {SOURCE.relative_to(REPO)} (remove it)")
    return found


def sync() -> list[str]:
    """Make every copy equal its source and drop orphans; return what changed."""
    changed = []
    pairs = expected()
    for copy, src in pairs.items():
        if not copy.exists() or copy.read_bytes() != src.read_bytes():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, copy)
            changed.append(f"copied {src.relative_to(REPO)} -> {copy.relative_to(REPO)}")
    for copy in sorted(REPO.glob("roles/*/files/manifests/**/*.yaml")):
        if copy not in pairs:
            copy.unlink()
            changed.append(f"removed {copy.relative_to(REPO)}")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report differences, change nothing")
    args = parser.parse_args(argv)
    if args.check:
        found = problems()
        print("\n".join(found) or "role manifests are in sync")
        return 1 if found else 0
    print("\n".join(sync()) or "nothing to do")
    return 0


if __name__ == "__main__":
    sys.exit(main())
