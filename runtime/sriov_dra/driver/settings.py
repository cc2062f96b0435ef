"""Settings of ``sriov-dra-plugin``: flags, their environment variables, defaults and validation.

One parse of the command line and environment into a frozen :class:`PluginSettings`
(docs/design.md#settings): a flag wins over its environment variable, which wins over the
default; environment names are upstream dra-driver-sriov's where it has the setting, so its
DaemonSet environment keeps working. Every problem is reported at once (:class:`SettingsError`).
Unlike upstream, ``CONFIGURATION_MODE`` defaults to ``MULTUS`` (``STANDALONE`` is refused) and
metrics stay off without ``--metrics-bind-address`` (dra-driver-sriov #145). No I/O.
"""

from __future__ import annotations

import argparse
import enum
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NoReturn

from sriov_dra.core import interface_naming
from sriov_dra.core.plugin import auto_attach_gate, device_taints
from sriov_dra.driver import plugin_flags
from sriov_dra.kubeletapi import endpoints
from sriov_dra.servicekit import logs
from sriov_dra_rules import errors, names

DISABLED_ADDRESSES: Final = frozenset({"", "0"})
"""``--metrics-bind-address`` values that turn the metrics/health HTTP server off."""

_TRUE: Final = frozenset({"true", "1", "yes"})
_FALSE: Final = frozenset({"false", "0", "no", ""})


class ConfigurationMode(enum.StrEnum):
    """``CONFIGURATION_MODE`` values (case-sensitive, as upstream)."""

    MULTUS = "MULTUS"
    STANDALONE = "STANDALONE"


class SettingsError(errors.InvalidSpec):
    """The command line or environment is invalid; the message lists every problem and its fix."""


