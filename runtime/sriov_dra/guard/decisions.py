"""The guard's decisions: one bounded reason per outcome, and the typed rejection that carries it.

Every ADD ends with exactly one :class:`Reason`: the decision metric's ``reason`` label, the
request log line's ``reason`` and the start of the CNI error's ``details``, so an admin goes from a
failed sandbox event to the metric and back. Each pre-ADD rule (docs/design.md#guard-checks) has
its own reason; the CNI error ``code`` says whether the kubelet's retry can help
(:data:`CODE_BY_KIND`). Names only: decides nothing, no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from sriov_dra.guard import shim


class Kind(enum.StrEnum):
    """What kind of ending a reason is."""

    PASSED = "passed"
    """Multus ran and, for managed Pods, every managed interface was verified."""
    REJECTED = "rejected"
    """A pre-ADD rule failed; no delegate ran."""
    FAILED = "failed"
    """An API read, Multus or the post-ADD verification failed."""


class Reason(enum.StrEnum):
    """Bounded reason names (metric label values; persisted in logs and CNI error details)."""

    # Passed.
    PASSED_UNMANAGED = "PassedUnmanaged"
    PASSED_VERIFIED = "PassedVerified"
    PASSED_THROUGH = "PassedThrough"
    # Request and Pod (docs/design.md#guard).
    INVALID_CNI_REQUEST = "InvalidCniRequest"
    POD_NOT_FOUND = "PodNotFound"
    POD_UID_MISMATCH = "PodUidMismatch"
    POD_NODE_MISMATCH = "PodNodeMismatch"
    INVALID_NETWORKS_ANNOTATION = "InvalidNetworksAnnotation"
    INVALID_REGISTRY = "InvalidRegistry"
    UNSUPPORTED_REGISTRY_VERSION = "UnsupportedRegistryVersion"
    REGISTRY_POD_UID_MISMATCH = "RegistryPodUidMismatch"
    # Each selected managed shadow (docs/design.md#guard-checks).
    SHADOW_NOT_FOUND = "ShadowNotFound"
    UNSUPPORTED_BINDING_VERSION = "UnsupportedBindingVersion"
    INVALID_BINDING = "InvalidBinding"
    BINDING_POD_UID_MISMATCH = "BindingPodUidMismatch"
    BINDING_NODE_MISMATCH = "BindingNodeMismatch"
    SHADOW_NAMESPACE_MISMATCH = "ShadowNamespaceMismatch"
    MISSING_POD_OWNER_REFERENCE = "MissingPodOwnerReference"
    MISSING_PROTECTION_FINALIZER = "MissingProtectionFinalizer"
    SHADOW_TERMINATING = "ShadowTerminating"
    RESOURCE_NAME_ANNOTATION_PRESENT = "ResourceNameAnnotationPresent"
    INVALID_SHADOW_CONFIG = "InvalidShadowConfig"
    DEVICE_ID_MISMATCH = "DeviceIdMismatch"
    CONFIG_HASH_MISMATCH = "ConfigHashMismatch"
    # Registry against selections (docs/design.md#selections, docs/design.md#guard-checks).
    REGISTRY_ENTRY_NOT_SELECTED = "RegistryEntryNotSelected"
    DUPLICATE_MANAGED_SELECTION = "DuplicateManagedSelection"
    REGISTRY_SHADOW_MISMATCH = "RegistryShadowMismatch"
    MANAGED_SELECTION_OVERRIDE = "ManagedSelectionOverride"
    DUPLICATE_INTERFACE_NAME = "DuplicateInterfaceName"
    # Failures.
    API_FORBIDDEN = "ApiForbidden"
    API_READ_FAILED = "ApiReadFailed"
    MULTUS_FAILED = "MultusFailed"
    MULTUS_UNAVAILABLE = "MultusUnavailable"
    INTERFACES_MISSING = "InterfacesMissing"
    INTERFACE_DEVICE_MISMATCH = "InterfaceDeviceMismatch"
    NETWORK_STATUS_MISSING = "NetworkStatusMissing"
    OVERLOADED = "Overloaded"
    INTERNAL_ERROR = "InternalError"


_PASSED: Final = frozenset({Reason.PASSED_UNMANAGED, Reason.PASSED_VERIFIED, Reason.PASSED_THROUGH})
_FAILED: Final = frozenset(
    {
        Reason.API_READ_FAILED,
        Reason.MULTUS_FAILED,
        Reason.MULTUS_UNAVAILABLE,
        Reason.INTERFACES_MISSING,
        Reason.INTERFACE_DEVICE_MISMATCH,
        Reason.NETWORK_STATUS_MISSING,
        Reason.OVERLOADED,
        Reason.INTERNAL_ERROR,
    }
)
_VERIFICATION: Final = frozenset(
    {Reason.INTERFACES_MISSING, Reason.INTERFACE_DEVICE_MISMATCH, Reason.NETWORK_STATUS_MISSING}
)
_RETRYABLE: Final = frozenset(
    {Reason.API_READ_FAILED, Reason.MULTUS_UNAVAILABLE, Reason.OVERLOADED, Reason.INTERNAL_ERROR}
)


def kind(reason: Reason) -> Kind:
    """Return whether ``reason`` ends an ADD as passed, rejected or failed."""
    if reason in _PASSED:
        return Kind.PASSED
    if reason in _FAILED:
        return Kind.FAILED
    return Kind.REJECTED


def cni_code(reason: Reason) -> int:
    """CNI error code for ``reason``: 11 (try again) when a retry alone can help, 101 for a failed
    post-ADD verification, 100 for a rejection that needs a fix first."""
    if reason in _RETRYABLE:
        return shim.CniErrorCode.TRY_AGAIN
    if reason in _VERIFICATION:
        return shim.CniErrorCode.VERIFICATION_FAILED
    return shim.CniErrorCode.REJECTED


@dataclass(frozen=True)
class Violation:
    """One broken rule: its reason and an actionable message naming the object and field."""

    reason: Reason
    message: str


class Rejected(Exception):
    """The ADD must not proceed (or must fail); carries every violation found, first one decides.

    Shapes: ``violations`` is non-empty; ``reason`` is ``violations[0].reason``.
    """

    def __init__(self, violations: Sequence[Violation]) -> None:
        if not violations:
            raise ValueError("Rejected needs at least one violation")
        self.violations = tuple(violations)
        self.reason = self.violations[0].reason
        super().__init__("; ".join(f"{v.reason}: {v.message}" for v in self.violations))

    @classmethod
    def one(cls, reason: Reason, message: str) -> Rejected:
        """A rejection with a single violation."""
        return cls([Violation(reason, message)])
