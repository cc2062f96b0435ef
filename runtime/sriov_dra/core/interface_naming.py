"""Deterministic interface names for managed VFs, and Multus's final interface naming.

:func:`assign_interfaces` names every device of this driver allocated across a Pod's claims
(explicit names as given, the rest ``dra0``, ``dra1``, ...), independent of input order, RPC
batching or retries (docs/design.md#interface-names). :func:`final_interface_names` and
:func:`find_interface_collisions` give the name Multus gives every delegate, so the plugin before
its Pod patch and the guard before any delegate runs refuse a collision instead of an ADD failing
with "interface name already exists" (multus-cni #1089). Never renames to resolve one. Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sriov_dra.core import identities
from sriov_dra_rules import errors, names


@dataclass(frozen=True)
class AllocatedDevice:
    """One allocation result of this driver, as seen through one claim alias of the Pod.

    ``claim_alias`` is the ``pod.spec.resourceClaims[].name`` that resolved to the claim;
    ``request``/``subrequest`` come from the result's ``request`` (``"req"`` or ``"req/sub"``).
    ``ifname`` is the explicit interface name of the effective configuration, if any.
    ``requirements_key`` is an opaque fingerprint of everything else the device's requests must
    agree on (e.g. resolved source NAD and VfConfig digest); ``""`` when not used.

    Shapes: ``claim_uid`` lowercase UUID; alias, request, subrequest and device DNS-1123 labels;
    ``pool`` DNS-1123 subdomains joined by ``/``.
    """

    claim_uid: identities.ClaimUid
    claim_alias: str
    request: str
    pool: str
    device: str
    subrequest: str | None = None
    ifname: str | None = None
    requirements_key: str = ""

    @property
    def request_name(self) -> str:
        """Return ``request`` or ``request/subrequest`` as in the allocation result."""
        return self.request if self.subrequest is None else f"{self.request}/{self.subrequest}"

    def describe(self) -> str:
        """Return ``alias/request[/sub] -> pool/device`` for error messages."""
        return f"claim {self.claim_alias} request {self.request_name} -> device {self.pool}/{self.device}"


@dataclass(frozen=True)
class InterfaceAssignment:
    """The interface one physical device gets in the Pod.

    ``claim_alias`` is the canonical (lexically first) alias of the claim; ``requests`` lists
    every ``request[/subrequest]`` that allocated this device, sorted. ``explicit`` is true when
    the name came from configuration rather than the ``draN`` sequence.
    """

    claim_uid: identities.ClaimUid
    claim_alias: str
    requests: tuple[str, ...]
    pool: str
    device: str
    ifname: str
    explicit: bool


def _device_problems(index: int, dev: AllocatedDevice) -> list[errors.FieldError]:
    path = f"devices[{index}]"
    checks: list[tuple[str, str | None]] = [
        ("claimUID", names.uuid_problem(dev.claim_uid)),
        ("claimAlias", names.dns1123_label_problem(dev.claim_alias)),
        ("request", names.dns1123_label_problem(dev.request)),
        ("pool", names.pool_name_problem(dev.pool)),
        ("device", names.dns1123_label_problem(dev.device)),
    ]
    if dev.subrequest is not None:
        checks.append(("subrequest", names.dns1123_label_problem(dev.subrequest)))
    problems = [errors.FieldError(f"{path}.{field}", p) for field, p in checks if p is not None]
    if dev.ifname is not None:
        problem = names.ifname_problem(dev.ifname)
        if problem is not None:
            problems.append(
                errors.FieldError(
                    f"{path}.interface", f"{problem} ({dev.describe()}); set a valid Linux name"
                )
            )
    return problems


def _sort_key(alias: str, dev: AllocatedDevice) -> tuple[str, str, str, str, str]:
    return (alias, dev.request, dev.subrequest or "", dev.pool, dev.device)


def _canonical_aliases(devs: list[AllocatedDevice]) -> dict[str, str]:
    """Map each claim UID to its lexically first alias; refuse an alias naming two claims."""
    alias: dict[str, str] = {}
    claims_of_alias: dict[str, set[str]] = {}
    for d in devs:
        alias[d.claim_uid] = min(alias.get(d.claim_uid, d.claim_alias), d.claim_alias)
        claims_of_alias.setdefault(d.claim_alias, set()).add(d.claim_uid)
    for name, claims in sorted(claims_of_alias.items()):
        if len(claims) > 1:
            raise errors.InvalidSpec(
                f"claim alias {name!r} resolves to several claims ({', '.join(sorted(claims))}); "
                "each pod.spec.resourceClaims name names exactly one claim: re-resolve the Pod's claims",
            )
    return alias


def _physical_devices(devs: list[AllocatedDevice], alias: dict[str, str]) -> list[list[AllocatedDevice]]:
    """Group entries by (pool, device), check that each group agrees, return groups in order.

    Each group is sorted by a total order over every field, so the member reported in an error
    (and the first member, which stands for the group) never depends on input order.
    """
    groups: dict[tuple[str, str], list[AllocatedDevice]] = {}
    for d in devs:
        groups.setdefault((d.pool, d.device), []).append(d)
    for (pool, device), members in sorted(groups.items()):
        members.sort(
            key=lambda m: (
                _sort_key(alias[m.claim_uid], m),
                m.claim_uid,
                m.claim_alias,
                m.ifname is not None,
                m.ifname or "",
                m.requirements_key,
            )
        )
        first = members[0]
        for other in members[1:]:
            if other.claim_uid != first.claim_uid:
                raise errors.Conflict(
                    f"device {pool}/{device} is allocated to two claims ({first.claim_uid} via "
                    f"{first.claim_alias}, {other.claim_uid} via {other.claim_alias}); distinct claims "
                    "must not share a VF: fix the allocation or remove the duplicate claim",
                    reason=errors.Reason.CONFLICTING_DEVICE_REQUIREMENTS,
                )
            if other.ifname != first.ifname:
                raise errors.Conflict(
                    f"{first.describe()} and {other.describe()} select the same VF but ask for different "
                    f"interface names ({first.ifname!r} vs {other.ifname!r}); make both configurations "
                    "name it the same, or neither",
                    reason=errors.Reason.CONFLICTING_DEVICE_REQUIREMENTS,
                )
            if other.requirements_key != first.requirements_key:
                raise errors.Conflict(
                    f"{first.describe()} and {other.describe()} select the same VF but resolve to different "
                    f"network requirements ({first.requirements_key!r} vs {other.requirements_key!r}); "
                    "make the template and VfConfig of both requests agree",
                    reason=errors.Reason.CONFLICTING_DEVICE_REQUIREMENTS,
                )
    return sorted(groups.values(), key=lambda ms: _sort_key(alias[ms[0].claim_uid], ms[0]))


def _explicit_names(ordered: list[list[AllocatedDevice]], primary_ifname: str) -> dict[str, AllocatedDevice]:
    """Return explicit name -> device; refuse the primary name and a name used twice."""
    explicit: dict[str, AllocatedDevice] = {}
    for members in ordered:
        dev = members[0]
        if dev.ifname is None:
            continue
        if dev.ifname == primary_ifname:
            raise errors.InvalidSpec(
                f"{dev.describe()} asks for interface {dev.ifname!r}, the Pod's primary interface; "
                "choose another name",
                reason=errors.Reason.INVALID_INTERFACE_NAME,
            )
        if dev.ifname in explicit:
            raise errors.InvalidSpec(
                f"interface name {dev.ifname!r} is requested for two VFs ({explicit[dev.ifname].describe()} "
                f"and {dev.describe()}); give each VF a unique name or omit it to get draN",
                reason=errors.Reason.DUPLICATE_INTERFACE_NAME,
            )
        explicit[dev.ifname] = dev
    return explicit


def assign_interfaces(
    devices: Iterable[AllocatedDevice], *, primary_ifname: str = names.DEFAULT_PRIMARY_IFNAME
) -> tuple[InterfaceAssignment, ...]:
    """Name every physical device allocated to a Pod by this driver, deterministically.

    Order: by (canonical claim alias, request, subrequest, pool, device) where the canonical
    alias of a claim referenced through several aliases is the lexically first one. One
    interface per (pool, device), only when every request of that device agrees on its
    requirements. Explicit names are validated as Linux names, unique, never the primary;
    generated names ``dra0..N`` skip explicit names and the primary.

    Shapes: result in interface order; no two entries share a name or a (pool, device).
    Raises: ``InvalidSpec`` (``InvalidInterfaceName``) for a malformed explicit name or one equal
    to ``primary_ifname``, (``DuplicateInterfaceName``) for one explicit name on two devices,
    (``InvalidSpec``) for malformed identifiers; ``Conflict`` (``ConflictingDeviceRequirements``)
    when one device is allocated to two different claims or its requests disagree on the
    explicit name or requirements. Source: docs/design.md#interface-names.
    """
    devs = list(devices)
    problems = [p for i, d in enumerate(devs) for p in _device_problems(i, d)]
    bad_names = any(p.path.endswith(".interface") for p in problems)
    errors.raise_if_any(
        problems,
        "allocated devices cannot be given interface names",
        reason=errors.Reason.INVALID_INTERFACE_NAME if bad_names else errors.Reason.INVALID_SPEC,
    )

    alias = _canonical_aliases(devs)
    ordered = _physical_devices(devs, alias)
    explicit = _explicit_names(ordered, primary_ifname)

    result: list[InterfaceAssignment] = []
    counter = 0
    for members in ordered:
        dev = members[0]
        if dev.ifname is not None:
            name = dev.ifname
        else:
            while f"{names.MANAGED_IFNAME_PREFIX}{counter}" in explicit or (
                f"{names.MANAGED_IFNAME_PREFIX}{counter}" == primary_ifname
            ):
                counter += 1
            name = f"{names.MANAGED_IFNAME_PREFIX}{counter}"
            counter += 1
        result.append(
            InterfaceAssignment(
                claim_uid=dev.claim_uid,
                claim_alias=alias[dev.claim_uid],
                requests=tuple(sorted({m.request_name for m in members})),
                pool=dev.pool,
                device=dev.device,
                ifname=name,
                explicit=dev.ifname is not None,
            )
        )
    return tuple(result)


class DelegateKind(enum.StrEnum):
    """Where a Multus delegate comes from, in delegate-list order."""

    PRIMARY = "Primary"
    DEFAULT_NETWORK = "DefaultNetwork"
    SELECTION = "Selection"
    AUXILIARY_CHAIN = "AuxiliaryChain"


@dataclass(frozen=True)
class MultusLayout:
    """The delegates Multus puts around a Pod's selections.

    ``primary_ifname``: ``CNI_IFNAME`` from the runtime, or the ``interface`` of a
    ``v1.multus-cni.io/default-network`` override (which replaces delegate 0 but keeps index 0).
    ``default_networks``: Multus ``defaultNetworks``, skipped for Pods whose namespace is in
    ``system_namespaces``. ``auxiliary_chain``: ``auxiliaryCNIChainName`` is set and its directory
    holds plugins (one more delegate after the selections).
    Source: Multus v4.3.0 ``getIfname`` and its delegate list.
    """

    primary_ifname: str = names.DEFAULT_PRIMARY_IFNAME
    default_networks: tuple[str, ...] = ()
    system_namespaces: tuple[str, ...] = ("kube-system",)
    auxiliary_chain: bool = False


DEFAULT_LAYOUT: Final = MultusLayout()
"""Multus's defaults: ``eth0``, no ``defaultNetworks``, ``kube-system`` only, no auxiliary chain."""


