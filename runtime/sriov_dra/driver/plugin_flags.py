"""The plugin's flags: name, environment variable, default and help of each (``driver.settings`` parses them).

One table, so ``--help``, the environment and docs/plugin.md#flags name the same settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sriov_dra.core import interface_naming
from sriov_dra.core.plugin import device_taints
from sriov_dra.kubeletapi import endpoints
from sriov_dra_rules import names


@dataclass(frozen=True)
class Flag:
    """One flag: ``--<name>``, its environment variable ``env``, its ``default`` text and ``help``."""

    name: str
    env: str
    default: str
    help: str


FLAGS: Final = (
    Flag("node-name", "NODE_NAME", "", "Node this plugin serves; also the pool name (required)"),
    Flag("kubeconfig", "KUBECONFIG", "", "kubeconfig file; empty = in-cluster service account"),
    Flag("sysfs-root", "SYSFS_ROOT", "/", "directory that holds sys/ (/ on a node; a fake tree in tests)"),
    Flag(
        "kubelet-plugins-directory-path",
        "KUBELET_PLUGINS_DIRECTORY_PATH",
        str(endpoints.KUBELET_PLUGINS_DIR),
        "kubelet plugins directory; the DRA socket is <this>/<driver>/dra.sock",
    ),
    Flag(
        "kubelet-registrar-directory-path",
        "KUBELET_REGISTRAR_DIRECTORY_PATH",
        str(endpoints.KUBELET_REGISTRY_DIR),
        "kubelet plugin registry directory (registration socket)",
    ),
    Flag(
        "pod-uid",
        "POD_UID",
        "",
        "UID of the plugin's Pod (downward API metadata.uid): per-instance socket names, so a rolling "
        "update with maxSurge runs the old and the new plugin side by side; empty = shared names",
    ),
    Flag(
        "pod-name",
        "POD_NAME",
        "",
        "name of the plugin's Pod (downward API metadata.name): the Pod annotated with the auto-attach "
        "mode the process runs; empty = not reported",
    ),
    Flag(
        "pod-namespace",
        "POD_NAMESPACE",
        "",
        "namespace of the plugin's Pod (downward API metadata.namespace)",
    ),
    Flag("cdi-root", "CDI_ROOT", "/var/run/cdi", "directory for the CDI spec files of prepared claims"),
    Flag("state-dir", "STATE_DIR", "", "directory of checkpoint.json; empty = <plugins dir>/<driver>"),
    Flag(
        "namespace",
        "NAMESPACE",
        "dra-driver-sriov",
        "namespace of the SriovResourcePolicy and DeviceAttributes objects (alias --policy-namespace)",
    ),
    Flag("configuration-mode", "CONFIGURATION_MODE", "MULTUS", "MULTUS (STANDALONE is not supported)"),
    Flag(
        "multus-auto-attach",
        "MULTUS_AUTO_ATTACH",
        "false",
        "generate Multus network selections for allocated VFs (MULTUS mode only)",
    ),
    Flag(
        "multus-auto-attach-node-label",
        "MULTUS_AUTO_ATTACH_NODE_LABEL",
        "",
        "with --multus-auto-attach: run auto-attach only on a Node labelled <this>=true (set by the "
        "preflight gate), manual mode elsewhere; empty = on every node",
    ),
    Flag(
        "multus-config-file",
        "MULTUS_CONFIG_FILE",
        "",
        "the node's Multus config (thick daemon-config.json or thin 00-multus.conf[list]), re-read "
        "before each Pod patch; its defaultNetworks/systemNamespaces win over the flags below; empty = none",
    ),
    Flag(
        "multus-primary-interface",
        "MULTUS_PRIMARY_INTERFACE",
        names.DEFAULT_PRIMARY_IFNAME,
        "interface name of the cluster network in Pods (the runtime's CNI_IFNAME)",
    ),
    Flag(
        "multus-default-networks",
        "MULTUS_DEFAULT_NETWORKS",
        "",
        "comma-separated Multus defaultNetworks, in order (each is numbered netN before the Pod's selections)",
    ),
    Flag(
        "multus-system-namespaces",
        "MULTUS_SYSTEM_NAMESPACES",
        ",".join(interface_naming.DEFAULT_LAYOUT.system_namespaces),
        "comma-separated Multus systemNamespaces (their Pods get no defaultNetworks); empty = none",
    ),
    Flag(
        "multus-auxiliary-chain",
        "MULTUS_AUXILIARY_CHAIN",
        "false",
        "Multus runs an auxiliary CNI chain (auxiliaryCNIChainName) after the Pod's selections",
    ),
    Flag(
        "repair-first-pass-timeout-s",
        "REPAIR_FIRST_PASS_TIMEOUT_S",
        "300",
        "auto-attach: seconds to wait for the repair worker's first pass before registering with the "
        "kubelet; past it startup fails (exit 1); 0 = wait without bound, logging progress",
    ),
    Flag(
        "api-max-in-flight",
        "API_MAX_IN_FLIGHT",
        "8",
        "auto-attach: API requests one prepare or release step issues at once (source reads, shadow creates, release), 1-16",
    ),
    Flag(
        "unhealthy-taint-effect",
        "UNHEALTHY_TAINT_EFFECT",
        "NoSchedule",
        "effect of the <driver>/unhealthy device taint on an unhealthy VF: NoSchedule, or NoExecute "
        "to also evict the Pods using it",
    ),
    Flag(
        "taint-clear-after-s",
        "TAINT_CLEAR_AFTER_S",
        str(int(device_taints.DEFAULT_CLEAR_AFTER_S)),
        "seconds a tainted VF must stay healthy before its device taint is removed",
    ),
    Flag("log-format", "LOG_FORMAT", "json", "json or text"),
    Flag("log-level", "LOG_LEVEL", "info", "debug, info, warning or error"),
    Flag(
        "metrics-bind-address",
        "METRICS_BIND_ADDRESS",
        "0",
        "host:port for /metrics, /healthz and /readyz; 0 or empty = disabled",
    ),
)
