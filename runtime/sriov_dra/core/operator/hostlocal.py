"""The address rules of a host-local IPAM config, checked before a NAD is written (CNI plugins v1.9.1).

host-local refuses a range it cannot allocate from only at CNI ADD, after the operator wrote the
NAD and reported it Ready; :func:`range_problems` finds those ranges at render time so the
SriovNetwork gets ``InvalidNetworkSpec`` naming the field instead. The rules are host-local's own
(``LoadIPAMConfig``, ``RangeSet``, ``Range.Canonicalize`` of containernetworking/plugins v1.9.1).
Values host-local does not read and other IPAM types are not checked; a config without a range is
not refused (the runtime may supply ``ipRanges``). Pure.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sriov_dra_rules import errors, strictjson

_RANGE_KEYS: Final = ("subnet", "rangeStart", "rangeEnd", "gateway")
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class _Range:
    """One range after host-local's defaults: first and last allocatable address, inclusive."""

    path: str
    subnet: Network
    start: Address
    end: Address

    def contains(self, addr: Address) -> bool:
        return addr.version == self.start.version and int(self.start) <= int(addr) <= int(self.end)


def _parse_address(text: str) -> Address | None:
    """``text`` as Go's ``net.ParseIP`` reads it, or None (no zone, no leading zeros)."""
    if "%" in text or text != text.strip():
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _cidr_problem(text: str) -> tuple[Network | None, str | None]:
    """``(network, None)`` for a subnet host-local can allocate from, else ``(None, problem)``."""
    addr_text, slash, prefix_text = text.partition("/")
    addr = _parse_address(addr_text)
    digits = prefix_text.isascii() and prefix_text.isdigit() and len(prefix_text) <= 3
    if not slash or addr is None or not digits or prefix_text != str(int(prefix_text)):
        return None, f"{text!r} is not address/prefix; write the subnet such as 10.56.217.0/24"
    bits = addr.max_prefixlen
    prefix = int(prefix_text)
    if prefix > bits:
        return None, f"{text!r} has prefix {prefix}, longer than the {bits} bits of the address"
    if prefix > bits - 2:
        return None, (
            f"{text!r} is too small for host-local to allocate from (prefix {prefix}); "
            f"use a prefix of at most {bits - 2}"
        )
    network = ipaddress.ip_network(f"{addr}/{prefix}", strict=False)
    if network.network_address != addr:
        return None, (
            f"{text!r} has host bits set; for prefix {prefix} the network address is "
            f"{network.network_address}, so write {network.network_address}/{prefix}"
        )
    return network, None


def _one_range(raw: Mapping[str, object], path: str, problems: list[errors.FieldError]) -> _Range | None:
    """Check one range object; return it with host-local's defaults, or None after a problem."""
    subnet_text = raw.get("subnet")
    subnet_path = strictjson.key_path(path, "subnet")
    if not isinstance(subnet_text, str):
        problems.append(
            errors.FieldError(
                subnet_path, f"must be a subnet string such as 10.56.217.0/24, got {subnet_text!r}"
            )
        )
        return None
    subnet, problem = _cidr_problem(subnet_text)
    if subnet is None:
        problems.append(errors.FieldError(subnet_path, problem or "is not a subnet"))
        return None
    found: dict[str, Address] = {}
    ok = True
    for key in _RANGE_KEYS[1:]:
        value = raw.get(key)
        if value is None:
            continue
        key_path = strictjson.key_path(path, key)
        addr = _parse_address(value) if isinstance(value, str) else None
        if addr is None:
            problems.append(
                errors.FieldError(key_path, f"must be an IP address such as 10.56.217.10, got {value!r}")
            )
            ok = False
            continue
        if key != "gateway" and addr not in subnet:
            problems.append(errors.FieldError(key_path, f"{value!r} is not in the subnet {subnet}"))
            ok = False
            continue
        found[key] = addr
    if not ok:
        return None
    start = found.get("rangeStart", subnet.network_address + 1)
    last = subnet.broadcast_address - 1 if subnet.version == 4 else subnet.broadcast_address
    end = found.get("rangeEnd", last)
    if int(start) > int(end):
        problems.append(
            errors.FieldError(
                strictjson.key_path(path, "rangeStart"),
                f"{start} is after rangeEnd {end}; host-local would allocate nothing from it",
            )
        )
        return None
    return _Range(path, subnet, start, end)


