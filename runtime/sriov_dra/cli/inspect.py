"""``sriov-dra inspect``: follow one Pod's VFs from its claim to the addresses on its interfaces.

Owns the command: arguments, reading the Pod's network namespace with ``--netns``, the exit
status (0 every row passes, 1 otherwise, 2 the Pod or namespace cannot be read), and, for a Pod
with no VF allocated, why devices may be withheld: each node's findings in the policy namespace's
SriovResourcePolicies and DeviceAttributes, and the namespaces that hold policies when the policy
namespace holds none. The correlation
(docs/design.md#correlation) is :mod:`~sriov_dra.cli.inspect_rows`'s, the output
:mod:`~sriov_dra.cli.inspect_table`'s. Read-only; needs GET/LIST of Pods, ResourceClaims,
ResourceSlices and NADs (and LIST of SriovResourcePolicies and DeviceAttributes).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from sriov_dra.cli.inspect_rows import POD, Row, inspect_pod
from sriov_dra.cli.inspect_table import render_json, render_table
from sriov_dra.core.plugin import device_metadata
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import objects, views
from sriov_dra_rules import errors, names, preflight_rules

DEFAULT_POLICY_NAMESPACE = "dra-driver-sriov"


class NetnsUnreadable(RuntimeError):
    """The network namespace given with ``--netns`` cannot be read; ``reason`` says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot read network namespace {path}: {reason}")
        self.path, self.reason = path, reason


def read_netns(path: str) -> dict[str, list[str]]:
    """``{interface: [CIDR]}`` of the namespace at ``path`` (link-local IPv6 left out), read by netlink.

    The socket is opened inside the namespace by ``sriov_dra.host.netlink`` (the calling thread
    never changes namespace), so the command needs no ``ip``/``nsenter`` binary.
    Raises: :class:`NetnsUnreadable` naming the path and the kernel's reason (no such file, not a
    network namespace, permission denied).
    """
    import errno as errno_codes
    import ipaddress
    import os

    from sriov_dra.host import netlink

    try:
        found = netlink.links(path)
    except netlink.NetlinkError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        if exc.errno == errno_codes.ENOENT:
            reason = f"{reason} (no namespace is mounted there)"
        raise NetnsUnreadable(path, reason) from exc
    return {
        link.name: [a for a in link.addresses if not ipaddress.ip_interface(a).ip.is_link_local]
        for link in found
    }


DEFAULT_METADATA_DIR = f"/var/lib/kubelet/plugins/{names.DRIVER_NAME}"
"""The plugin's data directory with the default ``--kubelet-plugins-directory-path``."""


def metadata_reader(data_dir: str) -> Callable[[str, str, str], str | None]:
    """A reader of the device metadata files under the plugin data dir ``data_dir`` on this node.

    Answers ``None`` for a file that is absent or unreadable here (inspect runs off the node too).
    """
    from pathlib import Path

    def read(namespace: str, claim: str, request: str) -> str | None:
        try:
            parts = device_metadata.host_file_parts(namespace, claim, request)
            return Path(data_dir).joinpath(*parts).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, errors.ContractViolation):
            return None

    return read


class Inspector:
    """The demo's view of this command (``sriov_dra_lab.demo.Inspector``)."""

    def inspect(self, client: objects.Objects, namespace: str, name: str, netns: str | None) -> list[Row]:
        """Rows of Pod ``namespace/name``; IPs from ``netns`` when given."""
        return inspect_pod(client, namespace, name, netns=netns, read_netns=read_netns if netns else None)

    def render(self, rows: Sequence[Any]) -> str:
        """The correlation table."""
        return render_table(rows)