@dataclass(frozen=True)
class PluginSettings:
    """Everything the plugin process is configured with (all paths absolute).

    Units: ``api_timeout_s`` seconds per API request; ``shutdown_grace_s`` seconds that
    in-flight kubelet calls get on SIGTERM; ``repair_first_pass_timeout_s`` seconds startup waits
    for the auto-attach repair worker's first pass (0 = no bound).
    Shapes: ``metrics_bind_address`` is ``host:port`` (``:port`` = all interfaces, port 0 = any
    free port) or ``""`` when disabled; ``kubeconfig`` ``None`` means in-cluster credentials;
    ``state_dir`` holds ``checkpoint.json``; ``multus_layout`` is the node's Multus delegate
    layout from the flags, which the keys of ``multus_config_file`` (absolute, or ``None``)
    overlay when auto-attach checks a Pod's interface names.
    """

    node_name: str
    kubeconfig: Path | None
    sysfs_root: Path
    plugins_dir: Path
    registrar_dir: Path
    cdi_root: Path
    state_dir: Path
    policy_namespace: str
    configuration_mode: ConfigurationMode
    multus_auto_attach: bool
    log_format: logs.LogFormat
    log_level: str
    metrics_bind_address: str
    api_timeout_s: float = 10.0
    shutdown_grace_s: float = endpoints.PREPARE_CALL_TIMEOUT_S
    """Seconds in-flight kubelet calls get to finish on SIGTERM or at a hand-over: the kubelet's
    own deadline, so a call is never cut short while the kubelet still waits for it."""
    pod_uid: str = ""
    """The plugin Pod's UID (downward API ``metadata.uid``): sockets named per instance, so a
    rolling update runs two instances side by side (docs/plugin.md#rolling-update); empty: the
    shared names ``dra.sock`` and ``<driver>-reg.sock``."""
    driver_name: str = names.DRIVER_NAME
    multus_layout: interface_naming.MultusLayout = interface_naming.DEFAULT_LAYOUT
    multus_config_file: Path | None = None
    repair_first_pass_timeout_s: float = 300.0
    """Auto-attach only: the plugin registers with the kubelet after the repair worker's first pass
    (docs/design.md#repair). One pass makes a few API calls per recorded Pod, each bounded by
    ``api_timeout_s``, so a healthy node finishes in seconds; 300 s only trips when the API server
    is unreachable or very slow, and then startup fails visibly (exit 1, the container restarts
    and the pass starts over) instead of registering unrepaired. 0 waits without bound."""
    unhealthy_taint_effect: device_taints.Effect = device_taints.Effect.NO_SCHEDULE
    """The effect of the ``<driver>/unhealthy`` device taint: NoSchedule keeps new claims off an
    unhealthy VF; NoExecute (opt-in) also evicts the Pods using it (docs/plugin.md#device-taints)."""
    taint_clear_after_s: float = device_taints.DEFAULT_CLEAR_AFTER_S
    """Seconds a tainted VF must stay Healthy before its taint is removed (the hysteresis)."""
    multus_auto_attach_node_label: str = ""
    """Auto-attach only: when set, auto-attach runs only if the Node carries this label with value
    ``true`` (``core.plugin.auto_attach_gate``), decided once at start; empty: on every node."""
    pod_name: str = ""
    pod_namespace: str = ""
    """The plugin Pod's name and namespace (downward API): the Pod annotated with the auto-attach
    mode this process runs (``kube.plugin_pod``); either empty: not reported."""
    auto_attach_gate_closed: str = ""
    """Not a flag: set at start by the gate (``driver.managed_wiring.gated_settings``) when the label
    is missing while the checkpoint records auto-attached bindings (release-only mode), to why;
    empty otherwise."""
    api_max_in_flight: int = 8
    """Auto-attach only: API requests one prepare or release step issues at once (the source NAD
    reads of a plan, the shadow creates of a claim, a release's shadow reads, deletions and
    finalizer removals; ``servicekit.fanout``), 1 to 16 (the API client keeps
    16 connections, ``kube.client.POOL_MAXSIZE``); 1 issues them one after the other."""

    @property
    def auto_attach_mode(self) -> auto_attach_gate.Mode:
        """This process's auto-attach mode: full, release-only (the gate closed on recorded bindings) or off."""
        if not self.multus_auto_attach:
            return auto_attach_gate.Mode.OFF
        return (
            auto_attach_gate.Mode.RELEASE_ONLY if self.auto_attach_gate_closed else auto_attach_gate.Mode.FULL
        )

    @property
    def sockets(self) -> endpoints.PluginSockets:
        """The DRA and registration socket paths: ``<plugins>/<driver>/dra[-<instance>].sock``, ``<registrar>/<driver>[-<instance>]-reg.sock``.

        ``<instance>``: ``endpoints.instance_name`` of ``pod_uid``, when set.
        """
        return endpoints.plugin_sockets(
            self.driver_name,
            plugins_dir=self.plugins_dir,
            registry_dir=self.registrar_dir,
            instance=endpoints.instance_name(self.pod_uid),
        )

    def as_log_fields(self) -> dict[str, str]:
        """Every setting as text, for the startup log line."""
        return {k: str(v) for k, v in vars(self).items()}


_INSTANCE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")
"""A Pod UID as it may appear in a socket name."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise SettingsError(f"invalid command line: {message}; see --help")


def _parser(env: Mapping[str, str]) -> _Parser:
    parser = _Parser(
        prog="sriov-dra-plugin",
        description="DRA kubelet plugin for SR-IOV virtual functions (MULTUS mode).",
    )
    for flag in plugin_flags.FLAGS:
        aliases = ["--policy-namespace"] if flag.name == "namespace" else []
        default = env.get(flag.env, flag.default)
        option = parser.add_argument(
            f"--{flag.name}",
            *aliases,
            dest=flag.name.replace("-", "_"),
            default=default,
            metavar=flag.env,
            help=f"{flag.help} [env {flag.env}, default {flag.default!r}]",
        )
        if flag.name in ("multus-auto-attach", "multus-auxiliary-chain"):
            option.nargs = "?"
            option.const = "true"
    return parser


def _bool(value: str, flag: plugin_flags.Flag, problems: list[errors.FieldError]) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered not in _FALSE:
        problems.append(errors.FieldError(f"--{flag.name} / {flag.env}", f"{value!r} is not true or false"))
    return False


def _seconds(value: str, name: str, problems: list[errors.FieldError]) -> float:
    """A duration in seconds (finite, 0 or more); a problem is recorded and 0 returned otherwise."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        problems.append(errors.FieldError(_where(name), f"{value!r} is not a number of seconds >= 0"))
        return 0.0
    return seconds


