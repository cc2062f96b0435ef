"""``sriov-dra preflight``: the checks of spec §4.3 and §18.1, each with pass/fail and what to change.

Cluster checks (``sriov_dra_rules.preflight_rules`` on facts read by ``sriov_dra.kube.clusterfacts``)
and, unless ``--no-node-checks``, the node checks of this machine (``sriov_dra_rules.preflight_node``)
with the guard's own config parser as the installation contract. The same rules run in the
Ansible role ``sriovnet.dra.preflight`` (byte copies in ``plugins/module_utils``). Prints one line
per check (``--output json``: one JSON document) and exits 1 when any check failed.

It must never change the cluster (access reviews persist nothing) or the node (the test ADD
uses throwaway namespaces and a temporary IPAM directory).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from sriov_dra.guard import install, shim
from sriov_dra.kube import client as kube_client
from sriov_dra.kube import clusterfacts
from sriov_dra.kube import errors as kube_errors
from sriov_dra_rules import preflight_node, preflight_rules

DEFAULT_NAMESPACE = "dra-driver-sriov"
DEFAULT_SERVICE_ACCOUNT = "dra-driver-sriov"


class GuardContractError(ValueError):
    """The guard file, its primary or Multus's daemon config fails the guard's contract."""


def config_files(conf_dir: str) -> list[str]:
    """CNI config file names in ``conf_dir`` in the runtime's order (``install.runtime_choice`` is the first).

    Raises: GuardContractError when the directory cannot be listed.
    """
    try:
        names = os.listdir(conf_dir)
    except OSError as exc:
        raise GuardContractError(f"cannot list the CNI config directory {conf_dir}: {exc.strerror}") from exc
    return sorted(
        n
        for n in names
        if n.endswith(install.CONFIG_SUFFIXES)
        and not n.startswith(".")
        and os.path.isfile(os.path.join(conf_dir, n))
    )


def _load(path: str, what: str) -> dict[str, Any]:
    try:
        doc = install.read_json(Path(path), what)
    except OSError as exc:
        raise GuardContractError(f"cannot read {what} {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise GuardContractError(str(exc)) from exc
    if not isinstance(doc, dict):
        raise GuardContractError(f"{what} {path} must hold a JSON object")
    return doc


def validate_guard(conf_dir: str, guard_file: str, daemon_config: str | None) -> str:
    """The guard file parses with the guard's own parser, its primary is real, Multus's primary is pinned.

    Raises: GuardContractError naming the file, the key and the fix.
    """
    path = os.path.join(conf_dir, guard_file)
    doc = _load(path, "guard config")
    plugins = doc.get("plugins")
    if not isinstance(plugins, list) or len(plugins) != 1 or not isinstance(plugins[0], dict):
        raise GuardContractError(
            f"guard config {path}: plugins must hold exactly one object of type multus-guard"
        )
    entry = {"cniVersion": doc.get("cniVersion"), "name": doc.get("name"), **plugins[0]}
    try:
        conf = shim.parse_conf(json.dumps(entry).encode())
    except shim.GuardConfError as exc:
        raise GuardContractError(f"guard config {path}: {exc}") from exc
    primary = _load(conf.primary_config, "primary network config")
    kinds = {str(p.get("type")) for p in [primary, *primary.get("plugins", [])] if isinstance(p, dict)}
    if kinds & {"multus", "multus-shim", install.PLUGIN_TYPE}:
        raise GuardContractError(
            f"guard config {path}: primary {conf.primary_config} is a Multus or guard config (recursion); "
            "point multus.primaryConfig at the cluster network's config"
        )
    held = plugins[0].get("capabilities")
    caps: dict[str, Any] = held if isinstance(held, dict) else {}
    missing = [c for c in install.primary_capabilities(primary) if caps.get(c) is not True]
    if missing:
        raise GuardContractError(
            f"guard config {path}: capabilities {missing} of the primary {conf.primary_config} are not enabled in "
            "plugins[0].capabilities; add them"
        )
    master = None
    if daemon_config and conf.mode == "thick":
        daemon = _load(daemon_config, "Multus daemon config")
        master = daemon.get("multusMasterCNI")
        if daemon.get("multusConfigFile", "auto") == "auto" and not master:
            raise GuardContractError(
                f"Multus daemon config {daemon_config}: multusConfigFile is auto but multusMasterCNI is not set; "
                "set multusMasterCNI to the primary network's file name"
            )
    problems = [
        p
        for p in install.installation_problems(
            Path(conf_dir), mode=conf.mode, multus_master_cni=master, autoconfig_dir=None
        )
        if not p.startswith("the runtime would use")  # that is the guard-first check
    ]
    if problems:
        raise GuardContractError(f"guard config {path}: " + "; ".join(problems))
    return f"{path}: mode {conf.mode}, primary pinned to {conf.primary_config}"


CONTRACT = preflight_node.GuardContract(config_files, validate_guard, GuardContractError)


def kubeconfig_path(given: str | None) -> Path:
    """``--kubeconfig``, else the first file of ``$KUBECONFIG``, else ``~/.kube/config``."""
    path = given or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    return Path(path.split(os.pathsep)[0])


def run_checks(args: argparse.Namespace) -> list[dict[str, str]]:
    """Cluster checks (when a kubeconfig is usable) then node checks, as ``{name, status, detail, fix}``."""
    found: list[dict[str, str]] = []
    policy_ns = args.policy_namespace or args.namespace
    api = kube_client.from_kubeconfig(kubeconfig_path(args.kubeconfig))
    try:
        facts = clusterfacts.read(
            api, namespace=args.namespace, service_account=args.service_account, policy_namespace=policy_ns
        )
    finally:
        api.close()
    found += preflight_rules.cluster_checks(
        version=facts.version,
        apis=facts.apis,
        service_account=f"{args.namespace}/{args.service_account}",
        policy_namespace=policy_ns,
        denied=facts.denied,
        reviewed=facts.reviewed,
        crds=facts.crds,
        workloads=facts.workloads,
        policies=facts.policies,
        nodes=facts.nodes,
        admission={
            "required": args.admission_policy,
            "policy": facts.admission_policy,
            "binding": facts.admission_binding,
            "grant": facts.admission_grant,
        },
        minimum=args.min_kubernetes,
    )
    if args.node_checks:
        options = {k: getattr(args, k) for k in preflight_node.DEFAULTS}
        found += preflight_node.node_checks(options, CONTRACT)
    return found


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
    """Run ``sriov-dra preflight``; 0 when no check failed, 1 when one did, 2 when the API is unreachable.

    ``out`` defaults to the ``sys.stdout`` of the moment of the call (not of the import), so a
    redirected or captured stdout receives the report.
    """
    out = sys.stdout if out is None else out
    if not kubeconfig_path(args.kubeconfig).is_file():
        print(
            f"sriov-dra preflight: no kubeconfig at {kubeconfig_path(args.kubeconfig)}; pass --kubeconfig",
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
            "Check the cluster (Kubernetes version, resource.k8s.io/v1, CRDs, the plugin's RBAC, the "
            "admission policy, no upstream operator or legacy device plugin, no overlapping policies) and, unless "
            "--no-node-checks, the node it runs on: the node checks read THIS machine's files (CNI "
            "binaries, CNI configs, the guard, cache mounts). Run it on a node (or inside a node's "
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
        "--add-check",
        action=argparse.BooleanOptionalAction,
        default=d["add_check"],
        help="node: test CNI ADD/DEL between throwaway namespaces (root)",
    )
    p.set_defaults(func=command)
