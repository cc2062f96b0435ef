"""Tests for sriov_dra.core.device_attributes: DeviceAttributes selection and merging
(docs/design.md#device-attributes)."""

from __future__ import annotations

import pytest
from tests.fakes.policy_objects import (
    NAME_KEY,
    NS_KEY,
    RAIL_A,
    RAIL_B,
    D,
    R,
    device_attrs,
    evaluate,
    pf_config,
    policy,
    rail_attrs,
    reasons,
    vf,
)

from sriov_dra.core import attributes
from sriov_dra_rules import errors

# --- DeviceAttributes selection ---------------------------------------------------------------------


def test_gpu_nic_pairs_example_maps_each_rail_to_its_template() -> None:
    objs = [
        rail_attrs("rail-a-network-attributes", "rail-a-net", {"string": "rail-a-net"}),
        rail_attrs("rail-b-network-attributes", "rail-b-net", {"string": "rail-b-net"}),
    ]
    pol = policy(
        "dual-rail-netdevice-policy",
        pf_config("ens1f0", "rail-a-net", vendors=["15b3"], linkType="eth"),
        pf_config("ens2f0", "rail-b-net", vendors=["15b3"], linkType="eth"),
        node_selector={
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "networking.example.com/dual-rail", "operator": "In", "values": ["true"]}
                    ]
                }
            ]
        },
    )
    ev = evaluate([pol], objs)
    assert ev.eligible == RAIL_A | {"0000-5e-02-0"}
    assert ev.outcomes["0000-3b-02-1"].reference == attributes.NadReference("rail-a-net")
    assert ev.outcomes["0000-5e-02-0"].reference == attributes.NadReference("rail-b-net")
    assert ev.device_attributes()["0000-3b-02-0"] == {NAME_KEY: attributes.string_value("rail-a-net")}
    assert ev.outcomes["0000-3b-02-0"].attribute_sources == ("rail-a-network-attributes",)
    assert ev.diagnostics == ()


@pytest.mark.parametrize("managed", [True, False], ids=["managed", "compat"])
def test_nil_selector_allows_uniform_fallback(managed: bool) -> None:
    ev = evaluate([policy("p", pf_config("ens1f0"))], managed=managed)
    assert ev.eligible == RAIL_A
    assert ev.outcomes["0000-3b-02-0"].values == {} and ev.outcomes["0000-3b-02-0"].reference is None


def test_selector_with_zero_matches_blocks_in_managed_mode_and_does_not_fall_through() -> None:
    ev = evaluate([policy("a", pf_config("ens1f0", "missing"), {})])
    assert ev.blocked == RAIL_A
    assert reasons(ev, "0000-3b-02-0") == (R.DEVICE_NOT_ELIGIBLE,)
    assert ev.outcomes["0000-3b-02-0"].config_index == 0
    assert ev.eligible == RAIL_B


def test_selector_with_zero_matches_advertises_without_attributes_in_compat_mode() -> None:
    ev = evaluate([policy("a", pf_config("ens1f0", "missing"))], managed=False)
    assert ev.eligible == RAIL_A and ev.device_attributes()["0000-3b-02-0"] == {}


def test_matching_object_with_empty_map_is_valid() -> None:
    ev = evaluate(
        [policy("a", pf_config("ens1f0", "empty"))],
        [device_attrs("e", {"networking.example.com/template": "empty"}, {})],
    )
    assert ev.eligible == RAIL_A
    assert ev.outcomes["0000-3b-02-0"].attribute_sources == ("e",)


def test_empty_selector_selects_every_object_merged_in_name_order_last_wins() -> None:
    objs = [
        device_attrs("b-obj", {}, {"example.com/k": {"string": "from-b"}, "example.com/b": {"int": 2}}),
        device_attrs("a-obj", {}, {"example.com/k": {"string": "from-a"}, "example.com/a": {"int": 1}}),
    ]
    ev = evaluate([policy("p", {"deviceAttributesSelector": {}})], objs)
    assert ev.device_attributes()["0000-3b-02-0"] == {
        "example.com/a": attributes.int_value(1),
        "example.com/b": attributes.int_value(2),
        "example.com/k": attributes.string_value("from-b"),
    }


