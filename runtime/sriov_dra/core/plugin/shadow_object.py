"""The shadow NetworkAttachmentDefinition object: build it fresh, and verify a live one against it.

A shadow is the Pod-local NAD carrying one allocated VF's frozen CNI config
(docs/design.md#identity, docs/design.md#ownership). :func:`build_shadow_nad` builds it from
scratch with only metadata this project owns; nothing is copied from the source NAD, so its
labels, annotations (notably ``k8s.v1.cni.cncf.io/resourceName``, whose mere presence makes
Multus look up devices), finalizers and owners cannot leak. :func:`verify_shadow_matches` decides
whether a live object under the deterministic name is exactly that shadow. No API calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sriov_dra.core import binding_annotation, identities, render
from sriov_dra_rules import errors, names, strict_json

NAD_API_VERSION: Final = "k8s.cni.cncf.io/v1"
NAD_KIND: Final = "NetworkAttachmentDefinition"
POD_API_VERSION: Final = "v1"
POD_KIND: Final = "Pod"


def build_shadow_nad(
    *,
    identity: identities.BindingIdentity,
    binding: binding_annotation.Binding,
    rendered: render.RenderedConfig,
    pod_namespace: str,
    pod_name: str,
) -> dict[str, object]:
    """Return the complete shadow NAD for the create call, built from scratch.

    Shapes: ``metadata.name`` is ``dra-sriov-<32 hex of attachmentID>``; ``metadata.namespace``
    the Pod's; labels ``managed-by``/``pod-uid``/``claim-uid``/``node-uid`` under the driver
    domain; one annotation (the binding, compact JSON version 1); one ownerReference
    ``{apiVersion: v1, kind: Pod, name, uid, blockOwnerDeletion: false}`` without ``controller``;
    one finalizer ``.../attachment-protection``; ``spec.config`` the rendered text. Every call
    returns new objects the caller may modify.
    Raises: errors.ContractViolation when ``identity``, ``binding`` and ``rendered`` disagree
    (attachmentID, UIDs, PCI address, config hash) or the Pod name/namespace is malformed,
    listing every mismatch; errors.ContractViolation from ``binding_annotation.encode_binding`` for an
    invalid binding.
    Source: docs/design.md#identity, docs/design.md#ownership, docs/design.md#render.
    """
    problems = _consistency_problems(identity, binding, rendered, pod_namespace, pod_name)
    errors.raise_if_any(
        problems,
        f"refusing to build shadow for pod {pod_namespace}/{pod_name}: its inputs disagree",
        cls=errors.ContractViolation,
    )
    return {
        "apiVersion": NAD_API_VERSION,
        "kind": NAD_KIND,
        "metadata": {
            "name": identities.shadow_name(binding.attachment_id),
            "namespace": pod_namespace,
            "labels": {
                names.LABEL_MANAGED_BY: names.MANAGED_BY_VALUE,
                names.LABEL_POD_UID: binding.pod_uid,
                names.LABEL_CLAIM_UID: binding.claim_uid,
                names.LABEL_NODE_UID: binding.node_uid,
            },
            "annotations": {names.BINDING_ANNOTATION: binding_annotation.encode_binding(binding)},
            "ownerReferences": [_pod_owner_reference(pod_name, binding.pod_uid)],
            "finalizers": [names.FINALIZER_ATTACHMENT_PROTECTION],
        },
        "spec": {"config": rendered.config_text},
    }


def verify_shadow_matches(
    live_nad: Mapping[str, object], expected: Mapping[str, object], *, releasing: bool = False
) -> list[errors.FieldError]:
    """Compare a live NAD with the shadow :func:`build_shadow_nad` returned; list every difference.

    Checked exactly: name and namespace; each owned label value; the binding annotation string;
    absence of the ``resourceName`` annotation key; the ownerReferences list (exactly the one Pod
    reference); the protection finalizer; no ``deletionTimestamp``; ``spec.config`` byte for
    byte; ``apiVersion``/``kind`` when the live object carries them. Labels, annotations and
    finalizers owned by others are allowed. ``uid``, ``resourceVersion`` and other server-set
    fields are not compared. With ``releasing`` (docs/design.md#release), an absent ownerReference
    list, an absent finalizer and a ``deletionTimestamp`` are accepted, but a present owner
    reference must still be exactly the Pod reference.
    Shapes: an empty list means the live object is this shadow; each FieldError path is a field
    of the live object such as ``metadata.labels["sriovnetwork.k8snetworkplumbingwg.io/pod-uid"]``.
    Used when a create's response was lost and the name is found taken (docs/design.md#prepare)
    and before release adopts a shadow (docs/design.md#release). It reports every difference and
    never suggests editing the object.
    """
    found: list[errors.FieldError] = []
    live_meta = _mapping(live_nad.get("metadata"))
    want_meta = _mapping(expected.get("metadata"))

    for key in ("apiVersion", "kind"):
        if key in live_nad and live_nad.get(key) != expected.get(key):
            found.append(_differs(key, live_nad.get(key), expected.get(key)))
    for key in ("name", "namespace"):
        if live_meta.get(key) != want_meta.get(key):
            found.append(_differs(f"metadata.{key}", live_meta.get(key), want_meta.get(key)))

    live_labels, want_labels = _mapping(live_meta.get("labels")), _mapping(want_meta.get("labels"))
    for key, value in want_labels.items():
        if live_labels.get(key) != value:
            found.append(_differs(strict_json.key_path("metadata.labels", key), live_labels.get(key), value))

    live_notes, want_notes = _mapping(live_meta.get("annotations")), _mapping(want_meta.get("annotations"))
    for key, value in want_notes.items():
        if live_notes.get(key) != value:
            found.append(
                _differs(strict_json.key_path("metadata.annotations", key), live_notes.get(key), value)
            )
    if names.RESOURCE_NAME_ANNOTATION in live_notes:
        found.append(
            errors.FieldError(
                strict_json.key_path("metadata.annotations", names.RESOURCE_NAME_ANNOTATION),
                "is present on a shadow (even empty, it makes Multus look up devices); the object "
                "was altered: leave it untouched and report it",
            )
        )

    found.extend(_owner_problems(live_meta, want_meta, releasing=releasing))
    live_finalizers = live_meta.get("finalizers") or []
    if not releasing and (
        not isinstance(live_finalizers, list) or names.FINALIZER_ATTACHMENT_PROTECTION not in live_finalizers
    ):
        found.append(
            errors.FieldError(
                "metadata.finalizers",
                f"lacks {names.FINALIZER_ATTACHMENT_PROTECTION}; a shadow is created with it, so this "
                "object is not the one this driver created",
            )
        )
    if not releasing and live_meta.get("deletionTimestamp") is not None:
        found.append(
            errors.FieldError(
                "metadata.deletionTimestamp",
                f"is set ({live_meta.get('deletionTimestamp')}); the shadow is terminating and cannot "
                "serve a new attachment: wait for its release to complete, then retry",
            )
        )

    live_config = _mapping(live_nad.get("spec")).get("config")
    want_config = _mapping(expected.get("spec")).get("config")
    if live_config != want_config:
        live_hash = (
            binding_annotation.config_sha256(live_config) if isinstance(live_config, str) else "not a string"
        )
        want_hash = (
            binding_annotation.config_sha256(want_config) if isinstance(want_config, str) else "not a string"
        )
        found.append(
            errors.FieldError(
                "spec.config",
                f"differs from the frozen rendered config (sha256 {live_hash}, expected {want_hash}); "
                "formatting edits of a shadow are not supported",
            )
        )
    return found


def _pod_owner_reference(pod_name: str, pod_uid: str) -> dict[str, object]:
    return {
        "apiVersion": POD_API_VERSION,
        "kind": POD_KIND,
        "name": pod_name,
        "uid": pod_uid,
        "blockOwnerDeletion": False,
    }


def _consistency_problems(
    identity: identities.BindingIdentity,
    binding: binding_annotation.Binding,
    rendered: render.RenderedConfig,
    pod_namespace: str,
    pod_name: str,
) -> list[errors.FieldError]:
    problems: list[errors.FieldError] = []
    pairs = (
        ("binding.attachmentID", binding.attachment_id, identities.attachment_id(identity)),
        ("binding.podUID", binding.pod_uid, identity.pod_uid),
        ("binding.claimUID", binding.claim_uid, identity.claim_uid),
        ("binding.nodeUID", binding.node_uid, identity.node_uid),
        ("binding.pciAddress", binding.pci_address, rendered.pci_address),
        ("binding.configSHA256", binding.config_sha256, rendered.config_sha256),
    )
    for path, have, want in pairs:
        if have != want:
            problems.append(errors.FieldError(path, f"is {have!r} but must be {want!r}"))
    for path, problem in (
        ("pod.namespace", names.dns1123_label_problem(pod_namespace)),
        ("pod.name", names.dns1123_subdomain_problem(pod_name)),
    ):
        if problem is not None:
            problems.append(errors.FieldError(path, problem))
    return problems


def _owner_problems(
    live_meta: Mapping[str, object], want_meta: Mapping[str, object], *, releasing: bool
) -> list[errors.FieldError]:
    live_owners = live_meta.get("ownerReferences") or []
    want_owners = want_meta.get("ownerReferences") or []
    if releasing and live_owners == []:
        return []  # orphan deletion propagation may legitimately remove it (docs/design.md#release)
    if not isinstance(live_owners, list) or not isinstance(want_owners, list) or len(live_owners) != 1:
        return [
            errors.FieldError(
                "metadata.ownerReferences",
                f"is {_show(live_owners)}; a shadow has exactly one ownerReference, to its Pod "
                f"{_show(want_owners)}",
            )
        ]
    live_ref, want_ref = _mapping(live_owners[0]), _mapping(want_owners[0] if want_owners else None)
    found = []
    for key in ("apiVersion", "kind", "name", "uid", "blockOwnerDeletion"):
        if live_ref.get(key) != want_ref.get(key):
            found.append(_differs(f"metadata.ownerReferences[0].{key}", live_ref.get(key), want_ref.get(key)))
    if live_ref.get("controller") not in (None, False):
        found.append(
            errors.FieldError(
                "metadata.ownerReferences[0].controller",
                f"is {_show(live_ref.get('controller'))}; a shadow's Pod reference is not a controller reference",
            )
        )
    return found


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _show(value: object) -> str:
    try:
        text = strict_json.encode(value)  # type: ignore[arg-type]
    except TypeError:
        text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _differs(path: str, live: object, want: object) -> errors.FieldError:
    return errors.FieldError(
        path,
        f"is {_show(live)} but this driver would have written {_show(want)}; the object was not "
        "created by this binding or was altered: leave it untouched and report it",
    )
