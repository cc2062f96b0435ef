"""One lab node's CNI stack: stock Multus (thin and thick), the guard, IPAM plugins and lab VFs.

:class:`CniNode` builds, on a running control plane, everything a node runs below the kubelet so
the cni test tier, the guard benchmark and the lab's kubelet simulator drive the same chain:

* a CNI bin dir of recording wrappers (:func:`sriov_dra_lab.cni.build_bin_dir`) around the pinned
  ``multus``, ``multus-shim``, ``macvlan``, ``tuning``, ``host-local``, ``static``, ``whereabouts``
  binaries and the lab ``sriov`` plugin (:mod:`sriov_dra_lab.sriov_cni`), plus the installed
  ``multus-guard`` shim;
* a primary network (``macvlan`` on a host veth uplink, host-local IPAM, ``tuning`` with the
  ``mac`` capability) in one runtime conf dir per Multus mode;
* identities: a ``multus`` ServiceAccount with Multus's permissions (thin kubeconfig and the thick
  daemon's token) and a ``sriov-dra-guard`` ServiceAccount with only the shipped guard ClusterRole;
* the thick ``multus-daemon`` (:class:`sriov_dra_lab.multus.ThickMultus`) and the guard daemon
  (:class:`sriov_dra_lab.guard.GuardDaemon`), installed with ``sriov-dra-guard install``;
* the lab VF map of the ``sriov`` plugin (:meth:`CniNode.use_vfs`) and whereabouts' flat config
  file (``whereabouts_conf``, for templates' ``ipam.configuration_path``; IPPools in kube-system).

:meth:`CniNode.run` is the runtime's view (the first config of the mode's conf dir, i.e. the guard);
:meth:`CniNode.run_multus_alone` runs Multus with the config it would have without the guard
(thin: the primary inlined as thin_entrypoint writes it; thick: the daemon's own 00-multus.conf).
Stop order is the reverse of start; every process is stopped by its own handle.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kubernetes import client

from sriov_dra.host import netlink
from sriov_dra_lab import binaries, cni, control_plane, guard, multus, netns
from sriov_dra_lab.fakes import net_edit
from sriov_dra_lab.nodes import SimulatedNode

PRIMARY_NAME: Final = "10-lab-primary.conflist"
MODES: Final = ("thin", "thick")
GUARD_NAMESPACE: Final = "sriov-dra-system"
PLUGINS: Final = ("multus", "multus-shim", "macvlan", "tuning", "host-local", "static", "whereabouts")


@dataclass(frozen=True)
class CniNodeSettings:
    """What to build. ``primary_subnet`` is the primary network's host-local range."""

    node_name: str = "lab-node-1"
    cni_version: str = "1.0.0"
    primary_subnet: str = "10.244.1.0/24"
    record_calls: bool = True