@pytest.mark.parametrize(
    ("objs", "reason"),
    [
        (
            [rail_attrs("x", "a", None) | {"spec": {"attributes": {NS_KEY: {"string": "infra"}}}}],
            R.INVALID_ATTRIBUTE,
        ),
        ([rail_attrs("x", "a", {"string": ""})], R.INVALID_ATTRIBUTE),
        ([rail_attrs("x", "a", {"int": 5})], R.INVALID_ATTRIBUTE),
        (
            [rail_attrs("x", "a", {"string": "n"}), rail_attrs("y", "a", {"string": "m"})],
            R.CONFLICTING_NETWORK_REFERENCE,
        ),
        (
            [
                rail_attrs("x", "a", {"string": "n"}),
                rail_attrs("y", "a", {"string": "n"}, {NS_KEY: {"string": "infra"}}),
            ],
            R.CONFLICTING_NETWORK_REFERENCE,
        ),
        ([rail_attrs("x", "a", {"string": "n"}, {f"{D}/PFName": {"string": "spoof"}})], R.RESERVED_ATTRIBUTE),
        (
            [rail_attrs("x", "a", {"string": "n"}, {"example.com/long": {"string": "z" * 65}})],
            R.INVALID_ATTRIBUTE,
        ),
    ],
    ids=[
        "namespace-only-reference",
        "empty-name",
        "name-wrong-type",
        "conflicting-names",
        "defaulted-vs-explicit-namespace",
        "reserved-key",
        "string-over-64-bytes",
    ],
)
def test_unresolved_attributes_claim_and_block_in_managed_mode(
    objs: list[dict[str, object]], reason: errors.Reason
) -> None:
    ev = evaluate([policy("a", pf_config("ens1f0", "a")), policy("b", {})], objs)
    assert ev.blocked == RAIL_A
    assert reason in reasons(ev, "0000-3b-02-0")
    assert ev.outcomes["0000-3b-02-0"].values == {}
    assert ev.eligible == RAIL_B
    assert any(d.reason is reason and d.blocking for d in ev.diagnostics)


def test_conflict_diagnostic_names_both_objects() -> None:
    objs = [rail_attrs("obj-x", "a", {"string": "n"}), rail_attrs("obj-y", "a", {"string": "m"})]
    ev = evaluate([policy("a", pf_config("ens1f0", "a"))], objs)
    diag = next(d for d in ev.diagnostics if d.reason is R.CONFLICTING_NETWORK_REFERENCE)
    assert "obj-x" in diag.message and "obj-y" in diag.message


def test_identical_references_in_two_objects_agree() -> None:
    objs = [
        rail_attrs("x", "a", {"string": "n"}, {NS_KEY: {"string": ""}}),
        rail_attrs("y", "a", {"string": "n"}),
    ]
    ev = evaluate([policy("a", pf_config("ens1f0", "a"))], objs)
    assert ev.eligible == RAIL_A
    assert ev.device_attributes()["0000-3b-02-0"] == {NAME_KEY: attributes.string_value("n")}


def test_reserved_key_is_skipped_with_a_warning_in_compat_mode() -> None:
    objs = [rail_attrs("x", "a", {"string": "n"}, {f"{D}/PFName": {"string": "spoof"}})]
    ev = evaluate([policy("a", pf_config("ens1f0", "a"))], objs, managed=False)
    assert ev.eligible == RAIL_A
    assert f"{D}/PFName" not in ev.device_attributes()["0000-3b-02-0"]
    diag = next(d for d in ev.diagnostics if d.reason is R.RESERVED_ATTRIBUTE)
    assert not diag.blocking


def test_invalid_value_blocks_even_in_compat_mode() -> None:
    objs = [rail_attrs("x", "a", {"string": "n"}, {"example.com/v": {"version": "v1"}})]
    ev = evaluate([policy("a", pf_config("ens1f0", "a"))], objs, managed=False)
    assert ev.blocked == RAIL_A


def test_reference_keys_are_ordinary_last_wins_attributes_in_compat_mode() -> None:
    objs = [rail_attrs("x", "a", {"string": "n"}), rail_attrs("y", "a", {"string": "m"})]
    ev = evaluate([policy("a", pf_config("ens1f0", "a"))], objs, managed=False)
    assert ev.device_attributes()["0000-3b-02-0"] == {NAME_KEY: attributes.string_value("m")}
    assert ev.outcomes["0000-3b-02-0"].reference is None


