# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""DeviceClasses that serve an SR-IOV device plugin's extended resources through DRA.

A Pod written for the SR-IOV device plugin asks ``resources.limits: {<prefix>/<resourceName>: 1}``.
With a DeviceClass whose ``spec.extendedResourceName`` is that name (Kubernetes 1.36, feature gate
``DRAExtendedResource``), the scheduler allocates a VF of the class instead, and the plugin attaches
it like any claim (docs/migration.md). One class per resource name: named as upstream
``ResourceNameToDeviceClassName`` names a pool, selecting this driver's devices whose
``k8s.cni.cncf.io/resourceName`` attribute is exactly that name (the attribute the operator, and the
administrator's DeviceAttributes without it, give every VF the resource's policy maps).
Used by the operator and by the plugin role's filter; standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from . import names

RESOURCE_NAME_ATTRIBUTE = "k8s.cni.cncf.io/resourceName"
"""The device attribute holding ``<prefix>/<resourceName>``."""

_NAME_PART_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_NATIVE_DOMAINS = ("kubernetes.io", "k8s.io")
_QUALIFIED_PREFIX_MAX = 253


def device_class_name(resource_name: str) -> str:
    """Upstream ``ResourceNameToDeviceClassName``: ``_``→``-``, keep ``[a-z0-9-]``, trim ``-``.

    Upper-case letters are lowered, every other character dropped; ``sriov`` when nothing is left.
    """
    kept: list[str] = []
    for ch in resource_name.replace("_", "-"):
        ch = ch.lower() if "A" <= ch <= "Z" else ch
        if ch == "-" or "a" <= ch <= "z" or "0" <= ch <= "9":
            kept.append(ch)
    return "".join(kept).strip("-") or "sriov"


def extended_resource_name(prefix: str, resource_name: str) -> str:
    """``<prefix>/<resourceName>``, the name the device plugin advertised (the bare name without a prefix)."""
    return f"{prefix}/{resource_name}" if prefix else resource_name


def extended_resource_problem(prefix: object, resource_name: object) -> str | None:
    """Why ``<prefix>/<resourceName>`` cannot be a DeviceClass's ``extendedResourceName``, else ``None``.

    Kubernetes' extended-resource rule: a DNS-1123 subdomain prefix outside ``kubernetes.io`` and
    ``k8s.io``, and a name part of at most 63 characters, alphanumeric at both ends with ``-``, ``_``
    and ``.`` inside; ``requests.<name>`` (its quota key) must still be a qualified name.
    """
    if not isinstance(prefix, str) or not prefix:
        return "has no prefix: an extended resource is <domain>/<name>; set the resource prefix"
    if not isinstance(resource_name, str) or not resource_name:
        return "has no resource name"
    full = extended_resource_name(prefix, resource_name)
    problem = names.dns1123_subdomain_problem(prefix)
    if problem is not None:
        return f"{full!r}: the prefix {problem}"
    if any(prefix == d or prefix.endswith("." + d) for d in _NATIVE_DOMAINS):
        return (
            f"{full!r}: the prefix {prefix!r} is a Kubernetes domain; extended resources use another domain"
        )
    if len("requests." + prefix) > _QUALIFIED_PREFIX_MAX:
        return (
            f"{full!r}: the prefix is longer than 244 characters (its quota key requests.<prefix> holds 253)"
        )
    if len(resource_name) > names.QUALIFIED_NAME_MAX_LEN or _NAME_PART_RE.fullmatch(resource_name) is None:
        return (
            f"{full!r}: the name {resource_name!r} must be at most 63 characters, alphanumeric at both ends, "
            "with only '-', '_' and '.' inside"
        )
    return None


def device_class(
    prefix: str,
    resource_name: str,
    *,
    driver: str = names.DRIVER_NAME,
    labels: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """The DeviceClass serving ``<prefix>/<resourceName>`` from ``driver``'s devices with that attribute.

    Raises: ValueError with :func:`extended_resource_problem`'s text for a name Kubernetes refuses.
    """
    problem = extended_resource_problem(prefix, resource_name)
    if problem is not None:
        raise ValueError("extendedResourceName " + problem)
    full = extended_resource_name(prefix, resource_name)
    domain, attribute = RESOURCE_NAME_ATTRIBUTE.split("/", 1)
    attrs = f"device.attributes[{_cel_string(domain)}]"
    expression = (
        f"device.driver == {_cel_string(driver)} && {_cel_string(domain)} in device.attributes && "
        f"{_cel_string(attribute)} in {attrs} && {attrs}.{attribute} == {_cel_string(full)}"
    )
    metadata: dict[str, object] = {"name": device_class_name(resource_name)}
    if labels:
        metadata["labels"] = dict(sorted(labels.items()))
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": metadata,
        "spec": {"selectors": [{"cel": {"expression": expression}}], "extendedResourceName": full},
    }


def _cel_string(value: str) -> str:
    """A CEL double-quoted string literal of ``value`` (backslash and quote escaped)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
