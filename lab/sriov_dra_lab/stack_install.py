"""Installing the lab: the roles' inventory and runs, the lab-only cluster objects, each node's CNI files.

This module owns steps 2–4 of :class:`~sriov_dra_lab.stack.LabStack`'s start as methods the stack
inherits: the inventory of ``playbooks/lab.yml`` and its cluster and node runs (waiting for every
shipped CRD), what no role ships (whereabouts' CRDs, the lab's Multus/whereabouts identities, the
GPU class), and per node the files the roles expect to find: the CNI bin dir with the pinned
plugins and the lab's sriov plugin, the primary network, the Multus and whereabouts kubeconfigs,
and, on simulated nodes, the ``multus-guard`` shim written by the guard DaemonSet's init container
command (real nodes run that DaemonSet).

It must never start a service, or write a node file outside the node's layout.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any, Final

from kubernetes import client as kube_client

from sriov_dra.kube import apply
from sriov_dra_lab import (
    binaries,
    cgroups,
    cni,
    images,
    lab_dir,
    multus_pods,
    plugin_pods,
    processes,
    roles,
    session,
    topology,
)
from sriov_dra_lab.control_plane import SERVICE_CIDR
from sriov_dra_lab.paths import LAB_MANIFESTS, MANIFESTS
from sriov_dra_lab.stack_base import (
    OPERATOR_NAMESPACE,
    PLUGIN_SERVICE_ACCOUNT,
    POLICY_NAMESPACE,
    NodeStack,
    StackState,
    load_manifests,
)

PRIMARY_FILE: Final = "10-lab-pods.conflist"
DAEMON_CONFIG: Final = "/etc/cni/net.d/multus.d/daemon-config.json"
THICK_SOCKET_DIR: Final = "/run/multus/sock/"
"""The daemon removes its socket directory at start, so it must not be the mount point itself."""
CNI_BINARIES: Final = (
    "bridge",
    "host-local",
    "loopback",
    "static",
    "tuning",
    "whereabouts",
    "multus",
    "multus-shim",
)


MULTUS_BINARIES: Final = frozenset({"multus", "multus-shim"})


class StackInstall(StackState):
    """The lab's install steps (see the module docstring); mixed into the stack."""

    def _install_lab_objects(self) -> None:
        """What no role ships: whereabouts' CRDs, the lab's Multus/whereabouts identities, the GPU class."""
        crds = load_manifests(LAB_MANIFESTS / "whereabouts-crds.yaml")
        apply.apply_objects(self.api, crds)
        rbac = load_manifests(LAB_MANIFESTS / "node-components-rbac.yaml")
        apply.apply_objects(self.api, [*rbac, session.gpu_device_class()])
        apply.wait_crds_established(self.api, [c["metadata"]["name"] for c in crds])

    def _write_inventory(self) -> Path:
        """The inventory of ``playbooks/lab.yml`` for this lab's nodes (see :mod:`~sriov_dra_lab.roles`)."""
        thick = self.options.multus_mode == "thick"
        hosts = []
        for index, name in enumerate(session.node_names(self.options.nodes), start=1):
            lay = self.layout(name, index)
            node_vars: dict[str, Any] = {
                "vfs_node_name": name,
                "vfs_host_root": str(lay.sysfs_root),
                "vfs_pfs": [{"pf": pf, "num_vfs": self.options.vfs_per_pf} for pf, *_ in topology.RAILS],
            }
            if not self.guard_as_daemonset:  # the DaemonSet's socket is the role's default, in every node
                node_vars["guard_socket"] = str(lay.guard_socket)
            if (
                not self.plugin_as_daemonset
            ):  # the DaemonSet's checkpoint is the role's default, in every node
                node_vars["guard_plugin_checkpoint"] = str(lay.plugin_state_dir / "checkpoint.json")
                node_vars["preflight_plugin_checkpoint"] = node_vars["guard_plugin_checkpoint"]
            prefix = topology.NodeMachine(lay).exec_prefix()
            hosts.append(roles.NodeHost(name, tuple(prefix), node_vars))
        cluster_vars: dict[str, Any] = {
            "multus_mode": self.options.multus_mode,
            "multus_primary_cni": PRIMARY_FILE,
            "guard_mode": self.options.multus_mode,
            "guard_primary_cni": PRIMARY_FILE,
            "guard_namespace": POLICY_NAMESPACE,
            "guard_shim_interpreter": sys.executable,
            "vfs_timeout": 5,
            "plugin_namespace": PLUGIN_SERVICE_ACCOUNT[0],
            "plugin_policy_namespace": self.options.policy_namespace,
            "plugin_multus_auto_attach": self.options.auto_attach,
            # the lab runs no preflight gate (playbooks/lab.yml): auto-attach on every node as the plugin starts
            "plugin_auto_attach_node_label": "",
            "operator_namespace": OPERATOR_NAMESPACE,
            **self._deploy_vars(),
        }
        if thick:  # the guard role's default inlines the primary (no clusterNetwork: multus-cni #1449)
            # The role's DaemonSet listens on multus-shim's default socket dir; the lab process on its own.
            socket = {} if self.multus_as_daemonset else {"daemonSocketDir": THICK_SOCKET_DIR}
            cluster_vars["guard_multus_extra"] = {"daemonConfigFile": DAEMON_CONFIG, **socket}
        workdir = self.workdir / "ansible"
        return roles.write_inventory(workdir, roles.inventory(workdir, hosts, cluster_vars))

    def _deploy_vars(self) -> dict[str, Any]:
        """The roles' ``*_deploy_*`` switches (and images) for this lab's node kind.

        Real nodes run Multus (thin or thick) as the multus role's DaemonSet from the Multus image of
        that mode assembled from the pinned binaries (thick only on the nodes labelled
        :data:`~sriov_dra_lab.multus_pods.CONFIG_LABEL`, once the node run wrote its daemon config),
        the guard as the DaemonSet the guard role renders (its init container installs the shim, the
        daemon runs Multus chrooted into the node's root) and the operator as the operator role's
        Deployment, both from the product image built from ``collection/image/Containerfile`` (each
        image pinned by digest, imported into every node's containerd before its kubelet starts). The
        plugin runs as the plugin role's DaemonSet from the same image, on the nodes labelled
        :data:`~sriov_dra_lab.plugin_pods.SRIOV_READY_LABEL`, reading each node's fake sysfs tree at
        :data:`~sriov_dra_lab.plugin_pods.SYSFS_ROOT`. Simulated nodes have no container runtime:
        every switch is off and the lab starts the entrypoints as processes.
        Raises: ``images.ImageError`` when real nodes are asked for and the images were not built.
        """
        switches: dict[str, Any] = {
            "multus_deploy_daemonset": False,
            "guard_deploy_daemonset": False,
            "plugin_deploy_daemonset": False,
            "operator_deploy_deployment": False,
        }
        if self.multus_as_daemonset:
            switches["multus_deploy_daemonset"] = True
            switches["multus_image"] = self.built_image(self._multus_image_key()).reference
            if self.options.multus_mode == "thick":
                switches["multus_node_selector"] = {multus_pods.CONFIG_LABEL: "true"}
        if self.guard_as_daemonset:
            switches["guard_deploy_daemonset"] = True
            switches["guard_image"] = self.workload_image().reference
        if self.plugin_as_daemonset:
            switches["plugin_deploy_daemonset"] = True
            switches["plugin_image"] = self.workload_image().reference
            switches["plugin_sysfs_root"] = plugin_pods.SYSFS_ROOT
            switches["plugin_cdi_root"] = plugin_pods.CDI_ROOT
            switches["plugin_node_selector"] = {plugin_pods.SRIOV_READY_LABEL: "true"}
        if self.options.real_nodes and self.options.operator:
            switches["operator_deploy_deployment"] = True
            switches["operator_image"] = self.workload_image().reference
        return switches

    def built_image(self, key: str) -> images.BuiltImage:
        """The image ``key`` (``images.PRODUCT``, ``images.MULTUS_THIN``, ...) ``tools/build-image.sh`` built.

        Raises: ``images.ImageError`` naming the index and how to build it.
        """
        return images.built_images()[key]

    def workload_image(self) -> images.BuiltImage:
        """The product image the real nodes' workloads run. Raises: as :meth:`built_image`."""
        return self.built_image(images.PRODUCT)

    def node_images(self) -> list[images.BuiltImage]:
        """The images a real node imports before its kubelet starts: the product's, and the Multus image
        of the lab's mode when Multus runs as the multus role's DaemonSet. Raises: as :meth:`built_image`."""
        out = [self.workload_image()]
        if self.multus_as_daemonset:
            out.append(self.built_image(self._multus_image_key()))
        return out

    def _multus_image_key(self) -> str:
        return images.MULTUS_THICK if self.options.multus_mode == "thick" else images.MULTUS_THIN

    def _start_roles(self, inventory: Path, limit: str, name: str) -> roles.PlaybookRun:
        trees = lab_dir.run_cgroups(self.lab_id, name)
        cgroups.create(trees)
        run = roles.PlaybookRun(
            inventory.parent, inventory, kubeconfig=self.cp.kubeconfig, limit=limit, name=name, cgroups=trees
        ).start()
        self._playbook_runs.append(run)
        return run

    def _wait_node_roles(self, node_run: roles.PlaybookRun) -> None:
        """Wait for the node run, then for the cluster objects the services need (the cluster run goes on).

        The operator's ServiceAccount marks them: the operator role runs after the guard and plugin
        roles (``playbooks/lab.yml``), and its RBAC task after its CRDs and namespace. Then every
        shipped CRD must be established. Raises: ``roles.PlaybookFailed``; ``processes.ProcessFailed``
        when the objects do not appear in time.
        """
        timeout_s = max(300.0, 3 * self.options.start_timeout_s)
        node_run.wait(timeout_s)
        core = kube_client.CoreV1Api(self.api)

        def applied() -> bool:
            try:
                core.read_namespaced_service_account("sriov-dra-operator", OPERATOR_NAMESPACE)
            except kube_client.ApiException as exc:
                if exc.status == 404:
                    return False
                raise
            return True

        processes.wait_until(
            "the roles' cluster objects (ServiceAccount sriov-dra-operator)", applied, timeout_s=timeout_s
        )
        crds = load_manifests(MANIFESTS / "crds")
        apply.wait_crds_established(self.api, [c["metadata"]["name"] for c in crds])

    def _finish_roles(self, *runs: roles.PlaybookRun) -> None:
        """Wait for ``runs`` (collecting their summaries), then for every shipped CRD to be established.

        Raises: ``roles.PlaybookFailed``.
        """
        timeout_s = max(300.0, 3 * self.options.start_timeout_s)
        summaries = [s for run in runs for s in run.wait(timeout_s)]
        self.role_summaries = roles.merge(summaries)
        self._playbook_runs.clear()
        crds = load_manifests(MANIFESTS / "crds")
        apply.wait_crds_established(self.api, [c["metadata"]["name"] for c in crds])

    def _install_cni(self, node: NodeStack) -> None:
        lay = node.layout
        for name in CNI_BINARIES:
            if name in MULTUS_BINARIES and self.multus_as_daemonset:
                continue  # the multus DaemonSet copies its own binary in
            link = lay.cni_bin_dir / name
            if not link.exists():
                binaries.install(binaries.find(name), link)
        cni.build_bin_dir(
            lay.cni_bin_dir,
            {
                "sriov": [
                    sys.executable,
                    "-m",
                    "sriov_dra_lab.sriov_cni",
                    "--vf-map",
                    str(lay.vf_map),
                    "--state-dir",
                    str(lay.lab_sriov_state),
                ]
            },
        )
        primary: dict[str, Any] = {
            "cniVersion": "1.0.0",
            "name": "lab-pods",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipam": {"type": "host-local", "ranges": [[{"subnet": f"10.244.{lay.index}.0/24"}]]},
                }
            ],
        }
        if node.real is not None:
            # The roles' workloads (the operator) reach the API server at the kubernetes Service IP,
            # which the real node DNATs to its API relay (real_node.RealNode._route_service_ip).
            primary["plugins"][0]["ipam"]["routes"] = [{"dst": SERVICE_CIDR}]
        (lay.cni_conf_dir / PRIMARY_FILE).write_text(json.dumps(primary, indent=2) + "\n")
        multus_dir = lay.cni_conf_dir / "multus.d"
        multus_dir.mkdir(exist_ok=True)
        shutil.copyfile(
            self.kubeconfig("multus", "system:serviceaccount:kube-system:multus"),
            multus_dir / "multus.kubeconfig",
        )
        wb_dir = lay.cni_conf_dir / "whereabouts.d"
        wb_dir.mkdir(exist_ok=True)
        shutil.copyfile(
            self.kubeconfig("whereabouts", "system:serviceaccount:kube-system:whereabouts"),
            wb_dir / "whereabouts.kubeconfig",
        )
        flat = {
            "datastore": "kubernetes",
            "kubernetes": {"kubeconfig": "/etc/cni/net.d/whereabouts.d/whereabouts.kubeconfig"},
            "log_file": str(lay.logs / "whereabouts.log"),  # a host path, also valid in the node
            "log_level": "verbose",
        }
        (wb_dir / "whereabouts.conf").write_text(json.dumps(flat, indent=2) + "\n")
        (wb_dir / "nodename").write_text(node.name + "\n")
        if self.guard_as_daemonset:
            return  # the guard DaemonSet's init container installs the shim
        # The guard DaemonSet's init container command; the conflist is the guard role's (playbooks/lab.yml).
        done = node.machine.run_in_node(
            [
                sys.executable,
                "-c",
                "import pathlib, sys; from sriov_dra.guard import install; "
                "install.write_shim(pathlib.Path(sys.argv[1]), interpreter=sys.argv[2])",
                "/opt/cni/bin",
                sys.executable,
            ]
        )
        if done.returncode != 0:
            raise processes.ProcessFailed(
                f"installing the multus-guard shim on {node.name} failed: {done.stderr.strip()}"
            )
