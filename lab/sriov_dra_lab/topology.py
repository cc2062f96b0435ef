"""One simulated node's machine: fake SR-IOV hardware, its own network and mount namespaces.

Owns everything that makes a lab node look like a real node to the processes that run "on" it:

- a **fake sysfs tree** (``<node>/sysfs``) with two Mellanox-style PFs, ``ens1f0`` under PCIe root
  ``pci0000:00`` and ``ens2f0`` under ``pci0000:80`` (the gpu-nic-pairs example's PF names,
  vendor ``15b3``), each with ``vfs_per_pf`` VFs bound to ``mlx5_core``, each VF with one RDMA
  device (``mlx5_2`` …, :func:`vf_rdma_device`);
- a **node network namespace** holding one veth pair per VF: the VF end carries the VF's netdev
  name from the fake tree (``ens1f0v0`` …), the peer end (``…p``) stays beside it. The lab
  ``sriov`` CNI plugin moves a VF end into a Pod's namespace exactly as sriov-cni moves a VF;
  each PF's interface is a veth pair too (``ens1f0``/``ens1f0p``, both up), so the plugin reads
  its carrier through netlink as it reads a real PF's (device health, ``host/vf_health_reader.py``);
- a **node mount namespace** (persisted as a bind-mounted file, like ``ip netns``) in which the
  node's own directories are mounted over ``/etc/cni/net.d``, ``/opt/cni/bin``, ``/var/lib/cni``,
  ``/run/multus`` and the service-account directory, so Multus (thin and thick), whereabouts
  (whose flat file path is fixed) and host-local
  find per-node files at their standard paths; mounts made on the host later (Pod namespaces
  under ``/run/netns``) still propagate in (``slave`` propagation).

Everything a node runs (plugin, guard, Multus, CNI plugins) is started through
:meth:`NodeMachine.exec_prefix`, i.e. inside both namespaces. The API server listens on the host's
loopback only, so :mod:`sriov_dra_lab.api_proxy` relays the same port into the node namespace.

Creates only what it names (netns ``sdl<lab id>-<node>``, mount-ns files under the lab work
directory) and removes exactly that. Empty mount points (the :data:`NODE_MOUNTS`) are created on
the host if missing; nothing is ever written into them outside a node mount namespace. Must never touch the host's own CNI files or links.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sriov_dra_lab import iproute
from sriov_dra_lab.fakes import fake_pci, fake_sysfs

log = logging.getLogger(__name__)

VENDOR: Final = "15b3"
PF_DEVICE: Final = "101d"
VF_DEVICE: Final = "101e"
NIC_DRIVER: Final = "mlx5_core"

#: (PF netdev, PF BDF, PCIe root, root port, NUMA node) of the two rails of every lab node.
RAILS: Final = (
    ("ens1f0", "0000:03:00.0", "pci0000:00", "0000:00:01.0", 0),
    ("ens2f0", "0000:81:00.0", "pci0000:80", "0000:80:01.0", 1),
)

#: Host paths (inside the node mount namespace) that get a per-node directory mounted over them.
NODE_MOUNTS: Final = (
    "/etc/cni/net.d",
    "/opt/cni/bin",
    "/var/lib/cni",
    "/run/multus",
    "/var/run/secrets/kubernetes.io/serviceaccount",
)
"""The last one holds thick Multus's in-cluster credentials (its daemon reads no kubeconfig)."""


class TopologyError(RuntimeError):
    """A node's namespaces or hardware could not be set up; the message names the step and the fix."""


@dataclass(frozen=True)
class LabVf:
    """One VF of a lab node: its fake PCI address and the veth end standing in for its netdev.

    Shapes: ``pci`` a BDF like ``0000:03:00.2``; ``ifname`` and ``peer`` at most 15 bytes.
    """

    pf: str
    index: int
    pci: str
    pcie_root: str
    ifname: str
    peer: str


