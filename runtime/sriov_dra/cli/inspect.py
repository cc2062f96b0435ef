"""``sriov-dra inspect``: follow one Pod's VFs from its claim to the addresses on its interfaces.

For each SR-IOV allocation result of each of the Pod's ResourceClaims (spec §14.4):

  request → (driver, pool, device) → VF PCI address and ``resource.kubernetes.io/pcieRoot`` (from
  the live ResourceSlice) → the GPU result(s) paired with it by a ``matchAttribute`` constraint
  on pcieRoot, and whether their roots are equal → the shadow NAD bound to that VF (its binding
  annotation's claim UID and PCI address) → the source template it was rendered from → the
  interface name → the address on that interface, read from the Pod's network namespace when a
  path is given (the lab knows it), else from the claim's ``status.devices[].networkData`` that
  the plugin fills (with prefix), else from Multus's ``network-status`` (without prefix) → the
  MAC (``networkData``, else network-status) → the rail subnet of the shadow's IPAM config.

Each row also carries the spec §14.4 checks that can be made from these objects: the shadow's
``deviceID`` is the VF, the binding names this Pod and claim, the CNI network name is the
template's, the address is inside the rail subnet, the paired roots are equal, and the claim's
``networkData`` names the interface (and, with a netns, its addresses). Read-only; works
against any cluster with the admin's kubeconfig (GET/LIST of Pods, ResourceClaims,
ResourceSlices, NADs).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sriov_dra.core import bindings
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import objects, views
from sriov_dra_rules import errors as core_errors
from sriov_dra_rules import names

POD = objects.Resource("", "v1", "pods", "Pod")
CLAIM = objects.Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim")
SLICE = objects.Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False)
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
DEVICE_ID = "k8s.cni.cncf.io/deviceID"

NetnsReader = Callable[[str], Mapping[str, Sequence[str]]]
"""``reader(netns_path)`` → ``{interface name: [CIDR addresses]}`` of a network namespace."""


@dataclass(frozen=True)
class Row:
    """One VF of a Pod, correlated end to end (see the module docstring).

    Shapes: ``gpus`` entries ``"<request>: <pool>/<device> @<root>"``; ``ips`` CIDR strings
    (plain IPs from network-status); ``ip_origin`` ``netns``, ``claim networkData`` or
    ``network-status``; ``claim_ips`` the claim's ``networkData.ips`` (empty when it has none);
    ``checks`` maps a check name to ``True``/``False`` (absent when it cannot be made).
    """

    pod: str
    node: str
    claim: str
    request: str
    driver: str
    pool: str
    device: str
    vf_pci: str
    pcie_root: str
    gpus: tuple[str, ...]
    shadow: str
    source: str
    interface: str
    ips: tuple[str, ...]
    ip_origin: str
    subnet: str
    checks: dict[str, bool] = field(default_factory=dict)
    mac: str = ""
    claim_ips: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when a shadow was found and every check made passed."""
        return bool(self.shadow) and all(self.checks.values())


def _slice_index(client: objects.Objects) -> dict[tuple[str, str, str], dict[str, views.AttributeValue]]:
    index: dict[tuple[str, str, str], dict[str, views.AttributeValue]] = {}
    for item in client.list(SLICE).items:
        index.update(views.slice_devices(item))
    return index


def _claim_names(pod: views.Pod) -> list[str]:
    out: list[str] = []
    for entry in pod.claims:
        name = entry.claim_name or pod.claim_statuses.get(entry.name)
        if name and name not in out:
            out.append(name)
    return out


def _partners(claim: views.Claim, request: str) -> set[str]:
    """Requests bound to ``request`` by a ``matchAttribute`` constraint on pcieRoot."""
    found: set[str] = set()
    for constraint in claim.constraints:
        if constraint.match_attribute == PCIE_ROOT and request in constraint.requests:
            found.update(m for m in constraint.requests if m != request)
    return found


