"""``sriov-dra preflight``: the prerequisite checks, each with pass/fail and what to change.

The cluster checks (``sriov_dra_rules.preflight_rules`` on facts read by
``sriov_dra.kube.cluster_facts``) and the node checks of this machine
(``sriov_dra_rules.preflight_node``), the same rules the ``sriovnet.dra.preflight`` role runs
(docs/design.md#prerequisites, docs/design.md#rollout). One line per check, or ``--output
json``; exit 1 when any failed. Changes neither the cluster nor the node.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TextIO

from sriov_dra.kube import client as kube_client
from sriov_dra.kube import cluster_facts
from sriov_dra.kube import errors as kube_errors
from sriov_dra_rules import preflight_gates, preflight_node, preflight_rules

DEFAULT_NAMESPACE = "dra-driver-sriov"
DEFAULT_SERVICE_ACCOUNT = "dra-driver-sriov"


def kubeconfig_path(given: str | None) -> Path:
    """``--kubeconfig``, else the first file of ``$KUBECONFIG``, else ``~/.kube/config``."""
    path = given or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    return Path(path.split(os.pathsep)[0])


def node_results(args: argparse.Namespace) -> list[dict[str, str]]:
    """The node checks of this machine with the options of ``args`` (the module's options, by name)."""
    options = {k: getattr(args, k) for k in preflight_node.DEFAULTS}
    return preflight_node.node_checks(options)


def run_checks(args: argparse.Namespace) -> list[dict[str, str]]:
    """Cluster checks (unless ``--no-cluster-checks``) then node checks, as ``{name, status, detail, fix}``.

    Raises: kube_errors.ApiError when the cluster cannot be read.
    """
    found: list[dict[str, str]] = []
    if args.cluster_checks:
        found += cluster_results(args)
    if args.node_checks:
        found += node_results(args)
    return found


def cluster_results(args: argparse.Namespace) -> list[dict[str, str]]:
    """The cluster checks on facts read through the kubeconfig of ``args``."""
    policy_ns = args.policy_namespace or args.namespace
    api = kube_client.from_kubeconfig(kubeconfig_path(args.kubeconfig))
    try:
        facts = cluster_facts.read(
            api, namespace=args.namespace, service_account=args.service_account, policy_namespace=policy_ns
        )
        kept, why = cluster_facts.device_taints_kept(api)
        extended, extended_why = cluster_facts.extended_resources_kept(api)
    finally:
        api.close()
    return [
        *preflight_rules.cluster_checks(
            version=facts.version,
            apis=facts.apis,
            service_account=f"{args.namespace}/{args.service_account}",
            policy_namespace=policy_ns,
            denied=facts.denied,
            reviewed=facts.reviewed,
            crds=facts.crds,
            workloads=facts.workloads,
            policies=facts.policies,
            all_policies=facts.all_policies,
            device_attributes=facts.device_attributes,
            nodes=facts.nodes,
            admission={
                "required": args.admission_policy,
                "policy": facts.admission_policy,
                "binding": facts.admission_binding,
                "grant": facts.admission_grant,
            },
            minimum=args.min_kubernetes,
        ),
        preflight_gates.device_taints_check(kept, why),
        preflight_gates.extended_resources_check(extended, extended_why),
    ]


def render(found: list[dict[str, str]], output: str, out: TextIO) -> None:
    """Print each check (``text``: ``PASS name: detail`` and ``-- fix: ...`` on fail) or one JSON document."""
    if output == "json":
        failed = [c["name"] for c in found if c["status"] == preflight_node.FAIL]
        json.dump({"checks": found, "failed_checks": failed}, out, indent=2)
        out.write("\n")
        return
    for c in found:
        line = f"{c['status'].upper()} {c['name']}: {c['detail']}"
        if c["status"] == preflight_node.FAIL:
            line += f"\n     fix: {c['fix']}"
        out.write(line + "\n")


def command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``sriov-dra preflight``; 0 when no check failed, 1 when one did, 2 when the API is unreachable
    or nothing was asked for (``--no-cluster-checks --no-node-checks``).

    ``out`` defaults to the ``sys.stdout`` of the moment of the call (not of the import), so a
    redirected or captured stdout receives the report.
    """
    out = sys.stdout if out is None else out
    if not args.cluster_checks and not args.node_checks:
        print(
            "sriov-dra preflight: --no-cluster-checks and --no-node-checks leave nothing to check; drop one",
            file=sys.stderr,
        )
        return 2
    if args.cluster_checks and not kubeconfig_path(args.kubeconfig).is_file():
        print(
            f"sriov-dra preflight: no kubeconfig at {kubeconfig_path(args.kubeconfig)}; pass --kubeconfig "
            "(or --no-cluster-checks for the node checks only)",
            file=sys.stderr,
        )
        return 2
    try:
        found = run_checks(args)
    except kube_errors.ApiError as exc:
        print(f"sriov-dra preflight: cannot read the cluster: {exc}", file=sys.stderr)
        return 2
    render(found, args.output, out)
    return 1 if any(c["status"] == preflight_node.FAIL for c in found) else 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``preflight`` on the ``sriov-dra`` subcommand parser (node options = module options)."""
    d = preflight_node.DEFAULTS
    p = sub.add_parser(
        "preflight",
        help="check a cluster and this node for sriov-dra (pass/fail, the fix)",
        description=(
            "Check, unless --no-cluster-checks, the cluster (Kubernetes version, resource.k8s.io/v1, CRDs, the "
            "plugin's RBAC, the admission policy, no upstream operator or legacy device plugin, no overlapping "
            "policies) and, unless --no-node-checks, the node it runs on: the node checks read THIS machine's files (CNI "
            "binaries, CNI configs, the guard and the plugin checkpoint it reads, cache mounts). Run it on a node (or inside a node's "
            "mount and network namespaces), or pass --no-node-checks off-node. One PASS/FAIL line per "
            "check with the fix; exit 0 when none failed, 1 when one did, 2 when the API is unreachable."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--kubeconfig", default=None, help="kubeconfig file (None: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("-o", "--output", choices=["text", "json"], default="text", help="output format")
    p.add_argument("--namespace", default=DEFAULT_NAMESPACE, help="the plugin's namespace")
    p.add_argument("--service-account", default=DEFAULT_SERVICE_ACCOUNT, help="the plugin's ServiceAccount")
    p.add_argument(
        "--policy-namespace", default=None, help="SriovResourcePolicy namespace (None: --namespace)"
    )
    p.add_argument(
        "--min-kubernetes", default=preflight_rules.MIN_KUBERNETES, help="lowest Kubernetes version accepted"
    )
    p.add_argument(
        "--admission-policy",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=(
            "require the admission policy sriov-dra-binding-protection and its binding "
            "(--no-admission-policy when the role ran with plugin_admission_policy: false)"
        ),
    )
    p.add_argument(
        "--cluster-checks",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="check the cluster through the kubeconfig (on by default; --no-cluster-checks for the node only)",
    )
    p.add_argument(
        "--node-checks",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also check the local host as a node (on by default; --no-node-checks when not on a node)",
    )
    p.add_argument("--cni-conf-dir", default=d["cni_conf_dir"], help="node: CNI config directory")
    p.add_argument("--cni-bin-dir", default=d["cni_bin_dir"], help="node: CNI binary directory")
    p.add_argument("--guard-file", default=d["guard_file"], help="node: the guard's conflist, expected first")
    p.add_argument(
        "--multus-mode", choices=["thick", "thin"], default=d["multus_mode"], help="node: Multus mode"
    )
    p.add_argument(
        "--multus-daemon-config", default=d["multus_daemon_config"], help="node: thick Multus daemon config"
    )
    p.add_argument(
        "--binaries",
        nargs="+",
        default=list(d["binaries"]),
        help="node: CNI binaries expected in --cni-bin-dir besides multus-shim/multus",
    )
    p.add_argument(
        "--cache-dirs",
        nargs="+",
        default=list(d["cache_dirs"]),
        help="node: cache directories that must persist",
    )
    p.add_argument("--mounts-file", default=d["mounts_file"], help="node: mount table read for --cache-dirs")
    p.add_argument(
        "--legacy-device-plugin-config",
        default=d["legacy_device_plugin_config"],
        help="node: the SR-IOV device plugin's config, which must be absent",
    )
    p.add_argument("--exec-timeout", type=int, default=d["exec_timeout"], help="node: seconds per CNI call")
    p.add_argument(
        "--plugin-checkpoint",
        default=d["plugin_checkpoint"],
        help="node: the plugin's checkpoint.json (its --state-dir); the guard's guard.pluginCheckpoint must name it",
    )
    p.add_argument(
        "--add-check",
        action=argparse.BooleanOptionalAction,
        default=d["add_check"],
        help="node: test CNI ADD/DEL between throwaway namespaces (root)",
    )
    p.set_defaults(func=command)
