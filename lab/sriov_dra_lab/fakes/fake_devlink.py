"""LAB ONLY — a fake ``devlink`` command that answers ``dev eswitch show`` from a fake sysfs tree.

The collection's ``sriov_facts`` module asks the kernel for a PF's eswitch mode by running
iproute2's ``devlink -j dev eswitch show pci/<bdf>`` (``plugins/module_utils/devlink.py``). A
fake tree has no kernel behind it, so the tests put this command first on ``PATH``: the module
then runs its real code path (find the binary, run it, parse its JSON or its error) and gets the
fake tree's answer, the text of :data:`~sriov_dra_lab.fakes.fake_sysfs.ESWITCH_MODE_FILE` that the
plugin's fake source (:class:`~sriov_dra_lab.fakes.fake_sysfs.FakeEswitchModes`) reads too.

Answers as iproute2 does: JSON ``{"dev": {"pci/<bdf>": {"mode": ...}}}`` on stdout and exit 0;
for a PF of the tree without the file, the kernel's EOPNOTSUPP (``kernel answers: Operation not
supported``), for an address not in the tree ENODEV (``No such device``), both on stderr with
exit 1; anything else it was not written for is refused with exit 2.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from sriov_dra.core import identities
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra_lab.fakes import fake_sysfs


def answer(argv: Sequence[str], root: Path) -> tuple[int, str, str]:
    """``(exit status, stdout, stderr)`` of ``devlink <argv>`` on the fake tree at ``root``."""
    args = list(argv)
    json_out = args[:1] == ["-j"]
    if json_out:
        args = args[1:]
    if len(args) != 4 or args[:3] != ["dev", "eswitch", "show"] or not args[3].startswith("pci/"):
        return 2, "", f"fake devlink: only '[-j] dev eswitch show pci/<bdf>' is answered, got {list(argv)}\n"
    handle = args[3]
    bdf = identities.PciAddress(handle.removeprefix("pci/"))
    if not os.path.isdir(sysfs_mod.Sysfs(root).pci_device_dir(bdf)):
        return 1, "", "kernel answers: No such device\n"
    mode = fake_sysfs.FakeEswitchModes(root)(bdf)
    if mode is None:
        return 1, "", "kernel answers: Operation not supported\n"
    if json_out:
        return (
            0,
            json.dumps({"dev": {handle: {"mode": mode, "inline-mode": "none", "encap-mode": "basic"}}}),
            "",
        )
    return 0, f"{handle}: mode {mode} inline-mode none encap-mode basic\n", ""


def main(argv: Sequence[str], root: Path) -> int:
    """Print :func:`answer`'s output and return its exit status."""
    status, out, err = answer(argv, root)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return status


def install(bin_dir: Path, root: Path) -> Path:
    """Write an executable ``bin_dir/devlink`` answering from the fake tree at ``root``; its path.

    Put ``bin_dir`` first on ``PATH`` for the process that should find it.
    """
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "devlink"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "from pathlib import Path\n"
        "from sriov_dra_lab.fakes import fake_devlink\n"
        f"sys.exit(fake_devlink.main(sys.argv[1:], Path({str(root)!r})))\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script
