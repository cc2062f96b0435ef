"""Recovering a lost node's bindings: what is read, what is planned, and the writes in their order.

The work of ``sriov-dra recover-node`` (docs/operations.md), without argument parsing or output.
:func:`read_plan` reads the Node, the plugin Pods bound to it, every managed shadow, and (when a
frozen config names whereabouts) the IPPools and OverlappingRangeIPReservations, then decides:
the fencing verdict (``core.plugin.node_fencing``), the shadows of the node checked from the API
alone (``core.plugin.stranded_shadows``), and per shadow its Pod and IPAM reservations
(``core.plugin.ipam_reservations``). :func:`apply` then, per shadow and only when the node is
fenced: removes its claim's managed selections and registry entries from the Pod when the Pod
still exists with the recorded UID (``pod_selections.remove_claim_selections``, the release's
step), releases its whereabouts allocations and reservations by pod reference unless that
reference now names another Pod (whereabouts gives a same-named Pod the old allocation), and
last requests the shadow's deletion and removes our finalizer (``shadow_lifecycle.finalize_shadow``,
the release's last step), so a failure leaves the shadow and its frozen config for a rerun. Each
write is the release's own, with its preconditions; host-local files are on the dead node and are
only named. It never touches an unverified object, another node's shadow, or anything while the
node is not fenced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sriov_dra.core.plugin import ipam_reservations as ipam
from sriov_dra.core.plugin import node_fencing, stranded_shadows
from sriov_dra.driver.managed import pod_selections, seams, shadow_lifecycle
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import nad_client, objects, pod_patch, views, whereabouts
from sriov_dra_rules import errors, names

PLUGIN_POD_SELECTOR: Final = "app.kubernetes.io/name=sriov-dra-plugin"
"""The plugin DaemonSet's Pod label (``roles/plugin/templates/daemonset.yaml.j2``)."""


@dataclass(frozen=True)
class Clients:
    """The API clients recovery reads and writes through (all in ``sriov_dra.kube``)."""

    objects: objects.Objects
    nads: nad_client.NadClient
    pods: pod_patch.PodClient
    whereabouts: whereabouts.WhereaboutsClient


@dataclass
class ShadowPlan:
    """One shadow and what recovery does for it.

    Shapes: ``pod`` is ``"present"`` (the recorded UID, maybe terminating), ``"gone"``,
    ``"replaced"`` (the name holds another UID) or ``"unknown"`` (no ownerReference: the name is
    not known); ``pools`` maps ``namespace/name`` of each IPPool holding the interface's
    allocations to their addresses; ``reservations`` the OverlappingRangeIPReservations
    (``namespace/name`` → UID); ``done`` what :func:`apply` did, one phrase per step.
    """

    shadow: stranded_shadows.StrandedShadow
    pod: str
    reservation: ipam.Reservation | None
    reservation_problem: str = ""
    pools: dict[str, tuple[str, ...]] = field(default_factory=dict)
    reservations: dict[str, str] = field(default_factory=dict)
    done: list[str] = field(default_factory=list)
    failed: str = ""

    @property
    def podref(self) -> str:
        """whereabouts' pod reference ``<namespace>/<name>`` (``""`` when the name is unknown)."""
        return f"{self.shadow.namespace}/{self.shadow.pod_name}" if self.shadow.pod_name else ""


@dataclass
class Plan:
    """Everything :func:`read_plan` found; ``refusal`` set when the node may not be recovered."""

    node: str
    node_uids: tuple[str, ...]
    refusal: errors.LifecycleBlocked | None
    shadows: list[ShadowPlan]
    unverified: list[stranded_shadows.Unverified]


def _node_state(node: Mapping[str, Any] | None) -> node_fencing.NodeState | None:
    if node is None:
        return None
    view = views.decode_node(node)
    return node_fencing.NodeState(
        name=view.meta.name, uid=view.meta.uid, ready=view.ready, taints=view.taints
    )


def _plugin_pods(clients: Clients, node: str, selector: str) -> list[node_fencing.PluginPod]:
    listed = clients.objects.list(
        objects.POD, label_selector=selector, field_selector=f"spec.nodeName={node}"
    )
    found = [views.decode_pod(p) for p in listed.items]
    return [node_fencing.PluginPod(p.meta.namespace, p.meta.name, p.ready, p.meta.deleting) for p in found]


