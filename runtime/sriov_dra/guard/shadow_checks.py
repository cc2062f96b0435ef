"""Pre-ADD checks of one selected shadow NAD against the live Pod, pure.

Given the live Pod, one live NAD and its registry entry (if any), :func:`check_shadow` decides
whether the NAD is a managed shadow and whether Multus may run it (docs/design.md#guard-checks),
each broken rule with its own reason, all reported. A NAD without the binding annotation that the
registry does not record is an ordinary NAD and is not checked. ADD only: DEL never reads a
shadow. Never edits what it reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sriov_dra.core import (
    binding_annotation,
    identities,
    registry,
    render,
    template_findings,
    template_layout,
)
from sriov_dra.guard import decisions
from sriov_dra_rules import errors, names, strict_json

Reason = decisions.Reason
Violation = decisions.Violation


@dataclass(frozen=True)
class PodView:
    """The parts of the live Pod the guard decides on.

    ``static`` is true for a static Pod (annotation ``kubernetes.io/config.source`` other than
    ``api``), whose mirror-Pod UID differs from the runtime's, as Multus handles it.
    """

    namespace: str
    name: str
    uid: str
    node_name: str | None
    annotations: Mapping[str, str]
    static: bool = False

    @property
    def ref(self) -> str:
        """``Pod ns/name`` for messages."""
        return f"Pod {self.namespace}/{self.name}"


@dataclass(frozen=True)
class ExpectedInterface:
    """An interface the Pod must have after Multus ADD: one per selection it read live.

    Shapes: ``ifname`` the interface in the Pod's netns (the selection's ``interface``, or the
    ``net<N>`` Multus derives); ``network`` ``<ns>/<NAD name>`` as in network-status;
    ``pci_address`` the bound VF's BDF for a managed shadow, ``None`` for an ordinary NAD (no
    device to compare); ``claim_uid`` the ResourceClaim the managed shadow binds (its binding's
    ``claimUID``, logged so one filter on a claim UID follows it from the plugin into the guard),
    ``None`` for an ordinary NAD.
    """

    ifname: str
    network: str
    pci_address: str | None = None
    claim_uid: str | None = None

    def describe(self) -> str:
        """``eth1 (NAD ns/net-a)`` or ``dra0 (NAD ns/dra-sriov-..., VF 0000:03:00.1)`` for messages."""
        vf = f", VF {self.pci_address}" if self.pci_address else ""
        return f"{self.ifname} (NAD {self.network}{vf})"


@dataclass(frozen=True)
class ShadowVerdict:
    """Outcome for one selected NAD: ``managed`` false means an ordinary NAD (no checks apply)."""

    managed: bool
    violations: tuple[Violation, ...] = ()
    expected: ExpectedInterface | None = None


def _meta(nad: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = nad.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def check_shadow(
    nad: Mapping[str, Any], *, pod: PodView, entry: registry.RegistryEntry | None
) -> ShadowVerdict:
    """Check one selected NAD; every broken rule is reported, in this order.

    1. the ``binding`` annotation decodes with a known version (``UnsupportedBindingVersion``,
       ``InvalidBinding``; a NAD the registry records must carry it; the NAD name is the shadow
       name of its attachmentID);
    2. same Pod UID, node name and namespace as the live Pod;
    3. an ownerReference to that Pod (UID), the protection finalizer, no ``deletionTimestamp``;
    4. no ``k8s.v1.cni.cncf.io/resourceName`` key (even empty: its presence makes Multus look
       devices up);
    5. a valid inline sriov config (``core.render``'s rules) whose sriov entry's ``deviceID`` is
       the binding's PCI address (sriov-network-device-plugin #258), and ``configSHA256`` over
       the exact ``spec.config`` bytes;
    6. the registry entry's shadow UID, attachmentID, claim, interface and hash.

    Shapes: ``nad`` the live NAD JSON; ``entry`` the registry entry naming it, or ``None``.
    Source: docs/design.md#ownership, docs/design.md#guard-checks; multus-cni #1362,
    multus-dynamic-networks-controller #45.
    """
    meta = _meta(nad)
    ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    ref = f"NAD {ns}/{name}"
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), Mapping) else {}
    assert isinstance(annotations, Mapping)
    if names.BINDING_ANNOTATION not in annotations:
        if entry is None:
            return ShadowVerdict(managed=False)
        return ShadowVerdict(
            managed=True,
            violations=(
                Violation(
                    Reason.INVALID_BINDING,
                    f"{ref} is recorded in {pod.ref}'s {names.MANAGED_NETWORKS_ANNOTATION} but has no "
                    f"{names.BINDING_ANNOTATION} annotation; it is not the shadow the driver created",
                ),
            ),
        )
    try:
        binding = binding_annotation.decode_binding(annotations[names.BINDING_ANNOTATION], owner=ref)
    except errors.ContractViolation as exc:
        reason = (
            Reason.UNSUPPORTED_BINDING_VERSION
            if exc.reason is errors.Reason.UNSUPPORTED_VERSION
            else Reason.INVALID_BINDING
        )
        return ShadowVerdict(managed=True, violations=(Violation(reason, str(exc)),))

    found: list[Violation] = []
    if name != identities.shadow_name(binding.attachment_id):
        found.append(
            Violation(
                Reason.INVALID_BINDING,
                f"{ref}: the name is not the shadow name {identities.shadow_name(binding.attachment_id)!r} "
                f"of the binding's attachmentID {binding.attachment_id}; the object was copied or renamed",
            )
        )
    found += _identity_violations(ref, meta, binding, pod)
    found += _config_violations(ref, nad, binding, annotations)
    if entry is not None:
        found += _registry_violations(ref, meta, binding, entry)
    expected = ExpectedInterface(
        ifname=binding.interface,
        network=f"{ns}/{name}",
        pci_address=binding.pci_address,
        claim_uid=str(binding.claim_uid),
    )
    return ShadowVerdict(managed=True, violations=tuple(found), expected=expected)


def _identity_violations(
    ref: str, meta: Mapping[str, Any], binding: binding_annotation.Binding, pod: PodView
) -> list[Violation]:
    found: list[Violation] = []
    if binding.pod_uid != pod.uid:
        found.append(
            Violation(
                Reason.BINDING_POD_UID_MISMATCH,
                f"{ref} is bound to Pod UID {binding.pod_uid}, but {pod.ref} has UID {pod.uid}; a shadow "
                "serves only the Pod it was created for (a recreated Pod gets new shadows)",
            )
        )
    if binding.node_name != pod.node_name:
        found.append(
            Violation(
                Reason.BINDING_NODE_MISMATCH,
                f"{ref} is bound to node {binding.node_name!r}, but {pod.ref} runs on {pod.node_name!r}",
            )
        )
    if meta.get("namespace") != pod.namespace:
        found.append(
            Violation(
                Reason.SHADOW_NAMESPACE_MISMATCH,
                f"{ref} is not in {pod.ref}'s namespace {pod.namespace!r}; a shadow lives in its Pod's namespace",
            )
        )
    owners = meta.get("ownerReferences") if isinstance(meta.get("ownerReferences"), list) else []
    assert isinstance(owners, list)
    if not any(
        isinstance(o, Mapping)
        and o.get("kind") == "Pod"
        and o.get("apiVersion") == "v1"
        and o.get("uid") == pod.uid
        for o in owners
    ):
        pods = [
            f"{o.get('name')}/{o.get('uid')}"
            for o in owners
            if isinstance(o, Mapping) and o.get("kind") == "Pod"
        ]
        found.append(
            Violation(
                Reason.MISSING_POD_OWNER_REFERENCE,
                f"{ref} has no ownerReference to {pod.ref} (UID {pod.uid})"
                + (f"; it names Pod(s) {pods}" if pods else "")
                + "; the driver creates every shadow with that reference",
            )
        )
    finalizers = meta.get("finalizers") if isinstance(meta.get("finalizers"), list) else []
    assert isinstance(finalizers, list)
    if names.FINALIZER_ATTACHMENT_PROTECTION not in finalizers:
        found.append(
            Violation(
                Reason.MISSING_PROTECTION_FINALIZER,
                f"{ref} lacks the finalizer {names.FINALIZER_ATTACHMENT_PROTECTION}; a healthy shadow always "
                "carries it, so this object was altered or is being released",
            )
        )
    if meta.get("deletionTimestamp") is not None:
        found.append(
            Violation(
                Reason.SHADOW_TERMINATING,
                f"{ref} is being deleted (deletionTimestamp {meta.get('deletionTimestamp')}); a terminating "
                "shadow cannot serve a new attachment: wait for the claim's release, then retry",
            )
        )
    return found


def _config_violations(
    ref: str, nad: Mapping[str, Any], binding: binding_annotation.Binding, annotations: Mapping[str, Any]
) -> list[Violation]:
    found: list[Violation] = []
    if names.RESOURCE_NAME_ANNOTATION in annotations:
        found.append(
            Violation(
                Reason.RESOURCE_NAME_ANNOTATION_PRESENT,
                f"{ref} has the annotation key {names.RESOURCE_NAME_ANNOTATION} "
                f"(value {annotations[names.RESOURCE_NAME_ANNOTATION]!r}); even empty it makes Multus look up "
                "devices; a shadow never has it",
            )
        )
    spec = nad.get("spec")
    config = spec.get("config") if isinstance(spec, Mapping) else None
    if not isinstance(config, str) or not config.strip():
        found.append(
            Violation(
                Reason.INVALID_SHADOW_CONFIG,
                f"{ref} has no inline spec.config; a shadow always carries its frozen CNI config",
            )
        )
        return found
    entry_path, device_id = _sriov_device_id(config)
    invalid = _render_problems(nad, binding.pci_address, entry_path)
    if invalid:
        found.append(
            Violation(
                Reason.INVALID_SHADOW_CONFIG,
                f"{ref}: spec.config is not a valid single sriov configuration: {'; '.join(invalid)}",
            )
        )
    if device_id != binding.pci_address:
        problem = "has no deviceID" if not device_id else f"has deviceID {device_id!r}"
        found.append(
            Violation(
                Reason.DEVICE_ID_MISMATCH,
                f"{ref}: the sriov plugin {problem}, but the binding's VF is {binding.pci_address}",
            )
        )
    digest = binding_annotation.config_sha256(config)
    if digest != binding.config_sha256:
        found.append(
            Violation(
                Reason.CONFIG_HASH_MISMATCH,
                f"{ref}: sha256 of spec.config is {digest}, but the binding records {binding.config_sha256}; "
                "the frozen config was edited (formatting edits included)",
            )
        )
    return found


def _render_problems(nad: Mapping[str, Any], pci_address: str, entry_path: str | None) -> list[str]:
    """Why the renderer refuses ``nad``'s config for ``pci_address``, or ``[]``.

    Findings on the sriov entry's own ``deviceID``/``pciBusID`` (at ``entry_path``) are left out:
    they are :data:`Reason.DEVICE_ID_MISMATCH`'s.
    """
    skip = (f"{entry_path}.deviceID", f"{entry_path}.pciBusID") if entry_path else ()
    try:
        render.render_shadow_config(nad, pci_address)
    except errors.InvalidSpec as exc:
        if not exc.errors:
            return [str(exc)]
        return [str(e) for e in exc.errors if e.path not in skip]
    return []


def _sriov_device_id(config: str) -> tuple[str | None, str | None]:
    """``(path, deviceID)`` of the config's sriov entry (the root or ``plugins[0]``).

    Shapes: path ``spec.config`` or ``spec.config.plugins[0]`` (``None`` when there is no such
    entry); deviceID ``None`` when absent or empty.
    """
    try:
        doc = strict_json.decode(config, path=template_findings.CONFIG_PATH)
    except errors.InvalidSpec:
        return None, None
    if not isinstance(doc, dict):
        return None, None
    entry: object = doc
    path = template_findings.CONFIG_PATH
    plugins = doc.get("plugins")
    if "type" not in doc and isinstance(plugins, list) and plugins:
        entry, path = plugins[0], f"{template_findings.CONFIG_PATH}.plugins[0]"
    if not isinstance(entry, dict) or entry.get("type") != template_layout.SRIOV_PLUGIN_TYPE:
        return None, None
    value = entry.get("deviceID")
    return path, value if isinstance(value, str) and value else None


def _registry_violations(
    ref: str, meta: Mapping[str, Any], binding: binding_annotation.Binding, entry: registry.RegistryEntry
) -> list[Violation]:
    pairs = (
        ("uid", meta.get("uid"), entry.uid),
        ("attachmentID", binding.attachment_id, entry.attachment_id),
        ("claimUID", binding.claim_uid, entry.claim_uid),
        ("interface", binding.interface, entry.interface),
        ("configSHA256", binding.config_sha256, entry.config_sha256),
    )
    differs = [f"{key} {have!r} (registry: {want!r})" for key, have, want in pairs if have != want]
    if not differs:
        return []
    return [
        Violation(
            Reason.REGISTRY_SHADOW_MISMATCH,
            f"{ref} does not match the Pod's registry entry: {', '.join(differs)}; the shadow was replaced "
            "or the registry edited",
        )
    ]
