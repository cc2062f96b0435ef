"""Consumer verification: the one live Pod a claim is prepared for, and the Pod's claim aliases.

After ``core.plugin.claim_plan`` checked the claim itself, :func:`verify_consumer` reads the
consumer Pod live and checks it is exactly the reserved Pod, on this node, neither terminating nor
``hostNetwork`` for a new prepare, on a Node whose UID is still the recorded one, and referencing
this exact claim: by Kubernetes ``resourceclaim.Name`` semantics, or as the extended-resource claim
its ``status.extendedResourceClaimStatus`` names (:func:`resolve_pod_claims`;
docs/design.md#consumer). Aliases of one claim stay together (docs/design.md#interface-names).
Never searches for a Pod by label, trusts a claim ownerReference alone, or writes anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sriov_dra.core import identities
from sriov_dra.core.plugin import claim_plan
from sriov_dra.driver.managed import seams
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import views
from sriov_dra_rules import errors

EXTENDED_RESOURCE_ANNOTATION: Final = "resource.kubernetes.io/extended-resource-claim"
"""Set to ``"true"`` by the scheduler on claims it creates for extended resources."""

EXTENDED_ALIAS: Final = "extended-resources"
"""The claim alias of a Pod's extended-resource claim, which has no ``pod.spec.resourceClaims`` entry;
it orders that claim's interfaces among the Pod's other claims (docs/design.md#interface-names)."""

NodeUidReader = Callable[[], str | None]
"""Returns the Node's current ``metadata.uid``, ``None`` when the Node does not exist.

Production: ``driver.managed_wiring.LiveNodeUid`` (the plugin's Node watch, a live GET when it has no Node).
Raises: ``kube.errors`` classes when a live read fails.
"""


@dataclass(frozen=True)
class PodClaim:
    """One resolved ``pod.spec.resourceClaims`` entry.

    ``must_check_owner`` is true for template-generated claims (``IsForPod`` applies).
    """

    alias: str
    claim_name: str
    must_check_owner: bool


@dataclass(frozen=True)
class Consumer:
    """The verified consumer Pod of one claim.

    Shapes: ``pod`` is the live Pod JSON as read (its annotations are patched against it) and
    ``view`` its decoded fields; ``aliases`` every resolved claim entry of the Pod in spec order
    (entries with no claim skipped); ``claim_aliases`` the aliases naming the claim being
    prepared, sorted.
    """

    pod: Mapping[str, object]
    view: views.Pod
    namespace: str
    name: str
    uid: identities.PodUid
    aliases: tuple[PodClaim, ...]
    claim_aliases: tuple[str, ...]

    @property
    def ref(self) -> str:
        """``Pod ns/name`` for messages."""
        return f"Pod {self.namespace}/{self.name}"


def _consumer_error(message: str, *problems: errors.FieldError) -> errors.InvalidSpec:
    return errors.InvalidSpec(message, reason=errors.Reason.INVALID_CONSUMER, errors=problems)


def _pod_claims(pod: views.Pod) -> tuple[list[PodClaim], list[errors.FieldError]]:
    out: list[PodClaim] = []
    problems: list[errors.FieldError] = []
    for index, entry in enumerate(pod.claims):
        path = f"spec.resourceClaims[{index}]"
        if entry.name == EXTENDED_ALIAS and pod.extended_claim_name:
            problems.append(
                errors.FieldError(
                    f"{path}.name",
                    f"is {EXTENDED_ALIAS!r}, the alias auto-attach gives the Pod's extended-resource claim "
                    f"{pod.extended_claim_name!r}: rename the entry",
                )
            )
        if entry.claim_name:
            out.append(PodClaim(entry.name, entry.claim_name, must_check_owner=False))
        elif entry.template_name:
            resolved = pod.claim_statuses.get(entry.name, "")
            if entry.name not in pod.claim_statuses:
                problems.append(
                    errors.FieldError(
                        path,
                        f"claim {entry.name!r} from template {entry.template_name!r} has no entry in "
                        "status.resourceClaimStatuses yet; the resourceclaim controller has not created it",
                    )
                )
            elif resolved:
                out.append(PodClaim(entry.name, resolved, must_check_owner=True))
        else:
            problems.append(
                errors.FieldError(path, "sets neither resourceClaimName nor resourceClaimTemplateName")
            )
    if pod.extended_claim_name:
        out.append(PodClaim(EXTENDED_ALIAS, pod.extended_claim_name, must_check_owner=True))
    return out, problems


def resolve_pod_claims(pod: views.Pod) -> tuple[PodClaim, ...]:
    """Every claim of the Pod: its ``pod.spec.resourceClaims`` as Kubernetes ``resourceclaim.Name``
    resolves them, then its extended-resource claim.

    ``resourceClaimName`` → that name; ``resourceClaimTemplateName`` → the matching
    ``status.resourceClaimStatuses[].resourceClaimName`` (unset: no claim is needed, skipped);
    ``status.extendedResourceClaimStatus.resourceClaimName`` → that claim under
    :data:`EXTENDED_ALIAS`. Generated and extended claims must be controlled by the Pod
    (``must_check_owner``). Raises: InvalidSpec(InvalidConsumer) for an entry with neither field,
    a template entry the resourceclaim controller has not resolved yet (``ErrClaimNotFound``: retry
    later), or an entry named :data:`EXTENDED_ALIAS` beside an extended-resource claim.
    """
    out, problems = _pod_claims(pod)
    if problems:
        raise _consumer_error(f"Pod {pod.meta.ref}: its resource claims cannot be resolved", *problems)
    return tuple(out)


def known_pod_claims(pod: views.Pod) -> tuple[PodClaim, ...]:
    """The claims :func:`resolve_pod_claims` resolves, skipping the entries it would refuse (a display)."""
    return tuple(_pod_claims(pod)[0])


def is_for_pod(pod: views.Pod, claim: views.Meta) -> bool:
    """Kubernetes ``IsForPod(pod, claim, false)``: same namespace and controlled by this Pod UID."""
    if pod.meta.namespace != claim.namespace:
        return False
    for ref in claim.owners:
        if ref.controller and ref.uid == pod.meta.uid:
            return ref.kind == "Pod" and ref.api_version == "v1"
    return False


def check_claim_kind(claim: views.Meta, pod: views.Pod, plan: claim_plan.ClaimPlan) -> None:
    """Refuse an extended-resource claim the Pod does not map (docs/design.md#consumer).

    A claim is the Pod's extended-resource claim when ``status.extendedResourceClaimStatus`` names
    it; then every request of this driver's results must be in its ``requestMappings``. A claim
    carrying the scheduler's marker that the Pod's status does not name is not one auto-attach can
    place (the scheduler records the mapping before it binds the Pod).
    Raises: InvalidSpec(UnsupportedManagedClaimKind) naming the claim, what is missing and the fix.
    """
    named = bool(pod.extended_claim_name) and pod.extended_claim_name == claim.name
    if not named:
        if claim.annotations.get(EXTENDED_RESOURCE_ANNOTATION) == "true":
            raise errors.InvalidSpec(
                f"ResourceClaim {claim.ref} is an extended-resource claim, but Pod {pod.meta.ref} does not name it "
                f"in status.extendedResourceClaimStatus (it names {pod.extended_claim_name or 'no claim'!r}); "
                "automatic network attachment finds such a claim only through that status: enable the "
                "DRAExtendedResource feature gate on kube-apiserver and kube-scheduler, or request the VF with "
                "a ResourceClaimTemplate",
                reason=errors.Reason.UNSUPPORTED_MANAGED_CLAIM_KIND,
            )
        return
    mapped = {m.request for m in pod.extended_requests}
    missing = sorted({r for d in plan.devices for r in d.request_names} - mapped)
    if missing:
        raise errors.InvalidSpec(
            f"ResourceClaim {claim.ref} is the extended-resource claim of Pod {pod.meta.ref}, but its requests "
            f"{', '.join(missing)} are in no status.extendedResourceClaimStatus.requestMappings entry, so no "
            "container asked for these VFs; automatic network attachment supports only the claim the "
            "scheduler made: request the VF through resources.limits of the DeviceClass's extendedResourceName "
            "or with a ResourceClaimTemplate",
            reason=errors.Reason.UNSUPPORTED_MANAGED_CLAIM_KIND,
            errors=tuple(
                errors.FieldError(
                    "status.extendedResourceClaimStatus.requestMappings", f"has no request {r!r}"
                )
                for r in missing
            ),
        )


def check_pod(pod: views.Pod, *, plan: claim_plan.ClaimPlan, node_name: str, new_prepare: bool) -> None:
    """Check the live Pod against the reservation and this node (docs/design.md#consumer).

    Raises: InvalidSpec(InvalidConsumer) for another UID (the reserved Pod was replaced), another
    node, or (new prepare) a ``hostNetwork`` Pod; InvalidSpec(InvalidConsumer) for a terminating
    Pod on a new prepare and LifecycleBlocked(ClaimReleaseInProgress) on a retry (the binding is
    kept for release).
    """
    label = f"Pod {plan.namespace}/{plan.pod_name}"
    problems: list[errors.FieldError] = []
    if pod.meta.uid != plan.pod_uid:
        problems.append(
            errors.FieldError(
                "metadata.uid",
                f"is {pod.meta.uid or None}, but claim {plan.namespace}/{plan.name} is reserved for UID "
                f"{plan.pod_uid}: the Pod was replaced; the kubelet retries for the current Pod",
            )
        )
    if pod.node_name != node_name:
        problems.append(
            errors.FieldError("spec.nodeName", f"is {pod.node_name or None!r}, not this node {node_name!r}")
        )
    if new_prepare and pod.host_network:
        problems.append(
            errors.FieldError(
                "spec.hostNetwork",
                "is true; a hostNetwork Pod gets no secondary networks: remove hostNetwork or the SR-IOV claim",
            )
        )
    if problems:
        raise _consumer_error(f"{label} cannot consume claim {plan.namespace}/{plan.name}", *problems)
    if pod.meta.deleting:
        message = f"{label} is terminating; no network is attached to it"
        if new_prepare:
            raise _consumer_error(message)
        raise errors.LifecycleBlocked(
            message + "; its bindings are kept until the kubelet unprepares the claim",
            reason=errors.Reason.CLAIM_RELEASE_IN_PROGRESS,
        )


def check_node_identity(node: seams.NodeIdentity, current_uid: str | None) -> None:
    """Refuse work when the Node's current UID is not the identity this process recorded.

    ``current_uid`` is the Node's UID now (``None``: no such Node). Bindings, shadow labels and
    the orphan scan all carry the recorded UID, so a re-registered Node (same name, new UID)
    would get shadows labelled for a node that no longer exists; nothing is switched silently.
    Raises: ContractViolation naming the Node, both UIDs and the fix (drain, then restart the
    plugin so it records the new identity).
    A mismatch stops forward repair too (docs/design.md#repair).
    Source: docs/design.md#consumer.
    """
    if current_uid == node.uid:
        return
    now = f"has UID {current_uid}" if current_uid else "does not exist (it was deleted)"
    raise errors.ContractViolation(
        f"Node {node.name} {now}, but this plugin process recorded UID {node.uid} at startup; every "
        "binding, shadow node-uid label and orphan-scan selector is built from the recorded identity, so no "
        f"network is attached or repaired under it any more: drain the node (the kubelet unprepares the "
        f"claims prepared under {node.uid}), then restart the plugin Pod on {node.name} so it records the "
        "Node's new identity",
        errors=(
            errors.FieldError(f"Node {node.name}: metadata.uid", f"is {current_uid}, recorded {node.uid}"),
        ),
    )


def verify_consumer(
    claim: Mapping[str, object],
    plan: claim_plan.ClaimPlan,
    *,
    pods: seams.PodApi,
    node: seams.NodeIdentity,
    new_prepare: bool,
    node_uid: NodeUidReader | None = None,
) -> Consumer:
    """Read the reserved Pod live and verify it consumes exactly this claim on this node.

    ``node_uid`` reads the Node's current UID for the identity check; ``None``
    trusts the recorded identity (tests and benchmarks that have no Node).
    Raises: InvalidSpec(InvalidConsumer) when the Pod is gone, replaced, elsewhere, hostNetwork,
    terminating (new prepare), or does not reference the claim (directly, or through a template
    status or its extended-resource claim status, naming a claim this Pod controls); ContractViolation when the Node's UID is not the
    recorded one (``check_node_identity``); InvalidSpec(UnsupportedManagedClaimKind) for an
    extended-resource claim the Pod's status does not map (``check_claim_kind``); LifecycleBlocked for a terminating Pod on a retry;
    ``kube.errors`` classes for the Pod GET and a live Node read (Forbidden, timeout, ...).
    Source: docs/design.md#consumer, docs/design.md#pure-helpers.
    """
    try:
        pod = pods.get(plan.namespace, plan.pod_name)
    except kube_errors.NotFound as exc:
        raise _consumer_error(
            f"Pod {plan.namespace}/{plan.pod_name}, the reserved consumer of claim {plan.namespace}/"
            f"{plan.name}, does not exist (any more); nothing is prepared for a missing Pod"
        ) from exc
    view = views.decode_pod(pod)
    claim_meta = views.decode_meta(claim)
    check_pod(view, plan=plan, node_name=node.name, new_prepare=new_prepare)
    if node_uid is not None:
        check_node_identity(node, node_uid())
    check_claim_kind(claim_meta, view, plan)
    aliases = resolve_pod_claims(view)
    naming = [a for a in aliases if a.claim_name == plan.name]
    owned = [a for a in naming if not a.must_check_owner or is_for_pod(view, claim_meta)]
    if not owned:
        detail = (
            "the claim of that name is not controlled by this Pod (IsForPod failed)"
            if naming
            else "no pod.spec.resourceClaims entry nor status.extendedResourceClaimStatus resolves to it"
        )
        raise _consumer_error(
            f"Pod {plan.namespace}/{plan.pod_name} does not reference claim {plan.namespace}/{plan.name}: "
            f"{detail}; the reservation does not authorize this prepare"
        )
    return Consumer(
        pod=pod,
        view=view,
        namespace=view.meta.namespace,
        name=view.meta.name,
        uid=identities.PodUid(view.meta.uid),
        aliases=aliases,
        claim_aliases=tuple(sorted(a.alias for a in owned)),
    )


def sibling_claims(
    consumer: Consumer, *, this_claim: str, claims: seams.ClaimApi
) -> Sequence[tuple[str, Mapping[str, object]]]:
    """GET the Pod's other claims once each: ``(alias, claim JSON)`` for every alias of them.

    Claims are read by name once; a generated claim not controlled by the Pod is refused. The
    claim being prepared (``this_claim``) is skipped. Raises: InvalidSpec(InvalidConsumer) for a
    claim that is missing or not the Pod's; ``kube.errors`` classes for the GETs.
    """
    out: list[tuple[str, Mapping[str, object]]] = []
    fetched: dict[str, Mapping[str, object]] = {}
    for entry in consumer.aliases:
        if entry.claim_name == this_claim:
            continue
        if entry.claim_name not in fetched:
            try:
                fetched[entry.claim_name] = claims.get(consumer.namespace, entry.claim_name)
            except kube_errors.NotFound as exc:
                raise _consumer_error(
                    f"{consumer.ref} references claim {consumer.namespace}/{entry.claim_name} (as "
                    f"{entry.alias!r}), which does not exist; interface names need every claim of the Pod"
                ) from exc
        claim = fetched[entry.claim_name]
        if entry.must_check_owner and not is_for_pod(consumer.view, views.decode_meta(claim)):
            raise _consumer_error(
                f"{consumer.ref}: claim {consumer.namespace}/{entry.claim_name} (alias {entry.alias!r}) is not "
                "controlled by this Pod; it cannot be one of its generated claims"
            )
        out.append((entry.alias, claim))
    return out