def _pod_state(clients: Clients, shadow: stranded_shadows.StrandedShadow) -> str:
    if not shadow.pod_name:
        return "unknown"
    try:
        live = clients.pods.get(shadow.namespace, shadow.pod_name)
    except kube_errors.NotFound:
        return "gone"
    return "present" if views.decode_meta(live).uid == shadow.binding.pod_uid else "replaced"


def _ipam(plan: ShadowPlan, pools: Sequence[Mapping[str, Any]], orips: Sequence[Mapping[str, Any]]) -> None:
    """Fill ``plan.pools`` and ``plan.reservations`` from the listed whereabouts objects."""
    reservation, podref = plan.reservation, plan.podref
    if reservation is None or reservation.kind is not ipam.Kind.WHEREABOUTS or not podref:
        return
    ifname = plan.shadow.binding.interface
    for pool in pools:
        release = ipam.pool_release(pool, reservation, podref=podref, ifname=ifname)
        if release.ops:
            plan.pools[views.decode_meta(pool).ref] = tuple(str(a) for a in release.addresses)
    for orip in orips:
        if ipam.reservation_matches(orip, reservation, podref=podref, ifname=ifname):
            meta = views.decode_meta(orip)
            plan.reservations[meta.ref] = meta.uid


def read_plan(clients: Clients, node: str, *, plugin_selector: str = PLUGIN_POD_SELECTOR) -> Plan:
    """Read what recovery of ``node`` decides on, and decide (no write).

    Raises: ``kube_errors.ApiError`` classes (a read was refused or failed).
    """
    state = _node_state(clients.objects.get_or_none(objects.NODE, node))
    refusal = None
    try:
        node_fencing.check_fenced(node, state, _plugin_pods(clients, node, plugin_selector))
    except errors.LifecycleBlocked as exc:
        refusal = exc
    listed = clients.nads.list_all(label_selector=f"{names.LABEL_MANAGED_BY}={names.MANAGED_BY_VALUE}")
    found, unverified = stranded_shadows.find(listed, node, frozenset({state.uid} if state else ()))
    plans = []
    for shadow in found:
        try:
            reservation, problem = ipam.reservation_of(shadow.config), ""
        except errors.SriovDraError as exc:
            reservation, problem = None, exc.detail
        plans.append(ShadowPlan(shadow, _pod_state(clients, shadow), reservation, problem))
    if any(p.reservation and p.reservation.kind is ipam.Kind.WHEREABOUTS for p in plans):
        pools, orips = clients.whereabouts.pools(), clients.whereabouts.reservations()
        for plan in plans:
            _ipam(plan, pools, orips)
    uids = sorted({s.binding.node_uid for s in found} | ({state.uid} if state else set()))
    return Plan(node, tuple(uids), refusal, plans, unverified)


def ipam_summary(plan: ShadowPlan) -> str:
    """The IPAM column: what the frozen config reserves and where."""
    r = plan.reservation
    if r is None:
        return f"unreadable: {plan.reservation_problem}"
    if r.kind is ipam.Kind.WHEREABOUTS:
        held = [f"{a} ({pool})" for pool, addrs in sorted(plan.pools.items()) for a in addrs]
        return "whereabouts: " + (", ".join(held) if held else "no allocation of this interface left")
    if r.kind is ipam.Kind.HOST_LOCAL:
        return f"host-local: {r.where} on the dead node, not reachable from the API"
    if r.kind is ipam.Kind.OTHER:
        return f"{r.where}: not released (unknown to recovery)"
    return "none"


def planned_actions(plan: ShadowPlan) -> list[str]:
    """What :func:`apply` will do for ``plan``, one phrase per step."""
    out = []
    if plan.pod == "present":
        out.append(f"remove claim {plan.shadow.binding.claim_uid}'s selections from the Pod")
    if plan.pools or plan.reservations:
        if plan.pod == "replaced":
            out.append("keep the whereabouts entries: the Pod name now belongs to another Pod")
        else:
            out.append(
                f"release {sum(len(a) for a in plan.pools.values())} allocation(s), "
                f"{len(plan.reservations)} reservation(s)"
            )
    out.append("delete and remove our finalizer")
    return out


