"""LAB ONLY: the lab's nodes as real kubelets (``sriov-dra lab demo --node-kind real``).

A real lab node is a :class:`~sriov_dra_lab.real_node.RealNode` (kubelet v1.36 + containerd 2.2 in
the node's own network and mount namespaces) carrying everything a simulated node's
:class:`~sriov_dra_lab.topology.NodeMachine` gives it, at the same host paths, so the stack's
install and service steps run unchanged:

- the **layout** (:class:`RealNodeLayout`) is the simulated one with the real node's names: its
  network namespace ``sdrn<lab>-<index>``, its mount-namespace file and its CDI directory (the one
  containerd reads); the node root holds ``fs/<mount>`` for both, so the CNI conf/bin dirs and
  ``/var/lib/cni`` the stack fills are the ones containerd's CNI uses;
- the **machine** (:class:`RealNodeMachine`): the fake sysfs tree and one veth per PF and VF, created in
  the real node's network namespace after it started; the namespaces are the real node's;
- **binds** into the node mount namespace (:func:`node_binds`): the lab's short socket directory
  (the guard socket; the DRA plugins' directories as symlinks to the kubelet's own
  ``/var/lib/kubelet/plugins`` and ``plugins_registry``), the fake sysfs tree at
  :data:`~sriov_dra_lab.plugin_pods.SYSFS_ROOT` and the CDI directory at
  :data:`~sriov_dra_lab.plugin_pods.CDI_ROOT` (the plugin DaemonSet's paths, the same on every node);
- **images**: pause and busybox imported, the examples' toolbox image pulled through the lab's
  mirror (:mod:`sriov_dra_lab.registry`);
- the synthetic GPU plugin's CDI specs in a directory of their own (:func:`write_gpu_cdi`), which
  containerd also reads: the real containerd refuses a CDI device it cannot resolve.

Thin Multus, the guard and the plugin run as their roles' DaemonSets and the operator as the operator
role's Deployment (their Pods from the built images, imported into each node's containerd before the
kubelet starts: ``RealNode.built_images``; the plugin's tree and CDI directory at one node path each,
:mod:`~sriov_dra_lab.plugin_pods`); thick Multus still runs as a host process inside the node
namespaces. The lab's service Pods
(:data:`SERVICE_NAMESPACES`) are not counted as a workload's leftovers.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kubernetes import client

from sriov_dra_lab import images, plugin_pods, real_node, registry, session, topology
from sriov_dra_lab.control_plane import ControlPlane
from sriov_dra_lab.fakes import fake_sysfs
from sriov_dra_rules import names

log = logging.getLogger(__name__)

REAL_LABEL: Final = "lab.sriov-dra.dev/real-kubelet"
GPU_CDI_KIND: Final = "k8s.gpu.nvidia.com/gpu"


@dataclass(frozen=True)
class RealNodeLayout(topology.NodeLayout):
    """A simulated node's layout with the real node's namespace names and CDI directory."""

    @classmethod
    def for_node(cls, workdir: Path, lab_id: str, name: str, index: int) -> RealNodeLayout:
        """The layout of real node ``name`` (1-based ``index``): the simulated paths, the real names."""
        base = topology.NodeLayout.for_node(workdir, lab_id, name, index)
        return cls(name=name, index=index, root=base.root, run_root=base.run_root, lab_id=lab_id)

    @property
    def netns_name(self) -> str:
        """The real node's network namespace (``RealNode.netns_name``)."""
        return f"sdrn{self.lab_id}-{self.index}"

    @property
    def mountns_file(self) -> Path:
        """The real node's mount-namespace file (``RealNode.mountns_file``)."""
        return self.root / "ns" / "mnt"

    @property
    def cdi_root(self) -> Path:
        """The CDI directory containerd reads (``RealNode.cdi_dir``)."""
        return self.root / "cdi"

    @property
    def plugin_state_dir(self) -> Path:
        """The plugin DaemonSet's checkpoint directory: the role's default ``<kubelet>/plugins/<driver>``."""
        return self.host_dir(real_node.KUBELET_ROOT) / "plugins" / names.DRIVER_NAME

    @property
    def gpu_cdi_dir(self) -> Path:
        """The synthetic GPU plugin's CDI directory (a second containerd ``cdi_spec_dirs`` entry)."""
        return self.root / "cdi-gpu"


