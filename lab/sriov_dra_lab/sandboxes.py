"""The container runtime's network part, simulated: Pod sandboxes and the CNI calls around them.

Does what containerd's CRI plugin does for a Pod's network, and nothing else:

- **start**: create a network namespace for the sandbox (named ``<prefix><pod uid 8>-<n>``), pick
  the node's CNI config like libcni (the lexically first ``.conf``/``.conflist``/``.json`` of the
  node's ``/etc/cni/net.d``), and run its plugins for ADD in list order with ``prevResult``
  chaining, ``CNI_IFNAME=eth0`` and the Kubernetes ``CNI_ARGS`` (``IgnoreUnknown``,
  ``K8S_POD_NAMESPACE``, ``K8S_POD_NAME``, ``K8S_POD_INFRA_CONTAINER_ID``, ``K8S_POD_UID``). On a
  failed ADD the runtime undoes it: DEL, then the namespace is removed;
- **stop**: DEL in reverse order with the cached ADD result as ``prevResult`` (libcni's cache),
  then remove the namespace. A failed DEL keeps the namespace so that DEL can be retried.

Every plugin runs *on the node*: the command is prefixed with the node's ``nsenter`` argv
(:meth:`sriov_dra_lab.topology.NodeMachine.exec_prefix`) and ``CNI_PATH`` is the node's
``/opt/cni/bin``. The config is passed byte-for-byte as libcni builds it
(:func:`sriov_dra_lab.cni.plugin_config`). Never interprets a plugin's result beyond reading
its addresses for the Pod status.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sriov_dra_lab import cni, iproute
from sriov_dra_lab import kubelet_state as state


@dataclass(frozen=True)
class RuntimeSettings:
    """Where a node's CNI files are, and how to run a command on the node.

    Units: ``cni_timeout_s`` seconds per plugin call.
    Shapes: ``conf_dir`` and ``bin_dir`` are host paths; ``bin_dir_in_node`` is the same
    directory as the node sees it (``CNI_PATH``); ``exec_prefix`` the argv prefix entering the
    node's namespaces (empty: run on the host).
    """

    conf_dir: Path
    bin_dir: Path
    bin_dir_in_node: str
    exec_prefix: tuple[str, ...]
    netns_prefix: str
    cni_timeout_s: float = 120.0


class SandboxError(RuntimeError):
    """A sandbox could not be started or stopped; the message is what the runtime would report."""


def _invoke(
    settings: RuntimeSettings,
    plugin_type: str,
    command: str,
    attachment: cni.Attachment,
    conf: Mapping[str, Any],
) -> cni.CniResult:
    if not os.access(settings.bin_dir / plugin_type, os.X_OK):
        raise SandboxError(
            f"failed to find plugin {plugin_type!r} in path [{settings.bin_dir_in_node}] "
            f"(host directory {settings.bin_dir}); install it on the node"
        )
    argv = [*settings.exec_prefix, f"{settings.bin_dir_in_node}/{plugin_type}"]
    start = time.monotonic()
    proc = subprocess.run(
        argv,
        input=json.dumps(conf).encode(),
        capture_output=True,
        env=attachment.env(command),
        timeout=settings.cni_timeout_s,
        check=False,
    )
    return cni.CniResult(
        exit_code=proc.returncode,
        stdout=proc.stdout.decode("utf-8", "replace"),
        stderr=proc.stderr.decode("utf-8", "replace"),
        duration_s=time.monotonic() - start,
    )


def run_network(
    settings: RuntimeSettings,
    network: Mapping[str, Any],
    command: str,
    attachment: cni.Attachment,
    *,
    prev_result: Mapping[str, Any] | None = None,
) -> cni.CniResult:
    """Run every plugin of ``network`` for ``command`` on the node, as libcni does.

    ADD in order feeding each result forward; DEL/CHECK in reverse with ``prev_result``. Stops
    at the first failure and returns it. Raises: :class:`SandboxError` for a missing plugin.
    """
    plugins = [p for p in network.get("plugins", []) if isinstance(p, Mapping)]
    order = plugins if command == "ADD" else list(reversed(plugins))
    last = cni.CniResult(0, "", "", 0.0)
    previous = dict(prev_result) if (prev_result and command != "ADD") else None
    for plugin in order:
        conf = cni.plugin_config(network, plugin, prev_result=previous)
        last = _invoke(settings, str(plugin.get("type")), command, attachment, conf)
        if not last.ok:
            return last
        if command == "ADD":
            previous = last.result
    return last


def _failure(result: cni.CniResult) -> str:
    error = result.error or {}
    text = str(error.get("msg") or result.stderr.strip() or f"exit status {result.exit_code}")
    details = str(error.get("details") or "")
    return f"{text}: {details}" if details else text


def pod_ips(result: Mapping[str, Any], ifname: str = "eth0") -> list[str]:
    """The addresses (without prefix length) the runtime reports for the Pod: those on ``ifname``.

    Shapes: CNI ``ips`` entries whose ``interface`` index names ``ifname`` in ``interfaces``; when
    no entry names an interface, every address. IPv4 first, as the kubelet orders podIPs.
    """
    interfaces = result.get("interfaces") or []
    ips = result.get("ips") or []
    chosen = []
    for ip in ips:
        index = ip.get("interface")
        if index is None or (
            isinstance(index, int)
            and 0 <= index < len(interfaces)
            and interfaces[index].get("name") == ifname
        ):
            chosen.append(str(ip.get("address", "")).split("/")[0])
    chosen = [ip for ip in chosen if ip]
    return sorted(chosen, key=lambda ip: ":" in ip)


class SandboxRuntime:
    """Starts and stops Pod sandboxes on one node (see the module docstring)."""

    def __init__(self, settings: RuntimeSettings) -> None:
        self.settings = settings

    def _attachment(self, record: state.SandboxRecord) -> cni.Attachment:
        return cni.Attachment(
            container_id=record.container_id,
            netns=record.netns,
            cni_args=cni.k8s_args(record.pod_namespace, record.pod_name, record.pod_uid, record.container_id),
            ifname=record.ifname,
            cni_path=(Path(self.settings.bin_dir_in_node),),
        )

    def start(
        self, *, namespace: str, name: str, uid: str, cdi_devices: Mapping[str, Sequence[str]]
    ) -> state.SandboxRecord:
        """Create the sandbox namespace and run CNI ADD; undo both on failure.

        Raises: :class:`SandboxError` with the CNI error (what ``FailedCreatePodSandBox`` says);
        :class:`~sriov_dra_lab.iproute.IpError` if the namespace cannot be created.
        """
        network_file = cni.runtime_choice(self.settings.conf_dir)
        network = cni.load_network(network_file)
        netns_name = f"{self.settings.netns_prefix}{uid[:8]}-{secrets.token_hex(2)}"
        netns = iproute.add_netns(netns_name)
        record = state.SandboxRecord(
            pod_namespace=namespace,
            pod_name=name,
            pod_uid=uid,
            container_id=secrets.token_hex(32),
            netns=netns,
            network_file=network_file.name,
            cdi_devices={k: list(v) for k, v in cdi_devices.items()},
        )
        try:
            iproute.set_up(netns, "lo")  # the runtime brings loopback up itself
            result = run_network(self.settings, network, "ADD", self._attachment(record))
        except BaseException:
            self._undo(network, record)
            raise
        if not result.ok:
            self._undo(network, record)
            raise SandboxError(
                f"failed to setup network for sandbox {record.container_id[:12]}: plugin type="
                f"{network['plugins'][0].get('type')!r} name={network.get('name')!r} failed (add): "
                f"{_failure(result)}"
            )
        return state.SandboxRecord(**{**record.__dict__, "result": result.result or {}})

    def _undo(self, network: Mapping[str, Any], record: state.SandboxRecord) -> None:
        try:
            run_network(self.settings, network, "DEL", self._attachment(record))
        finally:
            iproute.del_netns(Path(record.netns).name)

    def stop(self, record: state.SandboxRecord) -> None:
        """Run CNI DEL for ``record`` and remove its namespace (kept when DEL fails).

        The network config is the node's current choice; if the file named in the record is still
        there it is used instead (libcni DELs with the cached config). Raises: :class:`SandboxError`.
        """
        cached = self.settings.conf_dir / record.network_file
        network_file = cached if cached.exists() else cni.runtime_choice(self.settings.conf_dir)
        network = cni.load_network(network_file)
        result = run_network(
            self.settings, network, "DEL", self._attachment(record), prev_result=record.result or None
        )
        if not result.ok:
            raise SandboxError(
                f"failed to teardown network for sandbox {record.container_id[:12]} (del): {_failure(result)}"
            )
        iproute.del_netns(Path(record.netns).name)

    @staticmethod
    def alive(record: state.SandboxRecord) -> bool:
        """Whether the sandbox's network namespace still exists."""
        return os.path.exists(record.netns)
