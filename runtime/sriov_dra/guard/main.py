"""``sriov-dra-guard``: the guard daemon (``serve``) and its installer (``install``, ``uninstall``).

``serve`` wires the real dependencies (API client, live Pod and NAD reads, netlink, Multus as a
child process), logs the effective settings once, serves ``/metrics``, ``/healthz`` and
``/readyz`` (503 until the socket listens), and on SIGTERM/SIGINT drains in-flight requests
within ``drain_grace_s`` and exits 0. A daemon a newer Pod's superseded idles while that Pod's
daemon accepts at the socket path and takes the path back once none does
(docs/guard.md#rolling-update). ``install`` writes the shim and conflist and exits 1 on an
installation problem; ``uninstall`` removes them, the conflist first. Only this module exits the
process; expected start-up failures print one actionable line.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from sriov_dra.guard import cni_hooks, install, metrics, multus, server, settings
from sriov_dra.host import netlink, pod_metadata_files, socket_takeover
from sriov_dra.kube import client as kube_client
from sriov_dra.kube import nads, pods
from sriov_dra.servicekit import logs, probes
from sriov_dra_rules import cni_install, errors, guard_conf, strict_json

log = logging.getLogger("sriov_dra.guard")
SOCKET_READY = "socket"
"""Readiness condition: the guard's unix socket listens (``/readyz`` is 503 before)."""
SUPERSEDED_POLL_S: Final = 0.5
"""How often the daemon looks whether a rollout's newer daemon took its socket path over, and an
idle superseded one whether that daemon is gone (s)."""


DESCRIPTION: Final = "sriov-dra-guard: the guard daemon (serve) and its node installer (install, uninstall)."
"""The ``--help`` summary (not ``__doc__``: the image runs Python with ``PYTHONOPTIMIZE=2``, no docstrings)."""


def build_parser() -> argparse.ArgumentParser:
    """Arguments of ``serve`` and ``install``."""
    parser = argparse.ArgumentParser(prog="sriov-dra-guard", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    defaults = settings.GuardSettings()

    serve = sub.add_parser("serve", help="run the guard daemon")
    serve.add_argument("--socket", type=Path, default=defaults.socket_path)
    serve.add_argument("--kubeconfig", type=Path, default=None, help="default: in-cluster service account")
    serve.add_argument("--node-name", default=None, help="refuse ADDs for Pods bound to other nodes")
    serve.add_argument(
        "--host-root",
        type=Path,
        default=None,
        help="the node's / as mounted in this container (e.g. /host): Multus runs chrooted into it and the "
        "Pod's netns is opened under it (default: run on the node itself)",
    )
    serve.add_argument(
        "--metadata-dir",
        type=Path,
        default=None,
        help="the DRA plugin's data directory as this process sees it (e.g. "
        "/host/var/lib/kubelet/plugins/sriovnetwork.k8snetworkplumbingwg.io): after a verified ADD the "
        "network data goes into the Pod's device metadata files there (default: not written)",
    )
    serve.add_argument("--add-budget-seconds", type=float, default=defaults.add_budget_s)
    serve.add_argument("--api-timeout-seconds", type=float, default=defaults.api_timeout_s)
    serve.add_argument("--max-concurrent", type=int, default=defaults.max_concurrent)
    serve.add_argument(
        "--metrics-address", default=defaults.metrics_address, help="host:port, empty disables"
    )
    serve.add_argument(
        "--pod-uid",
        default=os.environ.get("POD_UID", ""),
        help="this daemon's Pod UID (default: $POD_UID): a probe sending another Pod's UID in X-Pod-Uid "
        "gets 503, so during a rollout each Pod's probes are answered only by its own daemon; a daemon "
        "whose Pod a newer Pod superseded takes the socket path back only once no daemon accepts there",
    )
    serve.add_argument("--log-format", choices=("text", "json"), default="text")
    serve.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))

    inst = sub.add_parser(
        "install",
        help="write the multus-guard shim and 00-multus-guard.conflist",
        description=(
            "Write <bin-dir>/multus-guard and <conf-dir>/00-multus-guard.conflist for the pinned primary "
            "network, after checking the guard's install contract (sriov_dra_rules.cni_install); then print "
            "what in the node's CNI setup would still bypass the guard. Exit 0 when nothing would, 1 when "
            "something would, 2 when an argument is refused (nothing written)."
        ),
    )
    inst.add_argument(
        "--bin-dir", type=Path, required=True, help="CNI binary directory for the shim (usually /opt/cni/bin)"
    )
    inst.add_argument(
        "--conf-dir",
        type=Path,
        required=True,
        help="the container runtime's CNI config directory (usually /etc/cni/net.d)",
    )
    inst.add_argument(
        "--mode", choices=("thick", "thin"), required=True, help="how Multus runs: thick (daemon) or thin"
    )
    inst.add_argument(
        "--primary-config",
        type=Path,
        required=True,
        help="absolute path of the pinned primary network's CNI config (the cluster network, e.g. "
        "/etc/cni/net.d/10-flannel.conflist); not a 00-multus* file",
    )
    inst.add_argument(
        "--socket",
        default=defaults.socket_path.as_posix(),
        help="the guard daemon's unix socket, written as guard.socket (default: %(default)s)",
    )
    inst.add_argument(
        "--plugin-checkpoint",
        default=guard_conf.DEFAULT_PLUGIN_CHECKPOINT,
        help="the plugin's checkpoint.json on the node (its --state-dir), written as guard.pluginCheckpoint "
        "(default: %(default)s)",
    )
    inst.add_argument(
        "--verify-ordinary-selections",
        action="store_true",
        help="send every ADD to the daemon and verify ordinary selections after Multus too "
        "(guard.verifyOrdinarySelections; docs/guard.md)",
    )
    inst.add_argument(
        "--interpreter",
        default="/usr/bin/python3",
        help="python3 for the shim's #! line (default: %(default)s)",
    )
    inst.add_argument(
        "--multus",
        default="{}",
        help='JSON object of further multus.* keys, e.g. \'{"daemonSocketDir": "/run/multus/"}\' (default: {})',
    )
    inst.add_argument(
        "--multus-master-cni",
        default=None,
        help="the file name Multus pins as its primary (multusMasterCNI or thin --multus-master-cni-file-name), "
        "checked after the install",
    )
    inst.add_argument(
        "--autoconfig-dir",
        type=Path,
        default=None,
        help="Multus's autoconfig directory, to check what its auto-discovery would pick (default: not checked)",
    )
    uninst = sub.add_parser(
        "uninstall",
        help="remove 00-multus-guard.conflist, the multus-guard shim and its rules",
        description=(
            "Remove <conf-dir>/00-multus-guard.conflist first (the runtime then calls Multus's own config), "
            "then <bin-dir>/multus-guard and every <bin-dir>/multus-guard.d/ version. Absent files are fine."
        ),
    )
    uninst.add_argument("--bin-dir", type=Path, required=True, help="CNI binary directory of the shim")
    uninst.add_argument("--conf-dir", type=Path, required=True, help="the runtime's CNI config directory")
    return parser