class CniNode:
    """A node's CNI stack on a control plane; :meth:`start` then :meth:`stop`.

    :meth:`restart_thick` and :meth:`restart_guard` restart one daemon in between, keeping its
    on-disk state.
    """

    def __init__(
        self, cp: control_plane.ControlPlane, workdir: Path, settings: CniNodeSettings | None = None
    ) -> None:
        self.cp = cp
        self.workdir = workdir
        self.settings = settings or CniNodeSettings()
        self.bin_dir = workdir / "bin"
        self.record_file = workdir / "calls.tsv"
        self.vf_map = workdir / "lab-vfs.json"
        self.host_local_dir = workdir / "host-local"
        self.whereabouts_conf = workdir / "whereabouts.d" / "whereabouts.conf"
        self.thin_cache = workdir / "multus-thin-cache"
        self.conf_dirs = {mode: workdir / f"net.d-{mode}" for mode in MODES}
        self.guard_socket = workdir / "guard" / "multus-guard.sock"
        self.plugin_data_dir = workdir / "plugin-data"
        """Where the guard fills the device metadata files' network part (the plugin's data dir on a node)."""
        self.plugin_checkpoint = workdir / "plugin" / "checkpoint.json"
        """Where the guard's shim reads the plugin's checkpoint (``guard.pluginCheckpoint``)."""
        self.api: client.ApiClient | None = None
        self.node: SimulatedNode | None = None
        self.uplink: netns.LabVf | None = None
        self.thick: multus.ThickMultus | None = None
        self.guard: guard.GuardDaemon | None = None
        self.multus_kubeconfig = workdir / "multus.kubeconfig"
        self.guard_kubeconfig = workdir / "guard.kubeconfig"

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> CniNode:
        """Build and start everything; on failure stop what was started.

        Raises: ``binaries.BinaryMissing``; ``processes.ProcessFailed``; ``netlink.NetlinkError``;
        ``guard.InstallFailed``; API errors from the client.
        """
        paths = {name: binaries.find(name) for name in (*PLUGINS, "multus-daemon")}
        try:
            self._start(paths)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, paths: Mapping[str, Path]) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        api = self.api = self.cp.api()
        self.node = SimulatedNode(api, self.settings.node_name).start()
        plugins: dict[str, list[str]] = {name: [str(paths[name])] for name in PLUGINS}
        plugins["sriov"] = [
            sys.executable,
            "-m",
            "sriov_dra_lab.sriov_cni",
            f"--vf-map={self.vf_map}",
            f"--state-dir={self.workdir / 'lab-sriov-state'}",
        ]
        cni.build_bin_dir(
            self.bin_dir, plugins, record_file=self.record_file if self.settings.record_calls else None
        )
        self.use_vfs([])
        [self.uplink] = netns.create_vfs(["uplink"], prefix="lup")
        net_edit.set_up(self.uplink.ifname)
        for conf_dir in self.conf_dirs.values():
            conf_dir.mkdir(parents=True, exist_ok=True)
            (conf_dir / PRIMARY_NAME).write_text(json.dumps(self.primary_network(), indent=2))

        multus.install_whereabouts_crds(api)
        self.whereabouts_conf.parent.mkdir(parents=True, exist_ok=True)
        flat = {"datastore": "kubernetes", "kubernetes": {"kubeconfig": str(self.cp.kubeconfig)}}
        self.whereabouts_conf.write_text(json.dumps(flat, indent=2))
        multus.ensure_namespace(api, GUARD_NAMESPACE)
        multus_role = multus.cluster_role("lab-multus", multus.MULTUS_RULES)
        multus.service_account_kubeconfig(
            api,
            namespace="kube-system",
            name="multus",
            role=multus_role,
            path=self.multus_kubeconfig,
            server=self.cp.server,
            ca_cert=self.cp.ca_cert,
        )
        multus.service_account_kubeconfig(
            api,
            namespace=GUARD_NAMESPACE,
            name="sriov-dra-guard",
            role=multus.guard_cluster_role(),
            path=self.guard_kubeconfig,
            server=self.cp.server,
            ca_cert=self.cp.ca_cert,
        )
        self.thick = multus.ThickMultus(
            workdir=self.workdir / "thick",
            bin_dir=self.bin_dir,
            primary_config=self.conf_dirs["thick"] / PRIMARY_NAME,
            node_name=self.settings.node_name,
            server=self.cp.server,
            ca_cert=self.cp.ca_cert,
            token=multus.request_token(api, namespace="kube-system", name="multus", expiration_s=7200),
            cni_version=self.settings.cni_version,
        )
        self.thick.start()
        self.guard = guard.GuardDaemon(
            socket_path=self.guard_socket,
            kubeconfig=self.guard_kubeconfig,
            log_path=self.workdir / "guard.log",
            node_name=self.settings.node_name,
            extra_args=[f"--metadata-dir={self.plugin_data_dir}"],
        )
        self.guard.start()
        for mode in MODES:
            self.install_guard(mode)

    def install_guard(
        self,
        mode: str,
        *,
        multus_keys: Mapping[str, Any] | None = None,
        conf_dir: Path | None = None,
        verify_ordinary_selections: bool = False,
    ) -> Path:
        """(Re)install the guard's conflist for ``mode`` with the node's Multus settings (plus ``multus_keys``).

        ``conf_dir`` installs into another runtime conf dir (a variant the mode's dir keeps unchanged);
        the shim reads the plugin's checkpoint at :attr:`plugin_checkpoint`.
        """
        assert self.thick is not None
        keys: dict[str, Any]
        if mode == "thin":
            keys = {"kubeconfig": str(self.multus_kubeconfig), "config": {"cniDir": str(self.thin_cache)}}
        else:
            keys = {
                "daemonSocketDir": f"{self.thick.socket_dir}/",
                "daemonConfigFile": str(self.thick.daemon_config),
            }
        keys.update(multus_keys or {})
        return guard.install(
            bin_dir=self.bin_dir,
            conf_dir=conf_dir or self.conf_dirs[mode],
            mode=mode,
            primary_config=self.conf_dirs[mode] / PRIMARY_NAME,
            socket_path=self.guard_socket,
            multus=keys,
            plugin_checkpoint=self.plugin_checkpoint,
            verify_ordinary_selections=verify_ordinary_selections,
            check=[f"--multus-master-cni={PRIMARY_NAME}", f"--autoconfig-dir={self.conf_dirs[mode]}"],
        )

    def restart_thick(self) -> None:
        """Restart the thick ``multus-daemon`` as a DaemonSet Pod restart would: same config, socket
        dir and delegate cache dir (``thick.cache_dir``), which stay on disk in between.

        Raises: ``processes.ProcessFailed`` when the new process exits or never answers ``/healthz``.
        """
        assert self.thick is not None, "restart_thick() needs a started CniNode"
        self.thick.stop()
        self.thick.start()

    def restart_guard(self) -> None:
        """Restart the guard daemon on the same socket, kubeconfig and metrics port.

        Raises: ``processes.ProcessFailed`` when the new process exits or never answers ``/healthz``.
        """
        assert self.guard is not None, "restart_guard() needs a started CniNode"
        self.guard.stop()
        self.guard.start()

    def stop(self) -> None:
        """Stop the guard, the thick daemon and the heartbeat; delete the uplink. Idempotent."""
        if self.guard is not None:
            self.guard.stop()
        if self.thick is not None:
            self.thick.stop()
        if self.uplink is not None:
            with contextlib.suppress(netlink.NetlinkError):
                netns.delete_vfs([self.uplink])
            self.uplink = None
        if self.node is not None:
            self.node.stop(delete=True)
            self.node = None
        if self.api is not None:
            self.api.close()
            self.api = None

    # ------------------------------------------------------------------ the node's networks
    def primary_network(self) -> dict[str, Any]:
        """The primary network list: macvlan on the uplink with host-local IPAM, then tuning (mac)."""
        assert self.uplink is not None
        return {
            "cniVersion": self.settings.cni_version,
            "name": "lab-primary",
            "plugins": [
                {
                    "type": "macvlan",
                    "master": self.uplink.ifname,
                    "mode": "bridge",
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(self.host_local_dir),
                        "ranges": [[{"subnet": self.settings.primary_subnet}]],
                    },
                },
                {"type": "tuning", "capabilities": {"mac": True}},
            ],
        }

    def use_vfs(self, vfs: Sequence[netns.LabVf]) -> None:
        """Point the lab ``sriov`` plugin at these lab VFs (rewrites the VF map)."""
        netns.write_vf_map(self.vf_map, vfs)

    def attachment(
        self,
        netns_path: str,
        *,
        namespace: str,
        name: str,
        uid: str | None,
        container_id: str,
        ifname: str = "eth0",
    ) -> cni.Attachment:
        """The runtime's CNI values for one sandbox of Pod ``namespace/name``."""
        return cni.Attachment(
            container_id=container_id,
            netns=netns_path,
            cni_args=cni.k8s_args(namespace, name, uid, container_id),
            ifname=ifname,
            cni_path=(self.bin_dir,),
        )

    def run(
        self,
        mode: str,
        command: str,
        attachment: cni.Attachment,
        *,
        runtime_config: Mapping[str, Any] | None = None,
        timeout_s: float = 180.0,
        conf_dir: Path | None = None,
    ) -> cni.CniResult:
        """Run ``command`` as the runtime would with the mode's conf dir (the guard's conflist first)."""
        network = cni.load_network(cni.runtime_choice(conf_dir or self.conf_dirs[mode]))
        return cni.run_network(
            network,
            command,
            attachment,
            bin_dirs=[self.bin_dir],
            runtime_config=runtime_config,
            timeout_s=timeout_s,
        )

    def multus_alone_config(self, mode: str) -> dict[str, Any]:
        """The config Multus would get from the runtime without the guard (see the module docstring)."""
        assert self.thick is not None
        if mode == "thick":
            doc = json.loads((self.thick.generated_conf_dir / "00-multus.conf").read_text())
            assert isinstance(doc, dict)
            return doc
        return {
            "cniVersion": self.settings.cni_version,
            "name": "multus-cni-network",
            "type": "multus",
            "kubeconfig": str(self.multus_kubeconfig),
            "cniDir": str(self.thin_cache),
            "delegates": [self.primary_network()],
        }

    def run_multus_alone(self, mode: str, command: str, attachment: cni.Attachment) -> cni.CniResult:
        """Run stock Multus directly, as a node without the guard would."""
        plugin = self.bin_dir / ("multus-shim" if mode == "thick" else "multus")
        return cni.invoke(plugin, command, attachment, self.multus_alone_config(mode))

    def recorded(self, container_id: str) -> list[cni.RecordedCall]:
        """Plugin calls recorded for ``container_id``, oldest first."""
        return cni.recorded_calls(self.record_file, container_id=container_id)

    def remove(self) -> None:
        """Delete the work directory (after :meth:`stop`)."""
        shutil.rmtree(self.workdir, ignore_errors=True)
