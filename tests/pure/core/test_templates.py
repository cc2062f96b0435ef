"""Tests for sriov_dra.core.templates: reference precedence, Pod-namespace defaulting, conflicts."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import attributes, templates, vf_config
from sriov_dra_rules import errors

D = "sriovnetwork.k8snetworkplumbingwg.io"
NAME_KEY = f"{D}/netAttachDefName"
NS_KEY = f"{D}/netAttachDefNamespace"
POD_NS = "ai-workloads"


def attrs(name: object = None, namespace: object = None) -> dict[str, object]:
    out: dict[str, object] = {"k8s.cni.cncf.io/resourceName": {"string": "sriov_vfs"}}
    if name is not None:
        out[NAME_KEY] = name
    if namespace is not None:
        out[NS_KEY] = namespace
    return out


def cfg(name: str = "", namespace: str = "") -> vf_config.VfConfig:
    return vf_config.VfConfig(net_attach_def_name=name, net_attach_def_namespace=namespace)


def vfconfig_entry(source: str, **parameters: str) -> dict[str, object]:
    """One allocation config entry for request ``nic``: a VfConfig from ``source`` with ``parameters``."""
    return {
        "source": source,
        "requests": ["nic"],
        "opaque": {
            "driver": D,
            "parameters": {"apiVersion": f"{D}/v1alpha1", "kind": "VfConfig", **parameters},
        },
    }


@pytest.mark.parametrize(
    ("device_attrs", "config", "expected"),
    [
        (attrs({"string": "rail-a-net"}), cfg(), ("ai-workloads", "rail-a-net", "DeviceAttributes")),
        (
            attrs({"string": "rail-a-net"}, {"string": ""}),
            cfg(),
            ("ai-workloads", "rail-a-net", "DeviceAttributes"),
        ),
        (
            attrs({"string": "rail-a-net"}, {"string": "infra"}),
            cfg(),
            ("infra", "rail-a-net", "DeviceAttributes"),
        ),
        (
            {NAME_KEY: attributes.string_value("rail-b-net")},
            cfg(),
            ("ai-workloads", "rail-b-net", "DeviceAttributes"),
        ),
        (attrs(), cfg("one-nad"), ("ai-workloads", "one-nad", "VfConfig")),
        (attrs(), cfg("one-nad", "infra"), ("infra", "one-nad", "VfConfig")),
        (
            attrs({"string": "rail-a-net"}),
            cfg("rail-a-net"),
            ("ai-workloads", "rail-a-net", "DeviceAttributes"),
        ),
        (
            attrs({"string": "rail-a-net"}),
            cfg("rail-a-net", POD_NS),
            ("ai-workloads", "rail-a-net", "DeviceAttributes"),
        ),
        (
            attrs({"string": "rail-a-net"}, {"string": "infra"}),
            cfg("rail-a-net", "infra"),
            ("infra", "rail-a-net", "DeviceAttributes"),
        ),
    ],
    ids=[
        "device-name-only-resolves-to-pod-namespace",
        "device-empty-namespace-resolves-to-pod-namespace",
        "device-explicit-namespace",
        "device-attribute-values-as-objects",
        "vfconfig-fallback-pod-namespace",
        "vfconfig-fallback-explicit-namespace",
        "both-agree-defaulted",
        "both-agree-after-resolution-default-vs-explicit-pod-namespace",
        "both-agree-explicit",
    ],
)
def test_resolution_precedence(
    device_attrs: dict[str, object], config: vf_config.VfConfig, expected: tuple[str, str, str]
) -> None:
    result = templates.resolve_template(device_attrs, config, POD_NS, device="0000-3b-02-0")
    assert (result.namespace, result.name, result.origin.value) == expected


@pytest.mark.parametrize(
    ("device_attrs", "config"),
    [
        (attrs({"string": "rail-a-net"}), cfg("rail-b-net")),
        (attrs({"string": "rail-a-net"}, {"string": "infra"}), cfg("rail-a-net")),
        (attrs({"string": "rail-a-net"}), cfg("rail-a-net", "infra")),
    ],
    ids=["different-names", "explicit-vs-pod-namespace", "pod-vs-explicit-namespace"],
)
def test_disagreeing_references_conflict_naming_both(
    device_attrs: dict[str, object], config: vf_config.VfConfig
) -> None:
    with pytest.raises(errors.Conflict) as exc:
        templates.resolve_template(
            device_attrs,
            config,
            POD_NS,
            device="0000-3b-02-0",
            attribute_sources=["rail-a-network-attributes"],
        )
    assert exc.value.reason is errors.Reason.CONFLICTING_NETWORK_REFERENCE
    text = str(exc.value)
    assert config.net_attach_def_name in text and "rail-a-net" in text
    assert "rail-a-network-attributes" in text and "0000-3b-02-0" in text


@pytest.mark.parametrize(
    "device_attrs",
    [
        attrs(None, {"string": "infra"}),
        attrs({"string": ""}),
        attrs({"int": 1}),
        attrs({"string": "Rail_A"}),
        attrs({"string": "x" * 70}),
        attrs("rail-a-net"),
    ],
    ids=[
        "namespace-only",
        "empty-name",
        "name-wrong-type",
        "name-not-dns1123",
        "name-over-64-bytes",
        "value-not-an-attribute-object",
    ],
)
def test_malformed_device_reference_is_an_error_without_vfconfig_fallback(
    device_attrs: dict[str, object],
) -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        templates.resolve_template(device_attrs, cfg("fallback-nad"), POD_NS, device="0000-3b-02-0")
    assert exc.value.reason is errors.Reason.INVALID_ATTRIBUTE


def test_no_reference_anywhere_is_missing_network_template() -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        templates.resolve_template(attrs(), cfg(), POD_NS, device="0000-3b-02-0")
    assert exc.value.reason is errors.Reason.MISSING_NETWORK_TEMPLATE
    assert "0000-3b-02-0" in str(exc.value)


def test_vfconfig_namespace_without_name_is_refused() -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        templates.resolve_template(attrs({"string": "rail-a-net"}), cfg("", "infra"), POD_NS, device="d")
    assert exc.value.reason is errors.Reason.INVALID_VF_CONFIG


def test_invalid_pod_namespace_is_refused() -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        templates.resolve_template(attrs(), cfg("n"), "", device="d")
    assert exc.value.reason is errors.Reason.INVALID_CONSUMER


def test_class_infra_plus_claim_name_resolves_to_claim_name_in_pod_namespace() -> None:
    scoped = vf_config.decode_allocation_configs(
        [
            vfconfig_entry("FromClass", netAttachDefName="a", netAttachDefNamespace="infra"),
            vfconfig_entry("FromClaim", netAttachDefName="b"),
        ]
    )
    result = templates.resolve_template(
        attrs(), vf_config.effective_vf_config(scoped, "nic"), POD_NS, device="d"
    )
    assert str(result) == "ai-workloads/b"


@pytest.mark.parametrize(
    ("supplied", "expected"),
    [
        ([], None),
        ([("a", attributes.NadReference("n"))], attributes.NadReference("n")),
        (
            [("a", attributes.NadReference("n")), ("b", attributes.NadReference("n"))],
            attributes.NadReference("n"),
        ),
        (
            [("a", attributes.NadReference("n", "infra")), ("b", attributes.NadReference("n", "infra"))],
            attributes.NadReference("n", "infra"),
        ),
    ],
    ids=["none", "single", "identical-defaulted", "identical-explicit"],
)
def test_merge_references_accepts_identical_symbolic_references(
    supplied: list[tuple[str, attributes.NadReference]], expected: attributes.NadReference | None
) -> None:
    assert templates.merge_references(supplied) == expected


@pytest.mark.parametrize(
    "supplied",
    [
        [("a", attributes.NadReference("n")), ("b", attributes.NadReference("m"))],
        [("a", attributes.NadReference("n")), ("b", attributes.NadReference("n", "infra"))],
        [("a", attributes.NadReference("n", "x")), ("b", attributes.NadReference("n", "y"))],
    ],
    ids=["different-names", "defaulted-vs-explicit-conservatively-refused", "different-explicit-namespaces"],
)
def test_merge_references_conflict_names_every_object(
    supplied: list[tuple[str, attributes.NadReference]],
) -> None:
    with pytest.raises(errors.Conflict) as exc:
        templates.merge_references(supplied)
    assert exc.value.reason is errors.Reason.CONFLICTING_NETWORK_REFERENCE
    assert "a ->" in str(exc.value) and "b ->" in str(exc.value)


_names = st.sampled_from(["n", "m"])
_namespaces = st.sampled_from([None, "infra", POD_NS])
_refs = st.builds(attributes.NadReference, _names, _namespaces)


@given(
    st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), _refs), max_size=4, unique_by=lambda e: e[0]),
    st.randoms(),
)
def test_merge_references_does_not_depend_on_object_order(
    supplied: list[tuple[str, attributes.NadReference]], rnd: random.Random
) -> None:
    shuffled = list(supplied)
    rnd.shuffle(shuffled)
    outcomes: list[object] = []
    for order in (supplied, shuffled):
        try:
            outcomes.append(("ok", templates.merge_references(order)))
        except errors.Conflict as exc:
            outcomes.append(("conflict", str(exc)))
    assert outcomes[0] == outcomes[1]


@given(_refs, _refs)
def test_agreeing_symbolic_references_resolve_to_equal_concrete_pairs(
    a: attributes.NadReference, b: attributes.NadReference
) -> None:
    if a == b:
        assert a.resolve(POD_NS) == b.resolve(POD_NS)