@pytest.mark.parametrize("managed", [True, False], ids=["managed", "compat"])
@pytest.mark.parametrize(
    ("pcie_root", "custom", "eligible"),
    [("pci0000:3a", 17, True), ("pci0000:3a", 18, False), (None, 18, True)],
    ids=["15-discovered-plus-17-fits", "15-plus-18-over-budget", "14-without-pcieroot-plus-18-fits"],
)
def test_total_attribute_budget_per_device(
    pcie_root: str | None, custom: int, eligible: bool, managed: bool
) -> None:
    dev = vf("0000:3b:02.0", "ens1f0", "0000:3b:00.0", 0, pcie_root=pcie_root)
    objs = [device_attrs("x", {"t": "x"}, {f"example.com/a{i}": {"int": i} for i in range(custom)})]
    ev = evaluate(
        [policy("p", {"deviceAttributesSelector": {"matchLabels": {"t": "x"}}})],
        objs,
        managed=managed,
        devices=(dev,),
    )
    assert (dev.name in ev.eligible) is eligible
    if not eligible:
        assert reasons(ev, dev.name) == (R.INVALID_ATTRIBUTE,)


@pytest.mark.parametrize(
    ("managed", "blocked", "eligible"),
    [(True, RAIL_A, frozenset()), (False, frozenset(), RAIL_A)],
    ids=["managed-blocks", "compat-no-attributes"],
)
def test_invalid_label_selector(managed: bool, blocked: frozenset[str], eligible: frozenset[str]) -> None:
    selector = {"matchExpressions": [{"key": "t", "operator": "Bogus", "values": ["x"]}]}
    ev = evaluate(
        [policy("p", {"resourceFilters": [{"pfNames": ["ens1f0"]}], "deviceAttributesSelector": selector})],
        managed=managed,
    )
    assert ev.blocked == blocked and ev.eligible == eligible
    assert any(d.reason is R.UNSUPPORTED_MANAGED_SELECTOR for d in ev.diagnostics)


# --- attribute-name spellings: one rule for qualified and unqualified keys ----------------------------


def _rail(attrs: dict[str, object]) -> dict[str, object]:
    return device_attrs("rail-a", {"networking.example.com/template": "rail-a-net"}, attrs)


def _one_rail(attrs: dict[str, object], *, managed: bool = True) -> object:
    return evaluate([policy("p", pf_config("ens1f0", "rail-a-net"))], [_rail(attrs)], managed=managed)


def test_an_unqualified_net_attach_def_name_is_the_drivers_own_key_and_names_the_template() -> None:
    ev = _one_rail(
        {"netAttachDefName": {"string": "rail-a-net"}, "netAttachDefNamespace": {"string": "infra"}}
    )
    assert ev.outcomes["0000-3b-02-1"].reference == attributes.NadReference("rail-a-net", "infra")
    assert ev.outcomes["0000-3b-02-1"].values[NAME_KEY] == attributes.string_value("rail-a-net")


def test_a_qualified_and_an_unqualified_spelling_of_one_key_are_refused_together() -> None:
    ev = _one_rail({"netAttachDefName": {"string": "a"}, NAME_KEY: {"string": "b"}})
    assert errors.Reason.INVALID_ATTRIBUTE in reasons(ev, "0000-3b-02-1")
    messages = [d.message for d in ev.diagnostics]
    assert any("names the same attribute as" in m for m in messages), messages


@pytest.mark.parametrize("managed", [True, False], ids=["auto-attach", "compatibility"])
@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("sriovnetwork.k8snetworkplumbingwg.io/netAttachDefname", "did you mean 'netAttachDefName'?"),
        ("netAttachDefNamespce", "did you mean 'netAttachDefNamespace'?"),
        ("sriovnetwork.k8snetworkplumbingwg.io/rail", "'example.com/rail'"),
    ],
    ids=["misspelled-qualified", "misspelled-unqualified", "custom-key-in-the-drivers-domain"],
)
def test_an_unknown_key_in_the_drivers_domain_is_refused_never_published(
    key: str, hint: str, managed: bool
) -> None:
    ev = _one_rail({NAME_KEY: {"string": "rail-a-net"}, key: {"string": "x"}}, managed=managed)
    outcome = ev.outcomes["0000-3b-02-1"]
    assert errors.Reason.INVALID_ATTRIBUTE in outcome.reasons
    assert all(not k.endswith(key.rpartition("/")[2]) for k in outcome.values)
    assert any(
        "is not an attribute of this driver" in d.message and hint in d.message for d in ev.diagnostics
    )


def test_the_operator_refuses_an_unknown_key_in_the_drivers_domain_with_the_same_words() -> None:
    from sriov_dra.core.operator import node_policy

    dra = node_policy.validate_dra(
        {"attributes": {"sriovnetwork.k8snetworkplumbingwg.io/rail": {"int": 1}}}, compat_value="p/r"
    )
    assert any("is not an attribute of this driver" in p.message for p in dra.problems), dra.problems