@dataclass(frozen=True)
class DelegateInterface:
    """The interface name Multus will use for one delegate.

    ``position`` is the delegate's index in the full list; ``selection_index`` its index in the
    networks annotation (``None`` for the primary, default networks and the auxiliary chain).
    """

    position: int
    kind: DelegateKind
    name: str
    explicit: bool
    selection_index: int | None
    network: str

    def describe(self) -> str:
        """Return a short description naming the delegate, for error messages."""
        if self.selection_index is not None:
            return f"selection [{self.selection_index}] {self.network!r} (interface {self.name})"
        return f"{self.kind} {self.network!r} (interface {self.name})"


@dataclass(frozen=True)
class InterfaceCollision:
    """Two or more delegates that would get the same interface name."""

    name: str
    delegates: tuple[DelegateInterface, ...]

    @property
    def selection_indexes(self) -> tuple[int, ...]:
        """Return the networks-annotation indexes among the colliding delegates."""
        return tuple(d.selection_index for d in self.delegates if d.selection_index is not None)


def _requested_interface(index: int, selection: Mapping[str, object]) -> str | None:
    """Return the selection's requested interface as Multus reads it, or ``None``."""
    found: str | None = None
    for key in ("interface", "interfaceRequest"):
        value = selection.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise errors.InvalidSpec(
                f"networks selection [{index}] has a non-string {key!r}: {value!r}; use a string name",
                reason=errors.Reason.INVALID_NETWORKS_ANNOTATION,
            )
        if value and found is None:
            found = value
    return found


