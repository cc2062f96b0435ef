"""The rows ``sriov-dra inspect`` prints: one Pod's SR-IOV VFs from claim to interface addresses.

Per SR-IOV result of each of the Pod's claims (docs/design.md#correlation): request, device, PCI
address and pcieRoot from the live ResourceSlice, the GPU results paired by a pcieRoot
``matchAttribute``, the shadow NAD and its template, the interface, its addresses and MAC (the
Pod's netns when a reader is given, else the claim's ``networkData``, else Multus's
``network-status``), the rail subnet, and every check those objects allow. Never writes to the
API, and never raises on a malformed object it only displays (the check it feeds fails).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sriov_dra.core import binding_annotation
from sriov_dra.driver.managed import consumer
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
MetadataReader = Callable[[str, str, str], str | None]
"""``reader(namespace, claim, request)`` → the text of the request's device metadata file on this
node, or ``None`` when there is none here (docs/design.md#device-metadata)."""


@dataclass(frozen=True)
class Row:
    """One VF of a Pod, correlated end to end (see the module docstring).

    Shapes: ``gpus`` entries ``"<request>: <pool>/<device> @<root>"``; ``ips`` CIDR strings
    (plain IPs from network-status); ``ip_origin`` ``netns``, ``claim networkData`` or
    ``network-status``; ``claim_ips`` the claim's ``networkData.ips`` (empty when it has none);
    ``checks`` maps a check name to ``True``/``False`` (absent when it cannot be made);
    ``conditions`` the claim entry's conditions as ``<type>=<status>``; ``metadata`` the text of
    the request's device metadata file when it was read on the node (``""`` otherwise).
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
    conditions: tuple[str, ...] = ()
    metadata: str = ""

    @property
    def ok(self) -> bool:
        """True when a shadow was found and every check made passed."""
        return bool(self.shadow) and all(self.checks.values())


def _slice_index(client: objects.Objects) -> dict[tuple[str, str, str], dict[str, views.AttributeValue]]:
    index: dict[tuple[str, str, str], dict[str, views.AttributeValue]] = {}
    for item in client.list(SLICE).items:
        index.update(views.slice_devices(item))
    return index


def _claim_names(pod: views.Pod) -> list[tuple[str, bool]]:
    """Each claim name of the Pod once (``consumer.known_pod_claims``), with whether the Pod must control it."""
    out: dict[str, bool] = {}
    for entry in consumer.known_pod_claims(pod):
        out[entry.claim_name] = out.get(entry.claim_name, True) and entry.must_check_owner
    return list(out.items())


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


def _conditions(claim: Mapping[str, object], key: tuple[str, str, str]) -> tuple[str, ...]:
    """``<type>=<status>`` of the claim's ``status.devices`` entry for ``key`` (driver, pool, device)."""
    for entry in views.items(views.mapping(claim.get("status")).get("devices")):
        entry = views.mapping(entry)
        if (entry.get("driver"), entry.get("pool"), entry.get("device")) == key:
            return tuple(
                f"{c.get('type')}={c.get('status')}"
                for c in (views.mapping(c) for c in views.items(entry.get("conditions")))
            )
    return ()


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
) -> list[tuple[views.Nad, binding_annotation.Binding]]:
    selector = f"{names.LABEL_POD_UID}={pod_uid}"
    found = []
    for item in client.list(objects.NAD, namespace, label_selector=selector).items:
        nad = views.decode_nad(item)
        try:
            found.append(
                (nad, binding_annotation.decode_binding(nad.meta.annotations.get(names.BINDING_ANNOTATION)))
            )
        except core_errors.ContractViolation:
            continue
    return found


def _source_network_name(client: objects.Objects, ref: binding_annotation.SourceRef) -> str | None:
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
    read_metadata: MetadataReader | None = None,
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
    for claim_name, must_own in _claim_names(pod):
        found = client.get_or_none(CLAIM, claim_name, namespace)
        if found is None or (must_own and not consumer.is_for_pod(pod, views.decode_meta(found))):
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
                    conditions=_conditions(found, key),
                    metadata=(read_metadata(namespace, claim_name, result.request) or "")
                    if read_metadata
                    else "",
                )
            )
    rows.sort(key=lambda r: (r.interface or "~", r.claim, r.request))
    return rows
