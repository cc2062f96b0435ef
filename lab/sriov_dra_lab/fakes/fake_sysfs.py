"""Fake PCI/SR-IOV sysfs trees and a fake kernel for them: **for tests and the local lab only**.

The plugin never imports this module in production. It builds, under any directory, the part of
``/sys`` that :mod:`sriov_dra.host.sysfs` reads, laid out as the kernel lays it out:

- ``sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0/`` — root complex, bridges, the PF; its VFs
  are siblings of the PF (same parent bridge), as on real hardware; the root bus may sit below
  other device directories (``FakePf.ancestors``), as a Hyper-V/VMBus host bridge does
  (:func:`vmbus_pf`), and a PF may have no bridge at all;
- ``numa_node`` as the kernel writes it, ``-1`` (no affinity) included, or no file at all;
- ``sys/bus/pci/devices/<bdf>`` relative symlinks into ``sys/devices``;
- per function ``vendor``, ``device``, ``class``, ``numa_node``, ``driver_override``, ``driver``
  (symlink to ``sys/bus/pci/drivers/<name>``), ``iommu_group``; per PF ``sriov_totalvfs``,
  ``sriov_numvfs``, ``virtfn<N>``; per VF ``physfn``; ``net/<ifname>/`` dirs with ``type`` and
  ``class/net/<ifname>`` symlinks; optional ``infiniband/<dev>`` dirs;
- ``sys/bus/pci/drivers/<name>/{bind,unbind}`` and ``sys/bus/pci/drivers_probe`` as plain files.

VF netdev names are only names: the lab may pick names of real veth interfaces, which the caller
creates separately through :mod:`sriov_dra_lab.fakes.net_edit`.

A fake tree has no kernel, so writes to ``bind``/``unbind``/``drivers_probe``/``driver_override``
change nothing by themselves. :class:`FakeKernelPci` is a **fake** :class:`~sriov_dra.host.vf_driver_binding.KernelPci`:
it performs the same file writes, then emulates the kernel's effect on the tree (driver links,
netdev dirs appear and disappear, ``driver_override`` matching, default-driver probing). The
facts it needs (each function's default driver and netdev name) are kept in :data:`METADATA_FILE`
at the tree root, so another process (the lab's plugin) can load them.

The PFs and VFs to create are described in :mod:`~sriov_dra_lab.fakes.fake_pci`;
this module owns the tree and the fake kernel acting on it. A PF's eswitch mode, which a real
kernel answers only through devlink, is the file :data:`ESWITCH_MODE_FILE` in the PF's directory;
:class:`FakeEswitchModes` reads it back as the plugin's eswitch-mode source
(``discovery.EswitchModeSource``, the seam ``host/devlink.py`` fills on a real host), so the
product's sysfs reader never knows the file.

It must never be pointed at a real ``/`` (every write is under the given root) and must never
be used by production code paths.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from sriov_dra.core import identities
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra.host import vf_driver_binding
from sriov_dra_lab.fakes.fake_pci import (
    FakePf,
    vf_address,
)

ESWITCH_MODE_FILE = "sriov_dra_eswitch_mode"
"""Not a kernel file: the fake trees' stand-in for devlink's eswitch answer, in a fake PF's directory.
The collection's facts module reads the same name (``sriov_dra_rules.sysfs_read``; a unit test keeps
them equal)."""

METADATA_FILE = ".sriov-dra-fake.json"
"""Fake-kernel facts at the tree root (not part of any real sysfs)."""

NETWORK_CLASS = 0x020000
BRIDGE_CLASS = 0x060400


class FakeSysfs:
    """Builder and mutator of a fake sysfs tree under ``root`` (tests and lab only)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.sysfs = sysfs_mod.Sysfs(self.root)
        self._iommu_groups = 0
        self._meta: dict[str, dict[str, object]] = {}
        for part in (("bus", "pci", "devices"), ("bus", "pci", "drivers"), ("class", "net"), ("devices",)):
            self.sysfs.path(*part).mkdir(parents=True, exist_ok=True)
        _write(self.sysfs.path("bus", "pci", "drivers_probe"), "")
        meta = self.root / METADATA_FILE
        if meta.exists():
            loaded = json.loads(meta.read_text(encoding="utf-8"))
            self._meta = dict(loaded.get("functions", {}))
            self._iommu_groups = int(loaded.get("iommu_groups", 0))

    # --- building ------------------------------------------------------------------------------

    def add_driver(self, name: str) -> Path:
        """Register driver ``name``: ``sys/bus/pci/drivers/<name>/{bind,unbind}``."""
        where = self.sysfs.driver_dir(name)
        where.mkdir(parents=True, exist_ok=True)
        for attr in ("bind", "unbind", "new_id", "remove_id"):
            if not (where / attr).exists():
                _write(where / attr, "")
        return where

    def add_function(
        self,
        bdf: str,
        parent: Path,
        *,
        vendor: str,
        device: str,
        class_code: int,
        numa_node: int | None,
        driver: str | None = None,
        default_driver: str | None = None,
    ) -> Path:
        """Create one PCI function directory under ``parent`` and its ``bus/pci/devices`` link.

        The fake-kernel facts are persisted by :meth:`add_pf` or :meth:`save`.
        """
        where = parent / bdf
        where.mkdir(parents=True, exist_ok=True)
        _write(where / "vendor", f"0x{vendor}\n")
        _write(where / "device", f"0x{device}\n")
        _write(where / "class", f"0x{class_code:06x}\n")
        _write(where / "driver_override", "(null)\n")
        if numa_node is not None:
            _write(where / "numa_node", f"{numa_node}\n")
        self._iommu_groups += 1
        group = self.sysfs.path("kernel", "iommu_groups", str(self._iommu_groups))
        group.mkdir(parents=True, exist_ok=True)
        _symlink(group, where / "iommu_group")
        _symlink(where, self.sysfs.pci_device_dir(bdf))
        self._meta.setdefault(bdf, {})["default_driver"] = default_driver
        if driver is not None:
            self.attach_driver(bdf, driver)
        return where

    def add_pf(self, pf: FakePf) -> list[identities.PciAddress]:
        """Create ``pf`` with its bridges, netdev and VFs; return the VF addresses by index."""
        parent = self.sysfs.path("devices", *pf.ancestors, pf.pcie_root)
        parent.mkdir(parents=True, exist_ok=True)
        for bridge in pf.bridges:
            if not (parent / bridge).exists():
                self.add_function(
                    bridge,
                    parent,
                    vendor=pf.vendor,
                    device="1234",
                    class_code=BRIDGE_CLASS,
                    numa_node=pf.numa_node,
                )
            parent = parent / bridge
        self.add_driver(pf.driver)
        pf_dir = self.add_function(
            pf.bdf,
            parent,
            vendor=pf.vendor,
            device=pf.device,
            class_code=NETWORK_CLASS,
            numa_node=pf.numa_node,
            default_driver=pf.driver,
        )
        _write(pf_dir / "sriov_totalvfs", f"{pf.totalvfs}\n")
        _write(pf_dir / "sriov_numvfs", f"{len(pf.vfs)}\n")
        _write(pf_dir / "sriov_offset", f"{pf.first_vf_offset}\n")
        _write(pf_dir / "sriov_stride", f"{pf.vf_stride}\n")
        if pf.eswitch_mode is not None:
            _write(pf_dir / ESWITCH_MODE_FILE, f"{pf.eswitch_mode}\n")
        self._remember_netdev(pf.bdf, pf.ifname, pf.link_type, pf.phys_port_name)
        self.attach_driver(pf.bdf, pf.driver)
        addresses: list[identities.PciAddress] = []
        for index, vf in enumerate(pf.vfs):
            vf_bdf = vf_address(pf.bdf, index, offset=pf.first_vf_offset, stride=pf.vf_stride)
            self.add_driver(vf.default_driver)
            if vf.driver is not None:
                self.add_driver(vf.driver)
            vf_dir = self.add_function(
                vf_bdf,
                parent,
                vendor=pf.vendor,
                device=pf.vf_device,
                class_code=NETWORK_CLASS,
                numa_node=pf.numa_node,
                default_driver=vf.default_driver,
            )
            _symlink(pf_dir, vf_dir / "physfn")
            _symlink(vf_dir, pf_dir / f"virtfn{index}")
            if vf.driver_override:
                _write(vf_dir / "driver_override", f"{vf.driver_override}\n")
            for rdma in vf.rdma_devices:
                (vf_dir / "infiniband" / rdma).mkdir(parents=True, exist_ok=True)
            netdev = f"{pf.ifname}v{index}" if vf.netdev is None else vf.netdev or None
            self._remember_netdev(vf_bdf, netdev, pf.link_type, None)
            if vf.driver is not None:
                self.attach_driver(vf_bdf, vf.driver)
            addresses.append(vf_bdf)
        self.save()
        return addresses

    def kernel(self) -> FakeKernelPci:
        """A fake kernel acting on this tree."""
        return FakeKernelPci(self)

    # --- kernel effects (used by FakeKernelPci) -----------------------------------------------

    def device_dir(self, bdf: str) -> Path:
        """The function's directory under ``sys/devices`` (its bus link resolved lexically)."""
        link = self.sysfs.pci_device_dir(bdf)
        return Path(os.path.normpath(link.parent / os.readlink(link)))

    def default_driver(self, bdf: str) -> str | None:
        """The driver the fake kernel's ID tables match for ``bdf`` (None: no driver matches)."""
        value = self._meta.get(bdf, {}).get("default_driver")
        return str(value) if value is not None else None

    def attach_driver(self, bdf: str, driver: str) -> None:
        """Emulate a successful probe: ``driver`` links both ways, netdev for a kernel driver."""
        device = self.device_dir(bdf)
        self.add_driver(driver)
        _symlink(self.sysfs.driver_dir(driver), device / "driver")
        _symlink(device, self.sysfs.driver_dir(driver) / bdf)
        netdev = self._meta.get(bdf, {}).get("netdev")
        if netdev is not None and driver not in vf_driver_binding.DPDK_DRIVERS:
            self._add_netdev(bdf, device, str(netdev))

    def detach_driver(self, bdf: str) -> None:
        """Emulate an unbind: drop the driver links and every netdev of the function."""
        device = self.device_dir(bdf)
        driver = self.sysfs.current_driver(bdf)
        if driver is not None:
            (self.sysfs.driver_dir(driver) / bdf).unlink(missing_ok=True)
        (device / "driver").unlink(missing_ok=True)
        for name in self.sysfs.netdevs(bdf):
            self.sysfs.path("class", "net", name).unlink(missing_ok=True)
        # The kernel removes the net/ class directory with the function's last netdev, also one
        # that was in another namespace (measured on igbvf VFs, tests/realvf).
        shutil.rmtree(device / "net", ignore_errors=True)

    def move_netdev_out(self, bdf: str) -> str:
        """Emulate moving the function's netdev into another network namespace (a Pod's).

        The host's view, as the kernel shows it: ``net/<name>`` and ``class/net/<name>`` go, but
        ``net/`` stays, empty (sysfs lists only the reader's namespace; measured on igbvf VFs,
        tests/realvf). Returns the name moved. Raises: ValueError when there is no netdev here.
        """
        names = self.sysfs.netdevs(bdf)
        if not names:
            raise ValueError(f"fake sysfs: {bdf} has no netdev in this namespace to move out")
        device = self.device_dir(bdf)
        for name in names:
            self.sysfs.path("class", "net", name).unlink(missing_ok=True)
            shutil.rmtree(device / "net" / name)
        return names[0]

    def return_netdev(self, bdf: str, name: str) -> None:
        """Emulate the function's netdev coming back into this namespace as ``name``.

        E.g. ``net1``: a Pod's netns deleted before CNI DEL hands its physical devices back to
        the host under the names they had inside (measured on igbvf VFs, tests/realvf).
        """
        self._add_netdev(bdf, self.device_dir(bdf), name)

    def _add_netdev(self, bdf: str, device: Path, name: str) -> None:
        info = self._meta[bdf]
        where = device / "net" / name
        where.mkdir(parents=True, exist_ok=True)
        _write(where / "type", f"{info.get('netdev_type', sysfs_mod.ARPHRD_ETHER)}\n")
        if info.get("phys_port_name"):
            _write(where / "phys_port_name", f"{info['phys_port_name']}\n")
        _symlink(device, where / "device")
        _symlink(where, self.sysfs.path("class", "net", name))

    def _remember_netdev(self, bdf: str, name: str | None, link_type: int, port: str | None) -> None:
        entry = self._meta.setdefault(bdf, {})
        entry.update({"netdev": name, "netdev_type": link_type, "phys_port_name": port})

    def save(self) -> None:
        """Persist the fake-kernel facts to :data:`METADATA_FILE` (``add_pf`` does this itself)."""
        payload = {"version": 1, "iommu_groups": self._iommu_groups, "functions": self._meta}
        (self.root / METADATA_FILE).write_text(
            json.dumps(payload, sort_keys=True, indent=1), encoding="utf-8"
        )