def _subnet(config: Mapping[str, object]) -> str:
    ipam = views.mapping(config.get("ipam"))
    value = ipam.get("range") or ipam.get("subnet")
    if isinstance(value, str):
        if "-" in value and "/" in value:  # whereabouts "start-end/prefix"
            start, rest = value.split("-", 1)
            value = f"{start}/{rest.rsplit('/', 1)[1]}"
        try:
            return str(ipaddress.ip_network(value, strict=False))
        except ValueError:
            return value
    ranges = views.items(ipam.get("ranges"))
    first = views.items(ranges[0]) if ranges else ()
    if first and isinstance(first[0], Mapping):
        return str(first[0].get("subnet", ""))
    return ""


def _config(text: str) -> Mapping[str, object]:
    """A NAD's ``spec.config`` as a JSON object (``{}`` when it is not one: this is a display)."""
    try:
        parsed: object = json.loads(text or "{}")
    except ValueError:
        return {}
    return views.mapping(parsed)


def _network_status(pod: views.Pod) -> dict[str, tuple[list[str], str]]:
    """``{interface: (ips, mac)}`` from Multus's network-status (best effort: this is a display)."""
    raw = pod.meta.annotations.get(names.NETWORK_STATUS_ANNOTATION, "[]")
    try:
        entries: object = json.loads(raw)
    except ValueError:
        return {}
    out: dict[str, tuple[list[str], str]] = {}
    for entry in views.items(entries):
        if isinstance(entry, Mapping) and entry.get("interface"):
            ips = entry.get("ips")
            listed = [str(ip) for ip in ips] if isinstance(ips, list) else []
            out[str(entry["interface"])] = (listed, str(entry.get("mac") or ""))
    return out


def _in_subnet(ips: Sequence[str], subnet: str) -> bool | None:
    if not ips or not subnet:
        return None
    try:
        net = ipaddress.ip_network(subnet, strict=False)
        return all(ipaddress.ip_interface(ip).ip in net for ip in ips)
    except ValueError:
        return False


def _shadows(
    client: objects.Objects, namespace: str, pod_uid: str
) -> list[tuple[views.Nad, bindings.Binding]]:
    selector = f"{names.LABEL_POD_UID}={pod_uid}"
    found = []
    for item in client.list(objects.NAD, namespace, label_selector=selector).items:
        nad = views.decode_nad(item)
        try:
            found.append((nad, bindings.decode_binding(nad.meta.annotations.get(names.BINDING_ANNOTATION))))
        except core_errors.ContractViolation:
            continue
    return found


def _source_network_name(client: objects.Objects, ref: bindings.SourceRef) -> str | None:
    """The CNI network name of the source NAD (``None`` when it is gone or its config is no object)."""
    nad = client.get_or_none(objects.NAD, ref.name, ref.namespace)
    if nad is None:
        return None
    try:
        parsed: object = json.loads(views.decode_nad(nad).config or "{}")
    except ValueError:
        return None
    if not isinstance(parsed, Mapping):
        return None
    return str(parsed.get("name"))


