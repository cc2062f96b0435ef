"""``status.devices[].networkData`` of managed VFs, read from Multus's ``network-status``.

Three pure steps once Multus reported a Pod's networks: :func:`decode_network_status` (strict
JSON; of its entries only those named after one of the Pod's shadows are validated),
:func:`correlate` (each VF to the one entry named ``<namespace>/<shadow>`` with the recorded
interface, never by position) and :func:`merged_network_data` (this driver's entries only;
``None`` when nothing changes). Addresses get the prefix of the longest subnet of the shadow's
frozen IPAM config that contains them, never an invented one; Kubernetes 1.36's
``networkData`` limits are kept, never truncated. Diagnostic only: no prepare fails on it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from sriov_dra.core import metadata_document
from sriov_dra.core.plugin import device_conditions
from sriov_dra_rules import errors, names, strict_json

MAX_IPS: Final = 16
"""``NetworkDeviceDataMaxIPs``: entries ``networkData.ips`` may hold."""
INTERFACE_NAME_MAX_BYTES: Final = 256
"""``NetworkDeviceDataInterfaceNameMaxLength`` (bytes)."""
HARDWARE_ADDRESS_MAX_BYTES: Final = 128
"""``NetworkDeviceDataHardwareAddressMaxLength`` (bytes)."""

ANNOTATION_PATH: Final = strict_json.key_path("metadata.annotations", names.NETWORK_STATUS_ANNOTATION)
"""Field path of the annotation in error messages."""

Network: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network
DeviceKey: TypeAlias = tuple[str, str]
"""``(pool, device)`` of one VF of this driver."""


@dataclass(frozen=True)
class StatusEntry:
    """The fields of one network-status entry this module reads.

    Shapes: ``name`` ``<namespace>/<NAD name>`` for NADs (Multus); ``interface`` ``""`` when the
    entry has none; ``ips`` as reported (plain IPs, or CIDRs from another writer); ``mac`` ``""``
    when absent. ``index`` is the entry's position in the annotation (for messages).
    """

    index: int
    name: str
    interface: str
    ips: tuple[str, ...]
    mac: str


@dataclass(frozen=True)
class Attachment:
    """One managed VF as the checkpoint records it: its device, shadow NAD and interface.

    Shapes: ``network`` ``<shadow namespace>/<shadow name>`` (what Multus names it in
    network-status); ``interface`` the Pod interface (``dra0``); ``subnets`` from
    :func:`ipam_subnets` of the shadow's frozen config, in configuration order.
    """

    pool: str
    device: str
    network: str
    interface: str
    subnets: tuple[Network, ...] = ()

    @property
    def key(self) -> DeviceKey:
        """``(pool, device)``."""
        return (self.pool, self.device)


@dataclass(frozen=True)
class DeviceResult:
    """What network-status says about one device.

    Exactly one of: ``data`` set (reported); ``problem`` set (the entry cannot be used: the
    claim entry is left as it is); neither (no entry: not attached now, any old ``networkData``
    goes). ``unprefixed`` lists reported addresses left out of ``data.ips`` because no configured
    subnet contains them.
    """

    data: metadata_document.NetworkData | None = None
    problem: errors.FieldError | None = None
    unprefixed: tuple[str, ...] = field(default=())


# --- 1. the annotation ----------------------------------------------------------------------------


def decode_network_status(
    text: str | None, *, pod: str = "Pod", ours: Collection[str] | None = None
) -> tuple[StatusEntry, ...]:
    """Strictly decode the network-status annotation value (absent: no entries).

    ``pod`` names the Pod in messages (``Pod ns/name``). ``ours`` are the network names that
    could be this driver's (``<namespace>/<shadow name>`` of the Pod's shadows): only entries
    with such a ``name`` are validated and returned; any other entry (the cluster network's,
    which some Multus versions write with ``"name":""``, another NAD's, a non-object) is skipped,
    so an entry we do not own never voids our networkData. ``None`` validates every entry.
    Shapes: entries in annotation order.
    Raises: InvalidSpec (reason ``InvalidNetworkStatus``) with one FieldError per problem: text
    that is not strict JSON (duplicate keys included, in any entry), a root that is not a list;
    in a validated entry: not an object, a ``name`` that is not a non-empty string, an
    ``interface`` or ``mac`` that is not a string, ``ips`` that is not a list of strings.
    Unknown fields are ignored.
    Source: Multus ``CreateNetworkStatuses`` (entry fields); multus-cni #648.
    """
    if text is None:
        return ()
    message = f"{pod}: annotation {names.NETWORK_STATUS_ANNOTATION} cannot be read; claim networkData is left as it is"
    try:
        value = strict_json.decode(text, path=ANNOTATION_PATH)
    except errors.InvalidSpec as exc:
        raise errors.InvalidSpec(
            message, reason=errors.Reason.INVALID_NETWORK_STATUS, errors=exc.errors
        ) from None
    if not isinstance(value, list):
        raise errors.InvalidSpec(
            message,
            reason=errors.Reason.INVALID_NETWORK_STATUS,
            errors=[
                errors.FieldError(ANNOTATION_PATH, f"must be a JSON list, got {strict_json.kind(value)}")
            ],
        )
    problems: list[errors.FieldError] = []
    entries: list[StatusEntry] = []
    for index, item in enumerate(value):
        path = strict_json.index_path(ANNOTATION_PATH, index)
        name = item.get("name") if isinstance(item, dict) else None
        if ours is not None and not (isinstance(name, str) and name in ours):
            continue  # cannot be one of ours: neither validated nor read
        if not isinstance(item, dict):
            problems.append(errors.FieldError(path, f"must be a JSON object, got {strict_json.kind(item)}"))
            continue
        entry = _entry(index, item, path, problems)
        if entry is not None:
            entries.append(entry)
    errors.raise_if_any(problems, message, reason=errors.Reason.INVALID_NETWORK_STATUS)
    return tuple(entries)


def _text(
    item: Mapping[str, strict_json.JsonValue], key: str, path: str, problems: list[errors.FieldError]
) -> str | None:
    """``item[key]`` when it is a string, ``""`` when absent; a problem (and None) otherwise."""
    raw = item.get(key)
    if isinstance(raw, str) or raw is None:
        return raw or ""
    problems.append(errors.FieldError(f"{path}.{key}", f"must be a string, got {strict_json.kind(raw)}"))
    return None


def _entry(
    index: int, item: Mapping[str, strict_json.JsonValue], path: str, problems: list[errors.FieldError]
) -> StatusEntry | None:
    found = len(problems)
    name, interface, mac = (_text(item, key, path, problems) for key in ("name", "interface", "mac"))
    if name == "":
        problems.append(errors.FieldError(f"{path}.name", "must be a non-empty string (the network's name)"))
    raw_ips = item.get("ips")
    ips = raw_ips if isinstance(raw_ips, list) else []
    if raw_ips is not None and not isinstance(raw_ips, list):
        problems.append(
            errors.FieldError(f"{path}.ips", f"must be a list of strings, got {strict_json.kind(raw_ips)}")
        )
    for i, ip in enumerate(ips):
        if not isinstance(ip, str):
            problems.append(
                errors.FieldError(f"{path}.ips[{i}]", f"must be a string, got {strict_json.kind(ip)}")
            )
    if len(problems) > found or name is None or interface is None or mac is None:
        return None
    return StatusEntry(index, name, interface, tuple(str(ip) for ip in ips), mac)


# --- 2. addresses and correlation ---------------------------------------------------------------


def ipam_subnets(rendered_config: str) -> tuple[Network, ...]:
    """The subnets the shadow's IPAM configuration names, in configuration order, unique.

    Reads every ``ipam`` object (the root's and each ``plugins[]`` entry's), only the keys its
    ``type`` allocates from: host-local ``subnet`` and ``ranges[][].subnet``, whereabouts
    ``range`` (``CIDR`` or ``start-end/len``) and ``ipRanges[].range``, static
    ``addresses[].address``; another type's spelling, or another type, names no subnet. Values
    that are not subnets are skipped (this is a prefix lookup, not a validation of the config, which the render did).
    Shapes: ``rendered_config`` the frozen CNI JSON text; text that does not decode gives ``()``.

    Multus reports plain IPs (``CreateNetworkStatuses`` keeps no prefix), while ``networkData.ips``
    must be canonical interface CIDRs, so the prefix comes from these subnets: the longest that
    contains the address. An address no subnet contains (DHCP, an IPAM that does not name its
    subnet) is left out and reported in :attr:`DeviceResult.unprefixed`; an address that already
    has a prefix keeps it, in canonical form.
    """
    try:
        doc = strict_json.decode(rendered_config)
    except errors.InvalidSpec:
        return ()
    if not isinstance(doc, dict):
        return ()
    ipams = [doc.get("ipam")]
    plugins = doc.get("plugins")
    if isinstance(plugins, list):
        ipams.extend(p.get("ipam") for p in plugins if isinstance(p, dict))
    texts: list[object] = []
    for ipam in ipams:
        if not isinstance(ipam, dict):
            continue
        kind = ipam.get("type")
        if kind == "host-local":
            texts.append(ipam.get("subnet"))
            ranges = ipam.get("ranges")
            for ranges_set in ranges if isinstance(ranges, list) else []:
                texts.extend(r.get("subnet") for r in _dicts(ranges_set))
        elif kind == "whereabouts":
            texts.append(ipam.get("range"))
            texts.extend(rng.get("range") for rng in _dicts(ipam.get("ipRanges")))
        elif kind == "static":
            texts.extend(a.get("address") for a in _dicts(ipam.get("addresses")))
    out: list[Network] = []
    for text in texts:
        net = _subnet(text)
        if net is not None and net not in out:
            out.append(net)
    return tuple(out)


def _dicts(value: object) -> list[dict[str, strict_json.JsonValue]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _subnet(text: object) -> Network | None:
    """``10.0.0.0/24`` from ``10.0.0.0/24``, ``10.0.0.9/24`` or whereabouts ``10.0.0.5-10.0.0.9/24``."""
    if not isinstance(text, str) or "/" not in text:
        return None
    if "-" in text:
        start, _, rest = text.partition("-")
        text = f"{start}/{rest.rpartition('/')[2]}"
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        return None


def _canonical(text: str, subnets: Sequence[Network]) -> tuple[str | None, str | None]:
    """``(cidr, None)``, ``(None, None)`` when no subnet gives a prefix, or ``(None, problem)``."""
    if "%" in text:
        return None, f"{text!r} carries an IPv6 zone, which a CIDR cannot hold"
    try:
        iface = ipaddress.ip_interface(text) if "/" in text else None
        addr = iface.ip if iface is not None else ipaddress.ip_address(text)
    except ValueError:
        return None, f"{text!r} is not an IP address or an address in CIDR form"
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return None, f"{text!r} is an IPv4-mapped IPv6 address; report the IPv4 address instead"
    if iface is not None:
        return f"{iface.ip}/{iface.network.prefixlen}", None
    containing = [n for n in subnets if n.version == addr.version and addr in n]
    if not containing:
        return None, None
    best = max(containing, key=lambda n: n.prefixlen)
    return f"{addr}/{best.prefixlen}", None


def _data(attachment: Attachment, entry: StatusEntry) -> DeviceResult:
    path = strict_json.index_path(ANNOTATION_PATH, entry.index)
    ips: list[str] = []
    unprefixed: list[str] = []
    for i, text in enumerate(entry.ips):
        cidr, problem = _canonical(text, attachment.subnets)
        if problem is not None:
            return DeviceResult(problem=errors.FieldError(f"{path}.ips[{i}]", problem))
        if cidr is None:
            unprefixed.append(text)
        elif cidr not in ips:
            ips.append(cidr)
    if len(ips) > MAX_IPS:
        return DeviceResult(
            problem=errors.FieldError(
                f"{path}.ips",
                f"holds {len(ips)} addresses; networkData.ips takes at most {MAX_IPS} (Kubernetes limit)",
            )
        )
    if len(entry.mac.encode("utf-8", "surrogatepass")) > HARDWARE_ADDRESS_MAX_BYTES:
        return DeviceResult(
            problem=errors.FieldError(
                f"{path}.mac",
                f"is longer than the {HARDWARE_ADDRESS_MAX_BYTES} bytes networkData.hardwareAddress takes",
            )
        )
    if len(attachment.interface.encode("utf-8", "surrogatepass")) > INTERFACE_NAME_MAX_BYTES:
        return DeviceResult(
            problem=errors.FieldError(
                f"{path}.interface",
                f"is longer than the {INTERFACE_NAME_MAX_BYTES} bytes networkData.interfaceName takes",
            )
        )
    return DeviceResult(
        data=metadata_document.NetworkData(attachment.interface, tuple(ips), entry.mac),
        unprefixed=tuple(unprefixed),
    )


def correlate(
    entries: Sequence[StatusEntry], attachments: Sequence[Attachment]
) -> dict[DeviceKey, DeviceResult]:
    """What network-status says about each attachment, keyed by ``(pool, device)``.

    An attachment matches the entries with ``name == attachment.network`` and ``interface ==
    attachment.interface``: none → not reported; one → its data (or a problem for an unusable
    address, too many addresses or a too-long MAC); several → a problem (ambiguous). Limits are
    Kubernetes 1.36 ``validateNetworkDeviceData``'s: at most 16 canonical, unique IPs,
    ``interfaceName`` ≤ 256 bytes, ``hardwareAddress`` ≤ 128 bytes; data breaking one is a
    problem for that device, nothing is truncated.
    Raises: ContractViolation when two attachments share a device key.
    """
    out: dict[DeviceKey, DeviceResult] = {}
    for attachment in attachments:
        if attachment.key in out:
            raise errors.ContractViolation(f"device {attachment.pool}/{attachment.device} is attached twice")
        found = [e for e in entries if e.name == attachment.network and e.interface == attachment.interface]
        if not found:
            out[attachment.key] = DeviceResult()
        elif len(found) > 1:
            out[attachment.key] = DeviceResult(
                problem=errors.FieldError(
                    ANNOTATION_PATH,
                    f"entries {[e.index for e in found]} all report {attachment.network} on "
                    f"{attachment.interface}; which one is current is not known",
                )
            )
        else:
            out[attachment.key] = _data(attachment, found[0])
    return out


# --- 3. the claim status ------------------------------------------------------------------------


def _without_nulls(value: object) -> object:
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def merged_network_data(
    existing: object, results: Mapping[DeviceKey, DeviceResult], *, driver_name: str, now: str
) -> list[dict[str, object]] | None:
    """``status.devices`` with this driver's ``networkData`` set from ``results``, or ``None``.

    Only entries that exist are changed (``driver`` = ``driver_name``, no ``shareID``, device in
    ``results``): reported → ``networkData`` set; not reported → ``networkData`` removed; a
    problem → left as it is. ``NetworkReady`` follows ``networkData`` (True with the interface;
    False once it was attached and no longer is, absent before the first attach, so a Pod whose
    ADD has not run yet costs no write; ``core.plugin.device_conditions``, its time ``now`` only
    when its status changes). Every other entry, another driver's above all, is kept exactly as
    read, in place; no entry is added or removed. Returns ``None`` when the result equals
    ``existing`` (nothing to write), and when ``existing`` is not a list of objects (nothing of
    ours to fill; a list that cannot be read is not rewritten).
    Source: ``core.plugin.claim_plan.merged_status_devices`` (the same keys and no-change rule).
    """
    if not isinstance(existing, list) or not all(isinstance(e, Mapping) for e in existing):
        return None
    changed = False
    out: list[dict[str, object]] = []
    for entry in existing:
        entry = dict(entry)
        if entry.get("driver") != driver_name or entry.get("shareID"):
            out.append(entry)
            continue
        result = results.get((str(entry.get("pool")), str(entry.get("device"))))
        if result is None or result.problem is not None:
            out.append(entry)
            continue
        updated = {k: v for k, v in entry.items() if k != "networkData"}
        if result.data is not None:
            updated["networkData"] = result.data.to_json()
        interface = result.data.interface_name if result.data is not None else None
        if (
            interface
            or "networkData" in entry
            or device_conditions.has(entry.get("conditions"), device_conditions.NETWORK_READY)
        ):
            updated["conditions"] = device_conditions.merge(
                entry.get("conditions"), [device_conditions.network_ready(interface, now)]
            )
        if _without_nulls(updated) != _without_nulls(entry):
            changed = True
            out.append(updated)
        else:
            out.append(entry)
    return out if changed else None
