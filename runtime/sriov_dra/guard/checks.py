"""Pre-ADD checks of the live Pod's selections and registry, pure.

The guard's decision before Multus runs (docs/design.md#guard-checks; order in docs/guard.md,
"ADD, in order"): :func:`check_pod_identity`, :func:`read_networks` (Multus's parsing rule, shared
with the plugin), :func:`managed_targets` and :func:`check_managed` (per-shadow verdicts of
:mod:`~sriov_dra.guard.shadow_checks` plus the selection rules), :func:`check_interface_names` over
the full delegate list, then :func:`requested_interfaces` for post-ADD verification. Pods without a
registry or a selected shadow are ordinary: none of these rules applies to them (Multus judges
them). Rejections carry one reason per rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sriov_dra.core import interface_naming, networks, registry
from sriov_dra.guard import decisions, shadow_checks
from sriov_dra_rules import errors, names

Reason = decisions.Reason
Violation = decisions.Violation
Rejected = decisions.Rejected
_TUPLE_KEYS = frozenset({"name", "namespace", "interface"})
STATIC_SOURCE_ANNOTATION = "kubernetes.io/config.source"


@dataclass(frozen=True)
class PodNetworks:
    """The Pod's parsed network annotations.

    ``primary_ifname`` is the runtime's ``CNI_IFNAME`` unless a default-network override names an
    interface; ``registry`` is ``None`` when the Pod has none.
    """

    selections: tuple[networks.Selection, ...]
    registry: registry.Registry | None
    primary_ifname: str


def pod_view(pod: Mapping[str, Any]) -> shadow_checks.PodView:
    """Read the decision-relevant parts of a live Pod's JSON.

    Raises: :class:`Rejected` (``ApiReadFailed``) when the object lacks a namespace, name or UID
    or its annotations are not strings (the API never sends that; the read is not trusted).
    """
    meta = pod.get("metadata")
    spec = pod.get("spec")
    meta = meta if isinstance(meta, Mapping) else {}
    annotations = meta.get("annotations") or {}
    fields = [meta.get(k) for k in ("namespace", "name", "uid")]
    if not all(isinstance(f, str) and f for f in fields) or not (
        isinstance(annotations, Mapping) and all(isinstance(v, str) for v in annotations.values())
    ):
        raise Rejected.one(
            Reason.API_READ_FAILED,
            "the API returned a Pod without namespace, name, UID or string annotations",
        )
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    source = annotations.get(STATIC_SOURCE_ANNOTATION)
    return shadow_checks.PodView(
        namespace=str(fields[0]),
        name=str(fields[1]),
        uid=str(fields[2]),
        node_name=node if isinstance(node, str) and node else None,
        annotations=dict(annotations),
        static=source is not None and source != "api",
    )


def check_pod_identity(pod: shadow_checks.PodView, *, runtime_uid: str | None, node_name: str | None) -> None:
    """The live Pod must be the runtime's: same UID (static Pods exempt) and, if known, this node.

    Raises: :class:`Rejected` (``PodUidMismatch``, ``PodNodeMismatch``).
    Source: docs/design.md#guard (the UID checks stay).
    """
    if runtime_uid is not None and runtime_uid != pod.uid and not pod.static:
        raise Rejected.one(
            Reason.POD_UID_MISMATCH,
            f"the runtime's K8S_POD_UID is {runtime_uid} but the live {pod.ref} has UID {pod.uid}; the Pod was "
            "replaced: the kubelet will tear this sandbox down",
        )
    if node_name is not None and pod.node_name != node_name:
        raise Rejected.one(
            Reason.POD_NODE_MISMATCH,
            f"the live {pod.ref} is bound to node {pod.node_name!r}, not this node {node_name!r}",
        )


def read_networks(pod: shadow_checks.PodView, *, cni_ifname: str) -> PodNetworks:
    """Parse the Pod's selections, default-network override and registry.

    Raises: :class:`Rejected` with ``InvalidNetworksAnnotation`` (parse errors of either
    annotation, more than one default network), ``UnsupportedRegistryVersion``,
    ``InvalidRegistry`` or ``RegistryPodUidMismatch``.
    The ``networks`` annotation parses under the rule the plugin's merger uses
    (``core.networks``), the ``v1.multus-cni.io/default-network`` override names at most one
    network, and the registry, when present, decodes for this Pod's UID.
    Source: docs/design.md#selections, docs/design.md#guard-checks; multus-cni #635, #1195, #588,
    #360, #213.
    """
    try:
        selections = networks.parse_networks(
            pod.annotations.get(names.NETWORKS_ANNOTATION), pod_namespace=pod.namespace, pod=pod.ref
        )
        default = networks.parse_networks(
            pod.annotations.get(names.DEFAULT_NETWORK_ANNOTATION), pod_namespace=pod.namespace, pod=pod.ref
        )
    except errors.InvalidSpec as exc:
        raise Rejected.one(Reason.INVALID_NETWORKS_ANNOTATION, str(exc)) from exc
    if len(default) > 1:
        raise Rejected.one(
            Reason.INVALID_NETWORKS_ANNOTATION,
            f"{pod.ref}: {names.DEFAULT_NETWORK_ANNOTATION} names {len(default)} networks; Multus accepts one",
        )
    primary = default[0].interface if default and default[0].interface else cni_ifname
    value = pod.annotations.get(names.MANAGED_NETWORKS_ANNOTATION)
    if value is None:
        return PodNetworks(selections, None, primary)
    try:
        decoded = registry.decode_registry(value, owner=pod.ref)
    except errors.ContractViolation as exc:
        reason = (
            Reason.UNSUPPORTED_REGISTRY_VERSION
            if exc.reason is errors.Reason.UNSUPPORTED_VERSION
            else Reason.INVALID_REGISTRY
        )
        raise Rejected.one(reason, str(exc)) from exc
    if decoded.pod_uid != pod.uid:
        raise Rejected.one(
            Reason.REGISTRY_POD_UID_MISMATCH,
            f"{pod.ref}: {names.MANAGED_NETWORKS_ANNOTATION} was written for Pod UID {decoded.pod_uid}, "
            f"but the Pod's UID is {pod.uid}; the annotation was copied from another Pod: remove it",
        )
    return PodNetworks(selections, decoded, primary)


def _effective_layout(
    nets: PodNetworks, layout: interface_naming.MultusLayout
) -> interface_naming.MultusLayout:
    """``layout`` with the Pod's own primary interface (a default-network override may name one)."""
    return interface_naming.MultusLayout(
        primary_ifname=nets.primary_ifname,
        default_networks=layout.default_networks,
        system_namespaces=layout.system_namespaces,
        auxiliary_chain=layout.auxiliary_chain,
    )


