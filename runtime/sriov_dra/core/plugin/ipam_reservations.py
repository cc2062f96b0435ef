"""The IPAM reservations a shadow's frozen config names, and how to release them from the API.

A node that died cannot run CNI DEL, so what its Pods' IPAM reserved stays reserved
(docs/design.md#ipam, docs/operations.md). :func:`reservation_of` reads the sriov entry's ``ipam``
of a frozen config: whereabouts keeps its allocations in the API (``IPPool`` allocations keyed by
offset from the pool's first address, each ``{id, podref, ifname}``, and one
``OverlappingRangeIPReservation`` per address, named by the address) and can be released there by
pod reference; host-local keeps files on the node itself, which a dead node's API cannot reach.
:func:`pool_release` and :func:`reservation_matches` pick exactly one Pod interface's entries
(``podref`` ``<namespace>/<name>`` and ``ifname``) in the frozen config's ranges; the storage
namespace and a ``network_name`` set only in a node's whereabouts file are not in the frozen
config, so pools are matched by range, in any namespace. Pure: no API calls.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

from sriov_dra.core import ipam_ranges, template_layout
from sriov_dra.core.plugin import json_patch
from sriov_dra.core.template_findings import TemplateFindings
from sriov_dra_rules import errors, strict_json

IpNetwork = ipam_ranges.Network
IpAddress = ipam_ranges.Address


class Kind(enum.StrEnum):
    """Where an IPAM plugin keeps its reservations, as far as recovery is concerned."""

    WHEREABOUTS = "whereabouts"
    """In the API (IPPool, OverlappingRangeIPReservation): released by pod reference."""
    HOST_LOCAL = "host-local"
    """Files on the node (``dataDir/<network name>``): unreachable while the node is down."""
    NONE = "none"
    """Nothing reserved (no ``ipam``, ``static``)."""
    OTHER = "other"
    """An IPAM type recovery does not know: its reservations are left, and named."""


@dataclass(frozen=True)
class Reservation:
    """What one frozen config reserves.

    Shapes: ``ranges`` the whereabouts ranges as networks (``range`` first, then ``ipRanges``);
    ``network_name`` whereabouts' ``network_name`` (``""`` when unnamed); ``where`` a human
    phrase naming the store (host-local's directory, another type's name).
    """

    kind: Kind
    ranges: tuple[IpNetwork, ...] = ()
    network_name: str = ""
    where: str = ""


HOST_LOCAL_DATA_DIR = "/var/lib/cni/networks"
"""host-local's default ``dataDir``."""


def reservation_of(config: str) -> Reservation:
    """What the sriov entry's ``ipam`` of the frozen ``config`` reserves.

    Raises: errors.InvalidSpec when the config is not strict JSON, has no sriov entry, or a
    whereabouts range is not a CIDR (the shadow is then reported, never guessed past).
    """
    doc = strict_json.decode(config, path="spec.config")
    if not isinstance(doc, dict):
        raise errors.InvalidSpec("spec.config: must be a JSON object")
    found = TemplateFindings()
    entry, index = template_layout.locate_sriov_entry(doc, found)
    if entry is None:
        raise errors.InvalidSpec("spec.config: no sriov entry", errors=found.items)
    base = "spec.config" if index is None else f"spec.config.plugins[{index}]"
    ipam = entry.get("ipam")
    if not isinstance(ipam, dict) or not ipam:
        return Reservation(Kind.NONE)
    kind = ipam.get("type")
    if kind == "static":
        return Reservation(Kind.NONE, where="static")
    if kind == "host-local":
        data_dir = ipam.get("dataDir")
        name = doc.get("name")
        directory = f"{data_dir if isinstance(data_dir, str) and data_dir else HOST_LOCAL_DATA_DIR}/{name}"
        return Reservation(Kind.HOST_LOCAL, where=directory)
    if kind != "whereabouts":
        return Reservation(Kind.OTHER, where=str(kind) if isinstance(kind, str) else strict_json.kind(kind))
    name = ipam.get("network_name")
    return Reservation(
        Kind.WHEREABOUTS,
        ranges=ipam_ranges.whereabouts_networks(ipam, f"{base}.ipam"),
        network_name=name if isinstance(name, str) else "",
    )


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _pool_network(pool: Mapping[str, object]) -> tuple[IpAddress, IpNetwork] | None:
    """The pool's first address (offsets count from it) and network, or ``None`` when unreadable."""
    text = _mapping(pool.get("spec")).get("range")
    if not isinstance(text, str):
        return None
    try:
        return ipaddress.ip_interface(text).ip, ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


@dataclass(frozen=True)
class PoolRelease:
    """One pool's entries of one Pod interface.

    Shapes: ``addresses`` the released addresses in offset order; ``ops`` the JSON Patch
    (``test`` on ``/metadata/resourceVersion``, then one ``remove`` per allocation), empty when
    the pool holds none of them.
    """

    addresses: tuple[IpAddress, ...]
    ops: tuple[json_patch.PatchOp, ...]


def pool_release(
    pool: Mapping[str, object], reservation: Reservation, *, podref: str, ifname: str
) -> PoolRelease:
    """The allocations of ``podref``'s ``ifname`` in ``pool`` when its range is one of ``reservation``'s.

    A pool of another range, an unreadable range or a non-numeric key yields nothing (never a
    guess); the patch is conditional on the pool's resourceVersion, as whereabouts' own writes are.
    """
    found = _pool_network(pool)
    if found is None or found[1] not in reservation.ranges:
        return PoolRelease((), ())
    first, _network = found
    taken: list[tuple[int, str]] = []
    for key, value in _mapping(_mapping(pool.get("spec")).get("allocations")).items():
        entry = _mapping(value)
        if entry.get("podref") == podref and entry.get("ifname") == ifname and key.isdigit():
            taken.append((int(key), key))
    if not taken:
        return PoolRelease((), ())
    taken.sort()
    version = str(_mapping(pool.get("metadata")).get("resourceVersion") or "")
    ops = [json_patch.test_op("/metadata/resourceVersion", version)]
    ops += [json_patch.remove_op(json_patch.pointer("spec", "allocations", key)) for _, key in taken]
    return PoolRelease(tuple(first + offset for offset, _ in taken), tuple(ops))


def reserved_address(name: str, network_name: str) -> IpAddress | None:
    """The address an ``OverlappingRangeIPReservation`` name encodes, or ``None``.

    Shapes: ``[<network_name>-]<address>`` with an IPv6 address's ``:`` written as ``-`` (and a
    trailing ``::`` as ``--0``), as whereabouts names them.
    """
    text = name[len(network_name) + 1 :] if network_name and name.startswith(f"{network_name}-") else name
    for candidate in (text, text.replace("-", ":")):
        try:
            return ipaddress.ip_address(candidate)
        except ValueError:
            continue
    return None


def reservation_matches(
    reservation_object: Mapping[str, object], reservation: Reservation, *, podref: str, ifname: str
) -> bool:
    """True when an ``OverlappingRangeIPReservation`` is ``podref``'s ``ifname`` in one of the ranges."""
    spec = _mapping(reservation_object.get("spec"))
    if spec.get("podref") != podref or spec.get("ifname") != ifname:
        return False
    name = _mapping(reservation_object.get("metadata")).get("name")
    address = reserved_address(name, reservation.network_name) if isinstance(name, str) else None
    return address is not None and any(address in network for network in reservation.ranges)
