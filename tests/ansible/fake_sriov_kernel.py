"""FAKE SR-IOV kernel for fake sysfs trees: VF creation/removal on ``sriov_numvfs`` writes.

**Tests and molecule scenarios only.** ``sriov_dra_lab.fakes.fake_sysfs`` builds trees and emulates
driver binding; a plain file cannot react to a write of ``sriov_numvfs``, so this module adds the
kernel's SR-IOV rules (``drivers/pci/iov.c`` ``sriov_numvfs_store``):

- equal count: no-op; above ``sriov_totalvfs``: ``ERANGE``; non-zero to another non-zero:
  ``EBUSY``; 0 → N creates N VFs (siblings of the PF, routing-ID addresses from
  ``sriov_offset``/``sriov_stride``, ``physfn``/``virtfn<N>`` links, default VF driver bound,
  netdev ``<pf>v<N>``); N → 0 removes them;
- :meth:`FakeSriovKernel.fail_next` scripts the next write to a path to fail with an errno
  (EBUSY after a reset to 0, ENOSPC, ENOENT, ...), before anything changes.

Two ways to drive it: :meth:`FakeSriovKernel.write` is the ``writer`` seam of the collection's
``numvfs`` module_utils (unit tests), and ``python -m tests.ansible.fake_sriov_kernel serve``
polls a tree whose files a real module process writes (molecule), applying the same rules
after the fact: a refused change is undone by putting the old count back into the file.

It must never be pointed at a real ``/sys``: every path it touches is under the given root.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from sriov_dra_lab.fakes import fake_pci, fake_sysfs

DEFAULT_VF_DRIVER = {"ice": "iavf", "i40e": "iavf", "ixgbe": "ixgbevf", "mlx5_core": "mlx5_core"}
"""PF driver -> the VF driver the fake kernel binds new VFs to (``iavf`` otherwise)."""


class FakeSriovKernel:
    """A fake kernel for one fake tree: SR-IOV count changes plus fake_sysfs's driver binding."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.fake = fake_sysfs.FakeSysfs(self.root)
        self.pci = self.fake.kernel()
        self.calls: list[tuple[str, str]] = []
        self._failures: dict[tuple[str, str | None], int] = {}

    def fail_next(self, path: str, err: int, value: str | None = None) -> None:
        """Make the next write to ``path`` (of ``value``, if given) raise ``OSError(err)``, changing nothing."""
        self._failures[(str(path), value)] = err

    # --- the writer seam ----------------------------------------------------------------------

    def write(self, path: str, text: str) -> None:
        """Write like the kernel: apply the effect of ``text`` on ``path`` or raise ``OSError``."""
        path = str(path)
        self.calls.append((path, text))
        err = self._failures.pop((path, text.strip()), None)
        if err is None:
            err = self._failures.pop((path, None), None)
        if err is not None:
            raise OSError(err, os.strerror(err), path)
        name = os.path.basename(path)
        value = text.strip()
        parent = os.path.dirname(path)
        if name == "sriov_numvfs":
            self.set_numvfs(os.path.basename(parent), int(value))
        elif name == "driver_override":
            self.pci.set_driver_override(os.path.basename(parent), value)
        elif name in ("bind", "unbind"):
            driver = os.path.basename(parent)
            (self.pci.bind if name == "bind" else self.pci.unbind)(value, driver)
        else:
            raise OSError(errno.EACCES, f"fake kernel: no rule for writing {path}", path)

    # --- SR-IOV rules -------------------------------------------------------------------------

    def set_numvfs(self, pf_bdf: str, count: int) -> None:
        """``sriov_numvfs_store``: equal no-op, ERANGE above total, EBUSY non-zero to non-zero."""
        sysfs = self.fake.sysfs
        current = len(sysfs.virtfns(pf_bdf))
        total = sysfs.sriov_totalvfs(pf_bdf) or 0
        if count == current:
            return
        if count > total:
            raise OSError(errno.ERANGE, os.strerror(errno.ERANGE), pf_bdf)
        if current and count:
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), pf_bdf)
        if count == 0:
            self._remove_vfs(pf_bdf)
        else:
            self._create_vfs(pf_bdf, count)
        Path(sysfs.device_path(pf_bdf, "sriov_numvfs")).write_text(f"{count}\n", encoding="ascii")
        self.fake.save()

    def _create_vfs(self, pf_bdf: str, count: int) -> None:
        sysfs = self.fake.sysfs
        pf_dir = self.fake.device_dir(pf_bdf)
        offset = _read_int(pf_dir / "sriov_offset", 16)
        stride = _read_int(pf_dir / "sriov_stride", 1)
        vf_device = (
            (pf_dir / "sriov_vf_device").read_text().strip()
            if (pf_dir / "sriov_vf_device").exists()
            else "1889"
        )
        driver = DEFAULT_VF_DRIVER.get(sysfs.current_driver(pf_bdf) or "", "iavf")
        ifname = sysfs.pf_netdev(pf_bdf) or pf_bdf
        numa = sysfs.numa_node(pf_bdf)
        link_type = _read_int(Path(sysfs.sys_path("class", "net", ifname, "type")), 1)
        self.fake.add_driver(driver)
        for index in range(count):
            vf = fake_pci.vf_address(pf_bdf, index, offset=offset, stride=stride)
            vf_dir = self.fake.add_function(
                vf,
                pf_dir.parent,
                vendor=sysfs.vendor(pf_bdf) or "8086",
                device=vf_device,
                class_code=fake_sysfs.NETWORK_CLASS,
                numa_node=numa,
                default_driver=driver,
            )
            os.symlink(os.path.relpath(pf_dir, vf_dir), vf_dir / "physfn")
            os.symlink(os.path.relpath(vf_dir, pf_dir), pf_dir / f"virtfn{index}")
            # fake_sysfs keeps each function's netdev name in its metadata; attach_driver reads it.
            self.fake._remember_netdev(vf, f"{ifname}v{index}", link_type, None)
            self.fake.attach_driver(vf, driver)

    def _remove_vfs(self, pf_bdf: str) -> None:
        sysfs = self.fake.sysfs
        pf_dir = self.fake.device_dir(pf_bdf)
        for index, vf in [(link.index, link.bdf) for link in sysfs.virtfns(pf_bdf)]:
            vf_dir = self.fake.device_dir(vf)
            self.fake.detach_driver(vf)
            Path(sysfs.device_path(vf)).unlink()
            (pf_dir / f"virtfn{index}").unlink()
            shutil.rmtree(vf_dir)

    # --- polling a tree that a real process writes (molecule) ---------------------------------

    def reconcile(self) -> None:
        """Apply each PF's ``sriov_numvfs`` file content as if it had just been written."""
        sysfs = self.fake.sysfs
        for bdf in sysfs.pci_devices():
            path = Path(sysfs.device_path(bdf, "sriov_numvfs"))
            try:
                wanted = int(path.read_text().strip())
            except (OSError, ValueError):
                continue  # absent, or caught between a writer's truncate and its write
            current = len(sysfs.virtfns(bdf))
            if wanted == current:
                continue
            try:
                self.set_numvfs(bdf, wanted)
            except OSError:
                path.write_text(f"{current}\n", encoding="ascii")  # the kernel refused: count unchanged