def _address_problem(value: str) -> str | None:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        return f"{value!r} is not host:port (e.g. 127.0.0.1:9464, :9464), or 0 to disable"
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if host and host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return f"{host!r} is not an IP address; bind to an address of this node"
    return None


def _flag(name: str) -> plugin_flags.Flag:
    return next(f for f in plugin_flags.FLAGS if f.name == name)


def _where(name: str) -> str:
    return f"--{name} / {_flag(name).env}"


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _multus(
    args: Mapping[str, object], problems: list[errors.FieldError]
) -> tuple[interface_naming.MultusLayout, Path | None]:
    """The node's Multus layout from the ``--multus-*`` layout flags, and the config file to overlay."""
    primary = str(args["multus_primary_interface"])
    primary_problem = names.ifname_problem(primary)
    if primary_problem:
        problems.append(errors.FieldError(_where("multus-primary-interface"), primary_problem))
    system = _csv(str(args["multus_system_namespaces"]))
    for namespace in system:
        ns_problem = names.dns1123_label_problem(namespace)
        if ns_problem:
            problems.append(
                errors.FieldError(_where("multus-system-namespaces"), f"{ns_problem} (not a namespace name)")
            )
    raw_file = str(args["multus_config_file"])
    config_file = Path(raw_file) if raw_file else None
    if config_file is not None and not config_file.is_absolute():
        problems.append(
            errors.FieldError(_where("multus-config-file"), f"{raw_file!r} must be an absolute path")
        )
    layout = interface_naming.MultusLayout(
        primary_ifname=primary,
        default_networks=_csv(str(args["multus_default_networks"])),
        system_namespaces=system,
        auxiliary_chain=_bool(str(args["multus_auxiliary_chain"]), _flag("multus-auxiliary-chain"), problems),
    )
    return layout, config_file


