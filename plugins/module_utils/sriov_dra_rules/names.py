"""Shared names of the cross-part contracts, and the format validators they rely on.

Every annotation, label, finalizer and attribute key that the plugin, the guard and the operator
must spell identically, the driver name and the contract versions (docs/design.md#identity,
docs/design.md#ownership); and predicates for UUIDs, SHA-256 digests, DNS-1123 names, pool
names, PCI addresses, interface names, qualified names and label values. Validators return
``None`` or a short actionable phrase that callers wrap in a ``FieldError``. Constants are
persisted and published strings: never respell one. No I/O; standard library and ``errors``.
"""

from __future__ import annotations

import json
import re
from typing import Final

# --- Driver identity (docs/design.md#identity; upstream dra-driver-sriov compatibility) ----------

DOMAIN: Final = "sriovnetwork.k8snetworkplumbingwg.io"
"""Domain of every key this project owns; also the DRA driver name."""

DRIVER_NAME: Final = DOMAIN
"""DRA driver name published in ResourceSlices and matched in claim allocation results."""

PROTOCOL_VERSION: Final = 1
"""Version of the binding-identity encoding (docs/design.md#identity); part of every attachmentID."""

BINDING_VERSION: Final = 1
"""Version of the shadow ``binding`` annotation JSON (docs/design.md#ownership)."""

REGISTRY_VERSION: Final = 1
"""Version of the Pod ``managed-networks`` registry JSON (docs/design.md#ownership)."""

# --- Annotations -------------------------------------------------------------------------------

BINDING_ANNOTATION: Final = f"{DOMAIN}/binding"
"""Shadow NAD annotation carrying the binding provenance (compact JSON, version 1)."""

MANAGED_NETWORKS_ANNOTATION: Final = f"{DOMAIN}/managed-networks"
"""Pod annotation carrying the registry of driver-owned network selections (version 1)."""

NETWORKS_ANNOTATION: Final = "k8s.v1.cni.cncf.io/networks"
"""Multus network-selection annotation on the Pod (user entries plus managed entries)."""

NETWORK_STATUS_ANNOTATION: Final = "k8s.v1.cni.cncf.io/network-status"
"""Multus network-status annotation on the Pod (written by Multus, read by the guard)."""

RESOURCE_NAME_ANNOTATION: Final = "k8s.v1.cni.cncf.io/resourceName"
"""Device-plugin lookup key on a NAD; absent (not empty) on every shadow: Multus enters its lookup
branch when the key exists at all (docs/design.md#render)."""

DEFAULT_NETWORK_ANNOTATION: Final = "v1.multus-cni.io/default-network"
"""Multus Pod annotation replacing the cluster network (delegate 0)."""

AUTO_ATTACH_MODE_ANNOTATION: Final = f"{DOMAIN}/auto-attach-mode"
"""On the plugin's own Pod: the auto-attach mode that process runs, ``full``, ``release-only`` or
``off`` (docs/plugin.md#flags); set at its start, compared by the preflight's auto-attach gate."""

# --- Labels, finalizer, device attributes ------------------------------------------------------

LABEL_MANAGED_BY: Final = f"{DOMAIN}/managed-by"
LABEL_POD_UID: Final = f"{DOMAIN}/pod-uid"
LABEL_CLAIM_UID: Final = f"{DOMAIN}/claim-uid"
LABEL_NODE_UID: Final = f"{DOMAIN}/node-uid"

MANAGED_BY_VALUE: Final = "sriov-dra-plugin"
"""Value of :data:`LABEL_MANAGED_BY` on every shadow NAD (the part that creates them)."""

FINALIZER_ATTACHMENT_PROTECTION: Final = f"{DOMAIN}/attachment-protection"
"""Finalizer present in the shadow's create call; removed only after ReleaseComplete
(docs/design.md#release)."""

POLICY_STATUS_CONDITION: Final = "Valid"
"""The condition of each node's ``status.nodes`` entry in a SriovResourcePolicy or DeviceAttributes:
``False`` while that node's plugin finds a problem in the object."""
ATTR_NET_ATTACH_DEF_NAME: Final = f"{DOMAIN}/netAttachDefName"
ATTR_NET_ATTACH_DEF_NAMESPACE: Final = f"{DOMAIN}/netAttachDefNamespace"

# --- Generated names ---------------------------------------------------------------------------

SHADOW_NAME_PREFIX: Final = "dra-sriov-"
"""Prefix of every shadow NAD name; followed by 32 lowercase hex characters (docs/design.md#identity)."""

