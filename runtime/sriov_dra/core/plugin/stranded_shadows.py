"""The shadows a lost node left, identified and checked from the API alone.

A dead node's checkpoint cannot be read, so node recovery (docs/operations.md) decides from each
shadow itself: the ``binding`` annotation must decode, name the lost node, and agree with the
object's name (the shadow name of its attachmentID), its ``pod-uid``/``claim-uid``/``node-uid``
labels, its frozen ``spec.config`` (``configSHA256``) and its Pod ownerReference when it still
has one (orphan propagation may have removed it, as during release, docs/design.md#release).
A shadow that fails any check is :class:`Unverified`: reported, never touched. Pure: no API calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sriov_dra.core import binding_annotation, identities
from sriov_dra_rules import errors, names


@dataclass(frozen=True)
class StrandedShadow:
    """One verified shadow of the lost node.

    Shapes: ``pod_name`` from the Pod ownerReference (``""`` when it was removed); ``config`` the
    frozen ``spec.config``; ``foreign_finalizers`` every finalizer that is not ours.
    """

    namespace: str
    name: str
    uid: str
    binding: binding_annotation.Binding
    pod_name: str
    config: str
    terminating: bool
    protected: bool
    foreign_finalizers: tuple[str, ...]

    @property
    def ref(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Unverified:
    """A NAD that looks like one of the lost node's shadows but fails a check (``why``)."""

    namespace: str
    name: str
    why: str


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _strings(value: object) -> dict[str, str]:
    return {str(k): v for k, v in _mapping(value).items() if isinstance(v, str)}


def _problems(
    meta: Mapping[str, object], labels: Mapping[str, str], binding: binding_annotation.Binding, config: object
) -> list[str]:
    """Every way the object disagrees with its own binding annotation."""
    found = []
    if meta.get("name") != identities.shadow_name(binding.attachment_id):
        found.append(f"the name is not the shadow name of attachmentID {binding.attachment_id}")
    for label, want in (
        (names.LABEL_POD_UID, binding.pod_uid),
        (names.LABEL_CLAIM_UID, binding.claim_uid),
        (names.LABEL_NODE_UID, binding.node_uid),
    ):
        if labels.get(label) != want:
            found.append(f"label {label} is {labels.get(label)!r}, the binding says {want!r}")
    if not isinstance(config, str):
        found.append("spec.config is missing")
    elif binding_annotation.config_sha256(config) != binding.config_sha256:
        found.append("sha256 of spec.config differs from the binding's configSHA256 (the config was edited)")
    for owner in (_mapping(o) for o in _list(meta.get("ownerReferences"))):
        if owner.get("kind") == "Pod" and owner.get("uid") != binding.pod_uid:
            found.append(
                f"its Pod ownerReference names UID {owner.get('uid')}, the binding {binding.pod_uid}"
            )
    return found


def _pod_name(meta: Mapping[str, object], pod_uid: str) -> str:
    for owner in (_mapping(o) for o in _list(meta.get("ownerReferences"))):
        if owner.get("kind") == "Pod" and owner.get("uid") == pod_uid and isinstance(owner.get("name"), str):
            return str(owner["name"])
    return ""


def find(
    nads: Iterable[Mapping[str, object]], node_name: str, node_uids: frozenset[str]
) -> tuple[list[StrandedShadow], list[Unverified]]:
    """The shadows among ``nads`` whose binding names ``node_name``, sorted by namespace and name.

    ``nads`` are NADs labelled ``managed-by`` (any node); one whose binding names another node is
    skipped. A NAD whose annotation does not decode counts as the lost node's (and Unverified)
    only when its ``node-uid`` label is one of ``node_uids``.
    """
    found: list[StrandedShadow] = []
    unverified: list[Unverified] = []
    for nad in nads:
        meta = _mapping(nad.get("metadata"))
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        labels, annotations = _strings(meta.get("labels")), _strings(meta.get("annotations"))
        if labels.get(names.LABEL_MANAGED_BY) != names.MANAGED_BY_VALUE:
            continue
        try:
            binding = binding_annotation.decode_binding(
                annotations.get(names.BINDING_ANNOTATION), owner=f"NAD {namespace}/{name}"
            )
        except errors.SriovDraError as exc:
            if labels.get(names.LABEL_NODE_UID) in node_uids:
                unverified.append(Unverified(namespace, name, f"binding unreadable: {exc}"))
            continue
        if binding.node_name != node_name:
            continue
        config = _mapping(nad.get("spec")).get("config")
        problems = _problems(meta, labels, binding, config)
        if problems:
            unverified.append(Unverified(namespace, name, "; ".join(problems)))
            continue
        finalizers = tuple(f for f in _list(meta.get("finalizers")) if isinstance(f, str))
        found.append(
            StrandedShadow(
                namespace=namespace,
                name=name,
                uid=str(meta.get("uid") or ""),
                binding=binding,
                pod_name=_pod_name(meta, binding.pod_uid),
                config=str(config),
                terminating=bool(meta.get("deletionTimestamp")),
                protected=names.FINALIZER_ATTACHMENT_PROTECTION in finalizers,
                foreign_finalizers=tuple(f for f in finalizers if f != names.FINALIZER_ATTACHMENT_PROTECTION),
            )
        )
    found.sort(key=lambda s: (s.namespace, s.name))
    unverified.sort(key=lambda u: (u.namespace, u.name))
    return found, unverified
