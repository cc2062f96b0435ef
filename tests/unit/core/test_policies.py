"""Tests for sriov_dra.core.policies: first-match policy evaluation, filters, attribute merging."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import attributes, policies
from sriov_dra_rules import errors

D = "sriovnetwork.k8snetworkplumbingwg.io"
NAME_KEY = f"{D}/netAttachDefName"
NS_KEY = f"{D}/netAttachDefNamespace"
R = errors.Reason


def vf(bdf: str, pf: str, pf_bdf: str, vf_id: int, **extra: object) -> policies.DeviceFacts:
    fields: dict[str, object] = {
        "pci_address": bdf,
        "vendor": "15b3",
        "device_id": "101e",
        "pf_device_id": "101d",
        "pf_name": pf,
        "pf_pci_address": pf_bdf,
        "vf_id": vf_id,
        "driver": "mlx5_core",
        "numa_node": 0,
        "pcie_root": "pci0000:3a" if pf == "ens1f0" else "pci0000:5d",
        "link_type": "ethernet",
    }
    fields.update(extra)
    return policies.DeviceFacts(**fields)  # type: ignore[arg-type]


DEVICES = (
    vf("0000:3b:02.0", "ens1f0", "0000:3b:00.0", 0),
    vf("0000:3b:02.1", "ens1f0", "0000:3b:00.0", 1),
    vf("0000:5e:02.0", "ens2f0", "0000:5e:00.0", 0),
    vf("0000:5e:02.1", "ens2f0", "0000:5e:00.0", 1, link_type="infiniband", vendor="8086", device_id="154c"),
)
RAIL_A = frozenset({"0000-3b-02-0", "0000-3b-02-1"})
RAIL_B = frozenset({"0000-5e-02-0", "0000-5e-02-1"})
ALL = RAIL_A | RAIL_B
NODE = {"networking.example.com/dual-rail": "true", "kubernetes.io/hostname": "node-a"}


def policy(name: str, *configs: dict[str, object], node_selector: object = None) -> dict[str, object]:
    spec: dict[str, object] = {"configs": list(configs)}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    return {"metadata": {"name": name, "namespace": "dra-driver-sriov"}, "spec": spec}


def device_attrs(name: str, labels: dict[str, str], attrs: dict[str, object]) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"attributes": attrs}}


def pf_config(pf: str, template: str | None = None, **filter_extra: object) -> dict[str, object]:
    config: dict[str, object] = {"resourceFilters": [{"pfNames": [pf], **filter_extra}]}
    if template is not None:
        config["deviceAttributesSelector"] = {"matchLabels": {"networking.example.com/template": template}}
    return config


def rail_attrs(
    name: str, template: str, nad: object, extra: dict[str, object] | None = None
) -> dict[str, object]:
    attrs: dict[str, object] = {NAME_KEY: nad, **(extra or {})}
    return device_attrs(name, {"networking.example.com/template": template}, attrs)


def evaluate(
    pols: list[dict[str, object]],
    objs: list[dict[str, object]] | None = None,
    *,
    managed: bool = True,
    devices: tuple[policies.DeviceFacts, ...] = DEVICES,
    node: dict[str, str] | None = None,
) -> policies.PolicyEvaluation:
    return policies.evaluate_policies(
        devices, pols, objs or [], node_labels=NODE if node is None else node, managed=managed
    )


def reasons(ev: policies.PolicyEvaluation, device: str) -> tuple[errors.Reason, ...]:
    return ev.outcomes[device].reasons


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


# --- DeviceAttributes selection (spec §12.2.5 steps 1-2) ------------------------------------------


def test_spec_example_maps_each_rail_to_its_template() -> None:
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
    [("pci0000:3a", 18, True), ("pci0000:3a", 19, False), (None, 19, True)],
    ids=["14-discovered-plus-18-fits", "14-plus-19-over-budget", "13-without-pcieroot-plus-19-fits"],
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


# --- Discovery attributes -------------------------------------------------------------------------


def test_discovered_attributes_are_the_reserved_keys_and_omit_unknown_pcieroot() -> None:
    dev = DEVICES[0]
    published = policies.discovered_attributes(dev)
    assert set(published) == attributes.RESERVED_ATTRIBUTES
    assert published["resource.kubernetes.io/pcieRoot"] == attributes.string_value("pci0000:3a")
    assert published[f"{D}/vfID"] == attributes.int_value(0)
    assert published["k8s.cni.cncf.io/deviceID"] == attributes.string_value("0000:3b:02.0")
    unknown_root = vf("0000:3b:02.0", "ens1f0", "0000:3b:00.0", 0, pcie_root=None)
    assert "resource.kubernetes.io/pcieRoot" not in policies.discovered_attributes(unknown_root)
    assert dev.name == "0000-3b-02-0"


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