def mapping_notes(client: objects.Objects, policy_namespace: str) -> list[str]:
    """Why the plugins may publish no device for a Pod: every node's ``Valid=False`` status entry
    in the policy namespace's objects, and the namespaces holding policies when it holds none.

    Shapes: one line per note; empty when the plugin's CRDs are not served or nothing is wrong.
    """
    try:
        everywhere = client.list(objects.RESOURCE_POLICY).items
        attributes = client.list(objects.DEVICE_ATTRIBUTES, policy_namespace).items
    except kube_errors.NotFound:
        return []
    watched = [p for p in everywhere if views.decode_meta(p).namespace == policy_namespace]
    notes = [
        f"policy finding: {f}"
        for f in sorted(
            preflight_rules.node_findings("SriovResourcePolicy", watched)
            + preflight_rules.node_findings("DeviceAttributes", attributes)
        )
    ]
    counts = preflight_rules.policy_namespaces(everywhere)
    if not watched:
        where = ", ".join(f"{ns} ({n})" for ns, n in counts.items())
        notes.append(
            f"the policy namespace {policy_namespace} holds no SriovResourcePolicy, so no device is published"
            + (f"; SriovResourcePolicies exist in: {where}" if where else "")
        )
    return notes


def run(args: argparse.Namespace) -> int:
    """``sriov-dra inspect`` (arguments from :func:`add_parser`); returns the exit status.

    Exit 0 when every VF correlates and every check passes, 1 otherwise (the table says why).
    """
    import os
    from pathlib import Path

    from sriov_dra.kube import client as kube_client

    path = args.kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    api = kube_client.from_kubeconfig(Path(path.split(os.pathsep)[0]))
    try:
        client = objects.Objects(api, field_manager="sriov-dra-inspect")
        try:
            rows = inspect_pod(
                client,
                args.namespace,
                args.pod,
                netns=args.netns,
                read_netns=read_netns if args.netns else None,
                read_metadata=metadata_reader(args.metadata_dir),
            )
        except NetnsUnreadable as exc:
            print(f"sriov-dra inspect: {exc}", file=sys.stderr)
            return 2
        except kube_errors.NotFound:
            elsewhere = sorted(
                views.decode_meta(p).namespace
                for p in client.list(POD, None, field_selector=f"metadata.name={args.pod}").items
            )
            hint = f"; it exists in: {', '.join(f'-n {n}' for n in elsewhere)}" if elsewhere else ""
            print(f"sriov-dra inspect: pod {args.namespace}/{args.pod} not found{hint}", file=sys.stderr)
            return 2
        notes = [] if rows else mapping_notes(client, args.policy_namespace)
    finally:
        api.close()
    print(render_json(rows) if args.output == "json" else render_table(rows))
    for note in notes:
        print(f"sriov-dra inspect: no VF allocated; {note}", file=sys.stderr)
    return 0 if rows and all(r.ok for r in rows) else 1


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``inspect`` on the ``sriov-dra`` subcommand parser."""
    p = sub.add_parser(
        "inspect",
        help="correlate a Pod's claim, VFs, GPUs, shadow NADs, interfaces and IPs",
        description=(
            "Print the correlation of a Pod's VFs: per allocated VF its request, device, PCI "
            "address and PCIe root, the paired GPU, the shadow NAD and its template, the interface and "
            "IPs and the claim's conditions, with the checks each row passes. Read from the API; with "
            "--netns (on the Pod's node) the IPs come from the Pod's network namespace; on the node each "
            "request's device metadata file is printed after the table. Exit 0 when every row passes, 1 otherwise, "
            "2 when the Pod or the namespace cannot be read."
        ),
    )
    p.add_argument("pod", help="Pod name")
    p.add_argument("-n", "--namespace", default="default", help="the Pod's namespace (default: default)")
    p.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG or ~/.kube/config")
    p.add_argument(
        "--netns",
        default=None,
        help="the Pod's network namespace path, to read IPs with their prefix on the node itself "
        "(default: the claim's networkData, with prefix, else Multus's network-status, without)",
    )
    p.add_argument(
        "--metadata-dir",
        default=DEFAULT_METADATA_DIR,
        help="the plugin's data directory on this node, to print each request's device metadata file "
        f"(default: {DEFAULT_METADATA_DIR}; nothing is printed where it holds no file)",
    )
    p.add_argument(
        "--policy-namespace",
        default=DEFAULT_POLICY_NAMESPACE,
        help="the namespace the plugins watch for SriovResourcePolicies, read when no VF is allocated "
        f"(default: {DEFAULT_POLICY_NAMESPACE})",
    )
    p.add_argument(
        "-o", "--output", choices=["table", "json"], default="table", help="output format (default: table)"
    )
    p.set_defaults(func=run)