SHADOW_NAME_HEX_CHARS: Final = 32

MANAGED_IFNAME_PREFIX: Final = "dra"
"""Managed interfaces are ``dra0``, ``dra1``, ... (docs/design.md#interface-names)."""

DEFAULT_PRIMARY_IFNAME: Final = "eth0"
"""The runtime's ``CNI_IFNAME`` for the cluster network, unless configured otherwise."""

IFNAME_MAX_BYTES: Final = 15
"""Linux ``IFNAMSIZ`` (16) minus the terminating NUL."""

DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
POOL_NAME_MAX: Final = 253

_UUID_RE: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEX64_RE: Final = re.compile(r"[0-9a-f]{64}")
_LABEL_RE: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_PCI_RE: Final = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]")

QUALIFIED_NAME_MAX_LEN: Final = 63
LABEL_VALUE_MAX_LEN: Final = 63
_QUALIFIED_NAME_RE: Final = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def pattern_problem(
    value: object, pattern: re.Pattern[str], *, what: str, expected: str = "a string"
) -> str | None:
    """Say why ``value`` is not a string that ``pattern`` matches in full, or return ``None``.

    Messages: ``must be <expected>, got <type>`` for a non-string, ``'<value>' is not <what>``
    for a string ``pattern`` does not fully match. The one shape behind every
    ``*_problem`` validator of a single pattern (here and in ``core.plugin.cdi_spec``).
    """
    if not isinstance(value, str):
        return f"must be {expected}, got {type(value).__name__}"
    if not pattern.fullmatch(value):
        return f"{value!r} is not {what}"
    return None


def uuid_problem(value: object) -> str | None:
    """Say why ``value`` is not a canonical lowercase UUID, or return ``None``.

    Shapes: ``8-4-4-4-12`` lowercase hex digits, 36 characters, as Kubernetes writes
    ``metadata.uid``. Upper case is rejected so that UIDs compare exactly.
    """
    return pattern_problem(
        value,
        _UUID_RE,
        what="a lowercase UUID like 11111111-2222-3333-4444-555555555555",
        expected="a string UUID",
    )


def hex64_problem(value: object) -> str | None:
    """Say why ``value`` is not a full SHA-256 digest in lowercase hex, or return ``None``.

    Shapes: exactly 64 characters ``[0-9a-f]``; truncated or upper-case digests are rejected.
    """
    return pattern_problem(
        value,
        _HEX64_RE,
        what="64 lowercase hex characters (a full SHA-256 digest)",
        expected="a string of 64 lowercase hex characters",
    )


def dns1123_label_problem(value: object) -> str | None:
    """Say why ``value`` is not a DNS-1123 label, or return ``None``.

    Shapes: 1-63 characters of ``[a-z0-9-]``, starting and ending alphanumeric.
    Source: Kubernetes ``IsDNS1123Label``.
    """
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value:
        return "must not be empty"
    if len(value) > DNS1123_LABEL_MAX:
        return f"{value!r} is {len(value)} characters, max {DNS1123_LABEL_MAX}"
    if not _LABEL_RE.fullmatch(value):
        return f"{value!r} must be lowercase alphanumerics or '-', starting and ending alphanumeric"
    return None


def dns1123_subdomain_problem(value: object) -> str | None:
    """Say why ``value`` is not a DNS-1123 subdomain, or return ``None``.

    Shapes: 1-253 characters; dot-separated DNS-1123 labels. Source: Kubernetes
    ``IsDNS1123Subdomain`` (object names such as NADs and Nodes).
    """
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value:
        return "must not be empty"
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        return f"{value!r} is {len(value)} characters, max {DNS1123_SUBDOMAIN_MAX}"
    if not all(_LABEL_RE.fullmatch(part) for part in value.split(".")):
        return f"{value!r} must be dot-separated lowercase alphanumeric labels ('-' inside a label)"
    return None


def pool_name_problem(value: object) -> str | None:
    """Say why ``value`` is not a DRA pool name, or return ``None``.

    Shapes: 1-253 characters; one or more DNS-1123 subdomains separated by ``/``.
    Source: ``resource.k8s.io/v1`` ResourcePool.name validation.
    """
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value:
        return "must not be empty"
    if len(value) > POOL_NAME_MAX:
        return f"{value!r} is {len(value)} characters, max {POOL_NAME_MAX}"
    for part in value.split("/"):
        if dns1123_subdomain_problem(part) is not None:
            return f"{value!r} must be DNS-1123 subdomains separated by '/'"
    return None


