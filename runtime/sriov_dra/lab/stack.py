"""The whole lab as one object: control plane, simulated nodes and every service, started and stopped.

Owns the lab's wiring, in this order (``LabStack.start``), each step after the previous succeeded:

1. the control plane (:mod:`~sriov_dra.lab.controlplane`, with an audit log);
2. lab-only cluster objects no role ships: the whereabouts CRDs, the lab's Multus/whereabouts
   identities, the synthetic GPU DeviceClass;
3. per node: the Node (Ready, with a Lease), its machine (:mod:`~sriov_dra.lab.topology`: fake
   sysfs, node network and mount namespaces, veth VFs), the API relay into the node namespace, the
   node's CNI files the roles expect to find (bin dir with the pinned plugins, primary network,
   Multus and whereabouts kubeconfigs) and the ``multus-guard`` shim, written by the command the
   guard DaemonSet's init container runs;
4. ``playbooks/lab.yml`` (:mod:`~sriov_dra.lab.roles`): the roles ``multus``, ``guard``, ``vfs``,
   ``plugin`` and ``operator`` without their DaemonSets/Deployment, i.e. every CRD, DeviceClass,
   namespace, ServiceAccount and RBAC object they ship, Multus's node files, the guard's conflist
   (``sriovnet.dra.cni_config``) and the VF counts checked on the fake sysfs;
5. per node, the services: thick Multus (``--multus thick``), the guard daemon, the DRA plugin
   (``python -m sriov_dra.driver``), the synthetic ``gpu.nvidia.com`` kubelet plugin
   (:mod:`~sriov_dra.lab.gpu_plugin`), the kubelet simulator (registered with both), and the
   synthetic GPU ResourceSlice;
6. the operator (``python -m sriov_dra.operator``).

Services are started as processes through their entrypoints, inside the node's namespaces (no
service module is imported): there is no container runtime for the roles' workloads. Stop is the
reverse order; each process is stopped by its PID.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml
from kubernetes import client

from sriov_dra.host import strictyaml
from sriov_dra.kube import apply
from sriov_dra.lab import (
    binaries,
    cni,
    controlplane,
    iproute,
    kubelet_sim,
    multus,
    processes,
    roles,
    sandboxes,
    session,
    topology,
)
from sriov_dra.lab.nodes import SimulatedNode

log = logging.getLogger(__name__)

MANIFESTS: Final = Path(__file__).resolve().parents[1] / "manifests"
DRIVER_NAME: Final = "sriovnetwork.k8snetworkplumbingwg.io"
POLICY_NAMESPACE: Final = "dra-driver-sriov"
OPERATOR_NAMESPACE: Final = "sriov-network-operator"
PRIMARY_FILE: Final = "10-lab-pods.conflist"
DAEMON_CONFIG: Final = "/etc/cni/net.d/multus.d/daemon-config.json"
THICK_SOCKET_DIR: Final = "/run/multus/sock/"
"""The daemon removes its socket directory at start, so it must not be the mount point itself."""
STATE_FILE: Final = "lab.json"
LOGS_DIR: Final = "logs"
"""Under the work directory: ``controlplane/<component>.log``, ``<node>/<service>.log``, ``operator.log``."""
PLUGIN_SERVICE_ACCOUNT: Final = ("dra-driver-sriov", "dra-driver-sriov")
"""(namespace, name) of the plugin's ServiceAccount, the one the shipped plugin RBAC binds."""
SA_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
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


@dataclass
class NodeStack:
    """One running lab node."""

    layout: topology.NodeLayout
    machine: topology.NodeMachine
    node: SimulatedNode
    kubelet: kubelet_sim.KubeletSimulator | None = None
    processes: dict[str, processes.Process] = field(default_factory=dict)
    policy_namespace: str = POLICY_NAMESPACE

    @property
    def name(self) -> str:
        """The Node name."""
        return self.layout.name