def check_interface_names(
    nets: PodNetworks, pod: shadow_checks.PodView, layout: interface_naming.MultusLayout
) -> None:
    """Refuse two delegates with one interface name over Multus's full delegate list.

    ``layout.primary_ifname`` is replaced by ``nets.primary_ifname``.
    Raises: :class:`Rejected` (``DuplicateInterfaceName``) naming both entries.
    Source: docs/design.md#interface-names, docs/design.md#guard-checks; multus-cni #1089.
    """
    try:
        interface_naming.check_interface_collisions(
            [s.multus_view for s in nets.selections],
            pod_namespace=pod.namespace,
            layout=_effective_layout(nets, layout),
            owner=pod.ref,
        )
    except errors.InvalidSpec as exc:
        raise Rejected.one(Reason.DUPLICATE_INTERFACE_NAME, str(exc)) from exc


def requested_interfaces(
    nets: PodNetworks,
    pod: shadow_checks.PodView,
    layout: interface_naming.MultusLayout,
    managed: Sequence[shadow_checks.ExpectedInterface],
) -> tuple[shadow_checks.ExpectedInterface, ...]:
    """Every interface the Pod's selections ask for: what post-ADD verification must find.

    One entry per selection, in annotation order, named as Multus names it (its ``interface``, or
    ``net<position in the full delegate list>``, ``core.interface_naming``); a managed selection's entry is
    its shadow's from ``managed`` (:func:`check_managed`), carrying the bound VF. Call it after
    :func:`check_interface_names` and :func:`check_managed` passed.
    Shapes: ``network`` is ``<namespace>/<name>`` with the namespace defaulted to the Pod's.
    Raises: :class:`Rejected` (``InvalidNetworksAnnotation``) when an interface value is not a
    string (the parser already refuses it).
    Source: docs/design.md#guard-checks; Multus ``getIfname``; multus-cni #492.
    """
    try:
        delegates = interface_naming.final_interface_names(
            [s.multus_view for s in nets.selections],
            pod_namespace=pod.namespace,
            layout=_effective_layout(nets, layout),
        )
    except errors.InvalidSpec as exc:
        raise Rejected.one(Reason.INVALID_NETWORKS_ANNOTATION, str(exc)) from exc
    by_key = {(e.network, e.ifname): e for e in managed}
    out = [
        by_key.pop((d.network, d.name))
        if (d.network, d.name) in by_key
        else shadow_checks.ExpectedInterface(d.name, d.network)
        for d in delegates
        if d.kind is interface_naming.DelegateKind.SELECTION
    ]
    # A managed interface nobody selects was refused before Multus ran (RegistryEntryNotSelected).
    return (*out, *by_key.values())