def _overlap(a: _Range, b: _Range) -> bool:
    return a.contains(b.start) or a.contains(b.end) or b.contains(a.start) or b.contains(a.end)


def _range_sets(
    ipam: Mapping[str, object], path: str, problems: list[errors.FieldError]
) -> list[list[_Range | None]]:
    """Every range set host-local would read, the legacy top-level range first."""
    sets: list[list[_Range | None]] = []
    if "subnet" in ipam:
        sets.append([_one_range(ipam, path, problems)])
    raw_sets = ipam.get("ranges")
    ranges_path = strictjson.key_path(path, "ranges")
    if raw_sets is None:
        return sets
    if not isinstance(raw_sets, list):
        problems.append(
            errors.FieldError(ranges_path, f"must be a list of range sets, got {strictjson.kind(raw_sets)}")
        )
        return sets
    for i, raw_set in enumerate(raw_sets):
        set_path = strictjson.index_path(ranges_path, i)
        if not isinstance(raw_set, list) or not raw_set:
            problems.append(
                errors.FieldError(
                    set_path,
                    'must be a non-empty list of ranges such as [{"subnet":"10.56.217.0/24"}], '
                    f"got {strictjson.kind(raw_set) if raw_set != [] else 'an empty list'}",
                )
            )
            continue
        members: list[_Range | None] = []
        for j, raw in enumerate(raw_set):
            item_path = strictjson.index_path(set_path, j)
            if not isinstance(raw, dict):
                problems.append(
                    errors.FieldError(item_path, f"must be a range object, got {strictjson.kind(raw)}")
                )
                members.append(None)
                continue
            members.append(_one_range(raw, item_path, problems))
        sets.append(members)
    return sets


def range_problems(ipam: Mapping[str, object], path: str) -> list[errors.FieldError]:
    """Every reason host-local v1.9.1 would refuse the ranges of ``ipam`` at CNI ADD.

    ``ipam`` is the decoded IPAM object (its ``type`` is not checked here; call it for
    ``host-local`` only); ``path`` its field path (``spec.ipam``). Returns one
    :class:`~sriov_dra_rules.errors.FieldError` per problem, naming the field (``spec.ipam.subnet``,
    ``spec.ipam.ranges[0][1].rangeEnd``), the value and the fix; ``[]`` when host-local would
    accept them. Never raises, for any JSON value inside ``ipam``.

    Rules: ``subnet`` is ``address/prefix`` as Go's ``net.ParseCIDR`` reads it (dotted IPv4
    without leading zeros or IPv6 without a zone); it leaves at least one host address (``/31``
    and ``/32`` are too small) and has no host bits set (``10.0.0.5/24`` is refused with the
    network address it meant); ``rangeStart``/``rangeEnd``/``gateway`` are IP addresses,
    ``rangeStart``/``rangeEnd`` in the subnet and in order; ``ranges`` is a list of non-empty
    range sets, none mixing address families, no two ranges overlapping (the legacy top-level
    range counts as set 0).
    """
    problems: list[errors.FieldError] = []
    sets = _range_sets(ipam, path, problems)
    if problems:
        return problems
    checked: list[Sequence[_Range]] = [[r for r in s if r is not None] for s in sets]
    for members in checked:
        if len({r.start.version for r in members}) > 1:
            problems.append(
                errors.FieldError(
                    members[1].path, "mixes IPv4 and IPv6 in one range set; put each family in its own set"
                )
            )
            continue
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                if _overlap(a, b):
                    problems.append(
                        errors.FieldError(
                            b.path, f"overlaps {a.path} ({a.subnet}); give each range its own addresses"
                        )
                    )
    flat = [(i, r) for i, members in enumerate(checked) for r in members]
    for x, (i, a) in enumerate(flat):
        for j, b in flat[x + 1 :]:
            if i != j and _overlap(a, b):
                problems.append(
                    errors.FieldError(b.path, f"overlaps {a.path} ({a.subnet}) of another range set")
                )
    return problems
