"""``sriov-dra orphans``: one node's managed shadows, correlated with its checkpoint.

Lists the shadows labelled for the node's UID, reads that node's checkpoint (read-only) and
classifies each Active / Deleting / ReleaseComplete / Orphaned by full binding identity, with
whether its claim and Pod still exist and other controllers' finalizers apart
(docs/design.md#scale). Dry run by default; ``--apply`` acts only on ``ReleaseComplete`` shadows
(UID-precondition DELETE, then the JSON Patch removal of our finalizer). Orphaned shadows need
inspection or fencing first. Never writes the checkpoint or another node's shadows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TextIO

from sriov_dra.core import identities
from sriov_dra.core.plugin import checkpoint_codec
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import orphans, seams, shadow_lifecycle
from sriov_dra.host import checkpoint_files
from sriov_dra.kube import claims as kube_claims
from sriov_dra.kube import client as kube_client
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import nad_client, node_info, pod_patch, views
from sriov_dra_rules import errors, names

DEFAULT_CHECKPOINT = f"/var/lib/kubelet/plugins/{names.DRIVER_NAME}/checkpoint.json"


@dataclass(frozen=True)
class Row:
    """One shadow as printed: classification plus live claim/Pod identity and the planned action."""

    namespace: str
    name: str
    status: str
    claim: str
    pod: str
    foreign_finalizers: list[str]
    why: str
    action: str


def _live(get: Callable[[str, str], Mapping[str, object]], namespace: str, name: str, uid: str) -> str:
    """``present`` / ``replaced`` / ``gone`` / ``unknown`` for an object that should have ``uid``."""
    if not name:
        return "unknown"
    try:
        obj = get(namespace, name)
    except kube_errors.NotFound:
        return f"{name}: gone"
    except kube_errors.ApiError as exc:
        return f"{name}: unreadable ({type(exc).__name__})"
    return f"{name}: present" if views.decode_meta(obj).uid == uid else f"{name}: replaced"


def _target(cp: model.Checkpoint, report: orphans.ShadowReport) -> shadow_lifecycle.Target | None:
    record = cp.claims.get(identities.ClaimUid(report.claim_uid))
    if record is None:
        return None
    return next(
        (t for t in shadow_lifecycle.targets(record) if t.binding.attachment_id == report.attachment_id), None
    )


def rows(
    reports: list[orphans.ShadowReport],
    cp: model.Checkpoint,
    listed: Mapping[str, Mapping[str, object]],
    *,
    claims: seams.ClaimApi,
    pods: seams.PodApi,
) -> list[Row]:
    """Describe each report with its live claim/Pod identity and the action ``--apply`` would take."""
    out = []
    for r in reports:
        record = cp.claims.get(identities.ClaimUid(r.claim_uid))
        claim = (
            _live(claims.get, r.namespace, record.name, r.claim_uid)
            if record
            else f"uid {r.claim_uid or '?'}: no record"
        )
        obj = listed.get(f"{r.namespace}/{r.name}") or {}
        pod_name = shadow_lifecycle.owner_pod_name(obj, r.pod_uid) or ""
        pod = (
            _live(pods.get, r.namespace, pod_name, r.pod_uid)
            if pod_name
            else f"uid {r.pod_uid or '?'}: no owner reference"
        )
        if r.status is orphans.Status.RELEASE_COMPLETE:
            action = "delete (uid precondition) and remove our finalizer"
        elif r.status is orphans.Status.ORPHANED:
            action = "none: inspect it; if the node is lost, fence it and run recover-node"
        else:
            action = "none: the plugin owns it"
        out.append(
            Row(r.namespace, r.name, r.status.value, claim, pod, list(r.foreign_finalizers), r.why, action)
        )
    return out


def apply_released(
    reports: list[orphans.ShadowReport], cp: model.Checkpoint, *, nads: seams.NadApi, clock: seams.Clock
) -> Iterator[str]:
    """Finalize only the shadows whose record is ``ReleaseComplete``; yield one line per action done.

    Lazy, so the actions done before a failing one are reported. Raises: ``kube_errors.ApiError``
    from the failing action (e.g. Forbidden by the admission policy for a non-manager).
    """
    for r in reports:
        target = _target(cp, r) if r.status is orphans.Status.RELEASE_COMPLETE else None
        if target is None:
            continue
        result = shadow_lifecycle.finalize_released(target, r.uid, nads=nads, clock=clock)
        held = f"; still held by {', '.join(result.foreign)}" if result.foreign else ""
        yield f"{r.namespace}/{r.name}: {'gone' if result.gone else 'our finalizer removed'}{held}"


def _print_table(found: list[Row], out: TextIO) -> None:
    header = ("NAMESPACE", "NAME", "STATUS", "CLAIM", "POD", "FOREIGN-FINALIZERS", "ACTION")
    lines = [header] + [
        (r.namespace, r.name, r.status, r.claim, r.pod, ",".join(r.foreign_finalizers) or "-", r.action)
        for r in found
    ]
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    for line in lines:
        out.write("  ".join(str(v).ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() + "\n")
    for r in found:
        if r.why:
            out.write(f"{r.namespace}/{r.name}: {r.why}\n")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the command; 0 on success, 1 for an unreadable checkpoint or API failure (``--apply`` included).

    ``out`` defaults to the ``sys.stdout`` of the moment of the call (a captured stdout receives it).
    """
    out = sys.stdout if out is None else out
    kubeconfig = args.kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    api = kube_client.from_kubeconfig(Path(kubeconfig))
    try:
        try:
            try:
                data, source = checkpoint_files.read_only(Path(args.checkpoint))
            except FileNotFoundError:
                print(
                    f"sriov-dra orphans: no plugin checkpoint at {args.checkpoint}; "
                    "pass --checkpoint <path> when not running on the node",
                    file=sys.stderr,
                )
                return 1
            cp = checkpoint_codec.decode_checkpoint(data, source=str(source))
            node_uid = args.node_uid or node_info.node_uid(api, args.node, timeout_s=10.0)
            nads = nad_client.NadClient(api)
            listed = nads.list_all(label_selector=orphans.label_selector(node_uid))
        except (OSError, errors.SriovDraError, kube_errors.ApiError) as exc:
            print(f"sriov-dra orphans: {exc}", file=sys.stderr)
            return 1
        reports = orphans.correlate(listed, cp.claims, node_uid)
        by_name = {views.decode_meta(o).ref: o for o in listed}
        found = rows(reports, cp, by_name, claims=kube_claims.ClaimClient(api), pods=pod_patch.PodClient(api))
        if args.output == "json":
            json.dump([asdict(r) for r in found], out, indent=2)
            out.write("\n")
        elif found:
            _print_table(found, out)
        else:  # no table header above nothing
            who = f"node {args.node}" if args.node else f"node UID {node_uid}"
            out.write(f"no managed shadow NADs for {who}\n")
        if args.apply:
            try:
                for line in apply_released(reports, cp, nads=nads, clock=seams.SystemClock()):
                    out.write(f"applied: {line}\n")
            except kube_errors.ApiError as exc:  # e.g. refused by the admission policy: not a binding manager
                print(f"sriov-dra orphans: --apply stopped: {exc}", file=sys.stderr)
                return 1
        elif any(r.status is orphans.Status.RELEASE_COMPLETE for r in reports):
            out.write("dry run: rerun with --apply to finalize the ReleaseComplete shadows listed above\n")
        return 0
    finally:
        api.close()


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``orphans`` on the ``sriov-dra`` subcommand parser."""
    p = sub.add_parser(
        "orphans",
        help="list a node's managed shadow NADs against its checkpoint (dry run unless --apply)",
        description=(
            "List the shadow NADs the plugin manages for one node, each with its status against the "
            "plugin checkpoint (owned, ReleaseComplete, orphaned), its claim, Pod and foreign "
            "finalizers. Changes nothing unless --apply, which finalizes ReleaseComplete shadows only. "
            "Reads the durable checkpoint.slots beside --checkpoint when it exists. Off the node, pass "
            "--checkpoint with a copy of the node's checkpoint.slots (or checkpoint.json)."
        ),
    )
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--node", help="Node name (its UID is read from the API)")
    who.add_argument("--node-uid", help="Node UID (for a Node object that no longer exists)")
    p.add_argument(
        "--checkpoint",
        default=DEFAULT_CHECKPOINT,
        help=f"the plugin checkpoint; pass it when not running on the node (default: {DEFAULT_CHECKPOINT})",
    )
    p.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG or ~/.kube/config")
    p.add_argument(
        "-o", "--output", choices=["table", "json"], default="table", help="output format (default: table)"
    )
    p.add_argument(
        "--apply",
        action="store_true",
        help="finalize ReleaseComplete shadows only (UID-precondition delete, remove our finalizer)",
    )
    p.set_defaults(func=run)