def managed_targets(nets: PodNetworks) -> tuple[tuple[str, str], ...]:
    """The ``(namespace, name)`` NADs to read live: registry entries first, then shadow-named selections.

    Shapes: no duplicates; registry order, then annotation order.
    """
    out: list[tuple[str, str]] = []
    for entry in nets.registry.entries if nets.registry else ():
        if (entry.namespace, entry.name) not in out:
            out.append((entry.namespace, entry.name))
    for sel in nets.selections:
        if sel.name.startswith(names.SHADOW_NAME_PREFIX) and sel.target not in out:
            out.append(sel.target)
    return tuple(out)


def check_managed(
    pod: shadow_checks.PodView,
    nets: PodNetworks,
    nads: Mapping[tuple[str, str], Mapping[str, Any] | None],
) -> tuple[shadow_checks.ExpectedInterface, ...]:
    """Check every managed target and its selections; return the interfaces ADD must create.

    ``nads`` maps each of :func:`managed_targets` to its live NAD, or ``None`` when it was not
    found. Violations of every shadow come first (in target order), then selection violations.
    Shapes: expected interfaces in target order.
    Every registry entry must be selected exactly once, and a managed selection must be exactly
    ``{"name","namespace","interface"}`` with the recorded interface (no ``deviceID``, ``ips``,
    ``cni-args`` or other override).
    Raises: :class:`Rejected` carrying every violation; its reason is the first one's.
    Source: docs/design.md#selections, docs/design.md#guard-checks.
    """
    entries = {(e.namespace, e.name): e for e in (nets.registry.entries if nets.registry else ())}
    found: list[Violation] = []
    expected: list[shadow_checks.ExpectedInterface] = []
    interfaces: dict[tuple[str, str], str] = {}
    for target in managed_targets(nets):
        nad = nads.get(target)
        entry = entries.get(target)
        if nad is None:
            found.append(
                Violation(
                    Reason.SHADOW_NOT_FOUND,
                    f"NAD {target[0]}/{target[1]} selected by {pod.ref} does not exist; the driver recreates a "
                    "missing shadow before the kubelet's next retry",
                )
            )
            continue
        verdict = shadow_checks.check_shadow(nad, pod=pod, entry=entry)
        if not verdict.managed:
            continue
        found.extend(verdict.violations)
        if verdict.expected is not None:
            expected.append(verdict.expected)
            interfaces[target] = entry.interface if entry is not None else verdict.expected.ifname
    found += _selection_violations(pod, nets, entries, interfaces)
    if found:
        raise Rejected(found)
    return tuple(expected)