def final_interface_names(
    selections: Sequence[Mapping[str, object]],
    *,
    pod_namespace: str,
    layout: MultusLayout = MultusLayout(),
) -> tuple[DelegateInterface, ...]:
    """Return the interface name Multus gives each delegate of the Pod, in delegate order.

    ``selections`` are the parsed ``k8s.v1.cni.cncf.io/networks`` entries (plain dicts with at
    least ``name``; ``namespace`` defaults to ``pod_namespace``; ``interface`` or the deprecated
    ``interfaceRequest`` when ``interface`` is empty). Rule: the primary gets
    ``layout.primary_ifname``; any other delegate its requested interface, else
    ``net<position>`` where position counts every delegate before it, explicit or not.

    Raises: ``InvalidSpec`` (``InvalidNetworksAnnotation``) when an interface value is not a
    string. Source: Multus ``getIfname``; docs/design.md#interface-names.
    """
    out = [DelegateInterface(0, DelegateKind.PRIMARY, layout.primary_ifname, True, None, "cluster network")]
    if pod_namespace not in layout.system_namespaces:
        for network in layout.default_networks:
            pos = len(out)
            out.append(
                DelegateInterface(pos, DelegateKind.DEFAULT_NETWORK, f"net{pos}", False, None, network)
            )
    for index, selection in enumerate(selections):
        pos = len(out)
        requested = _requested_interface(index, selection)
        namespace = selection.get("namespace") or pod_namespace
        network = f"{namespace}/{selection.get('name', '')}"
        out.append(
            DelegateInterface(
                pos,
                DelegateKind.SELECTION,
                requested if requested is not None else f"net{pos}",
                requested is not None,
                index,
                network,
            )
        )
    if layout.auxiliary_chain:
        pos = len(out)
        out.append(
            DelegateInterface(pos, DelegateKind.AUXILIARY_CHAIN, f"net{pos}", False, None, "auxiliary")
        )
    return tuple(out)