def inspect_pod(
    client: objects.Objects,
    namespace: str,
    name: str,
    *,
    netns: str | None = None,
    read_netns: NetnsReader | None = None,
    sriov_driver: str = names.DRIVER_NAME,
) -> list[Row]:
    """Correlate every SR-IOV VF of Pod ``namespace/name`` (see the module docstring).

    Raises: ``sriov_dra.kube.errors.NotFound`` when the Pod does not exist.
    """
    pod = views.decode_pod(client.get(POD, name, namespace))
    uid = pod.meta.uid
    slices = _slice_index(client)
    shadows = _shadows(client, namespace, uid)
    local = read_netns(netns) if (netns and read_netns) else None
    reported = _network_status(pod)
    rows: list[Row] = []
    for claim_name in _claim_names(pod):
        found = client.get_or_none(CLAIM, claim_name, namespace)
        if found is None:
            continue
        claim = views.decode_claim(found)
        by_request = {r.request: r for r in claim.results}
        for result in claim.results:
            if result.driver != sriov_driver:
                continue
            key = result.key
            attrs = slices.get(key, {})
            pci, root = str(attrs.get(DEVICE_ID, "")), str(attrs.get(PCIE_ROOT, ""))
            gpus, roots = [], []
            for partner in sorted(_partners(claim, result.request)):
                other = by_request.get(partner)
                if other is None or other.driver == sriov_driver:
                    continue
                other_root = str(slices.get(other.key, {}).get(PCIE_ROOT, ""))
                roots.append(other_root)
                gpus.append(f"{partner}: {other.pool}/{other.device} @{other_root}")
            shadow = next(
                ((nad, b) for nad, b in shadows if b.claim_uid == claim.meta.uid and b.pci_address == pci),
                None,
            )
            checks: dict[str, bool] = {}
            if roots:
                checks["pcieRootEqual"] = all(r == root and r for r in roots)
            shadow_name = source = interface = subnet = mac = ""
            ips: list[str] = []
            origin = ""
            network = claim.network_data(key)
            claim_ips = network.ips if network is not None else ()
            if shadow is not None:
                nad, binding = shadow
                config = _config(nad.config)
                shadow_name, interface = nad.meta.name, binding.interface
                source = f"{binding.source.namespace}/{binding.source.name}"
                subnet = _subnet(config)
                checks["deviceIdIsVf"] = config.get("deviceID") == pci
                checks["bindingIdentity"] = binding.pod_uid == uid and binding.claim_uid == claim.meta.uid
                template_name = _source_network_name(client, binding.source)
                if template_name is not None:
                    checks["networkNamePreserved"] = config.get("name") == template_name
                status_ips, status_mac = reported.get(interface, ([], ""))
                mac = (network.hardware_address if network is not None else "") or status_mac
                if local is not None:
                    ips, origin = list(local.get(interface, [])), "netns"
                elif network is not None:
                    ips, origin = list(claim_ips), "claim networkData"
                else:
                    ips, origin = list(status_ips), "network-status"
                if network is not None:
                    checks["networkDataInterface"] = network.interface_name == interface
                    if local is not None:
                        checks["networkDataMatchesNetns"] = sorted(claim_ips) == sorted(ips)
                inside = _in_subnet(ips, subnet)
                if inside is not None:
                    checks["ipInRailSubnet"] = inside
                checks["interfaceHasAddress"] = bool(ips)
            rows.append(
                Row(
                    pod=f"{namespace}/{name}",
                    node=pod.node_name,
                    claim=claim_name,
                    request=result.request,
                    driver=result.driver,
                    pool=result.pool,
                    device=result.device,
                    vf_pci=pci,
                    pcie_root=root,
                    gpus=tuple(gpus),
                    shadow=shadow_name,
                    source=source,
                    interface=interface,
                    ips=tuple(ips),
                    ip_origin=origin,
                    subnet=subnet,
                    checks=checks,
                    mac=mac,
                    claim_ips=claim_ips,
                )
            )
    rows.sort(key=lambda r: (r.interface or "~", r.claim, r.request))
    return rows


