"""Raw sysfs facts of the guest's real igb PFs and igbvf VFs, read with plain ``os`` calls.

The independent answer the realvf guest tests compare the product code with, plus the helpers
that put the VFs back to the session baseline. Imported only inside the guest.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SYS_PCI = Path("/sys/bus/pci/devices")
NUM_VFS = 4
VF_DRIVER = "igbvf"
ROOTS = {"pci0000:20": 0, "pci0000:40": 1}
"""PCIe root of each igb PF -> the NUMA node QEMU gave its pxb-pcie bus (vm.qemu_argv)."""
SESSION_WRITES: dict[str, list[str]] = {}
"""PF address -> the writes the session fixture's ``numvfs.converge`` made (test_numvfs checks)."""
HELD: set[str] = set()
"""VF addresses a module-scoped fixture keeps inside a Pod netns across its module's tests (the
chain's VF in use, guest/test_cni_chain.py); the autouse baseline check skips them until the
fixture gives them back and discards them here."""


def collection_module_utils() -> object:
    """The collection's ``module_utils`` package, imported from this checkout.

    Python imports a collection only from a path ending in ``ansible_collections/<ns>/<name>``:
    a temporary directory holds that path as a symlink to the repository.
    """
    root = Path(tempfile.mkdtemp(prefix="realvf-collection-"))
    (root / "ansible_collections" / "sriovnet").mkdir(parents=True)
    (root / "ansible_collections" / "sriovnet" / "dra").symlink_to(REPO)
    sys.path.insert(0, str(root))
    from ansible_collections.sriovnet.dra.plugins import module_utils

    return module_utils


@dataclass(frozen=True)
class RealPf:
    """One igb PF as raw sysfs shows it."""

    bdf: str
    ifname: str
    pcie_root: str
    numa_node: int
    totalvfs: int


@dataclass(frozen=True)
class RawVf:
    """One VF as raw sysfs shows it: ``net`` is None when the function has no ``net/`` directory."""

    bdf: str
    index: int
    pf_bdf: str
    pcie_root: str
    numa_node: int
    driver: str | None
    net: tuple[str, ...] | None
    device_id: str


def read(path: Path) -> str:
    return path.read_text().strip()


def pcie_root_of(bdf: str) -> str:
    """First component under ``/sys/devices`` of the function's real path (``pci0000:20``)."""
    return Path(os.path.realpath(SYS_PCI / bdf)).relative_to("/sys/devices").parts[0]


def driver_of(bdf: str) -> str | None:
    link = SYS_PCI / bdf / "driver"
    return os.path.basename(os.readlink(link)) if link.is_symlink() else None


def raw_pfs() -> list[RealPf]:
    """The igb PFs, sorted by address."""
    out = []
    for bdf in sorted(os.listdir("/sys/bus/pci/drivers/igb")):
        if ":" not in bdf:
            continue
        dev = SYS_PCI / bdf
        out.append(
            RealPf(
                bdf=bdf,
                ifname=sorted(os.listdir(dev / "net"))[0],
                pcie_root=pcie_root_of(bdf),
                numa_node=int(read(dev / "numa_node")),
                totalvfs=int(read(dev / "sriov_totalvfs")),
            )
        )
    return out


def raw_vfs(pf: RealPf) -> list[RawVf]:
    """Every VF of ``pf`` through its ``virtfn<N>`` links, by index."""
    dev = SYS_PCI / pf.bdf
    links = sorted((int(n[len("virtfn") :]), n) for n in os.listdir(dev) if n.startswith("virtfn"))
    return [raw_vf(os.path.basename(os.readlink(dev / name)), index) for index, name in links]


def raw_vf(bdf: str, index: int = -1) -> RawVf:
    dev = SYS_PCI / bdf
    net = tuple(sorted(os.listdir(dev / "net"))) if (dev / "net").is_dir() else None
    return RawVf(
        bdf=bdf,
        index=index,
        pf_bdf=os.path.basename(os.readlink(dev / "physfn")),
        pcie_root=pcie_root_of(bdf),
        numa_node=int(read(dev / "numa_node")),
        driver=driver_of(bdf),
        net=net,
        device_id=read(dev / "device").removeprefix("0x"),
    )


def vf_table_line(pf: str, index: int) -> str:
    """The VF's settings in the ``vf <index> ...`` line of ``ip link show <pf>`` (iproute2's rendering
    of the PF's VF table: ``vlan N`` when set, ``spoof checking on|off``, link state, ``trust
    on|off``), read independently of the product's and the stand-in's netlink code.

    The MAC part is left out: with the PF up, igb records there the MAC the VF reported after its
    last reset (a VF brought up in a Pod changes it), not a setting the CNI step makes; sriov-cni
    v2.10.0 writes the administrative MAC only for a config that sets ``mac``.
    """
    text = subprocess.run(["ip", "link", "show", pf], capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        if re.match(rf"\s*vf {index}\b", line):
            return re.sub(r"\s*link/ether \S+ brd \S+,?", "", line.strip())
    raise AssertionError(f"no vf {index} line in ip link show {pf}:\n{text}")


def wait_until(what: str, predicate: Callable[[], object], timeout_s: float = 60.0) -> None:
    """Poll ``predicate`` until true; fail naming ``what`` after ``timeout_s`` (TCG is slow)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.05)


def write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def vfs_ready(pf: RealPf) -> bool:
    vfs = raw_vfs(pf)
    return len(vfs) == NUM_VFS and all(v.driver == VF_DRIVER and v.net for v in vfs)


def restore_baseline(pfs: list[RealPf]) -> None:
    """Every VF back to igbvf with its netdev in this namespace; the VF count back to 4."""
    from sriov_dra.host import netlink
    from sriov_dra_lab.fakes import net_edit

    for name in os.listdir(netlink.NETNS_RUN_DIR) if netlink.NETNS_RUN_DIR.is_dir() else []:
        with contextlib.suppress(netlink.NetlinkError):
            net_edit.remove_netns(name)
    for pf in pfs:
        if int(read(SYS_PCI / pf.bdf / "sriov_numvfs")) != NUM_VFS:
            write(SYS_PCI / pf.bdf / "sriov_numvfs", "0")
            write(SYS_PCI / pf.bdf / "sriov_numvfs", str(NUM_VFS))
        for vf in raw_vfs(pf):
            if vf.driver != VF_DRIVER:
                write(SYS_PCI / vf.bdf / "driver_override", "\n")
                if vf.driver is not None:
                    write(Path("/sys/bus/pci/drivers") / vf.driver / "unbind", vf.bdf)
                write(Path("/sys/bus/pci/drivers_probe"), vf.bdf)
        wait_until(f"the VFs of {pf.ifname} back on igbvf with netdevs", lambda pf=pf: vfs_ready(pf))
