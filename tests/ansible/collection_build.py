"""Build the collection tarball and lay it out where ansible-test and ansible-galaxy want it."""

from __future__ import annotations

import tarfile
from pathlib import Path

from tests.ansible.conftest import REPO, run


def build(out_dir: Path, env: dict[str, str]) -> Path:
    """``ansible-galaxy collection build`` of the repository into ``out_dir``; returns the tarball."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run(["ansible-galaxy", "collection", "build", "--force", "--output-path", str(out_dir)], env, cwd=REPO)
    (tarball,) = sorted(out_dir.glob("sriovnet-dra-*.tar.gz"))
    return tarball


def extract(tarball: Path, root: Path) -> Path:
    """Extract to ``root/ansible_collections/sriovnet/dra`` (the path ansible-test requires)."""
    dest = root / "ansible_collections" / "sriovnet" / "dra"
    dest.mkdir(parents=True)
    with tarfile.open(tarball) as tf:
        tf.extractall(dest, filter="data")
    return dest
