"""Tests for sriov_dra.core.policies: first-match policy evaluation, node selectors, structure, properties."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes.policy_objects import (
    ALL,
    DEVICES,
    NAME_KEY,
    NODE,
    NS_KEY,
    D,
    device_attrs,
    evaluate,
    pf_config,
    policy,
    rail_attrs,
)

from sriov_dra.core import policies
from sriov_dra_rules import errors

# --- Opt-in and first match -----------------------------------------------------------------------


@pytest.mark.parametrize("managed", [True, False], ids=["managed", "compat"])
def test_nothing_is_advertised_without_a_policy(managed: bool) -> None:
    ev = evaluate([], managed=managed)
    assert ev.claimed == frozenset() and ev.eligible == frozenset()


@pytest.mark.parametrize("managed", [True, False], ids=["managed", "compat"])
def test_empty_config_matches_every_device_and_empty_configs_match_none(managed: bool) -> None:
    assert evaluate([policy("all", {})], managed=managed).eligible == ALL
    assert evaluate([policy("none")], managed=managed).claimed == frozenset()


def test_alphabetically_first_policy_wins_then_first_config() -> None:
    ev = evaluate([policy("b-second", {}), policy("a-first", pf_config("ens1f0"), {})])
    assert {d: (o.policy, o.config_index) for d, o in ev.outcomes.items()} == {
        "0000-3b-02-0": ("a-first", 0),
        "0000-3b-02-1": ("a-first", 0),
        "0000-5e-02-0": ("a-first", 1),
        "0000-5e-02-1": ("a-first", 1),
    }


def test_configs_do_not_merge_across_matches() -> None:
    objs = [
        rail_attrs("x", "a", {"string": "rail-a-net"}),
        device_attrs("y", {"t": "extra"}, {"example.com/k": {"int": 1}}),
    ]
    ev = evaluate(
        [
            policy(
                "p",
                pf_config("ens1f0", "a"),
                {"resourceFilters": [{}], "deviceAttributesSelector": {"matchLabels": {"t": "extra"}}},
            )
        ],
        objs,
    )
    assert set(ev.outcomes["0000-3b-02-0"].values) == {NAME_KEY}
    assert set(ev.outcomes["0000-5e-02-0"].values) == {"example.com/k"}


# --- Node selectors -------------------------------------------------------------------------------


def _term(*exprs: dict[str, object], **extra: object) -> dict[str, object]:
    return {"matchExpressions": list(exprs), **extra}


@pytest.mark.parametrize(
    ("selector", "managed", "claimed", "blocked"),
    [
        (
            {
                "nodeSelectorTerms": [
                    _term({"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]})
                ]
            },
            True,
            ALL,
            set(),
        ),
        (
            {
                "nodeSelectorTerms": [
                    _term({"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-b"]})
                ]
            },
            True,
            set(),
            set(),
        ),
        (
            {
                "nodeSelectorTerms": [
                    _term({"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-b"]}),
                    _term({"key": "networking.example.com/dual-rail", "operator": "Exists"}),
                ]
            },
            True,
            ALL,
            set(),
        ),
        ({"nodeSelectorTerms": [{}]}, False, ALL, set()),
        ({"nodeSelectorTerms": [{}]}, True, ALL, ALL),
        ({"nodeSelectorTerms": []}, False, ALL, set()),
        (
            {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["x"]}]}
                ]
            },
            True,
            ALL,
            ALL,
        ),
        (
            {"nodeSelectorTerms": [_term({"key": "cpus", "operator": "Gt", "values": ["4"]})]},
            False,
            set(),
            set(),
        ),
        ({"nodeSelectorTerms": [_term({"key": "cpus", "operator": "Gt", "values": ["4"]})]}, True, ALL, ALL),
    ],
    ids=[
        "matching-term",
        "non-matching-term",
        "terms-are-ored",
        "compat-empty-term-matches-all-as-upstream",
        "managed-empty-term-refused",
        "compat-no-terms-matches-all",
        "managed-matchfields-refused",
        "compat-gt-term-skipped-as-upstream",
        "managed-gt-refused",
    ],
)
def test_node_selector(
    selector: dict[str, object], managed: bool, claimed: set[str], blocked: set[str]
) -> None:
    ev = evaluate([policy("p", {}, node_selector=selector)], managed=managed)
    assert ev.claimed == claimed
    assert ev.blocked == blocked


# --- Structural errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pols", "objs", "path"),
    [
        ([{"metadata": {}, "spec": {}}], [], "SriovResourcePolicy[0].metadata.name"),
        ([policy("p", {}), policy("p", {})], [], "SriovResourcePolicy/p"),
        (
            [policy("p", {"resourceFilters": [{"vendors": "15b3"}]})],
            [],
            "SriovResourcePolicy/p.spec.configs[0].resourceFilters[0].vendors",
        ),
        (
            [policy("p", {"resourceFilters": [{"linkType": "roce"}]})],
            [],
            "SriovResourcePolicy/p.spec.configs[0].resourceFilters[0].linkType",
        ),
        ([{"metadata": {"name": "p"}}], [], "SriovResourcePolicy/p.spec"),
        ([], [device_attrs("x", {"t": "x"}, {}), device_attrs("x", {}, {})], "DeviceAttributes/x"),
    ],
    ids=[
        "policy-without-name",
        "duplicate-policy-names",
        "vendors-not-a-list",
        "linktype-outside-enum",
        "policy-without-spec",
        "duplicate-attribute-objects",
    ],
)
def test_schema_violations_raise_invalid_spec(
    pols: list[dict[str, object]], objs: list[dict[str, object]], path: str
) -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        evaluate(pols, objs)
    assert path in [e.path for e in exc.value.errors]


# --- Properties -----------------------------------------------------------------------------------

_filter = st.fixed_dictionaries(
    {},
    optional={
        "vendors": st.lists(st.sampled_from(["15b3", "8086"]), max_size=2),
        "pfNames": st.lists(st.sampled_from(["ens1f0", "ens2f0", "ens1f0#0-1"]), max_size=2),
        "devices": st.lists(st.sampled_from(["101e", "154c"]), max_size=1),
        "linkType": st.sampled_from(["eth", "ib"]),
        "drivers": st.lists(st.just("vfio-pci"), max_size=1),
    },
)
_selector = st.one_of(
    st.none(),
    st.just({}),
    st.builds(lambda v: {"matchLabels": {"t": v}}, st.sampled_from(["a", "b", "c"])),
)


def _config(filters: list[dict[str, object]], selector: object) -> dict[str, object]:
    config: dict[str, object] = {"resourceFilters": filters}
    if selector is not None:
        config["deviceAttributesSelector"] = selector
    return config


_configs = st.lists(st.builds(_config, st.lists(_filter, max_size=2), _selector), max_size=3)
_policies = st.lists(
    st.tuples(st.sampled_from(["p1", "p2", "p3", "p4"]), _configs), max_size=4, unique_by=lambda p: p[0]
).map(lambda ps: [policy(name, *configs) for name, configs in ps])
_attr_value = st.one_of(
    st.builds(lambda s: {"string": s}, st.sampled_from(["n", "m", ""])),
    st.builds(lambda i: {"int": i}, st.integers(-2, 2)),
)
_objects = st.lists(
    st.tuples(
        st.sampled_from(["o1", "o2", "o3", "o4"]),
        st.sampled_from(["a", "b", "c"]),
        st.dictionaries(
            st.sampled_from([NAME_KEY, NS_KEY, "example.com/k", f"{D}/PFName"]), _attr_value, max_size=3
        ),
    ),
    max_size=4,
    unique_by=lambda o: o[0],
).map(lambda os: [device_attrs(name, {"t": label}, attrs) for name, label, attrs in os])


@given(_policies, _objects, st.booleans(), st.randoms())
def test_evaluation_does_not_depend_on_input_order(
    pols: list[dict[str, object]], objs: list[dict[str, object]], managed: bool, rnd: random.Random
) -> None:
    devices = list(DEVICES)
    shuffled = (list(pols), list(objs), devices[:])
    for seq in shuffled:
        rnd.shuffle(seq)
    first = evaluate(pols, objs, managed=managed)
    second = policies.evaluate_policies(
        shuffled[2], shuffled[0], shuffled[1], node_labels=NODE, managed=managed
    )
    assert first == second


@given(_policies, _objects, st.booleans())
def test_claimed_is_the_disjoint_union_of_eligible_and_blocked(
    pols: list[dict[str, object]], objs: list[dict[str, object]], managed: bool
) -> None:
    ev = evaluate(pols, objs, managed=managed)
    assert ev.eligible | ev.blocked == ev.claimed
    assert not ev.eligible & ev.blocked
    assert all(o.values == {} for d, o in ev.outcomes.items() if d in ev.blocked)
    assert all(not o.reasons for d, o in ev.outcomes.items() if d in ev.eligible)


def _without_unsupported(pols: list[dict[str, object]]) -> bool:
    text = repr(pols)
    return "drivers': ['" not in text and "#" not in text


@given(_policies, _objects)
def test_managed_mode_changes_usability_never_the_claiming_config(
    pols: list[dict[str, object]], objs: list[dict[str, object]]
) -> None:
    if not _without_unsupported(pols):
        return
    managed = evaluate(pols, objs, managed=True)
    compat = evaluate(pols, objs, managed=False)
    assert {d: (o.policy, o.config_index) for d, o in managed.outcomes.items()} == {
        d: (o.policy, o.config_index) for d, o in compat.outcomes.items()
    }


# --- a selector that matches nothing on a node where its policy applies -----------------------------


@pytest.mark.parametrize("managed", [True, False], ids=["auto-attach", "compatibility"])
def test_a_pf_name_typo_is_reported_without_blocking_what_the_filter_still_selects(managed: bool) -> None:
    pol = policy("p", {"resourceFilters": [{"pfNames": ["ens1f0", "ens2f9"]}]})
    ev = evaluate([pol], [], managed=managed)
    assert {"0000-3b-02-0", "0000-3b-02-1"} <= ev.claimed
    found = [d for d in ev.diagnostics if d.reason is errors.Reason.SELECTOR_MATCHES_NOTHING]
    assert [(d.source, d.path, d.blocking) for d in found] == [
        ("SriovResourcePolicy/p", "spec.configs[0].resourceFilters[0]", False)
    ]
    assert "pfNames 'ens2f9' name no PF on this node" in found[0].message
    assert "ens1f0, ens2f0" in found[0].message


def test_a_filter_entry_that_selects_no_device_here_is_reported() -> None:
    pol = policy("p", {"resourceFilters": [{"vendors": ["1af4"]}]})
    ev = evaluate([pol], [])
    assert ev.claimed == frozenset()
    assert any(
        d.reason is errors.Reason.SELECTOR_MATCHES_NOTHING and "selects no device on this node" in d.message
        for d in ev.diagnostics
    )


def test_a_policy_whose_node_selector_excludes_this_node_reports_nothing() -> None:
    selector = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "rail", "operator": "In", "values": ["x"]}]}]
    }
    pol = policy("p", {"resourceFilters": [{"pfNames": ["ens9f9"]}]}, node_selector=selector)
    ev = evaluate([pol], [])
    assert not [d for d in ev.diagnostics if d.reason is errors.Reason.SELECTOR_MATCHES_NOTHING]