def parse(argv: Sequence[str], env: Mapping[str, str]) -> PluginSettings:
    """Parse ``argv`` (without the program name) and ``env`` into settings.

    Raises: SettingsError listing every problem: missing/invalid node name, relative paths, an
    invalid namespace, a mode other than MULTUS (STANDALONE is named as unsupported),
    ``--multus-auto-attach`` without MULTUS, ``--multus-auto-attach-node-label`` that is not a label
    key or without ``--multus-auto-attach``, a bad boolean, log format/level or address, an
    invalid ``--multus-primary-interface``,
    a ``--multus-system-namespaces`` entry that is not a namespace name, a relative
    ``--multus-config-file``, a ``--repair-first-pass-timeout-s`` or ``--taint-clear-after-s``
    that is not seconds >= 0, an ``--unhealthy-taint-effect`` other than NoSchedule/NoExecute.
    """
    args = vars(_parser(env).parse_args(list(argv)))
    problems: list[errors.FieldError] = []

    where = _where
    node = str(args["node_name"])
    node_problem = names.dns1123_subdomain_problem(node) if node else "is required (the Node's name)"
    if node_problem:
        problems.append(errors.FieldError(where("node-name"), node_problem))
    auto_attach = _bool(str(args["multus_auto_attach"]), _flag("multus-auto-attach"), problems)
    gate_label = str(args["multus_auto_attach_node_label"]).strip()
    key_problems = names.qualified_name_errors(gate_label) if gate_label else []
    gate_problems = (
        [f"{gate_label!r} is not a label key: {'; '.join(key_problems)}"] if key_problems else []
    ) + (
        ["gates auto-attach per node, so it needs --multus-auto-attach as well; set both or neither"]
        if gate_label and not auto_attach
        else []
    )
    problems += [errors.FieldError(where("multus-auto-attach-node-label"), p) for p in gate_problems]
    mode_raw = str(args["configuration_mode"]) or ConfigurationMode.MULTUS.value
    mode = ConfigurationMode.MULTUS
    if mode_raw == ConfigurationMode.STANDALONE:
        problems.append(
            errors.FieldError(
                where("configuration-mode"),
                "STANDALONE (CNI run by the plugin through NRI) is not supported by this plugin; set "
                "CONFIGURATION_MODE=MULTUS and let Multus attach the VFs"
                + ("; --multus-auto-attach needs MULTUS as well" if auto_attach else ""),
            )
        )
    elif mode_raw != ConfigurationMode.MULTUS:
        problems.append(
            errors.FieldError(where("configuration-mode"), f"{mode_raw!r} is not MULTUS (case-sensitive)")
        )
    paths: dict[str, Path] = {}
    for name in (
        "sysfs-root",
        "kubelet-plugins-directory-path",
        "kubelet-registrar-directory-path",
        "cdi-root",
    ):
        paths[name] = Path(str(args[name.replace("-", "_")]))
    state = str(args["state_dir"])
    if state:
        paths["state-dir"] = Path(state)
    for name, path in paths.items():
        if not path.is_absolute():
            problems.append(errors.FieldError(where(name), f"{str(path)!r} must be an absolute path"))
    kubeconfig = str(args["kubeconfig"])
    namespace = str(args["namespace"])
    ns_problem = names.dns1123_label_problem(namespace)
    if ns_problem:
        problems.append(errors.FieldError(where("namespace"), ns_problem))
    try:
        log_format = logs.LogFormat(str(args["log_format"]))
    except ValueError:
        problems.append(errors.FieldError(where("log-format"), f"{args['log_format']!r} is not json or text"))
        log_format = logs.LogFormat.JSON
    level = str(args["log_level"]).lower()
    if level not in ("debug", "info", "warning", "error"):
        problems.append(
            errors.FieldError(where("log-level"), f"{level!r} is not debug, info, warning or error")
        )
    address = str(args["metrics_bind_address"])
    address = "" if address in DISABLED_ADDRESSES else address
    address_problem = _address_problem(address) if address else None
    if address_problem:
        problems.append(errors.FieldError(where("metrics-bind-address"), address_problem))
    multus_layout, multus_config_file = _multus(args, problems)
    first_pass_s = _seconds(str(args["repair_first_pass_timeout_s"]), "repair-first-pass-timeout-s", problems)
    in_flight_raw = str(args["api_max_in_flight"]).strip()
    in_flight = int(in_flight_raw) if in_flight_raw.isdigit() else 0
    if not 1 <= in_flight <= 16:
        problems.append(
            errors.FieldError(
                where("api-max-in-flight"), f"{in_flight_raw!r} is not a whole number from 1 to 16"
            )
        )
    effect_raw = str(args["unhealthy_taint_effect"])
    try:
        effect = device_taints.Effect(effect_raw)
    except ValueError:
        problems.append(
            errors.FieldError(
                where("unhealthy-taint-effect"),
                f"{effect_raw!r} is not NoSchedule or NoExecute (case-sensitive)",
            )
        )
        effect = device_taints.Effect.NO_SCHEDULE
    clear_after_s = _seconds(str(args["taint_clear_after_s"]), "taint-clear-after-s", problems)
    pod_uid = str(args["pod_uid"]).strip()
    if pod_uid and not _INSTANCE.fullmatch(pod_uid):
        problems.append(
            errors.FieldError(
                where("pod-uid"),
                f"{pod_uid!r} is not a Pod UID (letters, digits and '-', at most 64); set it from "
                "fieldRef metadata.uid",
            )
        )
    errors.raise_if_any(problems, "sriov-dra-plugin settings are invalid", cls=SettingsError)
    plugins_dir = paths["kubelet-plugins-directory-path"]
    return PluginSettings(
        node_name=node,
        kubeconfig=Path(kubeconfig) if kubeconfig else None,
        sysfs_root=paths["sysfs-root"],
        plugins_dir=plugins_dir,
        registrar_dir=paths["kubelet-registrar-directory-path"],
        cdi_root=paths["cdi-root"],
        state_dir=paths.get("state-dir", plugins_dir / names.DRIVER_NAME),
        policy_namespace=namespace,
        configuration_mode=mode,
        multus_auto_attach=auto_attach,
        multus_auto_attach_node_label=gate_label,
        log_format=log_format,
        log_level=level,
        metrics_bind_address=address,
        multus_layout=multus_layout,
        multus_config_file=multus_config_file,
        repair_first_pass_timeout_s=first_pass_s,
        api_max_in_flight=in_flight,
        unhealthy_taint_effect=effect,
        taint_clear_after_s=clear_after_s,
        pod_uid=pod_uid,
        pod_name=str(args["pod_name"]).strip(),
        pod_namespace=str(args["pod_namespace"]).strip(),
    )
