"""The address rules of a template's IPAM, checked before a NAD is written or a shadow frozen.

host-local and whereabouts refuse a range they cannot allocate from only at CNI ADD, after the
operator reported the NAD Ready or the plugin froze the config into a shadow, where it can no
longer be fixed. :func:`ipam_problems` finds those configs at render time on both paths (the
plugin's template check and the operator's SriovNetwork renderer) with one rule and one set of
words (docs/design.md#ipam): host-local's (:func:`range_problems`) and whereabouts'
(:func:`whereabouts_problems`); each refuses the other's spellings. Other types unchecked. Pure.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sriov_dra_rules import errors, strict_json

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


def _read_address(
    value: object, path: str, example: str, problems: list[errors.FieldError]
) -> Address | None:
    """``value`` as an IP address, or ``None`` after recording why it is not one."""
    addr = _parse_address(value) if isinstance(value, str) else None
    if addr is None:
        problems.append(errors.FieldError(path, f"must be an IP address such as {example}, got {value!r}"))
    return addr


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
    subnet_path = strict_json.key_path(path, "subnet")
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
        key_path = strict_json.key_path(path, key)
        addr = _read_address(value, key_path, "10.56.217.10", problems)
        if addr is None:
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
                strict_json.key_path(path, "rangeStart"),
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
    ranges_path = strict_json.key_path(path, "ranges")
    if raw_sets is None:
        return sets
    if not isinstance(raw_sets, list):
        problems.append(
            errors.FieldError(ranges_path, f"must be a list of range sets, got {strict_json.kind(raw_sets)}")
        )
        return sets
    for i, raw_set in enumerate(raw_sets):
        set_path = strict_json.index_path(ranges_path, i)
        if not isinstance(raw_set, list) or not raw_set:
            problems.append(
                errors.FieldError(
                    set_path,
                    'must be a non-empty list of ranges such as [{"subnet":"10.56.217.0/24"}], '
                    f"got {strict_json.kind(raw_set) if raw_set != [] else 'an empty list'}",
                )
            )
            continue
        members: list[_Range | None] = []
        for j, raw in enumerate(raw_set):
            item_path = strict_json.index_path(set_path, j)
            if not isinstance(raw, dict):
                problems.append(
                    errors.FieldError(item_path, f"must be a range object, got {strict_json.kind(raw)}")
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
    range counts as set 0). A config without a range is not refused (the runtime may supply
    ``ipRanges``); whereabouts' spellings (``range``, ``ipRanges``, ``range_start``,
    ``range_end``) are refused, as host-local would ignore them.
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


# --------------------------------------------------------------------------- whereabouts

WHEREABOUTS_KEYS: Final = ("range", "ipRanges", "range_start", "range_end")
"""whereabouts' own spellings of a pool; host-local ignores them."""
HOST_LOCAL_KEYS: Final = ("subnet", "rangeStart", "rangeEnd", "ranges")
"""host-local's spellings of a pool; whereabouts ignores them."""
_SPELLING: Final = {
    "subnet": "range",
    "rangeStart": "range_start",
    "rangeEnd": "range_end",
    "ranges": "ipRanges",
    "range": "subnet",
    "ipRanges": "ranges",
    "range_start": "rangeStart",
    "range_end": "rangeEnd",
}


def _foreign_keys(ipam: Mapping[str, object], path: str, mine: str, theirs: str) -> list[errors.FieldError]:
    keys = HOST_LOCAL_KEYS if mine == "whereabouts" else WHEREABOUTS_KEYS
    return [
        errors.FieldError(
            strict_json.key_path(path, key),
            f"is {theirs}'s spelling, which {mine} ignores (every ADD would fail to find its pool); "
            f"write {_SPELLING[key]!r} instead",
        )
        for key in keys
        if key in ipam
    ]


def _whereabouts_range(
    raw: Mapping[str, object], path: str, problems: list[errors.FieldError]
) -> tuple[Network, Address, Address] | None:
    """One whereabouts range object: its network and first/last address, or None after a problem."""
    text = raw.get("range")
    range_path = strict_json.key_path(path, "range")
    example = "write it such as 192.0.2.0/24 or 192.0.2.10-192.0.2.20/24"
    if not isinstance(text, str) or not text:
        problems.append(errors.FieldError(range_path, f"is required and must be a CIDR string; {example}"))
        return None
    first: Address | None = None
    last: Address | None = None
    cidr = text
    if "-" in text:
        start_text, _, rest = text.partition("-")
        end_text, slash, prefix = rest.partition("/")
        first, last = _parse_address(start_text), _parse_address(end_text)
        cidr = f"{start_text}/{prefix}" if slash else ""
        if first is None or last is None or not slash:
            problems.append(errors.FieldError(range_path, f"{text!r} is not first-last/prefix; {example}"))
            return None
    network, problem = _cidr_of(cidr)
    if network is None:
        problems.append(errors.FieldError(range_path, f"{text!r} {problem}; {example}"))
        return None
    start = first if first is not None else network.network_address
    end = last if last is not None else network.broadcast_address
    for key in ("range_start", "range_end"):
        value = raw.get(key)
        if value is None:
            continue
        key_path = strict_json.key_path(path, key)
        addr = _read_address(value, key_path, "192.0.2.10", problems)
        if addr is None:
            return None
        if addr.version != network.version or addr not in network:
            problems.append(errors.FieldError(key_path, f"{value!r} is not in the range {network}"))
            return None
        start, end = (addr, end) if key == "range_start" else (start, addr)
    if int(start) > int(end):
        problems.append(
            errors.FieldError(
                range_path, f"starts at {start}, after its end {end}; whereabouts would allocate nothing"
            )
        )
        return None
    exclude = raw.get("exclude")
    for i, item in enumerate(exclude if isinstance(exclude, list) else []):
        excluded, why = _cidr_of(item) if isinstance(item, str) else (None, "is not a CIDR string")
        if excluded is None:
            problems.append(
                errors.FieldError(
                    strict_json.index_path(strict_json.key_path(path, "exclude"), i),
                    f"{item!r} {why}; write it such as 192.0.2.16/28",
                )
            )
    return network, start, end


