"""``binaries.install`` puts a real file into a node's CNI bin dir, never a symlink into the build cache.

Thick Multus's daemon (the multus role's DaemonSet) looks each delegate up inside its container, which
mounts only the node's CNI bin dir: a symlink into ``~/.cache/sriov-dra`` resolves on the node but not
there ("failed to find plugin "bridge" in path [/opt/cni/bin]", seen on the lab's first thick run).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sriov_dra_lab import binaries


def test_install_links_the_cached_binary_as_a_real_file_with_the_same_content(tmp_path: Path) -> None:
    cached = tmp_path / "cache" / "bridge"
    cached.parent.mkdir()
    cached.write_bytes(b"\x7fELF plugin")
    cached.chmod(0o755)
    dest = tmp_path / "node" / "opt" / "cni" / "bin" / "bridge"
    dest.parent.mkdir(parents=True)
    binaries.install(cached, dest)
    assert not dest.is_symlink()
    assert dest.read_bytes() == b"\x7fELF plugin"
    assert dest.stat().st_mode & 0o111  # still executable
    cached.unlink()  # the node's file does not depend on the cache entry
    assert dest.read_bytes() == b"\x7fELF plugin"


def test_install_never_replaces_an_existing_file(tmp_path: Path) -> None:
    cached = tmp_path / "bridge"
    cached.write_bytes(b"new")
    dest = tmp_path / "dest"
    dest.write_bytes(b"old")
    with pytest.raises(FileExistsError):
        binaries.install(cached, dest)
    assert dest.read_bytes() == b"old"
