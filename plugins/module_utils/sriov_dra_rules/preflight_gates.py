# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The preflight's feature-gate checks, which ``sriov-dra preflight`` runs after the cluster checks.

Each says, from a server-side dry run the CLI sends, whether the API server keeps a gated field:
``device-taints`` (gate ``DRADeviceTaints``) and ``extended-resources`` (gate ``DRAExtendedResource``).
A result is a ``preflight_rules`` check dict (``name``, ``status``, ``detail``, ``fix``).
"""

from __future__ import annotations

from .preflight_rules import check

DEVICE_TAINTS_CHECK = "device-taints"
"""The check that the API server keeps device taints (gate ``DRADeviceTaints``); ``sriov-dra
preflight`` runs it after :data:`CLUSTER_CHECKS` (it needs a server-side dry run)."""


EXTENDED_RESOURCES_CHECK = "extended-resources"
"""The check that the API server keeps a DeviceClass's ``extendedResourceName`` (gate
``DRAExtendedResource``), which Pods asking a device plugin's resource name need (docs/migration.md);
run after :data:`DEVICE_TAINTS_CHECK`."""


def device_taints_check(kept: bool | None, why: str = "") -> dict[str, str]:
    """The ``device-taints`` check: ``kept`` says whether a dry-run ResourceSlice kept its device
    taint (None: the dry run was refused, ``why`` says how)."""
    return _gate_check(
        DEVICE_TAINTS_CHECK,
        "DRADeviceTaints",
        kept,
        why,
        dry_run="a tainted ResourceSlice",
        resource="resourceslices",
        kept_text="the API server keeps device taints",
        dropped_text="the API server dropped a device taint",
        consequence="unhealthy VFs stay allocatable",
        components="kube-apiserver, kube-scheduler and kube-controller-manager",
    )


def extended_resources_check(kept: bool | None, why: str = "") -> dict[str, str]:
    """The ``extended-resources`` check: ``kept`` says whether a dry-run DeviceClass kept its
    ``extendedResourceName`` (None: the dry run was refused, ``why`` says how)."""
    return _gate_check(
        EXTENDED_RESOURCES_CHECK,
        "DRAExtendedResource",
        kept,
        why,
        dry_run="a DeviceClass with extendedResourceName",
        resource="deviceclasses",
        kept_text="the API server keeps a DeviceClass's extendedResourceName",
        dropped_text="the API server dropped a DeviceClass's extendedResourceName",
        consequence="Pods asking a device plugin's resource name get no VF through DRA",
        components="kube-apiserver, kube-scheduler, kube-controller-manager and the kubelets",
    )


def _gate_check(
    name: str,
    gate: str,
    kept: bool | None,
    why: str,
    *,
    dry_run: str,
    resource: str,
    kept_text: str,
    dropped_text: str,
    consequence: str,
    components: str,
) -> dict[str, str]:
    """A check that a feature gate is on, from whether a server-side dry run kept the gated field."""
    if kept is None:
        return check(
            name,
            False,
            f"could not dry-run {dry_run}: {why}",
            f"run the preflight with a kubeconfig that may create {resource} (a dry run writes nothing)",
        )
    return check(
        name,
        kept,
        f"{kept_text} ({gate} on)" if kept else f"{dropped_text} ({gate} off): {consequence}",
        f"turn on the {gate} feature gate of {components} (on by default in Kubernetes 1.36)",
    )