def render_table(rows: Sequence[Row]) -> str:
    """The correlation table as text: one header, one line per VF, then failed checks if any."""
    if not rows:
        return "(no SR-IOV devices allocated to this Pod)"
    head = (
        "REQUEST",
        "DEVICE",
        "VF PCI",
        "PCIE ROOT",
        "PAIRED GPU",
        "SHADOW NAD",
        "TEMPLATE",
        "IF",
        "IP",
        "MAC",
        "RAIL SUBNET",
    )
    lines = [
        (
            r.request,
            r.device,
            r.vf_pci,
            r.pcie_root,
            ", ".join(g.split(": ", 1)[1].split("/", 1)[-1] if ": " in g else g for g in r.gpus) or "-",
            r.shadow or "(none)",
            r.source or "-",
            r.interface or "-",
            ",".join(r.ips) or "-",
            r.mac or "-",
            r.subnet or "-",
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    first = rows[0]
    out = [
        f"Pod {first.pod} on node {first.node}: claim {', '.join(sorted({r.claim for r in rows}))}, "
        f"driver {first.driver}, pool {first.pool}"
    ]
    out.append(fmt.format(*head).rstrip())
    out.extend(fmt.format(*line).rstrip() for line in lines)
    failed = [f"  {r.request}: {k} failed" for r in rows for k, v in r.checks.items() if not v]
    missing = [f"  {r.request}: no shadow NAD bound to VF {r.vf_pci}" for r in rows if not r.shadow]
    if failed or missing:
        out.append("problems:")
        out.extend(missing + failed)
    else:
        origin = {r.ip_origin for r in rows} - {""}
        out.append(
            f"checks passed: {', '.join(sorted({k for r in rows for k in r.checks}))} (IPs from {', '.join(sorted(origin)) or '-'})"
        )
    if any(r.ip_origin == "network-status" and any("/" not in ip for ip in r.ips) for r in rows):
        out.append(
            "IPs without prefix: Multus's network-status carries none; --netns <the Pod's network "
            "namespace path> reads each interface's address with its prefix on the node"
        )
    return "\n".join(out)


class NetnsUnreadable(RuntimeError):
    """The network namespace given with ``--netns`` cannot be read; ``reason`` says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot read network namespace {path}: {reason}")
        self.path, self.reason = path, reason


def read_netns(path: str) -> dict[str, list[str]]:
    """``{interface: [CIDR]}`` of the namespace at ``path`` (link-local IPv6 left out), read with ``ip``.

    Raises: :class:`NetnsUnreadable` when ``ip``/``nsenter`` fails (no such file, not a network
    namespace, permission denied) or cannot run; the reason is its last stderr line.
    """
    import subprocess

    from sriov_dra.lab import iproute

    try:
        return iproute.addresses(path)
    except iproute.IpError as exc:
        reason = str(exc).rsplit("): ", 1)[-1].strip().splitlines()
        raise NetnsUnreadable(path, reason[-1] if reason else str(exc)) from exc
    except (OSError, subprocess.SubprocessError) as exc:
        raise NetnsUnreadable(path, str(exc)) from exc


def render_json(rows: Sequence[Row]) -> str:
    """The rows as a JSON list (for scripts)."""
    return json.dumps([asdict(r) | {"ok": r.ok} for r in rows], indent=2)


class Inspector:
    """The demo's view of this command (``sriov_dra.lab.demo.Inspector``)."""

    def inspect(self, client: objects.Objects, namespace: str, name: str, netns: str | None) -> list[Row]:
        """Rows of Pod ``namespace/name``; IPs from ``netns`` when given."""
        return inspect_pod(client, namespace, name, netns=netns, read_netns=read_netns if netns else None)

    def render(self, rows: Sequence[Any]) -> str:
        """The correlation table."""
        return render_table(rows)


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
    finally:
        api.close()
    print(render_json(rows) if args.output == "json" else render_table(rows))
    return 0 if rows and all(r.ok for r in rows) else 1


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``inspect`` on the ``sriov-dra`` subcommand parser."""
    p = sub.add_parser(
        "inspect",
        help="correlate a Pod's claim, VFs, GPUs, shadow NADs, interfaces and IPs",
        description=(
            "Print the spec §14.4 correlation of a Pod: per allocated VF its request, device, PCI "
            "address and PCIe root, the paired GPU, the shadow NAD and its template, the interface and "
            "IPs, with the checks each row passes. Read from the API; with --netns (on the Pod's node) "
            "the IPs come from the Pod's network namespace. Exit 0 when every row passes, 1 otherwise, "
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
        "-o", "--output", choices=["table", "json"], default="table", help="output format (default: table)"
    )
    p.set_defaults(func=run)
