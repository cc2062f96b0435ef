"""LAB ONLY: a real Kubernetes node on this machine: the pinned kubelet and containerd, Debian's runc.

One :class:`RealNode` is one node of the lab's control plane, with its own

- **network namespace** ``sdrn<lab>-<n>`` holding ``eth0`` with the node IP, a veth to the lab's
  host bridge (:class:`NodeBridge`). Addresses come from ``203.0.113.0/24`` (TEST-NET-3, RFC 5737:
  documentation only, never routed; the lab already uses TEST-NET-1/2 for its rails), one free
  ``/28`` per bridge; the node namespace gets no default route, so nothing leaves the machine. The
  apiserver listens on the host loopback only; as for the simulated nodes,
  :mod:`sriov_dra_lab.api_proxy` relays its port onto ``127.0.0.1`` inside the node namespace, so
  the kubelet uses the lab's loopback URL and certificate unchanged. The apiserver reaches the
  kubelet (``kubectl exec``/``logs``) at the node IP over the bridge. Pods reach the apiserver at
  the ``kubernetes`` Service IP through one DNAT rule of the node namespace (no kube-proxy);
- **mount namespace**, ONE shared by containerd and the kubelet (runc bind-mounts what the
  kubelet mounted), with a fresh tmpfs ``/run`` (``/run/containerd/...`` is hard-coded) and the
  node's own directories bound over ``/var/lib/kubelet``, ``/var/lib/containerd``, ``/var/lib/cni``
  (libcni cache, host-local reservations), ``/var/log`` (``/var/log/containers`` is hard-coded),
  ``/etc/cni/net.d`` and ``/opt/cni/bin``; and per-node copies of the global sysctls the kubelet
  rewrites (:data:`KUBELET_SYSCTLS`) bound over their ``/proc/sys`` files, so the machine's values
  never change;
- **cgroup root** ``/sdrn<lab>-<n>`` created in every cgroup hierarchy (cpuset ``cpus``/``mems``
  copied), the kubelet's ``cgroupRoot``: the kubelet, containerd and every shim run in its
  ``system`` child, the Pods under ``kubepods``. Stop kills what is left in it and removes it;
- credentials: the kubelet's client certificate ``CN=system:node:<node>, O=system:nodes`` from the
  lab PKI (:meth:`~sriov_dra_lab.control_plane.ControlPlane.client_kubeconfig`); x509 client-CA
  authentication and Webhook authorization on its own port 10250;
- images without a registry (:mod:`sriov_dra_lab.images`): the pause and busybox images, imported
  with ``ctr -n k8s.io images import``; the pause image is containerd's pinned sandbox image;
- the Pod network: a ``bridge`` + ``host-local`` conflist (the pinned CNI plugins), Pod range
  ``10.244.<index>.0/24`` inside the node namespace (the lab's primary-network scheme).

The node settings the lab needs, each for a reason of the machine it runs on:
``restrict_oom_score_adj`` (the sandbox lacks CAP_SYS_RESOURCE), ``failCgroupV1: false``,
``cgroupDriver: cgroupfs``, image GC thresholds that keep local images, ``failSwapOn: false``.

Stop leaves nothing: the kubelet stops first, then every sandbox is stopped and removed through
the CRI (CNI DEL releases its address), containerd stops, whatever is left in the node's cgroups
is killed, the mount namespace, the network namespace (its veth with it), the cgroups and the
Node object are removed. Every process is started through :class:`~sriov_dra_lab.processes.Process`
(own session, SIGKILL when the lab dies).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml
from kubernetes import client

from sriov_dra_lab import binaries, cgroups, images, iproute, topology
from sriov_dra_lab.control_plane import SERVICE_CIDR, ControlPlane
from sriov_dra_lab.processes import Process, wait_until

log = logging.getLogger(__name__)

NODE_SUPERNET: Final = ipaddress.IPv4Network("203.0.113.0/24")
"""TEST-NET-3 (RFC 5737): never routed, so a node address can never leave the machine."""
BRIDGE_PREFIX: Final = 28
RUNC: Final = "runc"
CONTAINERD_SOCKET: Final = "/run/containerd/containerd.sock"
RUNTIME_ENDPOINT: Final = f"unix://{CONTAINERD_SOCKET}"
KUBELET_ROOT: Final = "/var/lib/kubelet"
KUBELET_PORT: Final = 10250
HEALTHZ_PORT: Final = 10248
NODE_DIRS: Final = (
    "/var/lib/kubelet",
    "/var/lib/containerd",
    "/var/lib/cni",
    "/var/log",
    "/etc/cni/net.d",
    "/opt/cni/bin",
)
"""Mount points inside the node mount namespace that get a per-node directory bound over them."""
KUBELET_SYSCTLS: Final = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)
"""Every global sysctl the kubelet sets at start (its container manager's kernel tunables)."""
CNI_PLUGINS: Final = ("bridge", "host-local", "loopback")
API_SERVICE: Final = str(ipaddress.ip_network(SERVICE_CIDR).network_address + 1)
"""The ``kubernetes`` Service's cluster IP (the apiserver's pick: the service range's first address)."""
POD_NETWORK: Final = "lab-pods"


def containerd_config(
    *,
    runc: str,
    cdi_dirs: Sequence[Path],
    registry_config: Path,
    cni_bin: str = "/opt/cni/bin",
    cni_conf: str = "/etc/cni/net.d",
    no_pivot_root: bool = False,
) -> str:
    """containerd's config (version 3): default paths, ``runc``, CDI from ``cdi_dirs``, the CNI dirs,
    registry hosts under ``registry_config``; ``no_pivot_root`` has runc enter a container's root
    with ``chroot`` (a root file system ``pivot_root`` refuses, such as an initramfs).

    Source: containerd 2.2 ``internal/cri/config`` (plugin sections ``io.containerd.cri.v1.runtime``,
    ``io.containerd.cri.v1.images``, ``io.containerd.grpc.v1.cri``); the node settings of the module
    docstring.
    """
    pivot = "        NoPivotRoot = true\n" if no_pivot_root else ""
    return f"""\
version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
imports = []

[grpc]
  address = "{CONTAINERD_SOCKET}"

[ttrpc]
  address = "{CONTAINERD_SOCKET}.ttrpc"

[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = true
  cdi_spec_dirs = {json.dumps([str(d) for d in cdi_dirs])}
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        SystemdCgroup = false
{pivot}  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{cni_conf}"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "{registry_config}"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{images.PAUSE_IMAGE}"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins.'io.containerd.nri.v1.nri']
  disable = true
"""


class RealNodeError(RuntimeError):
    """A real node cannot be set up on this machine; the message names the step and what is missing."""


def _run(argv: Sequence[str], what: str, *, timeout_s: float = 60.0) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=timeout_s)
    if proc.returncode != 0:
        raise RealNodeError(f"{what}: `{' '.join(argv)}` exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def missing_parts() -> list[str]:
    """What this machine lacks to run a real node, one line each (empty when everything is there).

    Checks: root, the pinned kubelet/containerd/crictl/pause binaries, runc on PATH, Debian's
    busybox-static, util-linux and iproute2, cgroup v1 hierarchies.
    """
    out: list[str] = []
    if os.geteuid() != 0:
        out.append("real nodes need root (namespaces, mounts, cgroups)")
    for name in ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "crictl", "pause"):
        try:
            binaries.find(name)
        except binaries.BinaryMissing as exc:
            out.append(str(exc))
    for tool in (RUNC, "nsenter", "unshare", "mount", "umount", "ip"):
        if shutil.which(tool) is None:
            out.append(
                f"{tool} not on PATH (tools/install-debian-deps.sh installs runc, util-linux, iproute2)"
            )
    for tool in ("iptables", "sysctl"):
        if shutil.which(tool) is None:
            out.append(
                f"{tool} not on PATH (install Debian's iptables and procps: the Pods' route to the API)"
            )
    if not images.BUSYBOX.exists():
        out.append(f"{images.BUSYBOX} missing (install Debian's busybox-static)")
    if not cgroup_hierarchies():
        out.append("no cgroup hierarchy mounted under /sys/fs/cgroup")
    return out