def _serve(args: argparse.Namespace) -> int:
    conf = settings.GuardSettings(
        socket_path=args.socket,
        kubeconfig=args.kubeconfig,
        host_root=args.host_root,
        metadata_dir=args.metadata_dir,
        node_name=args.node_name,
        add_budget_s=args.add_budget_seconds,
        api_timeout_s=args.api_timeout_seconds,
        max_concurrent=args.max_concurrent,
        metrics_address=args.metrics_address,
    )
    logs.configure(args.log_format, args.log_level)
    log.info("guard starting", extra=conf.describe())
    api = kube_client.from_kubeconfig(conf.kubeconfig) if conf.kubeconfig else kube_client.in_cluster()
    host_root = str(conf.host_root) if conf.host_root else None
    recorder = metrics.GuardMetrics()
    hooks = cni_hooks.CniHooks(
        settings=conf,
        get_pod=lambda ns, name, *, timeout_s: pods.get_pod(api, ns, name, timeout_s=timeout_s),
        get_nad=lambda ns, name, *, timeout_s: nads.get_nad(api, ns, name, timeout_s=timeout_s),
        runner=multus.MultusRunner(host_root),
        netns_links=lambda netns: netlink.links(multus.node_path(host_root, netns)),
        clock=cni_hooks.SystemClock(),
        recorder=recorder,
        metadata=pod_metadata_files.PodMetadataFiles(conf.metadata_dir) if conf.metadata_dir else None,
    )
    state = probes.Health([SOCKET_READY], pod_uid=args.pod_uid.strip())
    endpoint = (
        probes.HttpServer(conf.metrics_address, state, recorder.render) if conf.metrics_address else None
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    served: list[server.GuardServer] = []  # the last one holds the path or held it last
    while not stop.is_set():
        srv = server.GuardServer(
            hooks, conf.socket_path, max_concurrent=conf.max_concurrent, health=state, instance=state.pod_uid
        )
        if not _take_path(srv, state, stop):
            break
        served.append(srv)
        state.vouch_for(srv.superseded_instances)  # they idle while this daemon serves
        if endpoint is not None:
            endpoint.start_when_free(stop)
        state.set(SOCKET_READY, True)
        log.info("guard ready", extra={"socket": str(conf.socket_path)})
        while not stop.wait(SUPERSEDED_POLL_S):
            if srv.superseded():  # a newer daemon serves the path: it gets the health address too
                log.info("a newer daemon took the socket over: unready, health address freed")
                state.set(SOCKET_READY, False, "a newer daemon took the socket over")
                if endpoint is not None:
                    endpoint.stop()
                break
    log.info("guard stopping", extra={"grace_s": conf.drain_grace_s})
    state.set(SOCKET_READY, False, "stopping")
    deadline = time.monotonic() + conf.drain_grace_s
    for srv in reversed(served):  # the path's holder first: it gives the path up
        srv.stop(grace_s=max(deadline - time.monotonic(), 0.0))
    if endpoint is not None:
        endpoint.stop()
    api.close()
    return 0


def _take_path(srv: server.GuardServer, state: probes.Health, stop: threading.Event) -> bool:
    """Start ``srv`` on the socket path; while a newer Pod's daemon accepts there, idle unready and
    look again every :data:`SUPERSEDED_POLL_S` (docs/guard.md#rolling-update).

    Returns ``False`` when ``stop`` was set first. Raises: ``OSError`` when the socket cannot be created.
    """
    idle = False
    while not stop.is_set():
        try:
            srv.start()  # takes the socket over from a rollout's previous daemon
            if idle:
                log.info("the newer daemon is gone: this one takes the socket back")
            return True
        except socket_takeover.Retired as exc:  # the newer Pod's daemon answers our liveness probe
            if not idle:
                log.warning(
                    "a newer daemon superseded this one; idle until the Pod is deleted or that daemon is gone",
                    extra={"reason": str(exc)},
                )
                state.set(SOCKET_READY, False, f"superseded by Pod {exc.holder}")
                idle = True
        stop.wait(SUPERSEDED_POLL_S)
    return False


PRIMARY_FIX = (
    "pass --primary-config the absolute path of the cluster network's CNI config file (the primary the "
    "runtime used before the guard, e.g. /etc/cni/net.d/10-flannel.conflist)"
)


def _refuse(message: str) -> int:
    print(f"sriov-dra-guard install: {message}", file=sys.stderr)
    return 2


def _install(args: argparse.Namespace) -> int:
    try:
        extra = strict_json.decode_plain(args.multus, path="--multus")
    except errors.InvalidSpec as exc:
        found = "; ".join(str(e) for e in exc.errors)
        return _refuse(f"--multus is not strict JSON: {found}")
    if not isinstance(extra, dict):
        return _refuse(
            f"--multus must be a JSON object of further multus.* keys, got {strict_json.kind(extra)}; "
            'pass e.g. \'{"daemonSocketDir": "/run/multus/"}\' or leave it out'
        )
    primary = args.primary_config
    if not primary.is_absolute():
        return _refuse(f"--primary-config {primary} is a relative path; {PRIMARY_FIX}")
    try:
        cni_install.check_primary_file(args.conf_dir, install.CONFLIST_NAME, str(primary))
    except cni_install.ContractError as exc:
        return _refuse(f"--primary-config {primary}: {exc}; {PRIMARY_FIX}")
    try:
        text = install.guard_conflist(
            primary_config=primary,
            mode=args.mode,
            socket_path=args.socket,
            multus=extra,
            plugin_checkpoint=args.plugin_checkpoint,
            verify_ordinary_selections=args.verify_ordinary_selections,
        )
    except cni_install.ContractError as exc:
        return _refuse(f"the guard config these flags give is refused: {exc}; correct --socket or --multus")
    shim_path = install.write_shim(args.bin_dir, interpreter=args.interpreter)
    conf_path = install.write_conflist(args.conf_dir, text)
    print(f"installed {shim_path} and {conf_path}")
    problems = cni_install.installation_problems(
        args.conf_dir,
        mode=args.mode,
        multus_master_cni=args.multus_master_cni,
        autoconfig_dir=args.autoconfig_dir,
    )
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if problems else 0


def _uninstall(args: argparse.Namespace) -> int:
    removed = install.uninstall(args.bin_dir, args.conf_dir)
    print(f"removed {', '.join(map(str, removed))}" if removed else "nothing to remove")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sriov-dra-guard``; returns the exit status."""
    args = build_parser().parse_args(argv)
    commands = {"serve": _serve, "install": _install, "uninstall": _uninstall}
    try:
        return commands[args.command](args)
    except (OSError, ValueError) as exc:
        print(f"sriov-dra-guard {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