def _read_int(path: Path, default: int) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return default


def build(root: Path, layout: str) -> dict[str, object]:
    """Build a named tree layout under ``root``; return its description (PF names and counts)."""
    if layout == "two-roots":
        first, second = fake_pci.two_root_pfs(0)
        pfs = (first, dataclasses.replace(second, vfs=fake_pci.make_vfs(2), totalvfs=8))
    else:
        raise SystemExit(f"unknown layout {layout!r}")
    fake_sysfs.build(root, pfs)
    return {"root": str(root), "pfs": {pf.ifname: {"bdf": pf.bdf, "num_vfs": len(pf.vfs)} for pf in pfs}}


def serve(root: Path, pidfile: Path, max_seconds: float, interval_s: float = 0.02) -> None:
    """Poll ``root`` until SIGTERM, ``max_seconds`` or the tree's removal."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    pidfile.write_text(f"{os.getpid()}\n")
    kernel = FakeSriovKernel(root)
    deadline = time.monotonic() + max_seconds
    try:
        while not stop.is_set() and time.monotonic() < deadline and root.is_dir():
            kernel.reconcile()
            stop.wait(interval_s)
    finally:
        pidfile.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="fake SR-IOV kernel for fake sysfs trees (tests only)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--root", type=Path, required=True)
    b.add_argument("--layout", default="two-roots")
    s = sub.add_parser("serve")
    s.add_argument("--root", type=Path, required=True)
    s.add_argument("--pidfile", type=Path, required=True)
    s.add_argument("--max-seconds", type=float, default=900.0)
    s.add_argument("--daemonize", action="store_true")
    args = parser.parse_args(argv)
    if args.cmd == "build":
        print(json.dumps(build(args.root, args.layout)))
        return 0
    if args.daemonize and os.fork():
        return 0
    if args.daemonize:
        os.setsid()
        if os.fork():
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
    serve(args.root, args.pidfile, args.max_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
