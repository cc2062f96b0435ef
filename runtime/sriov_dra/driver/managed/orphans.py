"""Shadows of this node, correlated with the checkpoint: Active, Deleting, ReleaseComplete, Orphaned.

The orphan scan (docs/design.md#orphans) and the classification ``sriov-dra orphans`` prints. One
all-namespace LIST narrowed by the ``managed-by`` and ``node-uid`` labels finds the candidates
(labels only narrow: another node UID is ignored); each is matched to a checkpoint binding by its
full identity. A protected object without a matching record is *reported* Orphaned, never
finalized (that needs inspection or fencing); other controllers' finalizers are reported apart.
Never writes to the API or treats a label match as ownership.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from sriov_dra.core import binding_annotation, identities
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import seams
from sriov_dra.kube import views
from sriov_dra_rules import errors, names


class Status(enum.StrEnum):
    """Classification of one shadow."""

    ACTIVE = "Active"
    DELETING = "Deleting"
    RELEASE_COMPLETE = "ReleaseComplete"
    ORPHANED = "Orphaned"


@dataclass(frozen=True)
class ShadowReport:
    """One managed shadow of this node and what the checkpoint says about it.

    Shapes: ``claim_uid``/``pod_uid``/``attachment_id`` from the binding annotation (``""`` when
    it is unreadable); ``why`` explains an Orphaned status; ``foreign_finalizers`` lists every
    finalizer that is not ours; ``terminating`` is true when deletion has started.
    """

    namespace: str
    name: str
    uid: str
    status: Status
    claim_uid: str
    pod_uid: str
    attachment_id: str
    protected: bool
    terminating: bool
    foreign_finalizers: tuple[str, ...]
    why: str = ""


def label_selector(node_uid: str) -> str:
    """``managed-by=<plugin>,node-uid=<uid>``: the orphan LIST's selector."""
    return f"{names.LABEL_MANAGED_BY}={names.MANAGED_BY_VALUE},{names.LABEL_NODE_UID}={node_uid}"


def classify(
    nad: Mapping[str, object], records: Mapping[identities.ClaimUid, model.ClaimRecord], node_uid: str
) -> ShadowReport | None:
    """Classify one listed NAD; ``None`` when it is not a shadow of ``node_uid`` (ignored).

    ``records`` is the checkpoint by claim UID.
    """
    meta = views.decode_meta(nad)
    if (
        meta.labels.get(names.LABEL_NODE_UID) != node_uid
        or meta.labels.get(names.LABEL_MANAGED_BY) != names.MANAGED_BY_VALUE
    ):
        return None
    finalizers = meta.finalizers
    namespace, name, uid = meta.namespace, meta.name, meta.uid
    base = ShadowReport(
        namespace=namespace,
        name=name,
        uid=uid,
        status=Status.ORPHANED,
        claim_uid="",
        pod_uid="",
        attachment_id="",
        protected=names.FINALIZER_ATTACHMENT_PROTECTION in finalizers,
        terminating=meta.deleting,
        foreign_finalizers=tuple(f for f in finalizers if f != names.FINALIZER_ATTACHMENT_PROTECTION),
    )
    try:
        binding = binding_annotation.decode_binding(
            meta.annotations.get(names.BINDING_ANNOTATION), owner=f"NAD {namespace}/{name}"
        )
    except errors.SriovDraError as exc:
        return replace(base, why=f"binding unreadable: {exc}")
    if binding.node_uid != node_uid:
        return None
    found = replace(
        base, claim_uid=binding.claim_uid, pod_uid=binding.pod_uid, attachment_id=binding.attachment_id
    )
    record = records.get(binding.claim_uid)
    if record is None:
        return replace(found, why="no checkpoint record for its claim UID")
    if record.pod_uid != binding.pod_uid:
        return replace(found, why=f"the claim is recorded for Pod {record.pod_uid}")
    match = next((b for b in record.managed_bindings() if b.attachment_id == binding.attachment_id), None)
    if match is None or match.shadow_name != name or match.shadow_namespace != namespace:
        return replace(found, why="the record has no binding with this identity")
    if match.shadow_uid and match.shadow_uid != uid:
        return replace(found, why=f"the record names shadow UID {match.shadow_uid}")
    status = {
        model.Phase.PENDING: Status.ACTIVE,
        model.Phase.READY: Status.ACTIVE,
        model.Phase.DELETING: Status.DELETING,
        model.Phase.RELEASE_COMPLETE: Status.RELEASE_COMPLETE,
    }[match.phase]
    return replace(found, status=status)


def correlate(
    nads: Iterable[Mapping[str, object]],
    records: Mapping[identities.ClaimUid, model.ClaimRecord],
    node_uid: str,
) -> list[ShadowReport]:
    """Classify every listed NAD of ``node_uid``; sorted by namespace and name."""
    found = [r for r in (classify(n, records, node_uid) for n in nads) if r is not None]
    return sorted(found, key=lambda r: (r.namespace, r.name))


def scan(*, nads: seams.NadApi, store: seams.Store, node: seams.NodeIdentity) -> list[ShadowReport]:
    """One labelled LIST across all namespaces, correlated with the current checkpoint.

    Raises: ``kube.errors`` classes (Forbidden without a cluster-wide list grant).
    """
    listed = nads.list_all(label_selector=label_selector(node.uid))
    return correlate(listed, store.all_claims(), node.uid)