def load_manifests(*paths: Path) -> list[dict[str, Any]]:
    """Every YAML document of ``paths`` (files, or directories of ``*.yaml``), in order.

    Raises: InvalidSpec when a file is not strict YAML (:mod:`sriov_dra.host.strictyaml`).
    """
    docs: list[dict[str, Any]] = []
    for path in paths:
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            docs.extend(d for d in strictyaml.read_all(file) if isinstance(d, dict))
    return docs


def clean_stale(workdir: Path) -> list[str]:
    """Remove what a lab killed without its stop left in ``workdir``: mounts, node netns, socket dirs.

    Reads the lab id from ``<workdir>/lab.json``; unmounts every mount under ``workdir`` (deepest
    first), deletes the network namespaces ``sdl<id>-*`` and ``/run/sdl-<id>``. Returns what it
    removed (one line each); touches nothing of another lab.
    """
    done: list[str] = []
    root = workdir.resolve()
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        mounts = [line.split()[4] for line in f]
    for target in sorted(
        {m for m in mounts if m == str(root) or m.startswith(f"{root}/")}, key=len, reverse=True
    ):
        if subprocess.run(["umount", target], capture_output=True, check=False).returncode == 0:
            done.append(f"unmounted {target}")
    try:
        lab_id = json.loads((root / STATE_FILE).read_text())["labId"]
    except (OSError, ValueError, KeyError):
        return done
    prefix = f"sdl{lab_id}-"
    if iproute.NETNS_DIR.is_dir():
        for entry in sorted(iproute.NETNS_DIR.iterdir()):
            if entry.name.startswith(prefix):
                iproute.del_netns(entry.name)
                done.append(f"removed network namespace {entry.name}")
    run_dir = topology.run_root(lab_id)
    if run_dir.exists():
        shutil.rmtree(run_dir, ignore_errors=True)
        done.append(f"removed {run_dir}")
    return done


LAB_MARKERS: Final = (STATE_FILE, "controlplane", "admin.kubeconfig", "pki")
"""Files only a lab work directory holds (the last two: the layout earlier ``lab up`` runs left)."""


def reset_workdir(workdir: Path) -> list[str]:
    """Make ``workdir`` ready for a new lab: clean a previous lab's leftovers and remove its files.

    Touches ``workdir`` only when it holds one of :data:`LAB_MARKERS` (never a directory that is
    not a lab's). Returns what :func:`clean_stale` removed, one line each.
    """
    if not any((workdir / marker).exists() for marker in LAB_MARKERS):
        return []
    done = clean_stale(workdir)  # a lab killed before its stop
    shutil.rmtree(workdir)
    return done


