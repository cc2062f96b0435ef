"""The Pod side of selection merging: the snapshot read, the registry against the Pod UID, the update.

What :mod:`~sriov_dra.core.plugin.selections` reads from and hands back for one live Pod
(docs/design.md#selections, docs/design.md#ownership): :class:`PodSnapshot`, the managed-networks
registry decoded only when it records this Pod's UID (a copied registry is an
``OwnershipConflict``), the registry written back (removed when empty), and
:class:`SelectionUpdate` with the JSON Patch under UID and resourceVersion preconditions (empty
when nothing changes). Pure; decides nothing about which selections are ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sriov_dra.core import identities, registry
from sriov_dra.core.plugin import json_patch
from sriov_dra_rules import errors, names


@dataclass(frozen=True)
class PodSnapshot:
    """The parts of one live Pod that selection merging reads.

    ``annotations`` is ``None`` when the Pod has no ``metadata.annotations`` map at all (the patch
    then creates it). Build it from a plain Pod dict with :func:`pod_snapshot`.
    """

    namespace: str
    name: str
    uid: str
    resource_version: str
    annotations: Mapping[str, str] | None

    @property
    def ref(self) -> str:
        """``Pod ns/name`` for messages."""
        return f"Pod {self.namespace}/{self.name}"


def pod_snapshot(pod: Mapping[str, Any]) -> PodSnapshot:
    """Read a :class:`PodSnapshot` from a plain Pod object (the API's JSON as dicts).

    Raises: ContractViolation when namespace, name, uid or resourceVersion is missing or not a
    string, or when an annotation value is not a string.
    """
    meta = pod.get("metadata")
    if not isinstance(meta, Mapping):
        raise errors.ContractViolation("Pod object has no metadata; pass the object as read from the API")
    problems = [
        errors.FieldError(f"metadata.{key}", "must be a non-empty string")
        for key in ("namespace", "name", "uid", "resourceVersion")
        if not isinstance(meta.get(key), str) or not meta.get(key)
    ]
    annotations = meta.get("annotations")
    if annotations is not None and not (
        isinstance(annotations, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in annotations.items())
    ):
        problems.append(errors.FieldError("metadata.annotations", "must map strings to strings"))
    errors.raise_if_any(problems, "Pod object is malformed", cls=errors.ContractViolation)
    return PodSnapshot(
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta["uid"],
        resource_version=meta["resourceVersion"],
        annotations=dict(annotations) if annotations is not None else None,
    )


@dataclass(frozen=True)
class SelectionUpdate:
    """Result of a merge or removal.

    ``annotations`` is the complete intended annotation map (equal to the input when
    ``changed`` is false); ``networks`` and ``registry`` are the new values of the two keys
    (``None`` = key absent); ``patch`` is empty when nothing changes. ``added`` / ``removed`` name
    the managed selections (``ns/name@if``) written or dropped; ``kept`` lists edited entries of a
    released claim that were left in place because they are no longer exactly ours.
    """

    changed: bool
    annotations: Mapping[str, str]
    networks: str | None
    registry: str | None
    patch: tuple[json_patch.PatchOp, ...]
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    kept: tuple[errors.FieldError, ...] = ()


def decode_registry(pod: PodSnapshot, annotations: Mapping[str, str]) -> registry.Registry | None:
    """The Pod's managed-networks registry, ``None`` when the annotation is absent.

    Raises: ContractViolation for a malformed or unknown-version registry; Conflict
    (``OwnershipConflict``) when it records another Pod UID (annotations copied from another Pod).
    """
    text = annotations.get(names.MANAGED_NETWORKS_ANNOTATION)
    if text is None:
        return None
    decoded = registry.decode_registry(text, owner=pod.ref)
    if decoded.pod_uid != pod.uid:
        raise errors.Conflict(
            f"{pod.ref}: annotation {names.MANAGED_NETWORKS_ANNOTATION} records Pod UID {decoded.pod_uid} "
            f"but this Pod is {pod.uid}; the annotations were probably copied from another Pod. Remove "
            f"that annotation and the {names.SHADOW_NAME_PREFIX}* selections it lists, then retry",
            reason=errors.Reason.OWNERSHIP_CONFLICT,
        )
    return decoded


def set_registry(
    after: dict[str, str],
    pod: PodSnapshot,
    current: registry.Registry | None,
    entries: tuple[registry.RegistryEntry, ...],
    changed: bool,
) -> None:
    """Write ``entries`` as the registry into ``after`` when ``changed``; no entries removes the key.

    The registry keeps the Pod UID it recorded (or takes this Pod's when there was none).
    """
    if not changed:
        return
    if not entries:
        after.pop(names.MANAGED_NETWORKS_ANNOTATION, None)
        return
    pod_uid = current.pod_uid if current else identities.PodUid(pod.uid)
    after[names.MANAGED_NETWORKS_ANNOTATION] = registry.encode_registry(
        registry.Registry(pod_uid=pod_uid, entries=entries)
    )


def unchanged(pod: PodSnapshot) -> SelectionUpdate:
    """The update that changes nothing: the Pod's own strings, an empty patch."""
    ann = dict(pod.annotations or {})
    return SelectionUpdate(
        changed=False,
        annotations=ann,
        networks=ann.get(names.NETWORKS_ANNOTATION),
        registry=ann.get(names.MANAGED_NETWORKS_ANNOTATION),
        patch=(),
    )


def update(
    pod: PodSnapshot,
    after: dict[str, str],
    *,
    added: tuple[str, ...] = (),
    removed: tuple[str, ...] = (),
    kept: tuple[errors.FieldError, ...] = (),
) -> SelectionUpdate:
    """The update from the Pod's annotations to ``after``, its patch under UID/resourceVersion."""
    patch = json_patch.annotations_patch(
        uid=pod.uid, resource_version=pod.resource_version, before=pod.annotations, after=after
    )
    return SelectionUpdate(
        changed=bool(patch),
        annotations=after,
        networks=after.get(names.NETWORKS_ANNOTATION),
        registry=after.get(names.MANAGED_NETWORKS_ANNOTATION),
        patch=tuple(patch),
        added=added,
        removed=removed,
        kept=kept,
    )
