"""The preflight's policy checks decide as the plugin does: one node-selector and one filter rule.

The preflight path is :func:`sriov_dra_rules.preflight_rules.node_selected` /
:func:`~sriov_dra_rules.preflight_rules.policy_overlaps` (``sriov-dra preflight`` and the Ansible
``preflight`` role); the plugin path is the real policy evaluation
(:func:`sriov_dra.core.policies.evaluate_policies`) over VFs. Both must agree for any selector,
labels and filters, including the constructs upstream and Kubernetes read differently: ``Gt``/``Lt``
(a term with them selects no node), ``matchFields``, empty terms, and ``drivers`` (never a filter).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.fakes.policy_objects import ALL, R, evaluate, policy, vf

from sriov_dra_rules import label_selectors, resource_filters
from sriov_dra_rules import preflight_rules as rules

# --- node selectors -------------------------------------------------------------------------------

LABEL_KEYS = ["rail", "cpus", "example.com/tier"]
LABEL_VALUES = ["a", "b", "4", "12"]
requirements = st.fixed_dictionaries(
    {
        "key": st.sampled_from([*LABEL_KEYS, "Bad Key"]),
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"]),
    },
    optional={"values": st.lists(st.sampled_from([*LABEL_VALUES, "-3", "x y"]), max_size=2)},
)
terms = st.fixed_dictionaries(
    {},
    optional={
        "matchExpressions": st.lists(requirements, max_size=3),
        "matchFields": st.lists(requirements, max_size=1),
    },
)
selectors = st.one_of(st.none(), st.fixed_dictionaries({"nodeSelectorTerms": st.lists(terms, max_size=3)}))
node_labels = st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(LABEL_VALUES), max_size=3)


def _plugin_takes_part(selector: object, labels: dict[str, str], managed: bool) -> bool:
    """Whether the plugin lets a match-all policy with ``selector`` claim this node's VFs."""
    claimed = evaluate([policy("p", {}, node_selector=selector)], managed=managed, node=labels).claimed
    assert claimed in (frozenset(), ALL)
    return claimed == ALL


def _node(labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "labels": labels}}


@settings(max_examples=settings().max_examples * 3 // 5)  # 300 under the CI profile
@given(selectors, node_labels, st.booleans())
def test_preflight_and_plugin_give_the_same_node_selector_verdict(
    selector: dict[str, Any] | None, labels: dict[str, str], managed: bool
) -> None:
    plugin = _plugin_takes_part(selector, labels, managed)
    assert rules.node_selected(selector, labels, managed=managed) is plugin
    twins = [policy("a", {}, node_selector=selector), policy("b", {}, node_selector=selector)]
    overlaps = rules.policy_overlaps(twins, [_node(labels)], managed=managed)
    assert bool(overlaps) is plugin


@pytest.mark.parametrize("operator", ["Gt", "Lt"])
def test_a_gt_or_lt_term_selects_no_node_in_the_preflight_as_in_the_plugin(operator: str) -> None:
    value = "4" if operator == "Gt" else "64"
    selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "cpus", "operator": operator, "values": [value]}]}
        ]
    }
    labels = {"cpus": "8"}  # Kubernetes node affinity would select this node (8 > 4, 8 < 64)
    assert rules.node_selected(selector, labels, managed=False) is False
    assert _plugin_takes_part(selector, labels, managed=False) is False


def test_a_gt_term_is_refused_in_managed_mode_so_its_policy_blocks_on_every_node() -> None:
    selector = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["4"]}]}]
    }
    ev = evaluate([policy("p", {}, node_selector=selector)], managed=True, node={"cpus": "2"})
    assert (ev.claimed, ev.eligible) == (ALL, frozenset())
    assert {r for d in ALL for r in ev.outcomes[d].reasons} == {R.UNSUPPORTED_RESOURCE_FILTER}
    assert rules.node_selected(selector, {"cpus": "2"}, managed=True) is True
    selection = label_selectors.evaluate_node_selector(selector, {"cpus": "8"}, "spec.nodeSelector")
    (problem,) = selection.unsupported
    assert problem.path == "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator"
    assert "'Gt' is not supported" in problem.message and "In or NotIn" in problem.message


