"""Tests for sriov_dra_rules.resource_filters: filter semantics as the policy evaluation applies them."""

from __future__ import annotations

import pytest
from tests.fakes.policy_objects import ALL, RAIL_A, RAIL_B, R, evaluate, pf_config, policy, reasons

# --- Filters --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ([{"vendors": ["15b3"]}], ALL - {"0000-5e-02-1"}),
        ([{"vendors": ["15b3", "8086"]}], ALL),
        ([{"devices": ["154c"]}], {"0000-5e-02-1"}),
        ([{"pciAddresses": ["0000:3b:02.1"]}], {"0000-3b-02-1"}),
        ([{"pfPciAddresses": ["0000:5e:00.0"]}], RAIL_B),
        ([{"pfNames": ["ens1f0"], "vendors": ["8086"]}], set()),
        ([{"pfNames": ["ens1f0"]}, {"devices": ["154c"]}], RAIL_A | {"0000-5e-02-1"}),
        ([{"linkType": "eth"}], ALL - {"0000-5e-02-1"}),
        ([{"linkType": "ethernet"}], ALL - {"0000-5e-02-1"}),
        ([{"linkType": "IB"}], {"0000-5e-02-1"}),
        ([{"vendors": [], "pfNames": []}], ALL),
        ([{"pfNames": ["ENS1F0"]}], set()),
        ([], ALL),
    ],
    ids=[
        "vendor-is-pf-vendor",
        "or-within-field",
        "device-is-vf-device-id",
        "pci-address",
        "pf-pci-address",
        "and-across-fields",
        "or-across-filters",
        "linktype-eth-normalised",
        "linktype-ethernet",
        "linktype-case-insensitive",
        "empty-lists-do-not-constrain",
        "exact-case-sensitive-strings",
        "no-filters-match-all",
    ],
)
@pytest.mark.parametrize("managed", [True, False], ids=["managed", "compat"])
def test_resource_filter_semantics(
    filters: list[dict[str, object]], expected: set[str], managed: bool
) -> None:
    ev = evaluate([policy("p", {"resourceFilters": filters})], managed=managed)
    assert ev.eligible == expected


def test_drivers_filter_is_ignored_with_a_warning_in_compat_mode() -> None:
    ev = evaluate([policy("p", pf_config("ens1f0", drivers=["vfio-pci"]))], managed=False)
    assert ev.eligible == RAIL_A
    diag = [d for d in ev.diagnostics if d.reason is R.UNSUPPORTED_RESOURCE_FILTER]
    assert len(diag) == 1 and not diag[0].blocking and "drivers" in diag[0].path


def test_drivers_filter_blocks_its_superset_in_managed_mode_without_fall_through() -> None:
    ev = evaluate([policy("a", pf_config("ens1f0", drivers=["vfio-pci"])), policy("b", {})])
    assert ev.blocked == RAIL_A and ev.eligible == RAIL_B
    assert reasons(ev, "0000-3b-02-0") == (R.UNSUPPORTED_RESOURCE_FILTER,)
    assert ev.outcomes["0000-3b-02-0"].policy == "a"


def test_pfname_vf_range_is_literal_in_compat_mode() -> None:
    ev = evaluate([policy("a", pf_config("ens1f0#0-1")), policy("b", {})], managed=False)
    assert {d for d, o in ev.outcomes.items() if o.policy == "b"} == ALL


def test_pfname_vf_range_blocks_the_whole_pf_in_managed_mode() -> None:
    ev = evaluate([policy("a", pf_config("ens1f0#0-0")), policy("b", {})])
    assert ev.blocked == RAIL_A
    assert all(ev.outcomes[d].policy == "a" for d in RAIL_A)
    assert ev.eligible == RAIL_B


@pytest.mark.parametrize(
    ("managed", "blocked"), [(True, RAIL_A), (False, frozenset())], ids=["managed", "compat"]
)
def test_unknown_filter_field_is_refused_only_in_managed_mode(managed: bool, blocked: frozenset[str]) -> None:
    ev = evaluate([policy("a", pf_config("ens1f0", rootDevices=["0000:3b:00.0"]))], managed=managed)
    assert ev.claimed == RAIL_A
    assert ev.blocked == blocked
