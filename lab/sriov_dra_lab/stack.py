"""The whole lab as one object: control plane, real or simulated nodes and every service, started and stopped.

Owns the lab's wiring, in this order (``LabStack.start``), each step after the previous succeeded:

1. the control plane (:mod:`~sriov_dra_lab.control_plane`, with an audit log);
2. lab-only cluster objects no role ships: the whereabouts CRDs, the lab's Multus/whereabouts
   identities, the synthetic GPU DeviceClass;
3. per node: the Node (Ready, with a Lease), its machine (:mod:`~sriov_dra_lab.topology`: fake
   sysfs, node network and mount namespaces, veth VFs), the API relay into the node namespace, the
   node's CNI files the roles expect to find (bin dir with the pinned plugins, primary network,
   Multus and whereabouts kubeconfigs) and, on simulated nodes, the ``multus-guard`` shim, written
   by the command the guard DaemonSet's init container runs;
4. ``playbooks/lab.yml`` (:mod:`~sriov_dra_lab.roles`): the roles ``multus``, ``guard``, ``vfs``,
   ``plugin`` and ``operator`` (with the workloads on real nodes, without those the lab runs as
   processes), i.e. every CRD,
   DeviceClass, namespace, ServiceAccount and RBAC object they ship, Multus's node files, the guard's conflist
   (``sriovnet.dra.cni_config``) and the VF counts checked on the fake sysfs;
5. per node, the services: thick Multus (``--multus thick``; on real nodes the multus role's
   DaemonSet Pod, let onto the node by its label once the node run wrote its daemon config:
   :mod:`~sriov_dra_lab.multus_pods`), the guard daemon (simulated nodes; real nodes run the guard
   role's DaemonSet, and thin Multus as the multus role's DaemonSet), the DRA plugin (on
   real nodes the plugin role's DaemonSet Pod, let onto the node by its label and waited for until
   registered: :mod:`~sriov_dra_lab.plugin_pods`; on simulated nodes ``python -m
   sriov_dra_lab.launch_plugin``), the synthetic ``gpu.nvidia.com`` kubelet plugin
   (:mod:`~sriov_dra_lab.gpu_plugin`), on simulated nodes the kubelet simulator (registered with
   both), and the synthetic GPU ResourceSlice;
6. the operator (``python -m sriov_dra.operator``); on real nodes the operator role deploys it as its
   Deployment instead, and step 5 runs while the cluster run waits for the rollouts (the operator
   Pods' sandboxes need the guard and Multus).

Services are started as processes through their entrypoints, inside the node's namespaces (no
service module is imported); of the roles' workloads thin Multus, the guard, the plugin and the
operator run as Pods on real nodes.

With ``LabOptions.real_nodes`` (``sriov-dra lab demo --node-kind real``) step 3 starts, per node, a
real kubelet v1.36 with containerd instead of the Node object and the kubelet simulator
(:mod:`~sriov_dra_lab.real_stack`: the same fake hardware, CNI files and services on it), after the
nodes' host bridge and the image mirror the examples pull from; stop ends each real node (kubelet,
sandboxes through the CRI, containerd, namespaces) before its services. Stop is the
reverse order; each process is stopped by its PID.

This module owns that order and the stop; the steps live by sub-concern: install (roles, lab
objects, node CNI files) in :mod:`~sriov_dra_lab.stack_install`, each service's start and stop in
:mod:`~sriov_dra_lab.stack_services`, the work directory's state and cleanup in
:mod:`~sriov_dra_lab.lab_dir`, and the shared settings and names in :mod:`~sriov_dra_lab.stack_base`.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sriov_dra.kube import apply
from sriov_dra_lab import (
    binaries,
    control_plane,
    images,
    lab_dir,
    processes,
    push_registry,
    real_node,
    real_stack,
    registry,
    roles,
    session,
    topology,
)
from sriov_dra_lab.lab_dir import STATE_FILE, clean_stale
from sriov_dra_lab.nodes import SimulatedNode
from sriov_dra_lab.stack_base import (
    LOGS_DIR,
    LabOptions,
    NodeStack,
)
from sriov_dra_lab.stack_install import CNI_BINARIES, StackInstall
from sriov_dra_lab.stack_services import StackServices

log = logging.getLogger(__name__)


class LabStack(StackInstall, StackServices):
    """A running lab (see the module docstring). Use :meth:`start` / :meth:`stop`."""

    def __init__(self, options: LabOptions) -> None:
        self.options = options
        self.workdir = options.workdir.resolve()
        self.logs_dir = self.workdir / LOGS_DIR
        """Every component log: ``controlplane/``, ``<node>/`` and ``operator.log``."""
        self.lab_id = secrets.token_hex(2)
        self.cp = control_plane.ControlPlane(
            control_plane.ControlPlaneSettings(
                workdir=self.workdir / "controlplane",
                keep_workdir=True,
                audit=True,
                logs_dir=self.logs_dir / "controlplane",
            )
        )
        self.nodes: list[NodeStack] = []
        self.operator: processes.Process | None = None
        self.api: Any = None
        self._kubeconfigs: dict[str, Path] = {}
        self._lock_fd: int | None = None
        self.role_summaries: list[roles.RoleSummary] = []
        self._playbook_runs: list[roles.PlaybookRun] = []
        self.bridge: real_node.NodeBridge | None = None
        """The host bridge of the real nodes (``options.real_nodes``)."""
        self.mirror: registry.Mirror | None = None
        """The image mirror on that bridge (the examples' image)."""
        self.push_registry: push_registry.PushRegistry | None = None
        """A registry on that bridge to push to (:meth:`start_push_registry`)."""

    def start(self) -> LabStack:
        """Start everything (see the module docstring); stop what started on failure.

        Raises: ``binaries.BinaryMissing``, ``processes.ProcessFailed``, ``topology.TopologyError``,
        ``roles.PlaybookFailed``.
        """
        for name in CNI_BINARIES:
            binaries.find(name)
        if os.geteuid() != 0:
            raise topology.TopologyError(
                "the lab needs root: it creates network and mount namespaces and veth interfaces; run it as root"
            )
        if self.options.real_nodes and (missing := real_node.missing_parts()):
            raise topology.TopologyError("real nodes cannot run here: " + "; ".join(missing))
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self._lock_fd is None:
            self._lock_fd = lab_dir.hold(self.workdir)  # a second lab up or a lab down refuses this directory
        (self.workdir / STATE_FILE).write_text(json.dumps({"labId": self.lab_id}) + "\n")
        try:
            self.cp.start()
            self.api = self.cp.api()
            inventory = self._write_inventory()
            cluster_run = self._start_roles(inventory, "localhost", "cluster")
            self._install_lab_objects()
            if self.options.real_nodes:
                self.bridge = real_node.NodeBridge(lab_id=self.lab_id).create()
                specs = [registry.toolbox_spec(), images.busybox_spec()]
                self.mirror = registry.Mirror(self.bridge.host_address, specs).start()
            for index in range(1, self.options.nodes + 1):
                self._prepare_node(index)
            node_run = self._start_roles(inventory, roles.NODE_GROUP, "nodes")
            if self.options.real_nodes:
                # The guard and operator roles wait for their rollouts, and the operator Pods' sandboxes
                # need the node's CNI chain (the guard Pod, Multus): the services start once the node
                # files and the guard's and plugin's cluster objects are in place, while the cluster run
                # still waits.
                self._wait_node_roles(node_run)
                for node in self.nodes:
                    self._start_services(node)
            self._finish_roles(cluster_run, node_run)
            if not self.options.real_nodes:
                for node in self.nodes:
                    self._start_services(node)
            if self.options.operator and not self.options.real_nodes:
                self.start_operator()  # on real nodes the operator role deployed its Deployment
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every process and kubelet, remove node namespaces and the control plane. Idempotent.

        A Ctrl-C or SIGTERM during the stop does not cut it short (it is re-raised afterwards).
        """
        with processes.signals_deferred():
            self._stop()

    def _stop(self) -> None:
        for run in self._playbook_runs:
            run.kill()
        self._playbook_runs.clear()
        for node in self.nodes:
            if node.kubelet is not None:
                node.kubelet.stop()
                node.kubelet = None
        if self.operator is not None:
            self.operator.stop()
            self.operator = None
        for node in reversed(self.nodes):
            if node.real is not None:
                # The real kubelet first, then its sandboxes (CNI DEL through Multus and the guard,
                # which still run), containerd and the node's namespaces.
                node.node.stop()
            for proc in reversed(list(node.processes.values())):
                proc.stop()
            node.processes.clear()
            node.machine.destroy()
            node.node.stop()
        self.nodes.clear()
        if self.mirror is not None:
            self.mirror.stop()
            self.mirror = None
        if self.push_registry is not None:
            self.push_registry.stop()
            self.push_registry = None
        if self.bridge is not None:
            self.bridge.remove()
            self.bridge = None
        if self.api is not None:
            self.api.close()
            self.api = None
        self.cp.stop()
        # Pod sandboxes outlive the kubelet simulator by design; a stopped lab leaves none of them.
        for line in clean_stale(self.workdir):
            log.info("lab stop: %s", line)
        shutil.rmtree(topology.run_root(self.lab_id), ignore_errors=True)
        if self._lock_fd is not None:  # stopped: lab down and the next lab up may have the directory
            lab_dir.release(self.workdir)
            self._lock_fd = None

    def _prepare_node(self, index: int) -> NodeStack:
        """Node object, machine, API relay and the node's CNI files; the services start later."""
        name = session.node_names(index)[-1]
        if self.options.real_nodes:
            return self._prepare_real_node(name, index)
        layout = topology.NodeLayout.for_node(self.workdir, self.lab_id, name, index)
        sim_node = SimulatedNode(
            self.api, name, labels={**session.NODE_LABELS, "kubernetes.io/hostname": name}
        )
        machine = topology.NodeMachine(layout, vfs_per_pf=self.options.vfs_per_pf)
        node = self._add_node(layout, machine, sim_node)
        sim_node.start()
        machine.create()
        self._start_apiproxy(node)
        self._install_cni(node)
        return node

    def _prepare_real_node(self, name: str, index: int) -> NodeStack:
        """A real kubelet + containerd carrying the node's fake hardware (:mod:`~sriov_dra_lab.real_stack`)."""
        assert self.bridge is not None and self.mirror is not None
        layout = real_stack.RealNodeLayout.for_node(self.workdir, self.lab_id, name, index)
        machine = real_stack.RealNodeMachine(layout, vfs_per_pf=self.options.vfs_per_pf)
        machine.create_dirs()
        real_stack.write_gpu_cdi(layout)
        labels = {k: v for k, v in session.NODE_LABELS.items() if k != session.SIMULATED_LABEL}
        real = real_stack.new_real_node(
            layout,
            control_plane=self.cp,
            bridge=self.bridge,
            mirror=self.mirror,
            labels=labels,
            built=self.node_images(),
        )
        node = self._add_node(layout, machine, real)
        real.start()
        machine.create()
        self._install_cni(node)
        return node

    def _add_node(
        self,
        layout: topology.NodeLayout,
        machine: topology.NodeMachine,
        handle: SimulatedNode | real_stack.RealLabNode,
    ) -> NodeStack:
        """Record a node before it starts, so a failed start stops what it made."""
        node = NodeStack(
            layout=layout, machine=machine, node=handle, policy_namespace=self.options.policy_namespace
        )
        self.nodes.append(node)
        return node

    def _start_services(self, node: NodeStack) -> None:
        """Start ``node``'s processes (after the roles installed their objects and files)."""
        if self.options.multus_mode == "thick":
            if self.multus_as_daemonset:
                self.start_multus_pod(node)
            else:
                self._start_thick_multus(node)
        if not self.guard_as_daemonset:
            self._start_guard(node)
        if self.plugin_as_daemonset:
            self.start_plugin_pod(node)
        else:
            self.start_plugin(node)
        self._start_gpu_plugin(node)
        if node.real is None:
            self.start_kubelet(node)
        apply.apply_objects(self.api, [session.gpu_slice(node.name)])

    def start_push_registry(self) -> push_registry.PushRegistry:
        """A registry on the real nodes' bridge that every node pulls from over plain HTTP; stopped with the lab.

        What docs/install.md pushes to when the lab stands for a cluster. Raises:
        ``push_registry.RegistryMissing``, ``processes.ProcessFailed``.
        """
        assert self.bridge is not None, "a push registry needs real nodes (their bridge)"
        if self.push_registry is None:
            reg = push_registry.PushRegistry(self.workdir / "registry", address=self.bridge.host_address)
            self.push_registry = reg.start()
            for node in self.nodes:
                if node.real is not None:
                    node.real.trust_registry(reg.host, reg.hosts_toml())
        return self.push_registry

    def node(self, name: str) -> NodeStack:
        """The running node ``name``. Raises: ``KeyError``."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"no lab node {name!r}; nodes: {[n.name for n in self.nodes]}")

    def pod_netns(self, pod: Mapping[str, Any]) -> str | None:
        """The network namespace path of ``pod``'s ready sandbox on its node, or None when it has none.

        A real node's is the pause process's (``/proc/<pid>/ns/net``, from the CRI); a simulated node's
        the kubelet simulator's record. Raises: ``KeyError`` for a node that is not the lab's.
        """
        node = self.node(pod["spec"]["nodeName"])
        if node.real is not None:
            return real_stack.sandbox_netns(node.real, pod["metadata"]["uid"])
        record = node.kubelet.sandbox(pod["metadata"]["uid"]) if node.kubelet else None
        return record.netns if record else None