def build(root: Path, pfs: Sequence[FakePf], *, drivers: Sequence[str] = ("vfio-pci",)) -> FakeSysfs:
    """Build a tree with ``pfs`` and the extra registered ``drivers``; return its builder."""
    fake = FakeSysfs(root)
    for name in drivers:
        fake.add_driver(name)
    for pf in pfs:
        fake.add_pf(pf)
    return fake


class FakeKernelPci:
    """FAKE kernel for a fake tree: writes like :class:`~sriov_dra.host.vf_driver_binding.SysfsKernelPci`,
    then applies what Linux would do (tests and lab only).

    Emulated rules: ``unbind`` needs the device bound to that driver (else ``ENODEV``); ``bind``
    needs an unbound device (else ``EBUSY``) that the driver matches — the override names it, or
    no override is set and it is the device's default driver (else ``ENODEV``); an unregistered
    driver has no ``bind`` file (``ENOENT``); ``drivers_probe`` binds an unbound device to its
    override, or without one to its default driver, if registered; ``driver_override`` reads
    back ``(null)`` once cleared. ``calls`` records ``(op, bdf, value)``; :meth:`fail_next`
    makes the next matching call raise before it writes anything.
    """

    def __init__(self, fake: FakeSysfs) -> None:
        self.fake = fake
        self.calls: list[tuple[str, str, str]] = []
        self._writer = vf_driver_binding.SysfsKernelPci(fake.sysfs)
        self._failures: dict[tuple[str, str], int] = {}

    def fail_next(self, op: str, bdf: str, err: int = errno.EIO) -> None:
        """Make the next ``op`` (``bind``/``unbind``/``probe``/``set_driver_override``) on ``bdf`` fail."""
        self._failures[(op, bdf)] = err

    def set_driver_override(self, bdf: str, driver: str) -> None:
        self._enter("set_driver_override", bdf, driver)
        self._writer.set_driver_override(bdf, driver)
        if not driver:
            _write(self.fake.sysfs.pci_device_dir(bdf) / "driver_override", "(null)\n")

    def unbind(self, bdf: str, driver: str) -> None:
        self._enter("unbind", bdf, driver)
        self._writer.unbind(bdf, driver)
        if self.fake.sysfs.current_driver(bdf) != driver:
            raise OSError(errno.ENODEV, os.strerror(errno.ENODEV), bdf)
        self.fake.detach_driver(bdf)

    def bind(self, bdf: str, driver: str) -> None:
        self._enter("bind", bdf, driver)
        self._writer.bind(bdf, driver)
        if self.fake.sysfs.current_driver(bdf) is not None:
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), bdf)
        if self._match(bdf) != driver:
            raise OSError(errno.ENODEV, os.strerror(errno.ENODEV), bdf)
        self.fake.attach_driver(bdf, driver)

    def probe(self, bdf: str) -> None:
        self._enter("probe", bdf, "")
        self._writer.probe(bdf)
        if self.fake.sysfs.current_driver(bdf) is not None:
            return
        driver = self._match(bdf)
        if driver is not None and self.fake.sysfs.driver_dir(driver).is_dir():
            self.fake.attach_driver(bdf, driver)

    def _match(self, bdf: str) -> str | None:
        override = self.fake.sysfs.driver_override(bdf)
        return override if override else self.fake.default_driver(bdf)

    def _enter(self, op: str, bdf: str, value: str) -> None:
        self.calls.append((op, bdf, value))
        err = self._failures.pop((op, bdf), None)
        if err is not None:
            raise OSError(err, os.strerror(err), bdf)


class FakeEswitchModes:
    """The fake tree's eswitch-mode source for the plugin (``discovery.EswitchModeSource``).

    Called with a PF address; returns the text of :data:`ESWITCH_MODE_FILE` in that PF's
    directory under ``root`` (stripped; discovery maps values other than ``legacy``/``switchdev``
    to ``legacy`` with a warning), or None when the tree has no such file (then ``legacy``), as
    ``host/devlink.py`` answers for the host's own devices.
    """

    def __init__(self, root: Path) -> None:
        self.sysfs = sysfs_mod.Sysfs(Path(root))

    def __call__(self, pf_bdf: identities.PciAddress) -> str | None:
        try:
            text = (self.sysfs.pci_device_dir(pf_bdf) / ESWITCH_MODE_FILE).read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError):
            return None
        return text.strip() or None


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="ascii")


def _symlink(target: Path, link: Path) -> None:
    """Create (or replace) ``link`` as a relative symlink to ``target``, as sysfs does."""
    if link.is_symlink():
        link.unlink()
    os.symlink(os.path.relpath(target, link.parent), link)