class RealNodeMachine(topology.NodeMachine):
    """The fake hardware of a real node, in the real node's namespaces (module docstring)."""

    def create_dirs(self) -> None:
        """The node's directories (before the real node starts: its binds need their sources).

        The DRA plugins' directories stay the kubelet's own (``<root>/fs/var/lib/kubelet/plugins``
        and ``plugins_registry``: the kubelet re-binds its root directory onto itself, which would
        hide a mount beneath it); the layout's short socket paths are symlinks to them, so a
        socket path stays under the 108-byte limit and resolves the same in the node.
        """
        kubelet = self.layout.host_dir(real_node.KUBELET_ROOT)
        self.layout.kubelet_dir.mkdir(parents=True, exist_ok=True)
        for link, name in (
            (self.layout.plugins_dir, "plugins"),
            (self.layout.registry_dir, "plugins_registry"),
        ):
            (kubelet / name).mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                link.symlink_to(kubelet / name, target_is_directory=True)
        self._create_dirs()
        self.layout.sysfs_root.mkdir(parents=True, exist_ok=True)  # a bind source (node_binds)

    def create(self) -> None:
        """Fake sysfs, the PF and VF veths in the (running) real node's netns, the VF map.

        Raises: :class:`~sriov_dra_lab.iproute.IpError`.
        """
        self._create_dirs()
        fake_sysfs.build(self.layout.sysfs_root, topology.fake_pfs(self.vfs_per_pf))
        self.create_links()

    def destroy(self) -> None:
        """Nothing of the namespaces (the real node removes them): the lab socket directory only."""
        shutil.rmtree(self.layout.run_root, ignore_errors=True)


def node_binds(layout: topology.NodeLayout) -> tuple[tuple[Path, str], ...]:
    """What the real node's mount namespace gets from the lab (module docstring), as (host dir, node path).

    The fake sysfs tree and the CDI directory are bound at the same node path on every node
    (:data:`~sriov_dra_lab.plugin_pods.SYSFS_ROOT`, :data:`~sriov_dra_lab.plugin_pods.CDI_ROOT`): the
    plugin role renders one DaemonSet for all of them.
    """
    return (
        (layout.run_root, str(layout.run_root)),
        (layout.sysfs_root, plugin_pods.SYSFS_ROOT),
        (layout.cdi_root, plugin_pods.CDI_ROOT),
    )


def write_gpu_cdi(layout: RealNodeLayout) -> Path:
    """The CDI spec of the node's synthetic GPUs (``synthetic-gpu-<i>``: one environment variable each).

    Shapes: CDI 0.6.0, kind :data:`GPU_CDI_KIND`, the device names the synthetic GPU plugin returns
    for every GPU a synthetic slice may hold (``session.MAX_GPUS_PER_ROOT`` per root).
    """
    devices = [
        {"name": f"synthetic-{d['name']}", "containerEdits": {"env": [f"LAB_SYNTHETIC_GPU_{i}={d['name']}"]}}
        for i, d in enumerate(session.gpu_slice(layout.name, session.MAX_GPUS_PER_ROOT)["spec"]["devices"])
    ]
    spec = {"cdiVersion": "0.6.0", "kind": GPU_CDI_KIND, "devices": devices}
    layout.gpu_cdi_dir.mkdir(parents=True, exist_ok=True)
    path = layout.gpu_cdi_dir / "k8s.gpu.nvidia.com-synthetic.json"
    path.write_text(json.dumps(spec, indent=2) + "\n")
    return path


class RealLabNode:
    """The Node of a real lab node: the real node itself, started and stopped (the stack's ``node.node``)."""

    def __init__(self, real: real_node.RealNode) -> None:
        self.real = real
        self.name = real.name
        self.uid = ""

    def start(self) -> RealLabNode:
        """Start the real node (kubelet Ready) and read its Node UID. Raises: as ``RealNode.start``."""
        self.real.start()
        with self.real.control_plane.api() as api:
            self.uid = client.CoreV1Api(api).read_node(self.name).metadata.uid
        return self

    def stop(self, *, delete: bool = False) -> None:
        """Stop the kubelet, every sandbox (CNI DEL), containerd, and remove the node's namespaces."""
        self.real.stop(delete_node=delete)

    def versions(self) -> tuple[str, str]:
        """(kubelet version, container runtime version) from the Node status."""
        with self.real.control_plane.api() as api:
            info = client.CoreV1Api(api).read_node(self.name).status.node_info
        return info.kubelet_version, info.container_runtime_version


def new_real_node(
    layout: RealNodeLayout,
    *,
    control_plane: ControlPlane,
    bridge: real_node.NodeBridge,
    mirror: registry.Mirror,
    labels: Mapping[str, str],
    built: Sequence[images.BuiltImage] = (),
) -> RealLabNode:
    """The (not started) real node of ``layout`` on ``bridge``, pulling the examples' image through ``mirror``.

    ``built``: the images the roles' workloads run, imported into the node's containerd before its
    kubelet starts (``RealNode.built_images``).
    """
    real = real_node.RealNode(
        control_plane=control_plane,
        bridge=bridge,
        name=layout.name,
        index=layout.index,
        root=layout.root,
        logs_dir=layout.logs,  # with every other lab log, under <workdir>/logs/<node>
        labels={**labels, REAL_LABEL: "true"},
        binds=node_binds(layout),
        extra_cdi_dirs=(layout.gpu_cdi_dir,),
        built_images=tuple(built),
        registry_hosts={r: mirror.hosts_toml(r) for r in sorted(mirror.registries)},
    )
    return RealLabNode(real)


