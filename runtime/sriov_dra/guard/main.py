"""``sriov-dra-guard``: the guard daemon's entrypoint (``serve``) and its installer (``install``).

``serve`` wires the real dependencies (a kubeconfig or in-cluster API client, live Pod and NAD
reads from ``sriov_dra.kube``, netlink reads from ``sriov_dra.host``, Multus as a child process),
logs the effective settings once, serves ``/metrics`` and ``/healthz`` (503 until the socket
listens), and on SIGTERM/SIGINT stops accepting, drains in-flight requests within
``drain_grace_s`` and exits 0. ``install`` writes the shim and ``00-multus-guard.conflist``
(:mod:`~sriov_dra.guard.install`) and prints any installation problem; it exits 1 if there is one.

Only this module exits the process; expected start-up failures print one actionable line.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sriov_dra.guard import cni_hooks, install, metrics, multus, server, settings
from sriov_dra.host import netlink
from sriov_dra.kube import client as kube_client
from sriov_dra.kube import nads, pods
from sriov_dra_rules import errors, strictjson

log = logging.getLogger("sriov_dra.guard")
_STANDARD_RECORD_KEYS = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and every ``extra`` field."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as compact JSON."""
        doc: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update({k: v for k, v in vars(record).items() if k not in _STANDARD_RECORD_KEYS})
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


class TextFormatter(logging.Formatter):
    """``time level logger: message key=value ...``."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as one text line with its ``extra`` fields."""
        base = super().format(record)
        extra = " ".join(f"{k}={v}" for k, v in vars(record).items() if k not in _STANDARD_RECORD_KEYS)
        return f"{base} {extra}" if extra else base


def configure_logging(fmt: str, level: str) -> None:
    """Send logs to stderr in ``text`` or ``json`` format."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if fmt == "json" else TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def build_parser() -> argparse.ArgumentParser:
    """Arguments of ``serve`` and ``install``."""
    parser = argparse.ArgumentParser(prog="sriov-dra-guard", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    defaults = settings.GuardSettings()

    serve = sub.add_parser("serve", help="run the guard daemon")
    serve.add_argument("--socket", type=Path, default=defaults.socket_path)
    serve.add_argument("--kubeconfig", type=Path, default=None, help="default: in-cluster service account")
    serve.add_argument("--node-name", default=None, help="refuse ADDs for Pods bound to other nodes")
    serve.add_argument("--add-budget-seconds", type=float, default=defaults.add_budget_s)
    serve.add_argument("--api-timeout-seconds", type=float, default=defaults.api_timeout_s)
    serve.add_argument("--max-concurrent", type=int, default=defaults.max_concurrent)
    serve.add_argument(
        "--metrics-address", default=defaults.metrics_address, help="host:port, empty disables"
    )
    serve.add_argument("--log-format", choices=("text", "json"), default="text")
    serve.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))

    inst = sub.add_parser("install", help="write the multus-guard shim and 00-multus-guard.conflist")
    inst.add_argument("--bin-dir", type=Path, required=True)
    inst.add_argument("--conf-dir", type=Path, required=True)
    inst.add_argument("--mode", choices=("thick", "thin"), required=True)
    inst.add_argument("--primary-config", type=Path, required=True, help="the pinned primary network file")
    inst.add_argument("--socket", default=defaults.socket_path.as_posix())
    inst.add_argument("--interpreter", default="/usr/bin/python3", help="python3 for the shim's #! line")
    inst.add_argument("--multus", default="{}", help="JSON object of further multus.* keys")
    inst.add_argument("--multus-master-cni", default=None, help="Multus's pinned primary file name")
    inst.add_argument("--autoconfig-dir", type=Path, default=None, help="Multus's autoconfig directory")
    return parser


def _serve(args: argparse.Namespace) -> int:
    conf = settings.GuardSettings(
        socket_path=args.socket,
        kubeconfig=args.kubeconfig,
        node_name=args.node_name,
        add_budget_s=args.add_budget_seconds,
        api_timeout_s=args.api_timeout_seconds,
        max_concurrent=args.max_concurrent,
        metrics_address=args.metrics_address,
    )
    configure_logging(args.log_format, args.log_level)
    log.info("guard starting", extra=conf.describe())
    api = kube_client.from_kubeconfig(conf.kubeconfig) if conf.kubeconfig else kube_client.in_cluster()
    recorder = metrics.GuardMetrics()
    hooks = cni_hooks.CniHooks(
        settings=conf,
        get_pod=lambda ns, name, *, timeout_s: pods.get_pod(api, ns, name, timeout_s=timeout_s),
        get_nad=lambda ns, name, *, timeout_s: nads.get_nad(api, ns, name, timeout_s=timeout_s),
        runner=multus.MultusRunner(),
        netns_links=netlink.links,
        clock=cni_hooks.SystemClock(),
        recorder=recorder,
    )
    srv = server.GuardServer(hooks, conf.socket_path, max_concurrent=conf.max_concurrent)
    endpoint = (
        metrics.MetricsServer(recorder, conf.metrics_address, srv.ready) if conf.metrics_address else None
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if endpoint is not None:
        endpoint.start()
    srv.start()
    log.info("guard ready", extra={"socket": str(conf.socket_path)})
    stop.wait()
    log.info("guard stopping", extra={"grace_s": conf.drain_grace_s})
    srv.stop(grace_s=conf.drain_grace_s)
    if endpoint is not None:
        endpoint.stop()
    api.close()
    return 0


def _install(args: argparse.Namespace) -> int:
    try:
        extra = strictjson.decode_plain(args.multus, path="--multus")
    except errors.InvalidSpec as exc:
        found = "; ".join(str(e) for e in exc.errors)
        print(f"sriov-dra-guard install: --multus is not strict JSON: {found}", file=sys.stderr)
        return 2
    if not isinstance(extra, dict):
        print("sriov-dra-guard install: --multus must be a JSON object", file=sys.stderr)
        return 2
    text = install.guard_conflist(
        primary_config=args.primary_config, mode=args.mode, socket_path=args.socket, multus=extra
    )
    shim_path = install.write_shim(args.bin_dir, interpreter=args.interpreter)
    conf_path = install.write_conflist(args.conf_dir, text)
    print(f"installed {shim_path} and {conf_path}")
    problems = install.installation_problems(
        args.conf_dir,
        mode=args.mode,
        multus_master_cni=args.multus_master_cni,
        autoconfig_dir=args.autoconfig_dir,
    )
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sriov-dra-guard``; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return _serve(args) if args.command == "serve" else _install(args)
    except (OSError, ValueError) as exc:
        print(f"sriov-dra-guard {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