class LabStack:
    """A running lab (see the module docstring). Use :meth:`start` / :meth:`stop`."""

    def __init__(self, options: LabOptions) -> None:
        self.options = options
        self.workdir = options.workdir.resolve()
        self.logs_dir = self.workdir / LOGS_DIR
        """Every component log: ``controlplane/``, ``<node>/`` and ``operator.log``."""
        self.lab_id = secrets.token_hex(2)
        self.cp = controlplane.ControlPlane(
            controlplane.ControlPlaneSettings(
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
        self.role_summaries: list[roles.RoleSummary] = []
        self._playbook_runs: list[roles.PlaybookRun] = []

    # ------------------------------------------------------------------ lifecycle
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
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / STATE_FILE).write_text(json.dumps({"labId": self.lab_id}) + "\n")
        try:
            self.cp.start()
            self.api = self.cp.api()
            inventory = self._write_inventory()
            cluster_run = self._start_roles(inventory, "localhost", "cluster")
            self._install_lab_objects()
            for index in range(1, self.options.nodes + 1):
                self._prepare_node(index)
            node_run = self._start_roles(inventory, roles.NODE_GROUP, "nodes")
            self._finish_roles(cluster_run, node_run)
            for node in self.nodes:
                self._start_services(node)
            if self.options.operator:
                self.start_operator()
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
            for proc in reversed(list(node.processes.values())):
                proc.stop()
            node.processes.clear()
            node.machine.destroy()
            node.node.stop()
        self.nodes.clear()
        if self.api is not None:
            self.api.close()
            self.api = None
        self.cp.stop()
        # Pod sandboxes outlive the kubelet simulator by design; a stopped lab leaves none of them.
        for line in clean_stale(self.workdir):
            log.info("lab stop: %s", line)
        shutil.rmtree(topology.run_root(self.lab_id), ignore_errors=True)

    # ------------------------------------------------------------------ cluster
    def kubeconfig(self, name: str, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A client-certificate kubeconfig for ``user`` (cached by ``name``)."""
        if name not in self._kubeconfigs:
            self._kubeconfigs[name] = self.cp._kubeconfig(name, user, groups)
        return self._kubeconfigs[name]

    def _install_lab_objects(self) -> None:
        """What no role ships: whereabouts' CRDs, the lab's Multus/whereabouts identities, the GPU class."""
        crds = load_manifests(MANIFESTS / "lab" / "whereabouts-crds.yaml")
        apply.apply_objects(self.api, crds)
        rbac = load_manifests(MANIFESTS / "lab" / "node-components-rbac.yaml")
        apply.apply_objects(self.api, [*rbac, session.gpu_device_class()])
        apply.wait_crds_established(self.api, [c["metadata"]["name"] for c in crds])

    def _write_inventory(self) -> Path:
        """The inventory of ``playbooks/lab.yml`` for this lab's nodes (see :mod:`~sriov_dra.lab.roles`)."""
        thick = self.options.multus_mode == "thick"
        hosts = []
        for index, name in enumerate(session.node_names(self.options.nodes), start=1):
            lay = topology.NodeLayout.for_node(self.workdir, self.lab_id, name, index)
            node_vars: dict[str, Any] = {
                "guard_socket": str(lay.guard_socket),
                "vfs_node_name": name,
                "vfs_host_root": str(lay.sysfs_root),
                "vfs_pfs": [{"pf": pf, "num_vfs": self.options.vfs_per_pf} for pf, *_ in topology.RAILS],
            }
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
            "operator_namespace": OPERATOR_NAMESPACE,
        }
        if thick:  # the guard role's default inlines the primary (no clusterNetwork: multus-cni #1449)
            cluster_vars["guard_multus_extra"] = {
                "daemonConfigFile": DAEMON_CONFIG,
                "daemonSocketDir": THICK_SOCKET_DIR,
            }
        workdir = self.workdir / "ansible"
        return roles.write_inventory(workdir, roles.inventory(workdir, hosts, cluster_vars))

    def _start_roles(self, inventory: Path, limit: str, name: str) -> roles.PlaybookRun:
        run = roles.PlaybookRun(
            inventory.parent, inventory, kubeconfig=self.cp.kubeconfig, limit=limit, name=name
        ).start()
        self._playbook_runs.append(run)
        return run

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

    # ------------------------------------------------------------------ nodes
    def _prepare_node(self, index: int) -> NodeStack:
        """Node object, machine, API relay and the node's CNI files; the services start later."""
        name = session.node_names(index)[-1]
        layout = topology.NodeLayout.for_node(self.workdir, self.lab_id, name, index)
        sim_node = SimulatedNode(
            self.api, name, labels={**session.NODE_LABELS, "kubernetes.io/hostname": name}
        )
        machine = topology.NodeMachine(layout, vfs_per_pf=self.options.vfs_per_pf)
        node = NodeStack(
            layout=layout, machine=machine, node=sim_node, policy_namespace=self.options.policy_namespace
        )
        self.nodes.append(node)
        sim_node.start()
        machine.create()
        self._start_apiproxy(node)
        self._install_cni(node)
        return node

    def _start_services(self, node: NodeStack) -> None:
        """Start ``node``'s processes (after the roles installed their objects and files)."""
        if self.options.multus_mode == "thick":
            self._start_thick_multus(node)
        self._start_guard(node)
        self.start_plugin(node)
        self._start_gpu_plugin(node)
        self.start_kubelet(node)
        apply.apply_objects(self.api, [session.gpu_slice(node.name)])

    def node(self, name: str) -> NodeStack:
        """The running node ``name``. Raises: ``KeyError``."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"no lab node {name!r}; nodes: {[n.name for n in self.nodes]}")

    def _spawn(
        self,
        node: NodeStack | None,
        name: str,
        argv: list[str],
        *,
        in_node: bool = True,
        env: dict[str, str] | None = None,
    ) -> processes.Process:
        prefix = node.machine.exec_prefix() if (node is not None and in_node) else []
        logs = node.layout.logs if node is not None else self.logs_dir
        # setpriv asks for SIGKILL when the lab dies, instead of Process's preexec_fn: running Python
        # in a child forked from a process with live gRPC threads (the kubelet simulators' plugin
        # connections) can abort the child before it execs.
        proc = processes.Process(
            name=name,
            argv=["setpriv", "--pdeathsig", "KILL", "--", *prefix, *argv],
            log_path=logs / f"{name}.log",
            env={**os.environ, **env} if env else None,
            die_with_parent=False,
        )
        proc.start()
        if node is not None:
            node.processes[name] = proc
        return proc

    def _start_apiproxy(self, node: NodeStack) -> None:
        port = self.cp.ports["kube-apiserver"]
        proc = self._spawn(
            node,
            "apiproxy",
            [
                sys.executable,
                "-m",
                "sriov_dra.lab.apiproxy",
                "--netns",
                node.layout.netns_path,
                "--port",
                str(port),
            ],
            in_node=False,
        )
        processes.wait_until(
            f"the API relay into {node.name}",
            lambda: "relaying" in processes.tail(proc.log_path, 5),
            timeout_s=self.options.start_timeout_s,
            process=proc,
        )

    def _install_cni(self, node: NodeStack) -> None:
        lay = node.layout
        for name in CNI_BINARIES:
            link = lay.cni_bin_dir / name
            if not link.exists():
                link.symlink_to(binaries.find(name))
        cni.build_bin_dir(
            lay.cni_bin_dir,
            {
                "sriov": [
                    sys.executable,
                    "-m",
                    "sriov_dra.lab.sriov_cni",
                    "--vf-map",
                    str(lay.vf_map),
                    "--state-dir",
                    str(lay.lab_sriov_state),
                ]
            },
        )
        primary = {
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

    def _start_thick_multus(self, node: NodeStack) -> None:
        """Thick Multus: ``multus-daemon`` on the node, pinned to the lab primary, in-cluster credentials."""
        lay = node.layout
        sa = lay.host_dir(SA_DIR)
        (sa / "token").write_text(
            multus.request_token(self.api, namespace="kube-system", name="multus", expiration_s=86400)
        )
        (sa / "ca.crt").write_bytes(self.cp.ca_cert.read_bytes())
        (sa / "namespace").write_text("kube-system")
        (lay.host_dir("/run/multus") / "generated").mkdir(exist_ok=True)
        config = {
            "cniVersion": "1.0.0",
            "logToStderr": True,
            "logLevel": "verbose",
            "socketDir": THICK_SOCKET_DIR,
            "multusConfigFile": "auto",
            "multusAutoconfigDir": "/etc/cni/net.d",
            "multusMasterCNI": PRIMARY_FILE,
            "cniConfigDir": "/run/multus/generated",
            "binDir": "/opt/cni/bin",
            "cniDir": "/var/lib/cni/multus",
        }
        # Replaces the multus role's daemon config, which is shaped for the DaemonSet's container (/host
        # mounts, chroot); both pin the same primary.
        host_config = lay.cni_conf_dir / DAEMON_CONFIG.removeprefix("/etc/cni/net.d/")
        host_config.write_text(json.dumps(config, indent=2) + "\n")
        port = self.cp.ports["kube-apiserver"]
        proc = self._spawn(
            node,
            "multus-daemon",
            [str(binaries.find("multus-daemon")), "-config", DAEMON_CONFIG],
            env={
                "KUBERNETES_SERVICE_HOST": "127.0.0.1",
                "KUBERNETES_SERVICE_PORT": str(port),
                "MULTUS_NODE_NAME": node.name,
                "CNI_PATH": "/opt/cni/bin",
            },
        )
        processes.wait_until(
            f"thick Multus on {node.name}",
            (lay.host_dir("/run/multus") / "sock" / "multus.sock").exists,
            timeout_s=self.options.start_timeout_s,
            process=proc,
        )

    def _start_guard(self, node: NodeStack) -> None:
        # The ServiceAccount the guard role creates and binds to the shipped ClusterRole.
        kubeconfig = self.kubeconfig("guard", f"system:serviceaccount:{POLICY_NAMESPACE}:sriov-dra-guard")
        proc = self._spawn(
            node,
            "guard",
            [
                sys.executable,
                "-m",
                "sriov_dra.guard.main",
                "serve",
                "--socket",
                str(node.layout.guard_socket),
                "--kubeconfig",
                str(kubeconfig),
                "--node-name",
                node.name,
                "--metrics-address",
                "",
                "--log-format",
                "json",
            ],
        )
        processes.wait_until(
            f"the guard socket on {node.name}",
            node.layout.guard_socket.exists,
            timeout_s=self.options.start_timeout_s,
            process=proc,
        )

    def start_plugin(self, node: NodeStack, *, policy_namespace: str | None = None) -> processes.Process:
        """Start ``node``'s DRA plugin (after a stop: the same checkpoint). Returns its process.

        Raises: ``processes.ProcessFailed`` when it exits or does not register in time.
        """
        if policy_namespace is not None:
            node.policy_namespace = policy_namespace
        self._grant_policy_reads(node.policy_namespace)
        lay = node.layout
        argv = [
            sys.executable,
            "-m",
            "sriov_dra.driver",
            "--node-name",
            node.name,
            "--kubeconfig",
            str(self._plugin_kubeconfig(node)),
            "--sysfs-root",
            str(lay.sysfs_root),
            "--fake-sysfs-kernel",
            "--kubelet-plugins-directory-path",
            str(lay.plugins_dir),
            "--kubelet-registrar-directory-path",
            str(lay.registry_dir),
            "--cdi-root",
            str(lay.cdi_root),
            "--state-dir",
            str(lay.plugin_state_dir),
            "--namespace",
            node.policy_namespace,
            "--log-format",
            "json",  # the shipped default: one schema (sriov_dra.servicekit.logs) across the services
        ]
        if self.options.auto_attach:
            argv.append("--multus-auto-attach")
        proc = self._spawn(node, "plugin", argv)
        registration = lay.registry_dir / f"{DRIVER_NAME}-reg.sock"
        processes.wait_until(
            f"the DRA plugin's registration socket on {node.name}",
            registration.exists,
            timeout_s=self.options.start_timeout_s,
            process=proc,
        )
        return proc

    def _start_gpu_plugin(self, node: NodeStack) -> None:
        lay = node.layout
        proc = self._spawn(
            node,
            "gpu-plugin-synthetic",
            [
                sys.executable,
                "-m",
                "sriov_dra.lab.gpu_plugin",
                "--node-name",
                node.name,
                "--kubeconfig",
                str(self.cp.kubeconfig),
                "--plugins-dir",
                str(lay.plugins_dir),
                "--registry-dir",
                str(lay.registry_dir),
            ],
        )
        processes.wait_until(
            f"the synthetic GPU plugin on {node.name}",
            (lay.registry_dir / f"{session.GPU_DRIVER}-reg.sock").exists,
            timeout_s=self.options.start_timeout_s,
            process=proc,
        )

    def _plugin_kubeconfig(self, node: NodeStack) -> Path:
        """A kubeconfig with a token of the plugin's ServiceAccount bound to ``node``'s Node object.

        A DaemonSet Pod's projected token is tied to its node, which is what the shipped RBAC's
        ``resourceclaims/driver`` ``associated-node:*`` verbs require; binding the lab token to the
        Node gives the plugin process the same association.
        """
        path = node.layout.root / "plugin.kubeconfig"
        if path.exists():
            return path
        body = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(
                audiences=None,
                expiration_seconds=86400,
                bound_object_ref=client.V1BoundObjectReference(
                    api_version="v1", kind="Node", name=node.name, uid=node.node.uid
                ),
            )
        )
        answer = client.CoreV1Api(self.api).create_namespaced_service_account_token(
            PLUGIN_SERVICE_ACCOUNT[1], PLUGIN_SERVICE_ACCOUNT[0], body
        )
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "lab",
                    "cluster": {"server": self.cp.server, "certificate-authority": str(self.cp.ca_cert)},
                }
            ],
            "users": [{"name": "plugin", "user": {"token": answer.status.token}}],
            "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "plugin"}}],
            "current-context": "lab",
        }
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        path.chmod(0o600)
        return path

    def _grant_policy_reads(self, namespace: str) -> None:
        """The shipped policy-namespace Role and RoleBinding, rendered into ``namespace``.

        An operator-managed install watches the operator's namespace; the role renders the same
        Role there (the ServiceAccount stays the plugin's).
        """
        docs = [
            {**d, "metadata": {**d["metadata"], "namespace": namespace}}
            for d in load_manifests(MANIFESTS / "plugin" / "rbac.yaml")
            if d["kind"] in ("Role", "RoleBinding")
        ]
        apply.apply_objects(self.api, docs)

    def stop_plugin(self, node: NodeStack) -> None:
        """Stop ``node``'s plugin (SIGTERM, then SIGKILL after the grace period)."""
        proc = node.processes.pop("plugin", None)
        if proc is not None:
            proc.stop()

    def start_kubelet(self, node: NodeStack) -> kubelet_sim.KubeletSimulator:
        """Start ``node``'s kubelet simulator on its checkpoint and wait for the plugin to register.

        Raises: ``processes.ProcessFailed`` when the plugin does not register in time.
        """
        lay = node.layout
        kubeconfig = self.kubeconfig(f"kubelet-{node.name}", f"system:node:{node.name}", ("system:nodes",))
        runtime = sandboxes.RuntimeSettings(
            conf_dir=lay.cni_conf_dir,
            bin_dir=lay.cni_bin_dir,
            bin_dir_in_node="/opt/cni/bin",
            exec_prefix=tuple(node.machine.exec_prefix()),
            netns_prefix=f"sdl{self.lab_id}-",
        )
        settings = kubelet_sim.SimSettings(
            node_name=node.name,
            registry_dir=lay.registry_dir,
            state_file=lay.kubelet_state_dir / "state.json",
            runtime=runtime,
        )
        from sriov_dra.kube import client as kube_client

        sim = kubelet_sim.KubeletSimulator(kube_client.from_kubeconfig(kubeconfig), settings).start()
        node.kubelet = sim
        for driver in (DRIVER_NAME, session.GPU_DRIVER):
            if not sim.wait_registered(driver, timeout_s=self.options.start_timeout_s):
                raise processes.ProcessFailed(
                    f"the {driver} plugin on {node.name} did not register with the kubelet simulator; see "
                    f"the logs in {lay.logs}"
                )
        return sim

    def stop_kubelet(self, node: NodeStack) -> None:
        """Stop ``node``'s kubelet simulator (its checkpoint and the Pods' sandboxes stay)."""
        if node.kubelet is not None:
            node.kubelet.stop()
            node.kubelet.api.close()
            node.kubelet = None

    def start_operator(self) -> processes.Process:
        """Start the operator in :data:`OPERATOR_NAMESPACE` with its shipped RBAC identity."""
        kubeconfig = self.kubeconfig(
            "operator", f"system:serviceaccount:{OPERATOR_NAMESPACE}:sriov-dra-operator"
        )
        self.operator = self._spawn(
            None,
            "operator",
            [
                sys.executable,
                "-m",
                "sriov_dra.operator",
                "--kubeconfig",
                str(kubeconfig),
                "--namespace",
                OPERATOR_NAMESPACE,
                "--leader-elect",
                "false",
                "--metrics-address",
                "",
                "--log-format",
                "json",
            ],
        )
        return self.operator

    def environment(self) -> dict[str, str]:
        """``KUBECONFIG`` for a shell that wants to look at the lab."""
        return {**os.environ, "KUBECONFIG": str(self.cp.kubeconfig)}
