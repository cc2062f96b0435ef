"""Typed errors shared by every part, carrying the reason names of docs/design.md#errors.

Every error raised on purpose is a :class:`SriovDraError` with a :class:`Reason` (a CamelCase
word that becomes an Event reason, a metric label value and a CNI error detail) and a message
naming the object, the field, the bad value and what to change. Callers decide retry versus
permanent failure from the class, never from the message text. Formatting only; standard
library only.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class Reason(enum.StrEnum):
    """Bounded reason names; what each tells an operator and what to do: docs/design.md#errors.

    The values are the persisted and published strings; they are part of the contract and must
    not be renamed. Add new members at the end of their group.
    """

    # Input and contract validation.
    INVALID_SPEC = "InvalidSpec"
    CONTRACT_VIOLATION = "ContractViolation"
    UNSUPPORTED_VERSION = "UnsupportedVersion"
    # Templates, rendering and resolution.
    MISSING_NETWORK_TEMPLATE = "MissingNetworkTemplate"
    INVALID_NETWORK_TEMPLATE = "InvalidNetworkTemplate"
    UNSUPPORTED_NETWORK_TEMPLATE = "UnsupportedNetworkTemplate"
    CONFLICTING_NETWORK_REFERENCE = "ConflictingNetworkReference"
    INVALID_VF_CONFIG = "InvalidVfConfig"
    INVALID_PCI_ADDRESS = "InvalidPciAddress"
    SOURCE_ACCESS_DENIED = "SourceAccessDenied"
    # Consumer verification and claims.
    UNSUPPORTED_MANAGED_CLAIM_KIND = "UnsupportedManagedClaimKind"
    UNSUPPORTED_MANAGED_SELECTOR = "UnsupportedManagedSelector"
    INVALID_CONSUMER = "InvalidConsumer"
    INVALID_CLAIM = "InvalidClaim"
    DEVICE_NOT_ELIGIBLE = "DeviceNotEligible"
    CONFLICTING_DEVICE_REQUIREMENTS = "ConflictingDeviceRequirements"
    # Interfaces and selections.
    INVALID_INTERFACE_NAME = "InvalidInterfaceName"
    DUPLICATE_INTERFACE_NAME = "DuplicateInterfaceName"
    INVALID_NETWORKS_ANNOTATION = "InvalidNetworksAnnotation"
    MANUAL_SELECTION_CONFLICTS_WITH_MANAGED_TEMPLATE = "ManualSelectionConflictsWithManagedTemplate"
    OWNERSHIP_CONFLICT = "OwnershipConflict"
    ANNOTATION_TOO_LARGE = "AnnotationTooLarge"
    INVALID_NETWORK_STATUS = "InvalidNetworkStatus"
    # Lifecycle.
    CLAIM_RELEASE_IN_PROGRESS = "ClaimReleaseInProgress"
    SHADOW_DELETION_PENDING = "ShadowDeletionPending"
    SHADOW_CONFLICT = "ShadowConflict"
    NODE_NOT_FENCED = "NodeNotFenced"
    """Node recovery refused: the node is Ready, not fenced, or its plugin still answers
    (docs/operations.md)."""
    AUTO_ATTACH_GATE_CLOSED = "AutoAttachGateClosed"
    """A new claim on a node whose auto-attach gate is closed while auto-attached bindings remain
    (release-only mode): refused before any change; the recorded bindings are still repaired and
    released (docs/design.md#errors)."""
    # Attributes and policies (plugin and operator).
    INVALID_ATTRIBUTE = "InvalidAttribute"
    RESERVED_ATTRIBUTE = "ReservedAttribute"
    CONFLICTING_DRA_MAPPING = "ConflictingDRAMapping"
    UNSUPPORTED_RESOURCE_FILTER = "UnsupportedResourceFilter"
    SELECTOR_MATCHES_NOTHING = "SelectorMatchesNothing"
    """A resource filter, or a value of it, selects no device on a node its policy applies to; a
    report, never blocking (docs/design.md#errors)."""
    POLICY_NAMESPACE_EMPTY = "PolicyNamespaceEmpty"
    """The namespace the plugin watches holds no SriovResourcePolicy while other namespaces do, so
    the node publishes nothing (docs/design.md#errors)."""
    SRIOV_NETWORK_NOT_FOUND = "SriovNetworkNotFound"
    SRIOV_NETWORK_NOT_READY = "SriovNetworkNotReady"
    DRA_INACTIVE = "DRAInactive"
    INVALID_DRA_ATTRIBUTE = "InvalidDRAAttribute"
    SOURCE_NAD_NOT_READY = "SourceNADNotReady"
    DRA_CONFIGURATION_SYNC_FAILED = "DRAConfigurationSyncFailed"
    INVALID_NETWORK_SPEC = "InvalidNetworkSpec"
    """A SriovNetwork field cannot be rendered into a NAD (``spec.ipam`` not one JSON object, ...);
    docs/design.md#errors."""
    # Host: discovery and VF driver binding.
    HOST_READ_FAILED = "HostReadFailed"
    UNSUPPORTED_VF_DRIVER = "UnsupportedVfDriver"
    VF_BIND_FAILED = "VfBindFailed"
    UNSUPPORTED_LINK_TYPE = "UnsupportedLinkType"


@dataclass(frozen=True)
class FieldError:
    """One problem at one field path.

    Shapes: ``path`` is a dotted/indexed path such as ``spec.config.plugins[1].type`` or
    ``metadata.annotations["k8s.v1.cni.cncf.io/networks"][2].name``; ``message`` says what is
    wrong and what to change.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class SriovDraError(Exception):
    """Base of every error this project raises on purpose.

    Carries a :class:`Reason` and zero or more :class:`FieldError` entries so that one failed
    validation reports every problem at once. Reasons: docs/design.md#errors.
    ``str(err)`` is the full actionable message, always with a UTF-8 form.
    """

    default_reason: Reason = Reason.INVALID_SPEC

    def __init__(
        self,
        message: str,
        *,
        reason: Reason | None = None,
        errors: Sequence[FieldError] = (),
    ) -> None:
        self.reason: Reason = reason if reason is not None else self.default_reason
        self.errors: tuple[FieldError, ...] = tuple(errors)
        self.summary = message
        super().__init__(self._format())

    @property
    def detail(self) -> str:
        """The message without its reason: ``summary: path: problem; path: problem``.

        For texts that carry the reason elsewhere (a condition's reason, an Event's reason) or
        that a person reads as one sentence (a CLI or module error).
        """
        if not self.errors:
            return self.summary
        return f"{self.summary}: " + "; ".join(str(e) for e in self.errors)

    def _format(self) -> str:
        text = f"{self.reason}: {self.detail}"
        # A lone surrogate (a JSON "\ud800" escape in user input) has no UTF-8 form; escape it so
        # the message can always be logged, sent as a gRPC error string or stored in an Event.
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


class InvalidSpec(SriovDraError):
    """User- or administrator-supplied input is malformed or unsupported; fix the input
    (docs/design.md#errors)."""

    default_reason = Reason.INVALID_SPEC


class ContractViolation(SriovDraError):
    """Data written by one of our own parts (annotation, registry, checkpoint) is not valid.

    Never guessed past: the caller stops and reports, nothing is deleted or overwritten
    (docs/design.md#errors).
    """

    default_reason = Reason.CONTRACT_VIOLATION


class Conflict(SriovDraError):
    """Two valid inputs disagree (a mapping, an ownership, a name); a person must choose
    (docs/design.md#errors)."""

    default_reason = Reason.OWNERSHIP_CONFLICT


class LifecycleBlocked(SriovDraError):
    """The operation must wait for another lifecycle step (e.g. ``ClaimReleaseInProgress``;
    docs/design.md#errors)."""

    default_reason = Reason.CLAIM_RELEASE_IN_PROGRESS


def raise_if_any(
    errors: Iterable[FieldError],
    message: str,
    *,
    cls: type[SriovDraError] = InvalidSpec,
    reason: Reason | None = None,
) -> None:
    """Raise ``cls(message, errors=...)`` when ``errors`` is non-empty, else return.

    Raises: ``cls`` carrying every collected :class:`FieldError`.
    """
    collected = list(errors)
    if collected:
        raise cls(message, reason=reason, errors=collected)
