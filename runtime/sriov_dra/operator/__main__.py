"""Entrypoint ``python -m sriov_dra.operator`` (console script ``sriov-dra-operator``).

Parses flags (each with an environment-variable fallback for the Deployment), configures
structured logs, builds the API client, installs SIGTERM/SIGINT handlers that stop the operator
within a second, and exits with :func:`sriov_dra.operator.app.run`'s code (1 after a lost Lease,
2 on bad flags).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from sriov_dra.core.operator import node_policy, sriov_network
from sriov_dra.host import strict_yaml
from sriov_dra.kube import client as kube_client
from sriov_dra.operator import app, settings
from sriov_dra.servicekit import logs
from sriov_dra_rules import errors

log = logging.getLogger("sriov_dra.operator")


def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def parser() -> argparse.ArgumentParser:
    """The command-line interface; defaults come from the environment where noted."""
    p = argparse.ArgumentParser(
        prog="sriov-dra-operator",
        description="SriovNetwork → source NAD and node-policy spec.dra → generated DRA objects.",
    )
    p.add_argument("--kubeconfig", default=_env("KUBECONFIG"), help="kubeconfig path; empty: in-cluster")
    p.add_argument(
        "--namespace",
        default=_env("OPERATOR_NAMESPACE", _env("POD_NAMESPACE")),
        help="operator namespace: node policies and generated objects (env OPERATOR_NAMESPACE, POD_NAMESPACE)",
    )
    p.add_argument(
        "--resource-prefix",
        default=_env("RESOURCE_PREFIX", sriov_network.DEFAULT_RESOURCE_PREFIX),
        help="prefix of the legacy resourceName annotation and attribute (env RESOURCE_PREFIX)",
    )
    p.add_argument(
        "--dra",
        choices=["enabled", "disabled"],
        default=_env("DRA_PROVIDER", "enabled"),
        help="generate DRA objects; disabled reports DRAInactive (env DRA_PROVIDER)",
    )
    p.add_argument(
        "--supported-nic-ids",
        default=_env("SUPPORTED_NIC_IDS", ""),
        help="YAML/JSON file {name: '<vendor> <pf id> <vf id>'} (the supported-nic-ids ConfigMap data)",
    )
    p.add_argument("--resync-period-s", type=float, default=float(_env("RESYNC_PERIOD_S", "300")))
    p.add_argument("--field-manager", default="sriov-dra-operator")
    p.add_argument("--leader-elect", choices=["true", "false"], default=_env("LEADER_ELECT", "true"))
    p.add_argument("--lease-name", default="sriov-dra-operator")
    p.add_argument("--lease-namespace", default="", help="default: the operator namespace")
    p.add_argument("--identity", default="", help="default: $POD_NAME or <hostname>_<pid>")
    p.add_argument("--lease-duration-s", type=int, default=15)
    p.add_argument("--renew-deadline-s", type=int, default=10)
    p.add_argument("--retry-period-s", type=int, default=2)
    p.add_argument(
        "--metrics-address",
        default=_env("METRICS_ADDRESS", "0.0.0.0:8080"),
        help="host:port for /metrics, /healthz, /readyz; empty disables (env METRICS_ADDRESS)",
    )
    p.add_argument(
        "--log-format", choices=[f.value for f in logs.LogFormat], default=_env("LOG_FORMAT", "text")
    )
    p.add_argument("--log-level", default=_env("LOG_LEVEL", "INFO"))
    return p


def load_nic_ids(path: str) -> tuple[node_policy.NicId, ...]:
    """Read the supported-NIC table; an empty path or an empty directory gives an empty table.

    ``path`` is a YAML/JSON file (a mapping, or a whole ConfigMap manifest) or a mounted
    ConfigMap directory (one file per key; Kubernetes' ``..data`` bookkeeping entries skipped).
    Raises: InvalidSpec when the file is not strict YAML (a repeated key is named with its path
    and lines) or an entry is malformed; OSError when it cannot be read.
    """
    if not path:
        return ()
    where = Path(path)
    if where.is_dir():
        entries = {
            p.name: p.read_text().strip()
            for p in sorted(where.iterdir())
            if not p.name.startswith(".") and p.is_file()
        }
        return node_policy.parse_nic_ids(entries)
    data = strict_yaml.read(where)
    if not isinstance(data, dict):
        raise errors.InvalidSpec(f"{path}: expected a mapping of name to '<vendor> <pf id> <vf id>'")
    if isinstance(data.get("data"), dict):  # a whole ConfigMap manifest
        data = data["data"]
    return node_policy.parse_nic_ids(data)


def build_settings(args: argparse.Namespace) -> settings.OperatorSettings:
    """Validate flags into settings. Raises: ValueError or InvalidSpec with an actionable message."""
    if not args.namespace:
        raise ValueError("--namespace (or OPERATOR_NAMESPACE/POD_NAMESPACE) is required")
    if not args.resource_prefix:
        raise ValueError(
            "--resource-prefix (RESOURCE_PREFIX) must not be empty; upstream's default is openshift.io"
        )
    if args.resync_period_s <= 0:
        raise ValueError(f"--resync-period-s must be positive, got {args.resync_period_s}")
    return settings.OperatorSettings(
        reconcile=settings.ReconcileSettings(
            namespace=args.namespace,
            resource_prefix=args.resource_prefix,
            dra_enabled=args.dra == "enabled",
            nic_ids=load_nic_ids(args.supported_nic_ids),
            resync_period_s=args.resync_period_s,
            field_manager=args.field_manager,
        ),
        leader=settings.LeaderSettings(
            enabled=args.leader_elect == "true",
            lease_name=args.lease_name,
            lease_namespace=args.lease_namespace,
            identity=args.identity,
            lease_duration_s=args.lease_duration_s,
            renew_deadline_s=args.renew_deadline_s,
            retry_period_s=args.retry_period_s,
        ),
        serve=settings.ServeSettings(
            metrics_address=args.metrics_address,
            log_format=logs.LogFormat(args.log_format),
            log_level=args.log_level,
        ),
        kubeconfig=args.kubeconfig,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the operator until SIGTERM/SIGINT; return the process exit code."""
    args = parser().parse_args(argv)
    try:
        config = build_settings(args)
    except (ValueError, OSError, errors.InvalidSpec) as exc:
        print(f"sriov-dra-operator: {exc}", file=sys.stderr)
        return 2
    logs.configure(config.serve.log_format, config.serve.log_level)
    log.info(
        "starting",
        extra={
            "settings": json.dumps({"namespace": config.reconcile.namespace, "dra": args.dra}),
            "op": "start",
        },
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    api = (
        kube_client.from_kubeconfig(Path(config.kubeconfig))
        if config.kubeconfig
        else kube_client.in_cluster()
    )
    try:
        return app.run(config, api, stop)
    finally:
        api.close()


if __name__ == "__main__":
    sys.exit(main())