# --- resource filters -----------------------------------------------------------------------------

VENDORS, DEVICE_IDS, PF_BDFS = ["15b3", "8086", "ffff"], ["101e", "154c"], ["0000:3b:00.0", "0000:5e:00.0"]
PFS = ["ens1f0", "ens2f0", "ens1f0#0-1"]
"""Every value the filters below use exists on some VF (even a PF literally named ``ens1f0#0-1``), so
a preflight overlap, which assumes any attribute combination can exist, is one the universe has."""
UNIVERSE = tuple(
    vf(f"0000:{i + 16:02x}:00.1", pf, pf_bdf, 0, vendor=vendor, device_id=dev, link_type=link)
    for i, (vendor, dev, pf, pf_bdf, link) in enumerate(
        itertools.product(VENDORS, DEVICE_IDS, PFS, PF_BDFS, ["ethernet", "infiniband"])
    )
)
"""One VF for every combination of the attributes the filters below compare."""

filters = st.fixed_dictionaries(
    {},
    optional={
        "vendors": st.lists(st.sampled_from(VENDORS), max_size=2),
        "devices": st.lists(st.sampled_from(DEVICE_IDS), max_size=2),
        "pfNames": st.lists(st.sampled_from(PFS), max_size=2),
        "pfPciAddresses": st.lists(st.sampled_from(PF_BDFS), max_size=2),
        "drivers": st.lists(st.sampled_from(["vfio-pci", "mlx5_core"]), max_size=2),
        "linkType": st.sampled_from(["eth", "ethernet", "ib", "infiniband", "ETH"]),
    },
)


def _claimed_alone(name: str, resource_filter: dict[str, Any], managed: bool) -> frozenset[str]:
    pol = policy(name, {"resourceFilters": [resource_filter]})
    return evaluate([pol], managed=managed, devices=UNIVERSE, node={}).claimed


@settings(max_examples=settings().max_examples * 2 // 5)  # 200 under the CI profile
@given(filters, filters, st.booleans())
def test_preflight_overlap_of_two_filters_is_the_plugin_claiming_one_vf_for_both(
    first: dict[str, Any], second: dict[str, Any], managed: bool
) -> None:
    shared = _claimed_alone("a", first, managed) & _claimed_alone("b", second, managed)
    pols = [policy("a", {"resourceFilters": [first]}), policy("b", {"resourceFilters": [second]})]
    assert bool(rules.policy_overlaps(pols, [_node({})], managed=managed)) is bool(shared)


def test_disjoint_drivers_do_not_keep_two_policies_apart_because_the_plugin_ignores_drivers() -> None:
    first = {"pfNames": ["ens1f0"], "drivers": ["vfio-pci"]}
    second = {"pfNames": ["ens1f0"], "drivers": ["mlx5_core"]}
    for managed in (True, False):
        assert _claimed_alone("a", first, managed) == _claimed_alone("b", second, managed) != frozenset()
    pols = [policy("a", {"resourceFilters": [first]}), policy("b", {"resourceFilters": [second]})]
    assert rules.policy_overlaps(pols, [_node({})]) == [
        {"policies": ["dra-driver-sriov/a", "dra-driver-sriov/b"], "nodes": ["n1"]}
    ]


def test_drivers_is_not_a_constraining_filter_field() -> None:
    assert "drivers" not in resource_filters.FIELDS
    assert resource_filters.IGNORED_FIELDS == ("drivers",)
    parsed = resource_filters.parse_filter({"drivers": ["vfio-pci"]}, "f", managed=False)
    assert parsed.filter == resource_filters.ResourceFilter()
    assert [e.path for e in parsed.unsupported] == ["f.drivers"]


def test_a_pf_range_counts_as_its_whole_pf_for_overlap_only_in_managed_mode() -> None:
    pols = [
        policy("a", {"resourceFilters": [{"pfNames": ["ens1f0#0-1"]}]}),
        policy("b", {"resourceFilters": [{"pfNames": ["ens1f0"]}]}),
    ]
    assert rules.policy_overlaps(pols, [_node({})], managed=True) != []
    assert rules.policy_overlaps(pols, [_node({})], managed=False) == []
