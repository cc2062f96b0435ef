"""Benchmark: VF discovery on a fake sysfs of 2 PFs × 128 VFs vs a plain ``os.scandir`` walk.

``bench_discovery()`` builds the lab's two-root tree (``fake_sysfs.two_root_pfs``) with 128 VFs
per PF in a temporary directory and times, in the same run on the same tree:

* ``discovery.discover`` (PF detection, ``virtfn`` links, per-VF sysfs reads, pcieRoot for VF
  and PF, attribute map), and
* a recursive ``os.scandir`` walk of the whole tree without following symlinks (the floor of
  touching every directory entry once).

It reports the best-of-``repeats`` discovery time per VF and the ratio of the two times.
Absolute times depend on the machine and its page cache; nothing here is a test assertion.

Run as a script (``.venv/bin/python bench/plugin_discovery.py``) to print the numbers.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.benchkit import timing

from sriov_dra.host import discovery
from sriov_dra_lab.fakes import fake_pci, fake_sysfs

VFS_PER_PF: Final = 128


@dataclass(frozen=True)
class DiscoveryBench:
    """One measurement. Units: seconds; ``ratio`` is dimensionless (discovery / scandir walk)."""

    vfs: int
    tree_entries: int
    discovery_s: float
    scandir_s: float

    @property
    def per_vf_s(self) -> float:
        """Discovery seconds per VF."""
        return self.discovery_s / self.vfs

    @property
    def ratio(self) -> float:
        """Discovery time divided by the plain walk of the same tree."""
        return self.discovery_s / self.scandir_s


def scandir_walk(top: str) -> int:
    """Visit every entry under ``top`` once (symlinks not followed); return the entry count."""
    count = 0
    stack = [top]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                count += 1
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return count


def bench_discovery(*, vfs_per_pf: int = VFS_PER_PF, repeats: int = 7) -> DiscoveryBench:
    """Measure discovery and the scandir walk on a fresh 2-PF tree; see the module docstring."""
    with tempfile.TemporaryDirectory(prefix="sriov-dra-bench-") as tmp:
        fake = fake_sysfs.build(Path(tmp), fake_pci.two_root_pfs(vfs_per_pf))
        found = discovery.discover(fake.sysfs)  # warm the page cache; also proves the tree
        assert len(found) == 2 * vfs_per_pf, len(found)
        entries = scandir_walk(tmp)
        discovery_s = timing.best_per_call(lambda: discovery.discover(fake.sysfs), repeats=repeats)
        scandir_s = timing.best_per_call(lambda: scandir_walk(tmp), repeats=repeats)
    return DiscoveryBench(len(found), entries, discovery_s, scandir_s)


def main() -> None:
    """Print time per VF and the ratio to the plain walk."""
    result = bench_discovery()
    print(
        f"discover() on 2 PFs x {VFS_PER_PF} VFs: {result.discovery_s * 1e3:.1f} ms total, "
        f"{result.per_vf_s * 1e6:.0f} us per VF; scandir walk of the same tree "
        f"({result.tree_entries} entries): {result.scandir_s * 1e3:.1f} ms; ratio {result.ratio:.1f}x"
    )


if __name__ == "__main__":
    main()
