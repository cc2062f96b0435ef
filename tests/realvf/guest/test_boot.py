"""The guest itself: the pinned kernel with two igb PFs on two PCIe roots."""

from __future__ import annotations

import os
from pathlib import Path


def test_guest_runs_the_pinned_kernel_with_an_igb_pf_on_each_root() -> None:
    assert os.uname().release == os.environ["SRIOV_DRA_REALVF_KERNEL"]
    roots = sorted(p.name for p in Path("/sys/devices").glob("pci0000:*"))
    assert "pci0000:20" in roots and "pci0000:40" in roots, roots
    drivers = sorted(p.name for p in Path("/sys/bus/pci/drivers/igb").iterdir() if ":" in p.name)
    assert len(drivers) == 2, drivers
