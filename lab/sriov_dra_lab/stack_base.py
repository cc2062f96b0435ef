"""What every part of the lab stack shares: its settings, one node's handles, the names it uses.

This module owns :class:`LabOptions`, :class:`NodeStack`, the lab's fixed names (driver,
namespaces, the plugin's ServiceAccount, the manifests directory, the logs directory), the strict
reader of the manifests it applies, and :class:`StackState`: the attributes the stack's parts
(:mod:`~sriov_dra_lab.stack_install`, :mod:`~sriov_dra_lab.stack_services`,
:mod:`~sriov_dra_lab.stack`) read and the client-certificate kubeconfigs they share.

It must never start a process, touch a node, or write to the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sriov_dra.host import strict_yaml
from sriov_dra_lab import control_plane, kubelet_sim, processes, real_node, real_stack, roles, topology
from sriov_dra_lab.nodes import SimulatedNode

DRIVER_NAME: Final = "sriovnetwork.k8snetworkplumbingwg.io"
POLICY_NAMESPACE: Final = "dra-driver-sriov"
OPERATOR_NAMESPACE: Final = "sriov-network-operator"
LOGS_DIR: Final = "logs"
"""Under the work directory: ``controlplane/<component>.log``, ``<node>/<service>.log``, ``operator.log``."""
PLUGIN_SERVICE_ACCOUNT: Final = ("dra-driver-sriov", "dra-driver-sriov")
"""(namespace, name) of the plugin's ServiceAccount, the one the shipped plugin RBAC binds."""


@dataclass(frozen=True)
class LabOptions:
    """How to build the lab.

    Units: ``start_timeout_s`` seconds per service readiness wait.
    """

    workdir: Path
    nodes: int = 2
    vfs_per_pf: int = 4
    multus_mode: str = "thin"
    auto_attach: bool = True
    policy_namespace: str = POLICY_NAMESPACE
    operator: bool = True
    start_timeout_s: float = 90.0
    real_nodes: bool = False
    """Real kubelets and containerd (:mod:`~sriov_dra_lab.real_stack`) instead of simulated nodes."""


@dataclass
class NodeStack:
    """One running lab node."""

    layout: topology.NodeLayout
    machine: topology.NodeMachine
    node: SimulatedNode | real_stack.RealLabNode
    kubelet: kubelet_sim.KubeletSimulator | None = None
    processes: dict[str, processes.Process] = field(default_factory=dict)
    policy_namespace: str = POLICY_NAMESPACE

    @property
    def name(self) -> str:
        """The Node name."""
        return self.layout.name

    @property
    def real(self) -> real_node.RealNode | None:
        """The real node (kubelet + containerd) of a real lab node; None for a simulated one."""
        return self.node.real if isinstance(self.node, real_stack.RealLabNode) else None

    def real_versions(self) -> tuple[str, str]:
        """(kubelet version, container runtime) from the Node status of a real node; ('', '') otherwise."""
        return self.node.versions() if isinstance(self.node, real_stack.RealLabNode) else ("", "")


def load_manifests(*paths: Path) -> list[dict[str, Any]]:
    """Every YAML document of ``paths`` (files, or directories of ``*.yaml``), in order.

    Raises: InvalidSpec when a file is not strict YAML (:mod:`sriov_dra.host.strict_yaml`).
    """
    docs: list[dict[str, Any]] = []
    for path in paths:
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            docs.extend(d for d in strict_yaml.read_all(file) if isinstance(d, dict))
    return docs


class StackState:
    """The state the stack's parts share; :class:`~sriov_dra_lab.stack.LabStack` sets every field.

    ``api`` is the admin API client of the control plane (``None`` before start and after stop).
    """

    options: LabOptions
    workdir: Path
    logs_dir: Path
    lab_id: str
    cp: control_plane.ControlPlane
    nodes: list[NodeStack]
    operator: processes.Process | None
    api: Any
    role_summaries: list[roles.RoleSummary]
    _kubeconfigs: dict[str, Path]
    _playbook_runs: list[roles.PlaybookRun]

    @property
    def guard_as_daemonset(self) -> bool:
        """True when the guard runs as the guard role's DaemonSet (real nodes), not as a lab process."""
        return self.options.real_nodes

    @property
    def plugin_as_daemonset(self) -> bool:
        """True when the DRA plugin runs as the plugin role's DaemonSet (real nodes), not as a lab process.

        Its Pods run the product image's ``sriov-dra-plugin`` with no lab seam: no fake kernel, no fault
        hook (:mod:`~sriov_dra_lab.plugin_pods`).
        """
        return self.options.real_nodes

    @property
    def multus_as_daemonset(self) -> bool:
        """True when Multus (thin or thick) runs as the multus role's DaemonSet: on real nodes.

        Simulated nodes have no container runtime: thick Multus's daemon is a lab process there.
        """
        return self.options.real_nodes

    def layout(self, name: str, index: int) -> topology.NodeLayout:
        """The layout of node ``name`` (1-based ``index``): a real node's when the lab runs real nodes."""
        kind = real_stack.RealNodeLayout if self.options.real_nodes else topology.NodeLayout
        return kind.for_node(self.workdir, self.lab_id, name, index)

    def kubeconfig(self, name: str, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A client-certificate kubeconfig for ``user`` (cached by ``name``)."""
        if name not in self._kubeconfigs:
            self._kubeconfigs[name] = self.cp._kubeconfig(name, user, groups)
        return self._kubeconfigs[name]