@dataclass(frozen=True)
class NodeLayout:
    """Where one node's files live on the host, and the names of its namespaces.

    Shapes: ``root`` is ``<workdir>/nodes/<name>``; ``logs`` is ``<workdir>/logs/<name>``; ``run_root`` a short directory for unix
    sockets (``/run/sdl-<lab id>/<name>``: socket paths must stay under 108 bytes wherever the
    work directory is); every path below is a host path (also valid inside the node's
    namespaces). ``host_dir(mount)`` maps a :data:`NODE_MOUNTS` entry to the node directory
    mounted over it.
    """

    name: str
    index: int
    root: Path
    run_root: Path
    lab_id: str

    @classmethod
    def for_node(cls, workdir: Path, lab_id: str, name: str, index: int) -> NodeLayout:
        """The layout of node ``name`` (1-based ``index``) of the lab ``lab_id`` in ``workdir``."""
        return cls(
            name=name,
            index=index,
            root=workdir / "nodes" / name,
            run_root=run_root(lab_id) / name,
            lab_id=lab_id,
        )

    @property
    def sysfs_root(self) -> Path:
        """The fake sysfs tree (``<root>/sysfs/sys/...``)."""
        return self.root / "sysfs"

    def host_dir(self, mount: str) -> Path:
        """The node directory mounted over ``mount`` inside the node mount namespace."""
        return self.root / "fs" / mount.strip("/")

    @property
    def cni_conf_dir(self) -> Path:
        """The node's ``/etc/cni/net.d`` (host path)."""
        return self.host_dir("/etc/cni/net.d")

    @property
    def cni_bin_dir(self) -> Path:
        """The node's ``/opt/cni/bin`` (host path)."""
        return self.host_dir("/opt/cni/bin")

    @property
    def cni_state_dir(self) -> Path:
        """The node's ``/var/lib/cni`` (host path): host-local reservations, Multus cache."""
        return self.host_dir("/var/lib/cni")

    @property
    def kubelet_dir(self) -> Path:
        """The kubelet's directory: ``plugins/`` and ``plugins_registry/`` (host path)."""
        return self.run_root / "kubelet"

    @property
    def plugins_dir(self) -> Path:
        """Parent of each DRA driver's socket directory."""
        return self.kubelet_dir / "plugins"

    @property
    def registry_dir(self) -> Path:
        """The kubelet plugin registry the simulator scans."""
        return self.kubelet_dir / "plugins_registry"

    @property
    def cdi_root(self) -> Path:
        """Where the plugin writes CDI specs."""
        return self.root / "var" / "run" / "cdi"

    @property
    def plugin_state_dir(self) -> Path:
        """The plugin's state directory (``checkpoint.json``)."""
        return self.root / "var" / "lib" / "sriov-dra"

    @property
    def kubelet_state_dir(self) -> Path:
        """The kubelet simulator's own checkpoint (prepared claims, sandboxes)."""
        return self.root / "var" / "lib" / "kubelet-sim"

    @property
    def vf_map(self) -> Path:
        """The lab ``sriov`` plugin's ``{pci: ifname}`` map."""
        return self.root / "lab-sriov" / "vf-map.json"

    @property
    def lab_sriov_state(self) -> Path:
        """The lab ``sriov`` plugin's state directory."""
        return self.root / "lab-sriov" / "state"

    @property
    def guard_socket(self) -> Path:
        """The guard daemon's unix socket."""
        return self.run_root / "guard" / "multus-guard.sock"

    @property
    def logs(self) -> Path:
        """Logs of the node's processes: ``<workdir>/logs/<name>`` (all lab logs live under ``<workdir>/logs``)."""
        return self.root.parent.parent / "logs" / self.name

    @property
    def netns_name(self) -> str:
        """The node network namespace's name (``/var/run/netns/<name>``)."""
        return f"sdl{self.lab_id}-{self.name}"

    @property
    def netns_path(self) -> str:
        """Path of the node network namespace."""
        return str(iproute.NETNS_DIR / self.netns_name)

    @property
    def mountns_file(self) -> Path:
        """The file the node mount namespace is bound to (under the private ``ns`` mount)."""
        return self.root.parent.parent / "ns" / self.name


def run_root(lab_id: str) -> Path:
    """The lab's short socket directory: ``/run/sdl-<lab id>``."""
    return Path("/run") / f"sdl-{lab_id}"


def vf_ifname(pf: str, index: int) -> str:
    """The VF's netdev name (also what the fake sysfs reports): ``<pf>v<index>``."""
    return f"{pf}v{index}"


def plan_vfs(vfs_per_pf: int) -> list[LabVf]:
    """The VFs every lab node gets, rail A then rail B, by index.

    Shapes: ``vfs_per_pf`` VFs per PF; PCI addresses follow the SR-IOV routing-ID rule of
    :func:`sriov_dra_lab.fakes.fake_sysfs.vf_address` (first VF offset 2, stride 1, as ConnectX).
    """
    out: list[LabVf] = []
    for pf, bdf, root, _port, _numa in RAILS:
        for index in range(vfs_per_pf):
            name = vf_ifname(pf, index)
            pci = str(fake_pci.vf_address(bdf, index, offset=2, stride=1))
            out.append(LabVf(pf=pf, index=index, pci=pci, pcie_root=root, ifname=name, peer=f"{name}p"))
    return out