def cgroup_hierarchies() -> list[Path]:
    """Mount points of every cgroup v1 hierarchy and of the cgroup2 one under ``/sys/fs/cgroup``."""
    found: list[Path] = []
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fstype = right.split()[0] if right else ""
            mount = left.split()[4]
            if fstype in ("cgroup", "cgroup2") and mount.startswith("/sys/fs/cgroup/"):
                found.append(Path(mount))
    return found


def _mountpoints() -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return [line.split()[4] for line in f]


# --------------------------------------------------------------------------- bridge
@dataclass
class NodeBridge:
    """The lab's host bridge that every real node's ``eth0`` veth is attached to.

    Shapes: ``subnet`` a free ``/28`` of :data:`NODE_SUPERNET`; the bridge holds its first address,
    node ``i`` (1-based) gets the ``i+1``-th. Create with :meth:`create`, remove with :meth:`remove`.
    """

    lab_id: str
    name: str = ""
    subnet: ipaddress.IPv4Network = field(default=NODE_SUPERNET)

    def create(self) -> NodeBridge:
        """Pick a ``/28`` no host address uses, create the bridge with its address and set it up.

        Raises: :class:`RealNodeError` when no block is free or ``ip`` fails.
        """
        self.name = f"sdrnb{self.lab_id}"
        used = set()
        for link in json.loads(_run(["ip", "-j", "-4", "address", "show"], "listing host addresses") or "[]"):
            for info in link.get("addr_info") or []:
                used.add(ipaddress.ip_interface(f"{info['local']}/{info['prefixlen']}").network)
        for block in NODE_SUPERNET.subnets(new_prefix=BRIDGE_PREFIX):
            if not any(block.overlaps(u) for u in used):
                self.subnet = block
                break
        else:
            raise RealNodeError(
                f"every /{BRIDGE_PREFIX} of {NODE_SUPERNET} is in use on the host; remove a stale lab bridge"
            )
        _run(["ip", "link", "add", self.name, "type", "bridge"], f"creating bridge {self.name}")
        try:
            _run(
                ["ip", "address", "add", f"{self.host_address}/{BRIDGE_PREFIX}", "dev", self.name],
                "bridge address",
            )
            _run(["ip", "link", "set", self.name, "up"], "bridge up")
        except BaseException:
            self.remove()
            raise
        return self

    @property
    def host_address(self) -> str:
        """The bridge's own address (the host side of every node)."""
        return str(self.subnet.network_address + 1)

    def node_address(self, index: int) -> str:
        """The node IP of node ``index`` (1-based). Raises: ``ValueError`` beyond the block."""
        if not 1 <= index <= self.subnet.num_addresses - 3:
            raise ValueError(f"node index {index} does not fit in {self.subnet}")
        return str(self.subnet.network_address + 1 + index)

    def remove(self) -> None:
        """Delete the bridge (absent is fine)."""
        if self.name:
            subprocess.run(["ip", "link", "del", self.name], capture_output=True, check=False)

    def exists(self) -> bool:
        """True while the bridge link exists."""
        return bool(self.name) and Path(f"/sys/class/net/{self.name}").exists()