def _release_pool(
    clients: Clients, plan: ShadowPlan, ref: str, *, clock: seams.Clock, backoff: pod_selections.Backoff
) -> str:
    """Release the interface's allocations in pool ``ref``, re-reading it after a conflict."""
    assert plan.reservation is not None
    namespace, name = ref.split("/", 1)
    for attempt in range(1, backoff.attempts + 1):
        try:
            pool = clients.whereabouts.pool(namespace, name)
        except kube_errors.NotFound:
            return f"pool {ref} gone"
        release = ipam.pool_release(
            pool, plan.reservation, podref=plan.podref, ifname=plan.shadow.binding.interface
        )
        if not release.ops:
            return f"nothing left in pool {ref}"
        try:
            clients.whereabouts.patch_pool(namespace, name, release.ops)
            return f"released {', '.join(str(a) for a in release.addresses)} in pool {ref}"
        except (kube_errors.Invalid, kube_errors.Conflict):
            if attempt < backoff.attempts:
                clock.sleep(backoff.delay(attempt))
    raise errors.Conflict(
        f"IPPool {ref} kept changing while {plan.podref}'s allocations were released "
        f"({backoff.attempts} attempts); run recover-node again",
        reason=errors.Reason.SHADOW_CONFLICT,
    )


def _remove_selections(
    clients: Clients, claim: list[ShadowPlan], *, clock: seams.Clock, backoff: pod_selections.Backoff
) -> None:
    """Remove one claim's selections from its Pod once, noted on each of the claim's shadows."""
    s = claim[0].shadow
    if claim[0].pod != "present":
        return
    written = pod_selections.remove_claim_selections(
        pods=clients.pods,
        namespace=s.namespace,
        name=s.pod_name,
        pod_uid=s.binding.pod_uid,
        claim_uid=s.binding.claim_uid,
        clock=clock,
        backoff=backoff,
    )
    for plan in claim:
        plan.done.append("claim's selections removed" if written else "no selection of the claim left")


def _release_shadow(
    clients: Clients, plan: ShadowPlan, *, clock: seams.Clock, backoff: pod_selections.Backoff
) -> None:
    """The shadow's whereabouts entries, then the shadow itself (deleted, our finalizer removed)."""
    s = plan.shadow
    if plan.pod == "replaced" and (plan.pools or plan.reservations):
        plan.done.append(f"whereabouts entries of {plan.podref} kept: the name now belongs to another Pod")
    elif plan.pools or plan.reservations:
        for ref in sorted(plan.pools):
            plan.done.append(_release_pool(clients, plan, ref, clock=clock, backoff=backoff))
        for ref, uid in sorted(plan.reservations.items()):
            namespace, name = ref.split("/", 1)
            try:
                gone = not clients.whereabouts.delete_reservation(namespace, name, uid=uid)
            except kube_errors.Conflict:
                gone = True  # replaced by another owner's reservation: not ours any more
            plan.done.append(f"reservation {name} {'already gone' if gone else 'deleted'}")
    result = shadow_lifecycle.finalize_shadow(
        s.namespace, s.name, s.uid, nads=clients.nads, clock=clock, backoff=backoff
    )
    held = f"; still held by {', '.join(result.foreign)}" if result.foreign else ""
    plan.done.append(("shadow deleted" if result.gone else "our finalizer removed") + held)


def apply(
    clients: Clients,
    plan: Plan,
    *,
    clock: seams.Clock,
    backoff: pod_selections.Backoff = pod_selections.DEFAULT_BACKOFF,
) -> bool:
    """Recover every shadow of ``plan`` (module docstring); True when every shadow was recovered.

    A failing shadow is recorded in its ``failed`` and the others go on; a Forbidden answer (not a
    binding manager: the admission policy refuses) stops at once. Raises: errors.LifecycleBlocked
    when ``plan.refusal`` is set (nothing is written); ``kube_errors.Forbidden``.
    """
    if plan.refusal is not None:
        raise plan.refusal
    claims: dict[tuple[str, str], list[ShadowPlan]] = {}
    for shadow_plan in plan.shadows:
        key = (shadow_plan.shadow.binding.pod_uid, shadow_plan.shadow.binding.claim_uid)
        claims.setdefault(key, []).append(shadow_plan)
    ok = True
    for claim in claims.values():
        try:
            _remove_selections(clients, claim, clock=clock, backoff=backoff)
        except kube_errors.Forbidden:
            raise
        except (kube_errors.ApiError, errors.SriovDraError) as exc:
            for shadow_plan in claim:  # kept for a rerun: no shadow goes while the Pod still names it
                shadow_plan.failed = f"the Pod's selections: {exc}"
            ok = False
            continue
        for shadow_plan in claim:
            try:
                _release_shadow(clients, shadow_plan, clock=clock, backoff=backoff)
            except kube_errors.Forbidden:
                raise
            except (kube_errors.ApiError, errors.SriovDraError) as exc:
                shadow_plan.failed = str(exc)
                ok = False
    return ok and not plan.unverified
