"""The kubelet's choice of DRA service from a plugin's ``supported_versions``.

``sriov_dra_lab.kubelet_plugins.select_service`` mirrors the 1.36 kubelet's
``validateSupportedServices`` (kubernetes ``pkg/kubelet/cm/dra``): the plugin's first entry that
the kubelet supports wins.
"""

from __future__ import annotations

import pytest

from sriov_dra.kubeletapi import endpoints
from sriov_dra_lab import kubelet_plugins
from sriov_dra_rules import errors

V1 = endpoints.DraService.V1
V1BETA1 = endpoints.DraService.V1BETA1


@pytest.mark.parametrize(
    ("versions", "expected"),
    [
        (["v1.DRAPlugin", "v1beta1.DRAPlugin"], V1),
        (["v1beta1.DRAPlugin", "v1.DRAPlugin"], V1BETA1),
        (["v1beta1.DRAPlugin"], V1BETA1),
        (["v1alpha1.DRAResourceHealth", "v1.DRAPlugin"], V1),
        (["v1alpha4.DRAPlugin", "v1beta1.DRAPlugin"], V1BETA1),
    ],
    ids=[
        "v1-listed-first-wins",
        "plugin-order-decides-not-kubelet-preference",
        "v1beta1-only-plugin",
        "unknown-entries-are-skipped",
        "retired-version-skipped",
    ],
)
def test_first_supported_entry_in_plugin_order_is_chosen(
    versions: list[str], expected: endpoints.DraService
) -> None:
    assert kubelet_plugins.select_service("x.example.com", versions) is expected


@pytest.mark.parametrize(
    "versions",
    [[], ["v1beta1"], ["v1", "v1beta1"], ["v1alpha1.DRAResourceHealth"]],
    ids=["empty-list", "bare-version-string-as-in-old-pydra", "bare-versions", "health-only"],
)
def test_no_supported_entry_fails_registration_with_unsupported_version(versions: list[str]) -> None:
    with pytest.raises(errors.ContractViolation) as info:
        kubelet_plugins.select_service("x.example.com", versions)
    assert info.value.reason is errors.Reason.UNSUPPORTED_VERSION
    assert "x.example.com" in str(info.value) and "advertise 'v1.DRAPlugin' first" in str(info.value)


def test_default_timeouts_are_the_kubelets() -> None:
    timeouts = kubelet_plugins.KubeletTimeouts()
    assert (timeouts.dial_s, timeouts.get_info_s, timeouts.notify_s, timeouts.call_s) == (
        10.0,
        1.0,
        5.0,
        45.0,
    )
