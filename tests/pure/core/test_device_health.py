"""The VF health decision table (``sriov_dra.core.device_health``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import device_health as dh

H = dh.Health
C = dh.Cause
UP = dh.PfLink(admin_up=True, carrier=True, operstate="up")
NO_CARRIER = dh.PfLink(admin_up=True, carrier=False, operstate="lowerlayerdown")
ADMIN_DOWN = dh.PfLink(admin_up=False, carrier=False, operstate="down")
EIO = dh.Unreadable("cannot read x: Input/output error (errno 5)")
IAVF = dh.DriverExpectation("iavf", bound=True)
TARGET = dh.HealthTarget("node-1", "0000-03-02-0", "0000:03:02.0", "0000:03:00.0", "ens1f0", IAVF)


def reading(**changes: object) -> dh.VfReading:
    base: dict[str, object] = {
        "vf_present": True,
        "driver": "iavf",
        "pf_present": True,
        "pf_netdev": "ens1f0",
        "pf_link": UP,
    }
    base.update(changes)
    return dh.VfReading(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "health", "reason_part", "cause"),
    [
        ({}, H.HEALTHY, "VF 0000:03:02.0 bound to iavf; PF ens1f0 up with carrier", None),
        ({"vf_present": False}, H.UNHEALTHY, "VF 0000:03:02.0 is gone from sysfs", C.VF_GONE),
        ({"driver": None}, H.UNHEALTHY, "VF 0000:03:02.0 is unbound, expected iavf", C.VF_WRONG_DRIVER),
        (
            {"driver": "vfio-pci"},
            H.UNHEALTHY,
            "VF 0000:03:02.0 is bound to vfio-pci, expected iavf",
            C.VF_WRONG_DRIVER,
        ),
        ({"pf_present": False}, H.UNHEALTHY, "PF 0000:03:00.0 (ens1f0) is gone from sysfs", C.PF_GONE),
        (
            {"pf_netdev": None},
            H.UNHEALTHY,
            "PF 0000:03:00.0 has no network interface (was ens1f0",
            C.PF_NO_INTERFACE,
        ),
        ({"pf_link": ADMIN_DOWN}, H.UNHEALTHY, "PF ens1f0 is down (operstate down)", C.PF_DOWN),
        (
            {"pf_link": NO_CARRIER},
            H.UNHEALTHY,
            "PF ens1f0 has no carrier (operstate lowerlayerdown)",
            C.PF_NO_CARRIER,
        ),
        ({"pf_link": None}, H.UNKNOWN, "PF ens1f0 is not in the plugin's network namespace", None),
        ({"pf_link": EIO}, H.UNKNOWN, "PF ens1f0: cannot read x", None),
        ({"vf_present": EIO}, H.UNKNOWN, "VF 0000:03:02.0: cannot read x", None),
        ({"driver": EIO}, H.UNKNOWN, "VF 0000:03:02.0: cannot read x", None),
        ({"pf_present": EIO}, H.UNKNOWN, "PF 0000:03:00.0: cannot read x", None),
        ({"pf_netdev": EIO}, H.UNKNOWN, "PF 0000:03:00.0: cannot read x", None),
        (
            {"driver": None, "pf_link": EIO},
            H.UNHEALTHY,
            "VF 0000:03:02.0 is unbound, expected iavf",
            C.VF_WRONG_DRIVER,
        ),
        (
            {"driver": "vfio-pci", "pf_link": NO_CARRIER},
            H.UNHEALTHY,
            "VF 0000:03:02.0 is bound to vfio-pci, expected iavf; PF ens1f0 has no carrier",
            C.VF_WRONG_DRIVER,
        ),
    ],
    ids=[
        "all-facts-hold",
        "vf-gone",
        "vf-unbound",
        "vf-other-driver",
        "pf-gone",
        "pf-without-netdev",
        "pf-admin-down",
        "pf-no-carrier",
        "pf-link-not-in-namespace",
        "pf-link-unreadable",
        "vf-unreadable",
        "driver-unreadable",
        "pf-unreadable",
        "pf-netdev-unreadable",
        "a-failure-wins-over-an-unreadable-fact",
        "every-failure-named",
    ],
)
def test_decide_follows_the_decision_table(
    changes: dict[str, object], health: dh.Health, reason_part: str, cause: dh.Cause | None
) -> None:
    verdict = dh.decide(TARGET, reading(**changes))
    assert verdict.health is health
    assert reason_part in verdict.reason
    assert verdict.cause == cause


@pytest.mark.parametrize(
    ("discovered", "requested", "expected"),
    [
        ("iavf", None, dh.DriverExpectation("iavf", bound=True)),
        (None, None, dh.DriverExpectation(None, bound=False)),
        ("iavf", "", dh.DriverExpectation("iavf", bound=True)),
        ("iavf", "vfio-pci", dh.DriverExpectation("vfio-pci", bound=True)),
        ("iavf", "default", dh.DriverExpectation(None, bound=True)),
        (None, "vfio-pci", dh.DriverExpectation("vfio-pci", bound=True)),
    ],
    ids=["free", "free-unbound", "prepared-keep", "prepared-named", "prepared-default", "unbound-then-named"],
)
def test_expected_driver_is_the_claims_request_else_the_discovered_driver(
    discovered: str | None, requested: str | None, expected: dh.DriverExpectation
) -> None:
    assert dh.expected_driver(discovered, requested) == expected


def test_a_free_vf_discovered_unbound_is_healthy_unbound_and_healthy_bound() -> None:
    target = dh.HealthTarget(
        "p", "d", "0000:03:02.0", "0000:03:00.0", "ens1f0", dh.expected_driver(None, None)
    )
    assert dh.decide(target, reading(driver=None)).health is H.HEALTHY
    assert dh.decide(target, reading(driver="iavf")).health is H.HEALTHY


def test_default_driver_request_needs_some_driver_bound() -> None:
    target = dh.HealthTarget(
        "p", "d", "0000:03:02.0", "0000:03:00.0", "ens1f0", dh.expected_driver("iavf", "default")
    )
    assert dh.decide(target, reading(driver="igbvf")).health is H.HEALTHY
    verdict = dh.decide(target, reading(driver=None))
    assert (verdict.health, verdict.reason) == (H.UNHEALTHY, "VF 0000:03:02.0 has no driver bound")


facts = {
    "vf_present": st.sampled_from([True, False, EIO]),
    "driver": st.sampled_from(["iavf", "vfio-pci", None, EIO]),
    "pf_present": st.sampled_from([True, False, EIO]),
    "pf_netdev": st.sampled_from(["ens1f0", None, EIO]),
    "pf_link": st.sampled_from([UP, NO_CARRIER, ADMIN_DOWN, None, EIO]),
}


@given(st.fixed_dictionaries(facts))
def test_healthy_exactly_when_every_fact_holds_and_unknown_only_without_a_failure(
    changes: dict[str, object],
) -> None:
    r = reading(**changes)
    verdict = dh.decide(TARGET, r)
    all_hold = r == reading()
    assert (verdict.health is H.HEALTHY) == all_hold
    if verdict.health is H.UNKNOWN:
        assert "cannot read" in verdict.reason or "network namespace" in verdict.reason
    assert verdict.reason


def test_transitions_name_changed_health_and_new_unhealthy_devices_only() -> None:
    ok, bad, unknown = (
        dh.Verdict(H.HEALTHY, "ok"),
        dh.Verdict(H.UNHEALTHY, "down"),
        dh.Verdict(H.UNKNOWN, "?"),
    )
    before = {"a": ok, "b": ok, "c": bad}
    after = {"a": bad, "b": dh.Verdict(H.HEALTHY, "other reason"), "c": bad, "d": ok, "e": unknown}
    assert dh.transitions(before, after) == (
        dh.Transition("a", ok, bad),
        dh.Transition("e", None, unknown),
    )
