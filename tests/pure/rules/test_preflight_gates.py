"""The preflight's feature-gate checks: each reports its gate from whether a dry run kept the gated field."""

from __future__ import annotations

import pytest

from sriov_dra_rules import preflight_gates as gates


@pytest.mark.parametrize(
    ("kept", "why", "status", "detail"),
    [
        (True, "", "pass", "the API server keeps device taints (DRADeviceTaints on)"),
        (
            False,
            "",
            "fail",
            "the API server dropped a device taint (DRADeviceTaints off): unhealthy VFs stay allocatable",
        ),
        (None, "Forbidden: no", "fail", "could not dry-run a tainted ResourceSlice: Forbidden: no"),
    ],
    ids=["gate-on", "gate-off-field-dropped", "dry-run-refused"],
)
def test_device_taints_check_reports_the_gate_from_the_dry_run(
    kept: bool | None, why: str, status: str, detail: str
) -> None:
    check = gates.device_taints_check(kept, why)
    assert (check["name"], check["status"], check["detail"]) == ("device-taints", status, detail)
    assert bool(check["fix"]) == (status == "fail")


@pytest.mark.parametrize(
    ("kept", "why", "status", "detail"),
    [
        (
            True,
            "",
            "pass",
            "the API server keeps a DeviceClass's extendedResourceName (DRAExtendedResource on)",
        ),
        (
            False,
            "",
            "fail",
            "the API server dropped a DeviceClass's extendedResourceName (DRAExtendedResource off): Pods asking "
            "a device plugin's resource name get no VF through DRA",
        ),
        (
            None,
            "Forbidden: no",
            "fail",
            "could not dry-run a DeviceClass with extendedResourceName: Forbidden: no",
        ),
    ],
    ids=["gate-on", "gate-off-field-dropped", "dry-run-refused"],
)
def test_extended_resources_check_reports_the_gate_from_the_dry_run(
    kept: bool | None, why: str, status: str, detail: str
) -> None:
    check = gates.extended_resources_check(kept, why)
    assert (check["name"], check["status"], check["detail"]) == ("extended-resources", status, detail)
    want_fix = {"pass": "", "fail": "DRAExtendedResource" if kept is False else "may create deviceclasses"}[
        status
    ]
    assert want_fix in check["fix"] and bool(check["fix"]) == (status == "fail")