def _selection_violations(
    pod: shadow_checks.PodView,
    nets: PodNetworks,
    entries: Mapping[tuple[str, str], registry.RegistryEntry],
    interfaces: Mapping[tuple[str, str], str],
) -> list[Violation]:
    found: list[Violation] = []
    by_target: dict[tuple[str, str], list[networks.Selection]] = {}
    for sel in nets.selections:
        by_target.setdefault(sel.target, []).append(sel)
    for target, entry in entries.items():
        if target not in by_target:
            found.append(
                Violation(
                    Reason.REGISTRY_ENTRY_NOT_SELECTED,
                    f"{pod.ref}: registry entry {target[0]}/{target[1]}@{entry.interface} has no selection in "
                    f"{names.NETWORKS_ANNOTATION}; Multus would not attach it (the driver's repair restores it)",
                )
            )
    for target, ifname in interfaces.items():
        selected = by_target.get(target, [])
        if len(selected) > 1:
            found.append(
                Violation(
                    Reason.DUPLICATE_MANAGED_SELECTION,
                    f"{pod.ref}: managed shadow {target[0]}/{target[1]} is selected {len(selected)} times "
                    f"(entries {[s.index for s in selected]}); remove the copies",
                )
            )
        for sel in selected:
            problem = _override_problem(sel, target, ifname)
            if problem:
                found.append(Violation(Reason.MANAGED_SELECTION_OVERRIDE, f"{pod.ref}: {problem}"))
    return found


def _override_problem(sel: networks.Selection, target: tuple[str, str], ifname: str) -> str | None:
    want = networks.compact_json({"name": target[1], "namespace": target[0], "interface": ifname})
    if sel.exact_tuple(target[0], target[1], ifname):
        return None
    extra = sorted(set(sel.raw) - _TUPLE_KEYS)
    detail = f"adds {extra}" if extra else f"is {sel.raw_text}"
    return (
        f"managed selection [{sel.index}] of {target[0]}/{target[1]} {detail}; managed entries are generated by "
        f"the driver and must be exactly {want} (no deviceID, interface or option overrides)"
    )


def read_networks_of_any_pod(pod: shadow_checks.PodView, *, cni_ifname: str) -> PodNetworks | None:
    """:func:`read_networks`, or ``None`` for a Pod without registry whose networks Multus refuses.

    Such a Pod is ordinary: Multus answers its ADD with its own error (docs/design.md#guard).
    Raises: :class:`Rejected` as :func:`read_networks` for a Pod with a registry, and for a bad
    registry.
    """
    try:
        return read_networks(pod, cni_ifname=cni_ifname)
    except Rejected as exc:
        if (
            names.MANAGED_NETWORKS_ANNOTATION not in pod.annotations
            and exc.reason is Reason.INVALID_NETWORKS_ANNOTATION
        ):
            return None
        raise


def managed_findings(
    pod: shadow_checks.PodView,
    nets: PodNetworks | None,
    nads: Mapping[tuple[str, str], Mapping[str, Any] | None],
) -> tuple[list[Violation], tuple[shadow_checks.ExpectedInterface, ...]]:
    """:func:`check_managed` as findings and managed interfaces; ``([], ())`` for an ordinary Pod."""
    if nets is None:
        return [], ()
    try:
        return [], check_managed(pod, nets, nads)
    except Rejected as exc:
        return list(exc.violations), ()


def name_violations(
    nets: PodNetworks, pod: shadow_checks.PodView, layout: interface_naming.MultusLayout
) -> list[Violation]:
    """:func:`check_interface_names` as findings, for a managed Pod after its managed findings (a
    duplicated managed selection is also an interface collision, and its own reason says more)."""
    try:
        check_interface_names(nets, pod, layout)
    except Rejected as exc:
        return list(exc.violations)
    return []