def vf_rdma_device(rail: int, index: int, vfs_per_pf: int) -> str:
    """The RDMA device of VF ``index`` of rail ``rail``, numbered after the PFs' ``mlx5_0``/``mlx5_1``
    as mlx5_core numbers them: ``mlx5_2`` … across both rails (the NCCL hints name them)."""
    return f"mlx5_{len(RAILS) + rail * vfs_per_pf + index}"


def fake_pfs(vfs_per_pf: int) -> list[fake_pci.FakePf]:
    """The two fake PFs of a lab node (see the module docstring)."""
    pfs = []
    for rail, (pf, bdf, root, port, numa) in enumerate(RAILS):
        vfs = fake_pci.make_vfs(
            vfs_per_pf,
            driver=NIC_DRIVER,
            default_driver=NIC_DRIVER,
            netdevs=[vf_ifname(pf, i) for i in range(vfs_per_pf)],
            rdma_devices=[vf_rdma_device(rail, i, vfs_per_pf) for i in range(vfs_per_pf)],
        )
        pfs.append(
            fake_pci.FakePf(
                bdf=bdf,
                ifname=pf,
                pcie_root=root,
                bridges=(port,),
                vendor=VENDOR,
                device=PF_DEVICE,
                vf_device=VF_DEVICE,
                driver=NIC_DRIVER,
                numa_node=numa,
                # the fake firmware limit: 16, or more when a lab asks for more (bench/pod_start.py: 32)
                totalvfs=max(16, vfs_per_pf),
                vfs=vfs,
                first_vf_offset=2,
                vf_stride=1,
            )
        )
    return pfs


def _run(argv: Sequence[str], what: str) -> None:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise TopologyError(
            f"{what} failed: `{' '.join(argv)}` exited {proc.returncode}: {proc.stderr.strip()} "
            "(the lab needs root, util-linux unshare/nsenter and a kernel with mount and network namespaces)"
        )


def _is_mountpoint(path: Path) -> bool:
    target = str(path)
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return any(line.split()[4] == target for line in f)


def create_mount_namespace(ns_file: Path, owner: str) -> None:
    """Create a mount namespace (``slave`` propagation from the host) and persist it as ``ns_file``.

    As ``ip netns`` does for network namespaces: the namespace is bound onto a file, which only
    works on a private mount, so the file's directory is bound onto itself and made private first.
    ``owner`` names the node in errors. Raises: :class:`TopologyError`.
    """
    ns_dir = ns_file.parent
    ns_dir.mkdir(parents=True, exist_ok=True)
    if not _is_mountpoint(ns_dir):
        _run(["mount", "--bind", str(ns_dir), str(ns_dir)], "binding the lab namespace directory")
        _run(["mount", "--make-private", str(ns_dir)], "making the lab namespace directory private")
    ns_file.touch()
    _run(
        ["unshare", f"--mount={ns_file}", "--propagation", "slave", "true"],
        f"creating the mount namespace of {owner}",
    )


def remove_mount_namespace(ns_file: Path) -> None:
    """Unbind and delete ``ns_file`` (the namespace ends with its last process); unbind its directory when empty.

    Idempotent; never raises.
    """
    if ns_file.exists():
        if _is_mountpoint(ns_file):
            subprocess.run(["umount", str(ns_file)], capture_output=True, check=False)
        with contextlib.suppress(OSError):
            ns_file.unlink()
    ns_dir = ns_file.parent
    if ns_dir.exists() and not any(ns_dir.iterdir()) and _is_mountpoint(ns_dir):
        subprocess.run(["umount", str(ns_dir)], capture_output=True, check=False)


