"""Tests for sriov_dra.core.attributes: qualified names, values, reserved keys, NAD references."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import attributes

D = "sriovnetwork.k8snetworkplumbingwg.io"
NAME_KEY = f"{D}/netAttachDefName"
NS_KEY = f"{D}/netAttachDefNamespace"

# Independent reference grammar for DRA QualifiedName (pinned Kubernetes validateQualifiedName).
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
REFERENCE_QUALIFIED_NAME = re.compile(
    rf"((?=[^/]{{1,63}}/){_LABEL}(\.{_LABEL})*/)?[A-Za-z_][A-Za-z0-9_]{{0,31}}", re.ASCII
)
REFERENCE_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?",
    re.ASCII,
)


@pytest.mark.parametrize(
    ("name", "require_domain", "valid"),
    [
        ("k8s.cni.cncf.io/resourceName", False, True),
        ("resourceName", False, True),
        ("resourceName", True, False),
        ("_private", False, True),
        ("a" * 32, False, True),
        ("a" * 33, False, False),
        ("d" * 63 + "/x", False, True),
        ("d" * 64 + "/x", False, False),
        ("/x", False, False),
        ("example.com/", False, False),
        ("a/b/c", False, False),
        ("Example.com/x", False, False),
        ("example.com/9lives", False, False),
        ("example.com/with-dash", False, False),
        ("-bad.com/x", False, False),
        ("", False, False),
    ],
    ids=[
        "domain-and-id",
        "bare-id-allowed-by-dra",
        "bare-id-refused-when-domain-required",
        "underscore-start",
        "id-32-chars",
        "id-33-chars-too-long",
        "domain-63-chars",
        "domain-64-chars-too-long",
        "empty-domain",
        "empty-id",
        "two-slashes",
        "uppercase-domain",
        "id-starting-with-digit",
        "id-with-dash",
        "domain-starting-with-dash",
        "empty-name",
    ],
)
def test_qualified_name_rules(name: str, require_domain: bool, valid: bool) -> None:
    problems = attributes.qualified_name_problems(name, require_domain=require_domain)
    assert (problems == []) is valid


_alphabet = st.sampled_from("abcz09-._/AZ_")


@given(st.text(alphabet=_alphabet, max_size=80))
def test_qualified_name_validator_agrees_with_reference_regex(name: str) -> None:
    assert (attributes.qualified_name_problems(name) == []) == (
        REFERENCE_QUALIFIED_NAME.fullmatch(name) is not None
    )


@given(
    st.from_regex(rf"{_LABEL}(\.{_LABEL}){{0,3}}", fullmatch=True),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,40}", fullmatch=True),
)
def test_generated_qualified_names_agree_with_reference_regex(domain: str, ident: str) -> None:
    name = f"{domain}/{ident}"
    assert (attributes.qualified_name_problems(name) == []) == (
        REFERENCE_QUALIFIED_NAME.fullmatch(name) is not None
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"string": "rail-a"}, attributes.string_value("rail-a")),
        ({"int": -1}, attributes.int_value(-1)),
        ({"int": 2**63 - 1}, attributes.int_value(2**63 - 1)),
        ({"bool": False}, attributes.bool_value(False)),
        (
            {"version": "1.2.3-rc.1+build.5"},
            attributes.AttributeValue(attributes.AttributeType.VERSION, "1.2.3-rc.1+build.5"),
        ),
        ({"string": "x" * 64}, attributes.string_value("x" * 64)),
    ],
    ids=[
        "string",
        "negative-int",
        "int64-max",
        "bool-false-is-present",
        "semver-pre-and-build",
        "string-64-bytes",
    ],
)
def test_valid_scalar_values_decode(raw: object, expected: attributes.AttributeValue) -> None:
    value, problems = attributes.parse_attribute_value(raw, "v")
    assert problems == []
    assert value == expected
    assert value is not None and value.to_json() == raw


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"string": "x" * 65}, "65 bytes, max 64"),
        ({"string": "é" * 33}, "66 bytes, max 64"),
        ({"version": "1.2"}, "not a semver"),
        ({"version": "01.2.3"}, "not a semver"),
        ({"version": "1.2.3\n"}, "not a semver"),
        ({"version": "1.2.٣"}, "not a semver"),
        ({"int": True}, "expected an integer"),
        ({"int": 2**63}, "does not fit"),
        ({"bool": 1}, "expected a boolean"),
        ({"string": 5}, "expected a string"),
        ({"string": "a", "int": 1}, "exactly one"),
        ({}, "exactly one"),
        ({"strings": ["a"]}, "list attribute values are not supported"),
        ({"float": 1.5}, "unknown member"),
        ("rail-a", "expected an object"),
    ],
    ids=[
        "string-65-bytes",
        "string-multibyte-over-64-bytes",
        "version-two-parts",
        "version-leading-zero",
        "version-trailing-newline",
        "version-non-ascii-digit",
        "int-given-bool",
        "int-over-int64",
        "bool-given-int",
        "string-given-int",
        "two-members",
        "no-member",
        "list-form-refused",
        "unknown-member",
        "bare-string-not-object",
    ],
)
def test_invalid_values_are_refused_never_truncated(raw: object, fragment: str) -> None:
    value, problems = attributes.parse_attribute_value(raw, "spec.attributes[k]")
    assert value is None
    assert any(fragment in p.message for p in problems), problems


@given(st.text(alphabet=st.sampled_from("0123456789.-+abcXYZ"), max_size=20))
def test_version_validator_agrees_with_kubernetes_semver_regex(text: str) -> None:
    value, _ = attributes.parse_attribute_value({"version": text}, "v")
    assert (value is not None) == (REFERENCE_SEMVER.fullmatch(text) is not None)


def test_reserved_attributes_are_exactly_the_upstream_fourteen() -> None:
    expected = {
        f"{D}/vendor",
        f"{D}/deviceID",
        f"{D}/pfDeviceID",
        f"{D}/pciAddress",
        "k8s.cni.cncf.io/deviceID",
        f"{D}/PFName",
        f"{D}/EswitchMode",
        f"{D}/vfID",
        "resource.kubernetes.io/pcieRoot",
        f"{D}/pfPciAddress",
        "resource.kubernetes.io/pciBusID",
        f"{D}/linkType",
        f"{D}/rdmaCapable",
        "dra.net/numaNode",
        "resource.kubernetes.io/numaNode",
    }
    assert set(attributes.RESERVED_ATTRIBUTES) == expected


def test_attribute_map_separates_reserved_keys_from_valid_and_invalid_entries() -> None:
    result = attributes.validate_attribute_map(
        {
            "k8s.cni.cncf.io/resourceName": {"string": "rail_a"},
            f"{D}/PFName": {"string": "ens1f0"},
            "bad/na-me": {"string": "x"},
            "example.com/rail": {"int": 2},
        },
        "spec.attributes",
    )
    assert dict(result.values) == {
        "example.com/rail": attributes.int_value(2),
        "k8s.cni.cncf.io/resourceName": attributes.string_value("rail_a"),
    }
    assert result.reserved == (f"{D}/PFName",)
    assert [p.path for p in result.problems] == ['spec.attributes["bad/na-me"]']
    refusals = attributes.reserved_problems(result.reserved, "spec.attributes")
    assert refusals[0].path == f'spec.attributes["{D}/PFName"]'
    assert "device discovery" in refusals[0].message


def test_attribute_map_over_the_device_budget_is_refused() -> None:
    raw = {f"example.com/a{i}": {"int": i} for i in range(33)}
    result = attributes.validate_attribute_map(raw, "spec.attributes")
    assert any("33 attributes, max 32" in p.message for p in result.problems)


def test_operator_inputs_require_a_domain() -> None:
    result = attributes.validate_attribute_map(
        {"rail": {"string": "a"}}, "spec.dra.attributes", require_domain=True
    )
    assert result.values == {}
    assert "needs a domain prefix" in result.problems[0].message


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, None),
        ({"example.com/x": attributes.string_value("y")}, None),
        ({NAME_KEY: attributes.string_value("rail-a-net")}, attributes.NadReference("rail-a-net")),
        (
            {NAME_KEY: attributes.string_value("rail-a-net"), NS_KEY: attributes.string_value("")},
            attributes.NadReference("rail-a-net"),
        ),
        (
            {NAME_KEY: attributes.string_value("rail.a-net"), NS_KEY: attributes.string_value("infra")},
            attributes.NadReference("rail.a-net", "infra"),
        ),
    ],
    ids=[
        "no-keys-no-reference",
        "ordinary-metadata-only",
        "name-only-means-pod-namespace",
        "empty-namespace-means-pod-namespace",
        "explicit-namespace",
    ],
)
def test_nad_reference_valid_forms(
    values: dict[str, attributes.AttributeValue], expected: attributes.NadReference | None
) -> None:
    ref, problems = attributes.nad_reference(values, "spec.attributes")
    assert problems == []
    assert ref == expected


@pytest.mark.parametrize(
    ("values", "fragment"),
    [
        ({NS_KEY: attributes.string_value("infra")}, "is required when netAttachDefNamespace is set"),
        ({NAME_KEY: attributes.string_value("")}, "nonempty"),
        ({NAME_KEY: attributes.int_value(3)}, "must be a string attribute"),
        ({NAME_KEY: attributes.string_value("Rail_A")}, "not a valid NAD name"),
        (
            {NAME_KEY: attributes.string_value("a"), NS_KEY: attributes.string_value("in.fra")},
            "not a valid namespace",
        ),
        (
            {NAME_KEY: attributes.string_value("a"), NS_KEY: attributes.bool_value(True)},
            "must be a string attribute",
        ),
    ],
    ids=[
        "namespace-without-name",
        "empty-name",
        "name-wrong-type",
        "name-not-dns1123",
        "namespace-with-dot",
        "namespace-wrong-type",
    ],
)
def test_nad_reference_malformed_forms_are_errors(
    values: dict[str, attributes.AttributeValue], fragment: str
) -> None:
    ref, problems = attributes.nad_reference(values, "spec.attributes")
    assert ref is None
    assert any(fragment in p.message for p in problems), problems


def test_reference_resolves_an_omitted_namespace_to_the_pod_namespace() -> None:
    assert attributes.NadReference("rail-a-net").resolve("ai-workloads") == ("ai-workloads", "rail-a-net")
    assert attributes.NadReference("rail-a-net", "infra").resolve("ai-workloads") == ("infra", "rail-a-net")


def test_reference_attributes_omit_a_pod_namespace() -> None:
    assert attributes.reference_attributes(attributes.NadReference("n")) == {
        NAME_KEY: attributes.string_value("n")
    }
    assert attributes.reference_attributes(attributes.NadReference("n", "infra")) == {
        NAME_KEY: attributes.string_value("n"),
        NS_KEY: attributes.string_value("infra"),
    }


@pytest.mark.parametrize("member", ["string", "version"])
def test_attribute_string_with_a_lone_surrogate_is_a_problem_not_a_crash(member: str) -> None:
    """Found by the totality property: ``{"string": "\\ud800"}`` raised ``UnicodeEncodeError``."""
    value, problems = attributes.parse_attribute_value({member: "net-\ud800"}, "v")
    assert value is None
    assert [p.path for p in problems] == [f"v.{member}"] and "surrogate" in problems[0].message