def pci_address_problem(value: object) -> str | None:
    """Say why ``value`` is not a plain normalized PCI BDF, or return ``None``.

    Shapes: ``dddd:bb:dd.f`` in lowercase hex (domain 4, bus 2, device 00-1f, function 0-7), e.g.
    ``0000:03:00.1``; no ``pci:`` prefix: the form the shadow's ``deviceID`` carries
    (docs/design.md#render).
    """
    return pattern_problem(
        value, _PCI_RE, what="a lowercase PCI address like 0000:03:00.1 (no 'pci:' prefix)"
    )


def ifname_problem(value: object) -> str | None:
    """Say why ``value`` is not a valid Linux interface name, or return ``None``.

    Shapes: 1-15 bytes of UTF-8 (no lone surrogates); not ``.`` or ``..``; no ``/``, ``:``, NUL or
    whitespace. The rule is the kernel's (``dev_valid_name``), not DNS-1123: ``uplink_p0`` and
    ``flannel.1`` are valid.
    Source: docs/design.md#interface-names; multus-cni #213, multus-cni #1243.
    """
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate, e.g. decoded from a JSON "\ud800" escape
        return (
            f"interface name {json.dumps(value)} contains a lone UTF-16 surrogate, which has no UTF-8 "
            "form; use a valid character"
        )
    if size == 0:
        return "interface name must not be empty"
    if size > IFNAME_MAX_BYTES:
        return f"interface name {_quote(value)} is {size} bytes, max {IFNAME_MAX_BYTES}"
    if value in (".", ".."):
        return f"interface name {_quote(value)} is reserved; choose another name"
    bad = sorted({c for c in value if c in "/:\0" or c.isspace()})
    if bad:
        return (
            f"interface name {_quote(value)} contains {_quote(''.join(bad))}; "
            "'/', ':', NUL and whitespace are not allowed"
        )
    return None


def _quote(value: str) -> str:
    """Quote ``value`` with double quotes and escapes, as in JSON, for error messages."""
    return json.dumps(value, ensure_ascii=False)


def is_hex64(value: object) -> bool:
    """Return whether ``value`` is 64 lowercase hex characters (see :func:`hex64_problem`)."""
    return hex64_problem(value) is None


def is_dns1123_label(value: object) -> bool:
    """Return whether ``value`` is a DNS-1123 label (see :func:`dns1123_label_problem`)."""
    return dns1123_label_problem(value) is None


def is_dns1123_subdomain(value: object) -> bool:
    """Return whether ``value`` is a DNS-1123 subdomain (see :func:`dns1123_subdomain_problem`)."""
    return dns1123_subdomain_problem(value) is None


def is_pci_address(value: object) -> bool:
    """Return whether ``value`` is a plain lowercase PCI BDF (see :func:`pci_address_problem`)."""
    return pci_address_problem(value) is None


def qualified_name_errors(value: str) -> list[str]:
    """Problems that make ``value`` an invalid qualified name (label or annotation key).

    Shapes: ``[prefix/]name``; prefix a DNS-1123 subdomain; name 1–63 characters of
    ``[A-Za-z0-9-_.]`` starting and ending alphanumeric.
    Source: ``IsQualifiedName``.
    """
    parts = value.split("/")
    if len(parts) == 1:
        prefix, name = "", parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
    else:
        return ["a qualified name must be 'name' or 'prefix/name' with at most one '/'"]
    prefix_problem = dns1123_subdomain_problem(prefix) if prefix else None
    problems = [f"prefix part {prefix_problem}"] if prefix_problem else []
    if not name:
        problems.append("name part must be non-empty")
        return problems
    if len(name) > QUALIFIED_NAME_MAX_LEN:
        problems.append(
            f"name part must be no more than {QUALIFIED_NAME_MAX_LEN} characters (is {len(name)})"
        )
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        problems.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character"
        )
    return problems


def label_value_errors(value: str) -> list[str]:
    """Problems that make ``value`` an invalid label value.

    Shapes: empty, or 1–63 characters of ``[A-Za-z0-9-_.]`` starting and ending alphanumeric.
    Source: ``IsValidLabelValue``.
    """
    problems: list[str] = []
    if len(value) > LABEL_VALUE_MAX_LEN:
        problems.append(f"must be no more than {LABEL_VALUE_MAX_LEN} characters (is {len(value)})")
    if value and not _QUALIFIED_NAME_RE.fullmatch(value):
        problems.append(
            "a valid label value must be empty or consist of alphanumeric characters, '-', '_' "
            "or '.', and must start and end with an alphanumeric character"
        )
    return problems