def sandbox_netns(node: real_node.RealNode, pod_uid: str) -> str | None:
    """The network namespace of Pod ``pod_uid``'s ready sandbox as a host path (``/proc/<pause pid>/ns/net``).

    None when the node has no ready sandbox of that Pod.
    """
    listed = node.crictl("pods", "-q", "--state=ready", f"--label=io.kubernetes.pod.uid={pod_uid}")
    pid = _first_pid(node, "inspectp", listed.stdout.split())
    return None if pid is None else f"/proc/{pid}/ns/net"


def _first_pid(node: real_node.RealNode, inspect: str, ids: Sequence[str]) -> int | None:
    """The host PID ``crictl <inspect>`` (``inspectp`` for a sandbox, ``inspect`` for a container) reports
    for the first of ``ids`` it can inspect, or None."""
    for cri_id in ids:
        done = node.crictl(inspect, cri_id)
        if done.returncode == 0:
            pid = (json.loads(done.stdout).get("info") or {}).get("pid")
            if pid:
                return int(pid)
    return None


def container_pid(node: real_node.RealNode, namespace: str, container: str) -> int | None:
    """The host PID of the running container ``container`` of a Pod in ``namespace`` on ``node`` (CRI), or None.

    For the roles' one-per-node Pods (the plugin's ``plugin``, the guard's ``guard``): their RSS and
    status are the process's, read from ``/proc/<pid>``.
    """
    listed = node.crictl(
        "ps",
        "-q",
        "--state=running",
        f"--label=io.kubernetes.pod.namespace={namespace}",
        f"--label=io.kubernetes.container.name={container}",
    )
    return _first_pid(node, "inspect", listed.stdout.split())


SERVICE_NAMESPACES: Final = frozenset({"sriov-network-operator", "dra-driver-sriov", "kube-system"})
"""Where the roles deploy the lab's own services (operator, plugin and guard, Multus): their Pods are
the lab, not a workload's leftovers."""


def _sandbox_items(node: real_node.RealNode) -> list[dict[str, Any]] | str:
    done = node.crictl("pods", "-o", "json")
    if done.returncode != 0:
        return f"crictl pods failed: {done.stderr.strip()}"
    items: list[dict[str, Any]] = json.loads(done.stdout or "{}").get("items") or []
    return items


STOPPED: Final = "SANDBOX_NOTREADY"


def sandboxes(node: real_node.RealNode, live_pod_uids: Collection[str] | None = None) -> list[str]:
    """Every workload Pod sandbox containerd holds on ``node`` as ``namespace/name state`` (a leftover after a phase).

    The sandboxes of the lab's services (:data:`SERVICE_NAMESPACES`) are not listed. With
    ``live_pod_uids`` (the UIDs of the Pods the API still has), a **stopped** sandbox of a Pod that is
    gone is not listed either: the kubelet ran StopPodSandbox (CNI DEL) for it and removes the record at
    its next container GC, which runs once a minute (a deleted Pod's sandbox stayed 30–59 s here); what
    a failed teardown would leave (addresses, VFs away) is counted on its own. A ready sandbox, or any
    sandbox of a Pod the API still has, is listed.
    """
    items = _sandbox_items(node)
    if isinstance(items, str):
        return [items]
    out = []
    for item in items:
        meta = item.get("metadata") or {}
        if meta.get("namespace") in SERVICE_NAMESPACES:
            continue
        if (
            live_pod_uids is not None
            and item.get("state") == STOPPED
            and meta.get("uid") not in live_pod_uids
        ):
            continue
        out.append(f"{meta.get('namespace')}/{meta.get('name')} {item.get('state')}")
    return out


def service_sandbox_ids(node: real_node.RealNode) -> set[str]:
    """The sandbox IDs of the lab's service Pods on ``node`` (their host-local reservations are not leftovers)."""
    items = _sandbox_items(node)
    if isinstance(items, str):
        return set()
    return {
        str(item.get("id"))
        for item in items
        if (item.get("metadata") or {}).get("namespace") in SERVICE_NAMESPACES
    }


def workload_images(api: Any) -> list[str]:
    """Each service Pod (:data:`SERVICE_NAMESPACES`) as ``namespace/name on <node> <phase>: <image> (<imageID>)``.

    Shapes: one line per container, from the Pod status (the digest the kubelet's runtime reports).
    """
    lines = []
    core = client.CoreV1Api(api)
    for namespace in sorted(SERVICE_NAMESPACES):
        for pod in core.list_namespaced_pod(namespace).items:
            for status in pod.status.container_statuses or []:
                lines.append(
                    f"{namespace}/{pod.metadata.name} on {pod.spec.node_name} {pod.status.phase}: "
                    f"{status.image} ({status.image_id})"
                )
    return lines
