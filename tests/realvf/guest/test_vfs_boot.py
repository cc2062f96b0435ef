"""The ``vfs`` role's boot program (``plugins/module_utils/numvfs_boot.py``) on the real kernel.

The program is installed as the role installs it (the entry script ``roles/vfs/files/sriov-dra-vfs.py``
with ``lib/`` holding the files ``roles/vfs/vars/main.yml`` lists) and run as the unit runs it,
``python3 -I <dir>/sriov-dra-vfs.py --root / --timeout 30 --drain-confirmed PF=COUNT[:DRIVER]...``,
against the guest's real ``/``. The test puts both PFs back to 4 igbvf VFs with the program itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from tests.realvf.guest import realvfs

realvfs.collection_module_utils()
from ansible_collections.sriovnet.dra.plugins.module_utils import numvfs, numvfs_boot  # noqa: E402


def _install(target: Path) -> Path:
    """The role's boot layout under ``target`` (its persist block); returns the entry script."""
    role_vars = yaml.safe_load((realvfs.REPO / "roles" / "vfs" / "vars" / "main.yml").read_text())
    packages = [target / "lib" / p for p in role_vars["vfs_boot_packages"]]
    for package in packages:
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text("")
    module_utils = realvfs.REPO / "plugins" / "module_utils"
    for name in role_vars["vfs_boot_module_utils"]:
        shutil.copy(module_utils / name, packages[-1] / name)
    rules = packages[-1] / role_vars["vfs_boot_rules_package"]
    rules.mkdir()
    for source in (module_utils / role_vars["vfs_boot_rules_package"]).glob("*.py"):
        shutil.copy(source, rules / source.name)
    entry = target / "sriov-dra-vfs.py"
    shutil.copy(realvfs.REPO / "roles" / "vfs" / "files" / "sriov-dra-vfs.py", entry)
    return entry


def _boot(entry: Path, *specs: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-I", str(entry), "--root", "/", "--timeout", "30", "--drain-confirmed", *specs]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=240, cwd="/")


def _numvfs(pf: realvfs.RealPf) -> int:
    return int(realvfs.read(realvfs.SYS_PCI / pf.bdf / "sriov_numvfs"))


def _vfio_group(bdf: str) -> Path:
    return Path("/dev/vfio") / os.path.basename(os.readlink(realvfs.SYS_PCI / bdf / "iommu_group"))


def test_boot_program_sets_a_pf_by_address_and_one_by_name_with_vfio_pci_and_refuses_above_total(
    real_pfs: list[realvfs.RealPf], tmp_path: Path
) -> None:
    first, second = real_pfs
    entry = _install(tmp_path / "sriov-dra-vfs")
    try:
        # A PF by PCI address, one by netdev name with vfio-pci (the guest has the vIOMMU).
        done = _boot(entry, f"{first.bdf}=2", f"{second.ifname}=3:vfio-pci")
        assert (done.returncode, done.stderr) == (numvfs_boot.EXIT_OK, ""), done
        lines = done.stdout.splitlines()
        assert re.fullmatch(
            rf"PF {first.bdf} \({first.bdf}\): 2 VFs as planned \(had 4, \d+ sysfs writes\)", lines[0]
        )
        assert re.fullmatch(
            rf"PF {second.ifname} \({second.bdf}\): 3 VFs on vfio-pci as planned \(had 4, \d+ sysfs writes\)",
            lines[1],
        )
        assert lines[2:] == ["sriov-dra-vfs: 2 PFs as planned"]
        assert (_numvfs(first), _numvfs(second)) == (2, 3)
        first_vfs, second_vfs = realvfs.raw_vfs(first), realvfs.raw_vfs(second)
        assert [v.index for v in first_vfs] == [0, 1] and [v.index for v in second_vfs] == [0, 1, 2]
        assert all(v.pf_bdf == first.bdf and v.driver == realvfs.VF_DRIVER for v in first_vfs)
        assert all(v.pf_bdf == second.bdf and v.driver == "vfio-pci" and v.net is None for v in second_vfs)
        assert all(_vfio_group(v.bdf).exists() for v in second_vfs)

        # Above sriov_totalvfs: refused before any write, and the other PF is still handled (its rerun
        # is idempotent); exit status 1.
        refused = _boot(entry, f"{first.bdf}={first.totalvfs + 1}", f"{second.ifname}=3:vfio-pci")
        assert refused.returncode == numvfs_boot.EXIT_FAILED, refused
        assert refused.stderr.splitlines() == [
            numvfs.over_total_message(first.bdf, first.bdf, first.totalvfs + 1, first.totalvfs),
            f"sriov-dra-vfs: 1 of 2 PFs are not as planned: {first.bdf}",
        ]
        assert refused.stdout.splitlines() == [
            f"PF {second.ifname} ({second.bdf}): 3 VFs on vfio-pci as planned (nothing written)"
        ]
        assert (_numvfs(first), _numvfs(second)) == (2, 3)

        # Malformed arguments: usage status, nothing read or written.
        usage = _boot(entry, f"{first.bdf}=02")
        assert usage.returncode == numvfs_boot.EXIT_USAGE
        assert "the VF count '02' is not a number 0 or more" in usage.stderr
        assert _numvfs(first) == 2

        # Undo with the program itself: both PFs back to 4 VFs on igbvf.
        undo = _boot(
            entry,
            f"{first.bdf}={realvfs.NUM_VFS}:{realvfs.VF_DRIVER}",
            f"{second.bdf}={realvfs.NUM_VFS}:{realvfs.VF_DRIVER}",
        )
        assert (undo.returncode, undo.stderr) == (numvfs_boot.EXIT_OK, ""), undo
        for pf in real_pfs:
            realvfs.wait_until(
                f"{realvfs.NUM_VFS} igbvf VFs with netdevs on {pf.ifname}",
                lambda pf=pf: realvfs.vfs_ready(pf),
            )
    finally:
        if not all(realvfs.vfs_ready(pf) for pf in real_pfs):
            realvfs.restore_baseline(real_pfs)
