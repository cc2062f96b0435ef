"""What a fake sysfs tree holds: the PFs and VFs to create, and the lab's standard node layouts.

**For tests and the local lab only.** This module owns the descriptions
:func:`~sriov_dra_lab.fakes.fake_sysfs.build` lays out: :class:`FakePf` (IDs, driver, NUMA node,
bridges and the device directories above its root bus, SR-IOV routing-ID offset and stride) and
:class:`FakeVf` (driver bound now, default driver, netdev name, RDMA devices), the VF address the
kernel's routing-ID rule gives, and the node layouts tests and the lab share (two PFs under two
root complexes; a Hyper-V PF under VMBus).

It must never write a file; the tree is :mod:`~sriov_dra_lab.fakes.fake_sysfs`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sriov_dra.core import identities
from sriov_dra.host import sysfs as sysfs_mod


@dataclass(frozen=True)
class FakeVf:
    """One VF to create.

    ``driver`` is the driver bound now (None = unbound); ``default_driver`` the one the fake
    kernel's ID tables match; ``netdev`` the name a netdevice driver gives it (None means
    ``<pf ifname>v<index>``, ``""`` means its drivers create no netdev).
    """

    driver: str | None = "iavf"
    default_driver: str = "iavf"
    netdev: str | None = None
    rdma_devices: tuple[str, ...] = ()
    driver_override: str = ""


@dataclass(frozen=True)
class FakePf:
    """One SR-IOV PF to create, under ``pcie_root`` and the chain of ``bridges``.

    Shapes: ``ancestors`` lists the device directories between ``sys/devices`` and the root bus
    (empty: the root bus is ``sys/devices/<pcie_root>``, the plain layout); ``bridges`` lists
    bridge BDFs from the root port down (may be empty); ``numa_node`` is the ``numa_node`` file's
    number (``-1``: the kernel's "no affinity"; None: no file); VF addresses follow the SR-IOV
    routing-ID rule (PF RID + ``first_vf_offset`` + index × ``vf_stride``).
    """

    bdf: str
    ifname: str
    pcie_root: str = "pci0000:00"
    bridges: tuple[str, ...] = ("0000:00:01.0",)
    vendor: str = "8086"
    device: str = "1592"
    vf_device: str = "1889"
    driver: str = "ice"
    numa_node: int | None = 0
    link_type: int = sysfs_mod.ARPHRD_ETHER
    eswitch_mode: str | None = None
    phys_port_name: str | None = None
    totalvfs: int = 128
    vfs: tuple[FakeVf, ...] = ()
    first_vf_offset: int = 16
    vf_stride: int = 1
    ancestors: tuple[str, ...] = ()


def vf_address(pf_bdf: str, index: int, *, offset: int = 16, stride: int = 1) -> identities.PciAddress:
    """The VF address the kernel would give VF ``index`` of ``pf_bdf``.

    Raises: ValueError if the routing ID leaves the PF's 256-bus range.
    """
    domain, bus, rest = pf_bdf.split(":")
    dev, fn = rest.split(".")
    rid = (int(bus, 16) << 8) + (int(dev, 16) << 3) + int(fn, 16) + offset + index * stride
    if rid > 0xFFFF:
        raise ValueError(f"VF {index} of {pf_bdf} would need bus {rid >> 8:#x}; use fewer VFs")
    return identities.PciAddress(f"{domain}:{rid >> 8:02x}:{(rid >> 3) & 0x1F:02x}.{rid & 7}")


def make_vfs(
    count: int,
    *,
    driver: str | None = "iavf",
    default_driver: str = "iavf",
    netdevs: Sequence[str] | None = None,
    rdma_devices: Sequence[str] | None = None,
) -> tuple[FakeVf, ...]:
    """``count`` identical VFs; ``netdevs[i]`` (e.g. real veth names) names VF i's netdev and
    ``rdma_devices[i]`` its one RDMA device (``mlx5_4``)."""
    for given, what in ((netdevs, "netdev"), (rdma_devices, "RDMA device")):
        if given is not None and len(given) != count:
            raise ValueError(f"got {len(given)} {what} names for {count} VFs")
    return tuple(
        FakeVf(
            driver=driver,
            default_driver=default_driver,
            netdev=None if netdevs is None else netdevs[i],
            rdma_devices=() if rdma_devices is None else (rdma_devices[i],),
        )
        for i in range(count)
    )


def two_root_pfs(
    vfs_per_pf: int = 4, *, netdevs: tuple[Sequence[str], Sequence[str]] | None = None
) -> tuple[FakePf, FakePf]:
    """The lab's default node: one Intel E810-style PF under each of ``pci0000:00`` and ``pci0000:80``.

    Shapes: PF ``0000:03:00.0`` (``enp3s0f0``, NUMA 0) behind root port ``0000:00:01.0``; PF
    ``0000:81:00.0`` (``enp129s0f0``, NUMA 1) behind root port ``0000:80:01.0``.
    """
    first = make_vfs(vfs_per_pf, netdevs=None if netdevs is None else netdevs[0])
    second = make_vfs(vfs_per_pf, netdevs=None if netdevs is None else netdevs[1])
    return (
        FakePf(bdf="0000:03:00.0", ifname="enp3s0f0", vfs=first),
        FakePf(
            bdf="0000:81:00.0",
            ifname="enp129s0f0",
            pcie_root="pci0000:80",
            bridges=("0000:80:01.0",),
            numa_node=1,
            vfs=second,
        ),
    )


VMBUS_ANCESTORS = ("LNXSYSTM:00", "LNXSYBUS:00", "ACPI0004:00", "VMBUS:00")
"""ACPI and VMBus device directories above the PCI host bridges of a Hyper-V guest (one per device)."""


def vmbus_pf(vfs: int = 2, *, numa_node: int | None = 0) -> FakePf:
    """A PF passed through by Hyper-V: its root bus under VMBus, no bridge, domain ``0001``.

    Shapes: PF ``0001:00:00.0`` (``enP1s0f0``, Mellanox ConnectX-style IDs) at
    ``sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/<guid>/pci0001:00/0001:00:00.0``,
    the layout of ``hv_pci`` (one host bridge per device instance GUID, the PCI domain taken
    from the GUID's second group); its VFs are siblings of the PF under ``pci0001:00``.
    """
    return FakePf(
        bdf="0001:00:00.0",
        ifname="enP1s0f0",
        pcie_root="pci0001:00",
        bridges=(),
        ancestors=(*VMBUS_ANCESTORS, "5d2a1f4e-0001-4d2c-9a1b-6c3e8f7a9b01"),
        vendor="15b3",
        device="1017",
        vf_device="1018",
        driver="mlx5_core",
        numa_node=numa_node,
        vfs=make_vfs(vfs, driver="mlx5_core", default_driver="mlx5_core"),
        first_vf_offset=1,
    )
