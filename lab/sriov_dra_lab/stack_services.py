"""Starting and stopping the lab's services: processes through their entrypoints, or the roles' Pods.

This module owns step 5 and 6 of :class:`~sriov_dra_lab.stack.LabStack`'s start and the
restarts tests use, as methods the stack inherits: the API relay into a node, thick Multus, the
guard daemon, the DRA plugin (a process with a Node-bound token of its ServiceAccount and the
shipped policy-namespace Role; on real nodes the plugin role's DaemonSet Pod instead, through
:mod:`~sriov_dra_lab.plugin_pods`), the synthetic GPU plugin, the kubelet simulator and the
operator, each process started inside the node's namespaces, killed with the lab (``setpriv
--pdeathsig KILL``) and waited for until it is ready.

It must never import a service module, or start a service other than through its entrypoint.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Final

import yaml
from kubernetes import client

from sriov_dra.kube import apply
from sriov_dra_lab import (
    binaries,
    kubelet_pods,
    kubelet_sim,
    multus,
    multus_pods,
    plugin_pods,
    processes,
    sandboxes,
    session,
)
from sriov_dra_lab.paths import MANIFESTS
from sriov_dra_lab.stack_base import (
    DRIVER_NAME,
    OPERATOR_NAMESPACE,
    PLUGIN_SERVICE_ACCOUNT,
    POLICY_NAMESPACE,
    NodeStack,
    StackState,
    load_manifests,
)
from sriov_dra_lab.stack_install import DAEMON_CONFIG, PRIMARY_FILE, THICK_SOCKET_DIR

SA_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"


class StackServices(StackState):
    """The lab's service starters and stoppers (see the module docstring); mixed into the stack."""

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
                "sriov_dra_lab.api_proxy",
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
                # The plugin's data dir: the network part of the device metadata files after a verified ADD.
                "--metadata-dir",
                str(node.layout.plugins_dir / DRIVER_NAME),
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
        """Start ``node``'s DRA plugin process (after a stop: the same checkpoint). Returns its process.

        Raises: ``processes.ProcessFailed`` when it exits or does not register in time; ``RuntimeError``
        when the plugin runs as the DaemonSet (nothing changed then).
        """
        if self.plugin_as_daemonset:
            raise RuntimeError(
                f"the plugin on {node.name} runs as the plugin role's DaemonSet: start_plugin_pod, "
                "switch_plugin_policy_namespace or delete_plugin_pod change it"
            )
        if policy_namespace is not None:
            node.policy_namespace = policy_namespace
        self._grant_policy_reads(node.policy_namespace)
        lay = node.layout
        argv = [
            sys.executable,
            "-m",
            "sriov_dra_lab.launch_plugin",
            "--node-name",
            node.name,
            "--kubeconfig",
            str(self._plugin_kubeconfig(node)),
            "--sysfs-root",
            str(lay.sysfs_root),
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
                "sriov_dra_lab.gpu_plugin",
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
        """Stop ``node``'s plugin process (SIGTERM, then SIGKILL after the grace period).

        Raises: ``RuntimeError`` when the plugin runs as the DaemonSet (a Pod is deleted, not stopped).
        """
        if self.plugin_as_daemonset:
            raise RuntimeError(
                f"the plugin on {node.name} runs as the plugin role's DaemonSet: use delete_plugin_pod"
            )
        proc = node.processes.pop("plugin", None)
        if proc is not None:
            proc.stop()

    # --- the plugin as the plugin role's DaemonSet (real nodes) -------------------------------------

    def _registration(self, node: NodeStack) -> Path:
        """The registry directory that holds the plugin Pods' registration sockets (one per Pod)."""
        return node.layout.registry_dir

    def start_multus_pod(self, node: NodeStack) -> str:
        """Let thick Multus's DaemonSet run on ``node`` (its daemon config is written: the node label) and
        wait until the daemon serves on the node's :data:`~sriov_dra_lab.multus_pods.SOCKET`.

        Returns the Pod's name. Raises: ``processes.ProcessFailed`` naming the Pod's state.
        """
        real = node.real
        assert real is not None, "thick Multus runs as a DaemonSet only on real nodes"
        multus_pods.mark_config_written(self.api, node.name)
        pod = multus_pods.wait_running(
            self.api,
            node.name,
            lambda: real.run_in_node(["test", "-S", multus_pods.SOCKET]).returncode == 0,
            timeout_s=max(120.0, self.options.start_timeout_s),
        )
        return str(pod.metadata.name)

    def start_plugin_pod(self, node: NodeStack) -> str:
        """Let the DaemonSet run on ``node`` (its VFs exist: the node label) and wait until it is registered.

        Returns the Pod's name. Raises: ``processes.ProcessFailed`` naming the Pod's state.
        """
        plugin_pods.mark_ready(self.api, node.name)
        pod = plugin_pods.wait_running(
            self.api,
            PLUGIN_SERVICE_ACCOUNT[0],
            node.name,
            self._registration(node),
            timeout_s=max(120.0, self.options.start_timeout_s),
        )
        return str(pod.metadata.name)

    def delete_plugin_pod(self, node: NodeStack, *, wait: bool = True) -> str:
        """Delete ``node``'s plugin Pod by hand; with ``wait``, until its replacement is Ready and registered.

        Returns the deleted Pod's UID. Raises: ``LookupError`` (no Pod), ``processes.ProcessFailed``.
        """
        uid = plugin_pods.delete_pod(self.api, PLUGIN_SERVICE_ACCOUNT[0], node.name)
        if wait:
            plugin_pods.wait_running(
                self.api,
                PLUGIN_SERVICE_ACCOUNT[0],
                node.name,
                self._registration(node),
                timeout_s=max(120.0, self.options.start_timeout_s),
                after_uid=uid,
            )
        return uid

    def switch_plugin_policy_namespace(self, policy_namespace: str) -> None:
        """Run every node's plugin on ``policy_namespace`` (an operator-managed install watches the operator's).

        Processes are restarted with the new ``--namespace``; the DaemonSet is edited and rolled out,
        node by node, each new Pod waited for until registered. Raises: ``processes.ProcessFailed``.
        """
        if not self.plugin_as_daemonset:
            for node in self.nodes:
                self.stop_plugin(node)
                self.start_plugin(node, policy_namespace=policy_namespace)
            return
        self._grant_policy_reads(policy_namespace)
        plugin_pods.set_policy_namespace(self.api, PLUGIN_SERVICE_ACCOUNT[0], policy_namespace)
        for node in self.nodes:
            node.policy_namespace = policy_namespace
            plugin_pods.wait_running(
                self.api,
                PLUGIN_SERVICE_ACCOUNT[0],
                node.name,
                self._registration(node),
                timeout_s=max(180.0, 2 * self.options.start_timeout_s),
            )

    def plugin_log(self, node: NodeStack) -> list[str]:
        """The lines ``node``'s plugin logged: its Pod's container log, or its process's log file."""
        return self.service_log(node, "plugin")

    def service_log(self, node: NodeStack, service: str) -> list[str]:
        """The lines ``service`` (``plugin`` or ``guard``) logged on ``node``, wherever it runs.

        A DaemonSet's Pod log (``kubectl logs``; the guard's namespace is the plugin's in the lab), or
        the process's ``<logs>/<node>/<service>.log``. Raises: ``KeyError`` for another service.
        """
        as_pod = {"plugin": self.plugin_as_daemonset, "guard": self.guard_as_daemonset}[service]
        if as_pod:
            return plugin_pods.log_lines(self.api, PLUGIN_SERVICE_ACCOUNT[0], node.name, service=service)
        path = node.layout.logs / f"{service}.log"
        return path.read_text(errors="replace").splitlines() if path.exists() else []

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
        settings = kubelet_pods.SimSettings(
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