# --------------------------------------------------------------------------- node
@dataclass
class RealNode:
    """One real node (see the module docstring). Call :meth:`start`, then :meth:`stop`.

    Shapes: ``root`` is the node's host directory (must not be under ``/run``, which the node
    mount namespace replaces); ``index`` is 1-based and picks the node IP and the Pod range.
    Units: ``ready_timeout_s`` seconds.
    """

    control_plane: ControlPlane
    bridge: NodeBridge
    name: str
    index: int
    root: Path
    labels: dict[str, str] = field(default_factory=dict)
    ready_timeout_s: float = 120.0
    binds: tuple[tuple[Path, str], ...] = ()
    """(host directory, path in the node) bound into the node mount namespace after ``/run`` is
    replaced (a source under the host's ``/run`` too): what the lab's node services share with the
    kubelet and containerd (the plugin sockets, the fake sysfs tree, the CDI directory)."""
    extra_cdi_dirs: tuple[Path, ...] = ()
    """More containerd ``cdi_spec_dirs`` after :attr:`cdi_dir` (the lab's synthetic GPU specs)."""
    built_images: tuple[images.BuiltImage, ...] = ()
    """Images ``tools/build-image.sh`` built (the product's, Multus), imported before the kubelet starts,
    so no Pod the roles deploy can reach this node before its image is there (no registry serves them)."""
    registry_hosts: dict[str, str] = field(default_factory=dict)
    """``{registry: hosts.toml text}``: containerd resolves those registries as the text says (a mirror)."""
    logs_dir: Path | None = None
    """Where the node's processes log (:attr:`logs`); None: ``<root>/logs``."""
    processes: dict[str, Process] = field(default_factory=dict, init=False)
    ready_after_s: float = field(default=0.0, init=False)
    """Seconds from launching the kubelet to the Node's Ready condition (measured at start)."""
    _started: bool = field(default=False, init=False)

    # ------------------------------------------------------------------ names
    @property
    def netns_name(self) -> str:
        """The node network namespace's name."""
        return f"sdrn{self.bridge.lab_id}-{self.index}"

    @property
    def netns_path(self) -> str:
        """Path of the node network namespace."""
        return str(iproute.NETNS_DIR / self.netns_name)

    @property
    def veth_host(self) -> str:
        """The host end of the node's veth (on the bridge)."""
        return f"sdrnv{self.bridge.lab_id}{self.index}"

    @property
    def node_ip(self) -> str:
        """The node IP (``--node-ip``, the kubelet's serving address)."""
        return self.bridge.node_address(self.index)

    @property
    def pod_subnet(self) -> str:
        """The node's Pod range (host-local)."""
        return f"10.244.{self.index}.0/24"

    @property
    def cgroup_root(self) -> str:
        """The kubelet's ``cgroupRoot`` (the same path in every hierarchy)."""
        return f"/sdrn{self.bridge.lab_id}-{self.index}"

    @property
    def mountns_file(self) -> Path:
        """The file the node mount namespace is bound to (under the private ``ns`` mount)."""
        return self.root / "ns" / "mnt"

    def node_dir(self, mount: str) -> Path:
        """The node directory bound over ``mount`` (one of :data:`NODE_DIRS`) inside the node."""
        return self.root / "fs" / mount.strip("/")

    @property
    def kubelet_dir(self) -> Path:
        """The kubelet's root directory as seen from the host (``/var/lib/kubelet`` in the node)."""
        return self.node_dir(KUBELET_ROOT)

    @property
    def cdi_dir(self) -> Path:
        """The node's CDI spec directory (containerd ``cdi_spec_dirs``; a host path, valid inside)."""
        return self.root / "cdi"

    @property
    def logs(self) -> Path:
        """Logs of the node's processes (``kubelet.log``, ``containerd.log``, ``apiproxy.log``)."""
        return self.logs_dir if self.logs_dir is not None else self.root / "logs"

    def exec_prefix(self) -> list[str]:
        """``nsenter`` argv prefix that runs a command inside the node's network and mount namespaces."""
        return ["nsenter", f"--net={self.netns_path}", f"--mount={self.mountns_file}", "--"]

    def run_in_node(
        self, argv: Sequence[str], *, timeout_s: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside the node's namespaces; return the finished process (never raises on its status).

        Raises: ``subprocess.TimeoutExpired``.
        """
        return subprocess.run(
            [*self.exec_prefix(), *argv], capture_output=True, text=True, check=False, timeout=timeout_s
        )

    def crictl(self, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run the pinned ``crictl`` against the node's containerd."""
        return self.run_in_node(
            [str(binaries.find("crictl")), f"--runtime-endpoint={RUNTIME_ENDPOINT}", "--timeout=30s", *args],
            timeout_s=timeout_s,
        )

    def trust_registry(self, registry: str, hosts_toml: str) -> None:
        """Resolve and pull ``registry`` (``host:port``) as ``hosts_toml`` says, from the next pull on.

        containerd reads its registry ``config_path`` at each pull, so a running node needs no restart.
        """
        (self.root / "certs.d" / registry).mkdir(parents=True, exist_ok=True)
        (self.root / "certs.d" / registry / "hosts.toml").write_text(hosts_toml)

    def ctr(self, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run the pinned ``ctr`` in the ``k8s.io`` namespace against the node's containerd."""
        return self.run_in_node(
            [str(binaries.find("ctr")), f"--address={CONTAINERD_SOCKET}", "-n", "k8s.io", *args],
            timeout_s=timeout_s,
        )

    # ------------------------------------------------------------------ start
    def start(self) -> RealNode:
        """Build the node's namespaces, cgroups and files, start containerd and the kubelet, wait for Ready.

        Order: directories and files → network namespace and veth → mount namespace → cgroups →
        API relay → containerd → images → kubelet → Node Ready. On failure everything done so far
        is undone. Raises: :class:`RealNodeError`; ``ProcessFailed`` with the log tail when a
        process exits or the Node is not Ready in ``ready_timeout_s``; ``BinaryMissing``.
        """
        if self.root.resolve().is_relative_to("/run"):
            raise RealNodeError(
                f"node root {self.root} is under /run, which the node mount namespace replaces"
            )
        self._started = True
        try:
            self._write_files()
            self._create_netns()
            self._create_mountns()
            self._create_cgroups()
            self._start_apiproxy()
            self._route_service_ip()
            self._start_containerd()
            self._import_images()
            self._start_kubelet()
        except BaseException:
            self.stop()
            raise
        log.info(
            "real node ready", extra={"node": self.name, "ip": self.node_ip, "ready_s": self.ready_after_s}
        )
        return self

    def _write_files(self) -> None:
        for mount in NODE_DIRS:
            self.node_dir(mount).mkdir(parents=True, exist_ok=True)
        for d in (self.cdi_dir, self.logs, self.root / "pki", self.root / "images", self.root / "sysctl"):
            d.mkdir(parents=True, exist_ok=True)
        bin_dir = self.node_dir("/opt/cni/bin")
        for plugin in CNI_PLUGINS:
            link = bin_dir / plugin
            if not link.exists():
                binaries.install(binaries.find(plugin), link)
        conflist = {
            "cniVersion": "1.0.0",
            "name": POD_NETWORK,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": False,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": self.pod_subnet}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                }
            ],
        }
        (self.node_dir("/etc/cni/net.d") / "10-lab-pods.conflist").write_text(json.dumps(conflist, indent=2))
        for key in KUBELET_SYSCTLS:
            (self.root / "sysctl" / key.replace("/", ".")).write_text(Path("/proc/sys", key).read_text())
        for registry, text in self.registry_hosts.items():
            (self.root / "certs.d" / registry).mkdir(parents=True, exist_ok=True)
            (self.root / "certs.d" / registry / "hosts.toml").write_text(text)
        (self.root / "containerd.toml").write_text(self.containerd_config())
        kubeconfig = self.control_plane.client_kubeconfig(
            f"kubelet-{self.name}", f"system:node:{self.name}", ("system:nodes",)
        )
        shutil.copy(kubeconfig, self.root / "kubelet.kubeconfig")
        (self.root / "kubelet.yaml").write_text(yaml.safe_dump(self.kubelet_config(), sort_keys=False))

    def containerd_config(self) -> str:
        """containerd's config for this node (:func:`containerd_config`): runc from PATH, the node's
        CDI dirs, registry hosts under the node's ``certs.d``."""
        return containerd_config(
            runc=shutil.which(RUNC) or f"/usr/sbin/{RUNC}",
            cdi_dirs=[self.cdi_dir, *self.extra_cdi_dirs],
            registry_config=self.root / "certs.d",
        )

    def kubelet_config(self) -> dict[str, Any]:
        """The KubeletConfiguration (``kubelet.config.k8s.io/v1beta1``) of this node.

        Source: the kubelet 1.36 configuration reference and the node settings of the module
        docstring: cgroup v1 accepted, cgroupfs driver under the node's cgroup root,
        x509 client-CA authentication (anonymous and webhook authentication off), Webhook
        authorization, healthz on the node's loopback, image GC that keeps the local images.
        """
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.node_ip,
            "port": KUBELET_PORT,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": HEALTHZ_PORT,
            "containerRuntimeEndpoint": RUNTIME_ENDPOINT,
            "imageServiceEndpoint": RUNTIME_ENDPOINT,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "failCgroupV1": False,
            "failSwapOn": False,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(self.control_plane.ca_cert)},
            },
            "authorization": {"mode": "Webhook"},
            "podLogsDir": "/var/log/pods",
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {
                "memory.available": "1Mi",
                "nodefs.available": "1%",
                "nodefs.inodesFree": "1%",
                "imagefs.available": "1%",
            },
            "rotateCertificates": False,
            "serverTLSBootstrap": False,
            "registerNode": True,
            "featureGates": {"DRAExtendedResource": True},
            "maxPods": 110,
            "resolvConf": "/etc/resolv.conf",
        }

    def _create_netns(self) -> None:
        iproute.add_netns(self.netns_name)
        iproute.set_up(self.netns_path, "lo")
        _run(
            [
                "ip",
                "link",
                "add",
                self.veth_host,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                self.netns_name,
            ],
            f"creating the veth of {self.name}",
        )
        _run(
            ["ip", "link", "set", self.veth_host, "master", self.bridge.name, "up"], "attaching the node veth"
        )
        _run(
            ["ip", "-n", self.netns_name, "address", "add", f"{self.node_ip}/{BRIDGE_PREFIX}", "dev", "eth0"],
            "node address",
        )
        iproute.set_up(self.netns_path, "eth0")

    def _create_mountns(self) -> None:
        try:
            topology.create_mount_namespace(self.mountns_file, self.name)
        except topology.TopologyError as exc:
            raise RealNodeError(str(exc)) from exc
        # A bind's source may lie under the host's /run, which the tmpfs hides: bind it onto a stash
        # directory first, then move it into place.
        stash = self.root / "stash"
        script = ["set -e"]
        for i, (source, _target) in enumerate(self.binds):
            (stash / str(i)).mkdir(parents=True, exist_ok=True)
            script.append(f"mount --bind {source} {stash / str(i)}")
        script.append("mount -t tmpfs -o mode=755 tmpfs /run")
        # containerd pins each sandbox's netns under /run/netns, as on a real node; a hostPath Pod
        # mounting it (thick Multus's daemon validates CNI_NETNS there) needs the directory first.
        script.append("mkdir -p /run/netns")
        for mount in NODE_DIRS:
            script += [f"mkdir -p {mount}", f"mount --bind {self.node_dir(mount)} {mount}"]
        for i, (_source, target) in enumerate(self.binds):
            script += [f"mkdir -p {target}", f"mount --move {stash / str(i)} {target}"]
        for key in KUBELET_SYSCTLS:
            script.append(f"mount --bind {self.root / 'sysctl' / key.replace('/', '.')} /proc/sys/{key}")
        # As on a systemd host, the node's mounts are shared (still a slave of the host's, so nothing
        # propagates back): a HostToContainer hostPath (the guard's node root) then sees the netns and
        # IPAM mounts containerd makes after the container started.
        script.append("mount --make-rshared /")
        _run(
            ["nsenter", f"--mount={self.mountns_file}", "--", "sh", "-c", "\n".join(script)],
            f"mounting the node directories of {self.name}",
        )

    def _cgroup_dirs(self, child: str = "") -> list[Path]:
        return [
            h / self.cgroup_root.strip("/") / child if child else h / self.cgroup_root.strip("/")
            for h in cgroup_hierarchies()
        ]

    def _create_cgroups(self) -> None:
        cgroups.create([*self._cgroup_dirs(), *self._cgroup_dirs("system")])

    def spawn(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> Process:
        """Start ``argv`` in the node's namespaces and cgroup (``<cgroupRoot>/system`` of every hierarchy).

        The process is the node's: :meth:`stop` stops it (after the kubelet, before containerd) and
        its log is ``<logs>/<name>.log``. Raises: ``ProcessFailed`` when it cannot be started.
        """
        proc = Process(
            name=f"{self.name}-{name}",
            argv=cgroups.joined(self._cgroup_dirs("system"), [*self.exec_prefix(), *argv]),
            log_path=self.logs / f"{name}.log",
            env=env,
        )
        self.processes[name] = proc
        proc.start()
        return proc

    def _start_apiproxy(self) -> None:
        port = self.control_plane.ports["kube-apiserver"]
        proc = Process(
            name=f"{self.name}-apiproxy",
            argv=[
                sys.executable,
                "-m",
                "sriov_dra_lab.api_proxy",
                "--netns",
                self.netns_path,
                "--port",
                str(port),
            ],
            log_path=self.logs / "apiproxy.log",
        )
        self.processes["apiproxy"] = proc
        proc.start()
        wait_until(
            "the API relay into the node namespace",
            lambda: "relaying" in (self.logs / "apiproxy.log").read_text(),
            timeout_s=30,
            process=proc,
        )

    def _route_service_ip(self) -> None:
        """Pods reach the API server at the ``kubernetes`` Service address, as kube-proxy arranges it.

        There is no kube-proxy: DNAT rules in the node network namespace send
        :data:`API_SERVICE` (the first address of the service range, the IP the kubelet gives
        every Pod as ``KUBERNETES_SERVICE_HOST``, a SAN of the apiserver certificate) on port 443
        to the API relay on the node's loopback, for Pods on the bridge (``PREROUTING``) and for
        host-network Pods such as the guard's (``OUTPUT``, as kube-proxy also does; the node has no
        default route, so the Service address is a local route on ``lo`` there, as kube-proxy's
        IPVS mode binds Service addresses: without it a host-network connect fails with
        ENETUNREACH before any DNAT); ``route_localnet`` (a sysctl of the node namespace only) lets
        the node route that loopback destination for traffic from its Pod bridge.
        Raises: :class:`RealNodeError` when ``iptables`` fails.
        """
        port = self.control_plane.ports["kube-apiserver"]
        dnat = ["-d", f"{API_SERVICE}/32", "-p", "tcp", "--dport", "443"]
        dnat += ["-j", "DNAT", "--to-destination", f"127.0.0.1:{port}"]
        for argv in (
            ["sysctl", "-q", "-w", "net.ipv4.conf.all.route_localnet=1"],
            ["iptables", "-t", "nat", "-A", "PREROUTING", *dnat],
            ["iptables", "-t", "nat", "-A", "OUTPUT", *dnat],
            ["ip", "route", "add", "local", f"{API_SERVICE}/32", "dev", "lo"],
        ):
            _run(
                ["ip", "netns", "exec", self.netns_name, *argv],
                f"routing the kubernetes Service of {self.name}",
            )

    def _start_containerd(self) -> None:
        bin_dir = binaries.find("containerd").parent
        env = dict(os.environ, PATH=f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        proc = self.spawn(
            "containerd", [str(bin_dir / "containerd"), f"--config={self.root / 'containerd.toml'}"], env
        )
        wait_until(
            "containerd to answer on its socket",
            lambda: self.ctr("version", timeout_s=20).returncode == 0,
            timeout_s=60,
            process=proc,
            interval_s=0.5,
        )

    def _import_images(self) -> None:
        for spec in (images.pause_spec(binaries.find("pause")), images.busybox_spec()):
            path, _digest = images.write_archive(spec, self.root / "images")
            done = self.ctr("images", "import", "--local", str(path), timeout_s=120)
            if done.returncode != 0:
                raise RealNodeError(
                    f"importing {spec.name} into {self.name}'s containerd failed: {done.stderr.strip()}"
                )
        for image in self.built_images:
            started = time.monotonic()
            try:
                images.import_built(self.ctr, image)
            except images.ImageError as exc:
                raise RealNodeError(f"{self.name}: {exc}") from exc
            log.info(
                "built image imported",
                extra={
                    "node": self.name,
                    "image": image.reference,
                    "s": round(time.monotonic() - started, 1),
                },
            )

    def _start_kubelet(self) -> None:
        argv = [
            str(binaries.find("kubelet")),
            f"--config={self.root / 'kubelet.yaml'}",
            f"--kubeconfig={self.root / 'kubelet.kubeconfig'}",
            f"--root-dir={KUBELET_ROOT}",
            f"--cert-dir={self.root / 'pki'}",
            f"--hostname-override={self.name}",
            f"--node-ip={self.node_ip}",
            "--v=1",
        ]
        if self.labels:
            argv.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(self.labels.items())))
        env = dict(os.environ, PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        launched = time.monotonic()
        proc = self.spawn("kubelet", argv, env)
        with self.control_plane.api() as api:
            core = client.CoreV1Api(api)
            wait_until(
                f"Node {self.name} to be Ready",
                lambda: _node_ready(core, self.name),
                timeout_s=self.ready_timeout_s,
                process=proc,
                interval_s=0.2,
            )
        self.ready_after_s = time.monotonic() - launched

    def power_off(self) -> None:
        """The node loses power: SIGKILL its kubelet and containerd, then everything left in its cgroups.

        The shims, pause processes and containers (the plugin's, the Pods') run in their own sessions
        and outlive containerd, as on a machine whose runtime crashed; a machine that lost power has
        none, so they are killed too. Nothing is cleaned: no sandbox is stopped (no CNI DEL), the
        Node object, the namespaces, the cgroups and the files stay until :meth:`stop`.
        """
        for name in ("kubelet", "containerd"):
            proc = self.processes.get(name)
            if proc is not None and proc.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
        self._kill_cgroups()

    def restart_kubelet(self) -> float:
        """Stop the kubelet (SIGTERM; its Pods keep running) and start it again; wait for Ready.

        The kubelet restores its own checkpoints (``/var/lib/kubelet``), as after a node's
        kubelet restart. Returns: seconds from the new launch to Ready. Raises: as :meth:`start`.
        """
        old = self.processes.pop("kubelet", None)
        if old is not None:
            old.stop()
        self._start_kubelet()
        return self.ready_after_s

    # ------------------------------------------------------------------ stop
    def stop(self, *, delete_node: bool = True) -> None:
        """Stop the node and remove everything it made (see the module docstring). Idempotent; never raises.

        Failures of single steps are logged; :meth:`leftovers` reports what, if anything, remains.
        """
        if not self._started:
            return
        kubelet = self.processes.pop("kubelet", None)
        if kubelet is not None:
            kubelet.stop()
        for name in [n for n in self.processes if n not in ("containerd", "apiproxy")]:
            self.processes.pop(name).stop()  # what else runs on the node (a kubelet plugin)
        containerd = self.processes.get("containerd")
        if containerd is not None and containerd.running():
            # Every sandbox through the CRI: StopPodSandbox runs CNI DEL (the address is released).
            for args in (("stopp",), ("rmp", "--force")):
                listed = self.crictl("pods", "-q", timeout_s=60)
                for pod in listed.stdout.split():
                    done = self.crictl(*args, pod, timeout_s=90)
                    if done.returncode != 0:
                        log.warning(
                            "crictl %s %s failed on %s: %s", args[0], pod, self.name, done.stderr.strip()
                        )
        for name in ("containerd", "apiproxy"):
            proc = self.processes.pop(name, None)
            if proc is not None:
                proc.stop()
        self.processes.clear()
        self._kill_cgroups()
        topology.remove_mount_namespace(self.mountns_file)
        with contextlib.suppress(iproute.IpError):
            iproute.del_netns(self.netns_name)
        subprocess.run(["ip", "link", "del", self.veth_host], capture_output=True, check=False)
        self._remove_cgroups()
        if delete_node:
            self._delete_node()
        self._started = False

    def _cgroup_pids(self) -> set[int]:
        return cgroups.pids(self._cgroup_dirs())

    def _kill_cgroups(self) -> None:
        cgroups.kill_processes(self._cgroup_dirs())
        if pids := self._cgroup_pids():
            log.warning("processes still in the cgroups of %s: %s", self.name, sorted(pids))

    def _remove_cgroups(self) -> None:
        for top in self._cgroup_dirs():
            cgroups.remove_tree(top)

    def _delete_node(self) -> None:
        try:
            with self.control_plane.api() as api:
                client.CoreV1Api(api).delete_node(self.name)
        except client.ApiException as exc:
            if exc.status != 404:
                log.warning("cannot delete Node %s: %s", self.name, exc.reason)
        except Exception as exc:  # the control plane may already be gone at session end
            log.warning("cannot delete Node %s: %s", self.name, exc)

    # ------------------------------------------------------------------ queries
    def leftovers(self) -> list[str]:
        """What of this node still exists on the machine, one line each (empty after a clean stop).

        Checks: processes in its cgroups, its cgroup directories, mounts under its root, its
        network namespace and host veth, and that the machine's sysctls kept their values.
        """
        found = [f"process {p} in {self.cgroup_root}" for p in sorted(self._cgroup_pids())]
        found += [f"cgroup {d}" for d in self._cgroup_dirs() if d.exists()]
        root = str(self.root.resolve())
        found += [f"mount {m}" for m in _mountpoints() if m == root or m.startswith(root + "/")]
        if (iproute.NETNS_DIR / self.netns_name).exists():
            found.append(f"network namespace {self.netns_name}")
        if Path(f"/sys/class/net/{self.veth_host}").exists():
            found.append(f"veth {self.veth_host}")
        return found

    def rss_kib(self) -> dict[str, int]:
        """Resident memory (KiB) of the kubelet, containerd and the shims (summed) from ``/proc``."""
        out: dict[str, int] = {}
        for pid in self._cgroup_pids():
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            rss = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
            key = "shims" if comm.startswith("containerd-shim") else comm
            out[key] = out.get(key, 0) + rss
        return out


def _node_ready(core: client.CoreV1Api, name: str) -> bool:
    try:
        node = core.read_node(name)
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def new_lab_id() -> str:
    """A short random id naming one run's bridge, namespaces and cgroups (4 hex digits)."""
    return secrets.token_hex(2)


__all__ = [
    "NodeBridge",
    "RealNode",
    "RealNodeError",
    "cgroup_hierarchies",
    "missing_parts",
    "new_lab_id",
]