class NodeMachine:
    """Creates and removes one node's fake hardware and namespaces (see the module docstring)."""

    def __init__(self, layout: NodeLayout, *, vfs_per_pf: int = 4) -> None:
        self.layout = layout
        self.vfs_per_pf = vfs_per_pf
        self.vfs = plan_vfs(vfs_per_pf)

    def exec_prefix(self) -> list[str]:
        """``nsenter`` argv prefix that runs a command inside this node's network and mount namespaces."""
        return [
            "nsenter",
            f"--net={self.layout.netns_path}",
            f"--mount={self.layout.mountns_file}",
            "--",
        ]

    # ------------------------------------------------------------------ create
    def create(self) -> None:
        """Build the fake sysfs, the node netns with its VFs, and the node mount namespace.

        Order: directories → fake sysfs → netns (lo up) → veth PFs (up) → veth VFs → VF map → mount
        namespace.
        On failure everything created so far is removed. Raises: :class:`TopologyError`,
        :class:`~sriov_dra_lab.iproute.IpError`.
        """
        try:
            self._create_dirs()
            fake_sysfs.build(self.layout.sysfs_root, fake_pfs(self.vfs_per_pf))
            iproute.add_netns(self.layout.netns_name)
            iproute.set_up(self.layout.netns_path, "lo")
            self.create_links()
            self._create_mountns()
        except BaseException:
            self.destroy()
            raise
        log.info("lab node machine ready", extra={"node": self.layout.name, "netns": self.layout.netns_path})

    def create_links(self) -> None:
        """In the (existing) node netns: one veth per PF (both ends up) and per VF, then the VF map.

        Raises: :class:`~sriov_dra_lab.iproute.IpError`.
        """
        for pf, *_ in RAILS:
            iproute.add_veth(self.layout.netns_path, pf, f"{pf}p")
            iproute.set_up(self.layout.netns_path, f"{pf}p")
            iproute.set_up(self.layout.netns_path, pf)
        for vf in self.vfs:
            iproute.add_veth(self.layout.netns_path, vf.ifname, vf.peer)
            iproute.set_up(self.layout.netns_path, vf.peer)
        self.layout.vf_map.parent.mkdir(parents=True, exist_ok=True)
        self.layout.vf_map.write_text(json.dumps({vf.pci: vf.ifname for vf in self.vfs}, indent=2))

    def _create_dirs(self) -> None:
        for mount in NODE_MOUNTS:
            self.layout.host_dir(mount).mkdir(parents=True, exist_ok=True)
        for path in (
            self.layout.plugins_dir,
            self.layout.registry_dir,
            self.layout.cdi_root,
            self.layout.plugin_state_dir,
            self.layout.kubelet_state_dir,
            self.layout.lab_sriov_state,
            self.layout.guard_socket.parent,
            self.layout.logs,
        ):
            path.mkdir(parents=True, exist_ok=True)

    def _create_mountns(self) -> None:
        create_mount_namespace(self.layout.mountns_file, self.layout.name)
        enter = ["nsenter", f"--mount={self.layout.mountns_file}", "--"]
        for mount in NODE_MOUNTS:
            _run([*enter, "mkdir", "-p", mount], f"creating mount point {mount}")
            _run(
                [*enter, "mount", "--bind", str(self.layout.host_dir(mount)), mount],
                f"mounting {self.layout.host_dir(mount)} over {mount} on {self.layout.name}",
            )

    # ------------------------------------------------------------------ destroy
    def destroy(self) -> None:
        """Remove the mount namespace, the node netns (its veths die with it) and nothing else.

        Idempotent; never raises for what is already gone (failures are logged).
        """
        remove_mount_namespace(self.layout.mountns_file)
        try:
            iproute.del_netns(self.layout.netns_name)
        except iproute.IpError as exc:
            log.warning("cannot remove node netns", extra={"node": self.layout.name, "error": str(exc)})
        shutil.rmtree(self.layout.run_root, ignore_errors=True)
        # The lab's /run/sdl-<id> once its last node is gone (a node built without a stack, as the
        # host tests do, left it behind); rmdir only removes an empty directory.
        with contextlib.suppress(OSError):
            self.layout.run_root.parent.rmdir()

    # ------------------------------------------------------------------ queries
    def vfs_at_home(self) -> set[str]:
        """Names of the VF netdevs currently in the node namespace (not attached to a Pod)."""
        names = iproute.link_names(self.layout.netns_path)
        return {vf.ifname for vf in self.vfs if vf.ifname in names}

    def run_in_node(
        self, argv: Sequence[str], *, timeout_s: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside the node's namespaces and return the finished process.

        Units: ``timeout_s`` seconds. Raises: ``subprocess.TimeoutExpired``.
        """
        return subprocess.run(
            [*self.exec_prefix(), *argv],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout_s,
            env=dict(os.environ),
        )
