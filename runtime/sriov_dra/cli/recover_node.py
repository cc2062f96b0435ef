"""``sriov-dra recover-node <node>``: release what a lost, fenced node's plugin can no longer release.

Reads and decides through :mod:`sriov_dra.cli.node_recovery` and prints one row per shadow of the
node (its Pod, claim, IPAM reservations and the action), then the shadows it will not touch and
the reservations it cannot reach (host-local files on the dead node). Dry run by default, as
``sriov-dra orphans``; ``--apply`` writes, and only when the node is fenced, not Ready and its
plugin silent (docs/operations.md). Exit status 0 when nothing is refused, unverified or failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TextIO

from sriov_dra.cli import node_recovery
from sriov_dra.core.plugin import ipam_reservations
from sriov_dra.driver.managed import seams
from sriov_dra.kube import client as kube_client
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import nad_client, objects, pod_patch, whereabouts
from sriov_dra_rules import errors


def _row(plan: node_recovery.ShadowPlan, applied: bool) -> dict[str, str]:
    s = plan.shadow
    if plan.failed:
        action = "; ".join([*plan.done, f"FAILED: {plan.failed}"])
    else:
        action = "; ".join(plan.done if applied else node_recovery.planned_actions(plan))
    return {
        "namespace": s.namespace,
        "shadow": s.name,
        "pod": f"{s.pod_name or 'uid ' + s.binding.pod_uid} ({plan.pod})",
        "claim": s.binding.claim_uid,
        "interface": s.binding.interface,
        "ipam": node_recovery.ipam_summary(plan),
        "action": action,
    }


def _print_table(rows: list[dict[str, str]], out: TextIO) -> None:
    keys = ("namespace", "shadow", "pod", "claim", "interface", "ipam", "action")
    lines = [tuple(k.upper() for k in keys)] + [tuple(r[k] for k in keys) for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(keys))]
    for line in lines:
        out.write("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() + "\n")


def _notes(plan: node_recovery.Plan) -> list[str]:
    out = [
        f"not recovered: {u.namespace}/{u.name}: {u.why}; inspect it, it is never touched"
        for u in plan.unverified
    ]
    dirs = sorted(
        {
            p.reservation.where
            for p in plan.shadows
            if p.reservation and p.reservation.kind is ipam_reservations.Kind.HOST_LOCAL
        }
    )
    if dirs:
        out.append(
            f"host-local: the addresses reserved in {', '.join(dirs)} on {plan.node} stay there: the API cannot "
            "reach them; the node's runtime frees them when it tears the old sandboxes down after the node comes "
            "back, and a reinstalled node's disk takes them with it"
        )
    return out


def _client(args: argparse.Namespace) -> node_recovery.Clients:
    if args.in_cluster:
        api = kube_client.in_cluster()
    else:
        path = args.kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
        api = kube_client.from_kubeconfig(Path(path))
    objs = objects.Objects(api, field_manager=whereabouts.FIELD_MANAGER)
    return node_recovery.Clients(
        objects=objs,
        nads=nad_client.NadClient(api),
        pods=pod_patch.PodClient(api),
        whereabouts=whereabouts.WhereaboutsClient(objs),
    )


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the command (module docstring); the exit status.

    ``out`` defaults to the ``sys.stdout`` of the moment of the call.
    """
    out = sys.stdout if out is None else out
    clients = _client(args)
    try:
        plan = node_recovery.read_plan(clients, args.node, plugin_selector=args.plugin_selector)
        complete = True
        stopped = ""
        if args.apply and plan.refusal is None:
            try:
                complete = node_recovery.apply(clients, plan, clock=seams.SystemClock())
            except kube_errors.Forbidden as exc:
                complete, stopped = False, str(exc)
        applied = args.apply and plan.refusal is None
        rows = [_row(p, applied) for p in plan.shadows]
        refusals = [str(e) for e in plan.refusal.errors] if plan.refusal else []
        if args.output == "json":
            doc = {
                "node": plan.node,
                "nodeUIDs": list(plan.node_uids),
                "refusals": refusals,
                "applied": applied,
                "shadows": rows,
                "notes": _notes(plan),
                "stopped": stopped,
            }
            out.write(json.dumps(doc, indent=2) + "\n")
        else:
            if rows:
                _print_table(rows, out)
            else:
                out.write(f"no shadow NAD of node {plan.node} is left\n")
            for note in _notes(plan):
                out.write(note + "\n")
            if rows and not args.apply and plan.refusal is None:
                out.write(f"dry run: rerun with --apply to recover the {len(rows)} shadow(s) listed above\n")
        if plan.refusal is not None:
            print(f"sriov-dra recover-node: refused: {plan.refusal}", file=sys.stderr)
        if stopped:
            print(f"sriov-dra recover-node: --apply stopped: {stopped}", file=sys.stderr)
        failed = any(p.failed for p in plan.shadows) or bool(plan.unverified)
        return 1 if plan.refusal is not None or not complete or failed else 0
    except errors.SriovDraError as exc:
        print(f"sriov-dra recover-node: {exc}", file=sys.stderr)
        return 1
    finally:
        clients.objects.api.close()


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``recover-node`` on the ``sriov-dra`` subcommand parser."""
    p = sub.add_parser(
        "recover-node",
        help="release a lost, fenced node's shadows, Pod selections and whereabouts addresses (dry run unless --apply)",
        description=(
            "Release what the plugin of a lost node can no longer release: its shadow NADs (deleted, our "
            "finalizer removed), their claims' selections on Pods that still exist, and the whereabouts "
            "allocations their frozen configs name. Refuses unless the Node is deleted or carries the "
            "node.kubernetes.io/out-of-service taint, is not Ready, and no plugin Pod on it is ready. "
            "Changes nothing unless --apply. Needs cluster-admin or the group sriov-dra:binding-managers "
            "(the admission policy). Runbook: docs/operations.md."
        ),
    )
    p.add_argument("node", help="the lost node's name")
    p.add_argument("--apply", action="store_true", help="recover (default: print what would be done)")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG or ~/.kube/config")
    who.add_argument("--in-cluster", action="store_true", help="use the Pod's service account (a Job)")
    p.add_argument(
        "--plugin-selector",
        default=node_recovery.PLUGIN_POD_SELECTOR,
        help=f"label selector of the plugin's Pods (default: {node_recovery.PLUGIN_POD_SELECTOR})",
    )
    p.add_argument(
        "-o", "--output", choices=["table", "json"], default="table", help="output format (default: table)"
    )
    p.set_defaults(func=run)
