"""Tests for sriov_dra.core.interface_naming: managed interface naming (docs/design.md#interface-names) and Multus's final names."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import identities, interface_naming
from sriov_dra_rules import errors

CLAIM_A = identities.ClaimUid("c1a1c1a1-0000-4000-8000-00000000000a")
CLAIM_B = identities.ClaimUid("c1a1c1a1-0000-4000-8000-00000000000b")


def dev(
    claim: str = CLAIM_A,
    alias: str = "nics",
    request: str = "vf",
    device: str = "vf-0",
    *,
    sub: str | None = None,
    pool: str = "worker-a",
    ifname: str | None = None,
    req_key: str = "",
) -> interface_naming.AllocatedDevice:
    return interface_naming.AllocatedDevice(
        claim_uid=identities.ClaimUid(claim),
        claim_alias=alias,
        request=request,
        pool=pool,
        device=device,
        subrequest=sub,
        ifname=ifname,
        requirements_key=req_key,
    )


def _names(devices: list[interface_naming.AllocatedDevice], **kw: Any) -> list[tuple[str, str]]:
    return [(a.device, a.ifname) for a in interface_naming.assign_interfaces(devices, **kw)]


@pytest.mark.parametrize(
    ("devices", "expected"),
    [
        ([dev()], [("vf-0", "dra0")]),
        (
            [dev(CLAIM_B, "z-claim", device="vf-1"), dev(CLAIM_A, "a-claim", device="vf-9")],
            [("vf-9", "dra0"), ("vf-1", "dra1")],
        ),
        (
            [dev(request="rail-b", device="vf-0"), dev(request="rail-a", device="vf-1")],
            [("vf-1", "dra0"), ("vf-0", "dra1")],
        ),
        (
            [dev(request="r", sub="y", device="vf-0"), dev(request="r", sub="x", device="vf-1")],
            [("vf-1", "dra0"), ("vf-0", "dra1")],
        ),
        (
            [dev(device="vf-2", pool="worker-b"), dev(device="vf-3", pool="worker-a")],
            [("vf-3", "dra0"), ("vf-2", "dra1")],
        ),
        ([dev(device="vf-b"), dev(device="vf-a")], [("vf-a", "dra0"), ("vf-b", "dra1")]),
        (
            [dev(device="vf-0", ifname="dra0"), dev(device="vf-1"), dev(device="vf-2")],
            [("vf-0", "dra0"), ("vf-1", "dra1"), ("vf-2", "dra2")],
        ),
        (
            [dev(device="vf-0"), dev(device="vf-1", ifname="dra0"), dev(device="vf-2")],
            [("vf-0", "dra1"), ("vf-1", "dra0"), ("vf-2", "dra2")],
        ),
        (
            [dev(device="vf-0", ifname="uplink_p0"), dev(device="vf-1")],
            [("vf-0", "uplink_p0"), ("vf-1", "dra0")],
        ),
    ],
    ids=[
        "single-device-gets-dra0",
        "ordered-by-claim-alias",
        "ordered-by-request",
        "ordered-by-subrequest",
        "ordered-by-pool",
        "ordered-by-device",
        "explicit-dra0-keeps-its-place-in-sequence",
        "generated-names-skip-explicit-names",
        "explicit-kernel-style-name",
    ],
)
def test_assign_interfaces_orders_and_names(
    devices: list[interface_naming.AllocatedDevice], expected: Any
) -> None:
    assert _names(devices) == expected


def test_generated_names_skip_a_custom_primary_name() -> None:
    assert _names([dev(device="vf-0"), dev(device="vf-1")], primary_ifname="dra0") == [
        ("vf-0", "dra1"),
        ("vf-1", "dra2"),
    ]


def test_same_device_under_two_requests_gets_one_interface() -> None:
    result = interface_naming.assign_interfaces(
        [dev(request="b", device="vf-0"), dev(request="a", sub="s", device="vf-0"), dev(device="vf-1")]
    )
    assert [(a.device, a.ifname, a.requests) for a in result] == [
        ("vf-0", "dra0", ("a/s", "b")),
        ("vf-1", "dra1", ("vf",)),
    ]


def test_claim_referenced_by_two_aliases_uses_the_lexically_first() -> None:
    result = interface_naming.assign_interfaces(
        [
            dev(CLAIM_A, "zz-alias", device="vf-0"),
            dev(CLAIM_A, "aa-alias", device="vf-0"),
            dev(CLAIM_B, "mm-claim", device="vf-1"),
        ]
    )
    assert [(a.claim_alias, a.device, a.ifname) for a in result] == [
        ("aa-alias", "vf-0", "dra0"),
        ("mm-claim", "vf-1", "dra1"),
    ]


@pytest.mark.parametrize(
    ("devices", "reason", "message"),
    [
        (
            [dev(request="a", device="vf-0", ifname="x0"), dev(request="b", device="vf-0", ifname="x1")],
            errors.Reason.CONFLICTING_DEVICE_REQUIREMENTS,
            "different interface names",
        ),
        (
            [dev(request="a", device="vf-0", ifname="x0"), dev(request="b", device="vf-0")],
            errors.Reason.CONFLICTING_DEVICE_REQUIREMENTS,
            "different interface names",
        ),
        (
            [
                dev(request="a", device="vf-0", req_key="rail-a"),
                dev(request="b", device="vf-0", req_key="rail-b"),
            ],
            errors.Reason.CONFLICTING_DEVICE_REQUIREMENTS,
            "different network requirements",
        ),
        (
            [dev(CLAIM_A, "one", device="vf-0"), dev(CLAIM_B, "two", device="vf-0")],
            errors.Reason.CONFLICTING_DEVICE_REQUIREMENTS,
            "allocated to two claims",
        ),
    ],
    ids=[
        "same-vf-two-explicit-names",
        "same-vf-named-and-unnamed",
        "same-vf-two-templates",
        "same-vf-in-two-claims",
    ],
)
def test_disagreeing_requirements_for_one_vf_conflict(
    devices: list[interface_naming.AllocatedDevice], reason: errors.Reason, message: str
) -> None:
    with pytest.raises(errors.Conflict) as exc:
        interface_naming.assign_interfaces(devices)
    assert exc.value.reason is reason
    assert message in str(exc.value)


@pytest.mark.parametrize(
    ("devices", "reason", "message"),
    [
        (
            [dev(device="vf-0", ifname="data"), dev(device="vf-1", ifname="data")],
            errors.Reason.DUPLICATE_INTERFACE_NAME,
            "requested for two VFs",
        ),
        ([dev(ifname="eth0")], errors.Reason.INVALID_INTERFACE_NAME, "primary interface"),
        ([dev(ifname="averyveryverylongif")], errors.Reason.INVALID_INTERFACE_NAME, "is 19 bytes, max 15"),
        ([dev(ifname="eth/1")], errors.Reason.INVALID_INTERFACE_NAME, "not allowed"),
        ([dev(ifname="..")], errors.Reason.INVALID_INTERFACE_NAME, "reserved"),
        ([dev(claim="not-a-uid")], errors.Reason.INVALID_SPEC, "claimUID"),
        ([dev(alias="Bad_Alias")], errors.Reason.INVALID_SPEC, "claimAlias"),
    ],
    ids=[
        "repeated-explicit-name",
        "explicit-primary-name",
        "explicit-name-too-long",
        "explicit-name-with-slash",
        "explicit-dotdot",
        "malformed-claim-uid",
        "malformed-alias",
    ],
)
def test_invalid_explicit_names_and_identifiers_are_rejected(
    devices: list[interface_naming.AllocatedDevice], reason: errors.Reason, message: str
) -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        interface_naming.assign_interfaces(devices)
    assert exc.value.reason is reason
    assert message in str(exc.value)


def test_alias_naming_two_claims_is_rejected() -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        interface_naming.assign_interfaces(
            [dev(CLAIM_A, "same", device="vf-0"), dev(CLAIM_B, "same", device="vf-1")]
        )
    assert "resolves to several claims" in str(exc.value)


_claims = st.sampled_from([CLAIM_A, CLAIM_B])
_devices = st.lists(
    st.builds(
        dev,
        claim=_claims,
        alias=st.sampled_from(["a", "b", "c"]),
        request=st.sampled_from(["vf", "rail"]),
        device=st.sampled_from([f"vf-{i}" for i in range(6)]),
        sub=st.sampled_from([None, "x", "y"]),
        ifname=st.sampled_from([None, None, None, "dra1", "data"]),
    ),
    max_size=10,
)


def _try(devices: list[interface_naming.AllocatedDevice]) -> Any:
    try:
        return interface_naming.assign_interfaces(devices)
    except errors.SriovDraError as exc:
        return (type(exc), exc.reason, str(exc))


@given(_devices, st.randoms(use_true_random=False))
def test_names_and_errors_do_not_depend_on_input_order(
    devices: list[interface_naming.AllocatedDevice], rnd: Any
) -> None:
    shuffled = list(devices)
    rnd.shuffle(shuffled)
    assert _try(shuffled) == _try(devices)


@st.composite
def valid_allocations(draw: st.DrawFn) -> list[interface_naming.AllocatedDevice]:
    """Consistent inputs: one claim per alias, one claim per VF, agreeing names, unique explicit names."""
    aliases = {CLAIM_A: ["a", "b"], CLAIM_B: ["c"]}
    vfs = draw(st.lists(st.sampled_from([f"vf-{i}" for i in range(8)]), unique=True, max_size=6))
    explicit = iter(draw(st.permutations(["dra0", "dra2", "data", "uplink_p0", "x", "y", "z", "w"])))
    out: list[interface_naming.AllocatedDevice] = []
    for vf in vfs:
        claim = draw(_claims)
        ifname = next(explicit) if draw(st.booleans()) else None
        for _ in range(draw(st.integers(1, 3))):
            out.append(
                dev(
                    claim,
                    draw(st.sampled_from(aliases[claim])),
                    draw(st.sampled_from(["vf", "rail"])),
                    vf,
                    sub=draw(st.sampled_from([None, "x"])),
                    ifname=ifname,
                )
            )
    return out


@given(valid_allocations(), st.randoms(use_true_random=False))
def test_no_two_devices_share_a_name_and_each_vf_gets_one(
    devices: list[interface_naming.AllocatedDevice], rnd: Any
) -> None:
    result = interface_naming.assign_interfaces(devices)
    names = [a.ifname for a in result]
    assert len(set(names)) == len(names)
    assert "eth0" not in names
    assert len(result) == len({(d.pool, d.device) for d in devices})
    generated = [a.ifname for a in result if not a.explicit]
    assert generated == sorted(generated, key=lambda n: int(n[3:]))
    assert all(n.startswith("dra") and n[3:].isdigit() for n in generated)
    shuffled = list(devices)
    rnd.shuffle(shuffled)
    assert interface_naming.assign_interfaces(shuffled) == result


# --- Multus final interface names ---------------------------------------------------------------


def _final(selections: list[dict[str, Any]], **kw: Any) -> list[str]:
    kw.setdefault("pod_namespace", "ai-workloads")
    return [d.name for d in interface_naming.final_interface_names(selections, **kw)]


@pytest.mark.parametrize(
    ("selections", "layout", "namespace", "expected"),
    [
        (
            [{"name": "a", "interface": "foo"}, {"name": "b"}],
            interface_naming.MultusLayout(),
            "ns",
            ["eth0", "foo", "net2"],
        ),
        (
            [{"name": "a"}],
            interface_naming.MultusLayout(default_networks=("d1", "d2")),
            "ns",
            ["eth0", "net1", "net2", "net3"],
        ),
        (
            [{"name": "a"}],
            interface_naming.MultusLayout(default_networks=("d1",)),
            "kube-system",
            ["eth0", "net1"],
        ),
        (
            [{"name": "a"}],
            interface_naming.MultusLayout(auxiliary_chain=True),
            "ns",
            ["eth0", "net1", "net2"],
        ),
        ([{"name": "a"}], interface_naming.MultusLayout(primary_ifname="ovn0"), "ns", ["ovn0", "net1"]),
        (
            [{"name": "a", "interface": "", "interfaceRequest": "old0"}],
            interface_naming.MultusLayout(),
            "ns",
            ["eth0", "old0"],
        ),
        (
            [{"name": "a", "interface": "new0", "interfaceRequest": "old0"}],
            interface_naming.MultusLayout(),
            "ns",
            ["eth0", "new0"],
        ),
    ],
    ids=[
        "explicit-names-still-take-a-position",
        "default-networks-shift-positions",
        "system-namespace-skips-default-networks",
        "auxiliary-chain-is-last",
        "default-network-override-keeps-index-0",
        "deprecated-interfaceRequest-used-when-interface-empty",
        "interface-wins-over-interfaceRequest",
    ],
)
def test_final_names_follow_multus_positional_rule(
    selections: list[dict[str, Any]],
    layout: interface_naming.MultusLayout,
    namespace: str,
    expected: list[str],
) -> None:
    assert _final(selections, layout=layout, pod_namespace=namespace) == expected


def test_manual_net1_collides_with_generated_net1() -> None:
    selections = json.loads('[{"name":"net-a"},{"name":"net-b","interface":"net1"}]')
    collisions = interface_naming.find_interface_collisions(selections, pod_namespace="ns-a")
    assert [(c.name, c.selection_indexes) for c in collisions] == [("net1", (0, 1))]
    with pytest.raises(errors.InvalidSpec) as exc:
        interface_naming.check_interface_collisions(selections, pod_namespace="ns-a", owner="Pod ns-a/demo")
    assert exc.value.reason is errors.Reason.DUPLICATE_INTERFACE_NAME
    assert "selection [0] 'ns-a/net-a'" in str(exc.value)
    assert "selection [1] 'ns-a/net-b'" in str(exc.value)
    assert "Pod ns-a/demo" in str(exc.value)


@pytest.mark.parametrize(
    ("selections", "layout", "expected"),
    [
        (
            [{"name": "m", "interface": "dra0"}, {"name": "dra-sriov-x", "interface": "dra0"}],
            interface_naming.MultusLayout(),
            [("dra0", (0, 1))],
        ),
        ([{"name": "a", "interface": "eth0"}], interface_naming.MultusLayout(), [("eth0", (0,))]),
        (
            [{"name": "a", "interface": "net1"}],
            interface_naming.MultusLayout(default_networks=("d",)),
            [("net1", (0,))],
        ),
        (
            [{"name": "a", "interface": "net2"}],
            interface_naming.MultusLayout(auxiliary_chain=True),
            [("net2", (0,))],
        ),
        ([{"name": "a"}, {"name": "b", "interface": "dra0"}], interface_naming.MultusLayout(), []),
    ],
    ids=[
        "managed-vs-manual-explicit",
        "manual-vs-primary",
        "manual-vs-default-network",
        "manual-vs-auxiliary-chain",
        "no-collision",
    ],
)
def test_collisions_are_found_over_the_full_delegate_list(
    selections: list[dict[str, Any]], layout: interface_naming.MultusLayout, expected: Any
) -> None:
    got = interface_naming.find_interface_collisions(selections, pod_namespace="ns", layout=layout)
    assert [(c.name, c.selection_indexes) for c in got] == expected


def test_non_string_interface_is_an_invalid_annotation() -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        interface_naming.final_interface_names([{"name": "a", "interface": 3}], pod_namespace="ns")
    assert exc.value.reason is errors.Reason.INVALID_NETWORKS_ANNOTATION


_selections = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["a", "b"])},
        optional={"interface": st.sampled_from(["", "net1", "net2", "dra0", "eth0"])},
    ),
    max_size=6,
)


@given(_selections, st.integers(0, 2), st.booleans())
def test_unnamed_delegates_get_net_of_their_position(
    selections: list[dict[str, Any]], defaults: int, aux: bool
) -> None:
    layout = interface_naming.MultusLayout(
        default_networks=tuple(f"d{i}" for i in range(defaults)), auxiliary_chain=aux
    )
    delegates = interface_naming.final_interface_names(selections, pod_namespace="ns", layout=layout)
    assert len(delegates) == 1 + defaults + len(selections) + int(aux)
    assert [d.position for d in delegates] == list(range(len(delegates)))
    for d in delegates[1:]:
        assert d.explicit or d.name == f"net{d.position}"
    collisions = interface_naming.find_interface_collisions(selections, pod_namespace="ns", layout=layout)
    all_names = [d.name for d in delegates]
    assert {c.name for c in collisions} == {n for n in all_names if all_names.count(n) > 1}