def find_interface_collisions(
    selections: Sequence[Mapping[str, object]],
    *,
    pod_namespace: str,
    layout: MultusLayout = MultusLayout(),
) -> tuple[InterfaceCollision, ...]:
    """Return every interface name that more than one delegate would get, in first-use order.

    The check runs over the actual full delegate list, not only the managed entries.
    Raises: as :func:`final_interface_names`. Source: docs/design.md#interface-names;
    multus-cni #1089.
    """
    by_name: dict[str, list[DelegateInterface]] = {}
    for delegate in final_interface_names(selections, pod_namespace=pod_namespace, layout=layout):
        by_name.setdefault(delegate.name, []).append(delegate)
    return tuple(InterfaceCollision(n, tuple(ds)) for n, ds in by_name.items() if len(ds) > 1)


def check_interface_collisions(
    selections: Sequence[Mapping[str, object]],
    *,
    pod_namespace: str,
    layout: MultusLayout = MultusLayout(),
    owner: str = "Pod",
) -> None:
    """Raise if any two delegates of the Pod would get the same interface name.

    Raises: ``InvalidSpec`` (``DuplicateInterfaceName``) naming every collision and both
    entries; nothing is renamed. Source: docs/design.md#interface-names; multus-cni #1089.
    """
    collisions = find_interface_collisions(selections, pod_namespace=pod_namespace, layout=layout)
    errors.raise_if_any(
        (
            errors.FieldError(
                f'metadata.annotations["{names.NETWORKS_ANNOTATION}"]',
                f"interface {c.name!r} would be used by "
                + " and ".join(d.describe() for d in c.delegates)
                + "; set a distinct explicit interface on the manual selection (managed names never change)",
            )
            for c in collisions
        ),
        f"{owner} would get duplicate interface names before any delegate runs",
        reason=errors.Reason.DUPLICATE_INTERFACE_NAME,
    )