def _cidr_of(text: str) -> tuple[Network | None, str]:
    """``text`` read as Go's ``net.ParseCIDR`` reads it (host bits allowed), or ``(None, problem)``."""
    addr_text, slash, prefix_text = text.partition("/")
    addr = _parse_address(addr_text)
    digits = prefix_text.isascii() and prefix_text.isdigit() and len(prefix_text.lstrip("0")) <= 3
    if not slash or addr is None or not digits:
        return None, "is not address/prefix"
    prefix = int(prefix_text)
    if prefix > addr.max_prefixlen:
        return None, f"has prefix {prefix}, longer than the {addr.max_prefixlen} bits of the address"
    return ipaddress.ip_network(f"{addr}/{prefix}", strict=False), ""


def whereabouts_problems(ipam: Mapping[str, object], path: str) -> list[errors.FieldError]:
    """Every reason whereabouts would refuse or misread the pool of ``ipam`` at CNI ADD.

    Rules (whereabouts v0.9 ``LoadIPAMConfig``): a ``range`` or ``ipRanges`` is required (without
    one every ADD fails), each a CIDR or ``first-last/prefix``; ``range_start``/``range_end`` in
    the range and in order; ``exclude`` CIDRs; ``gateway`` an address. host-local's spellings
    (``subnet``, ``rangeStart``, ``rangeEnd``, ``ranges``) are refused: whereabouts would ignore
    them and fail with ``invalid CIDR``.
    Shapes: as :func:`range_problems`. Never raises, for any JSON value inside ``ipam``.
    """
    problems = _foreign_keys(ipam, path, "whereabouts", "host-local")
    ranges: list[tuple[Mapping[str, object], str]] = []
    if "range" in ipam:
        ranges.append((ipam, path))
    raw_list = ipam.get("ipRanges")
    list_path = strict_json.key_path(path, "ipRanges")
    if raw_list is not None and not isinstance(raw_list, list):
        problems.append(
            errors.FieldError(list_path, f"must be a list of range objects, got {strict_json.kind(raw_list)}")
        )
    for i, item in enumerate(raw_list if isinstance(raw_list, list) else []):
        item_path = strict_json.index_path(list_path, i)
        if isinstance(item, dict):
            ranges.append((item, item_path))
        else:
            problems.append(
                errors.FieldError(item_path, f"must be a range object, got {strict_json.kind(item)}")
            )
    if not ranges and not problems:
        problems.append(
            errors.FieldError(
                strict_json.key_path(path, "range"),
                'is required: whereabouts allocates from "range" (or "ipRanges") and fails every ADD '
                'without one; write "range": "192.0.2.0/24"',
            )
        )
    for raw, raw_path in ranges:
        _whereabouts_range(raw, raw_path, problems)
    if ipam.get("gateway") is not None:
        _read_address(ipam["gateway"], strict_json.key_path(path, "gateway"), "192.0.2.1", problems)
    return problems


def whereabouts_networks(ipam: Mapping[str, object], path: str) -> tuple[Network, ...]:
    """The networks whereabouts names its pools by, ``range`` first, then each ``ipRanges`` entry.

    Shapes: a ``first-last/prefix`` range gives its network (as whereabouts' ``LoadIPAMConfig``
    normalizes it). Raises: errors.InvalidSpec with every range problem (nothing is guessed).
    """
    raws: list[tuple[Mapping[str, object], str]] = [(ipam, path)] if "range" in ipam else []
    extra = ipam.get("ipRanges")
    list_path = strict_json.key_path(path, "ipRanges")
    for i, item in enumerate(extra if isinstance(extra, list) else []):
        raws.append((item if isinstance(item, dict) else {}, strict_json.index_path(list_path, i)))
    problems: list[errors.FieldError] = []
    found = [r[0] for raw, raw_path in raws if (r := _whereabouts_range(raw, raw_path, problems)) is not None]
    errors.raise_if_any(problems, f"{path}: a whereabouts range cannot be read")
    return tuple(found)


def ipam_problems(ipam: Mapping[str, object], path: str) -> list[errors.FieldError]:
    """The IPAM rule of both paths: :func:`range_problems` for host-local, :func:`whereabouts_problems`
    for whereabouts, ``[]`` for other types. Never raises."""
    kind = ipam.get("type")
    if kind == "host-local":
        return _foreign_keys(ipam, path, "host-local", "whereabouts") or range_problems(ipam, path)
    if kind == "whereabouts":
        return whereabouts_problems(ipam, path)
    return []
