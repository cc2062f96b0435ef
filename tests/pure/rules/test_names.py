"""Tests for sriov_dra_rules.names: contract key spellings and format validators."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra_rules import names


@pytest.mark.parametrize(
    ("constant", "expected"),
    [
        (names.DRIVER_NAME, "sriovnetwork.k8snetworkplumbingwg.io"),
        (names.BINDING_ANNOTATION, "sriovnetwork.k8snetworkplumbingwg.io/binding"),
        (names.MANAGED_NETWORKS_ANNOTATION, "sriovnetwork.k8snetworkplumbingwg.io/managed-networks"),
        (names.NETWORKS_ANNOTATION, "k8s.v1.cni.cncf.io/networks"),
        (names.LABEL_MANAGED_BY, "sriovnetwork.k8snetworkplumbingwg.io/managed-by"),
        (names.LABEL_POD_UID, "sriovnetwork.k8snetworkplumbingwg.io/pod-uid"),
        (names.LABEL_CLAIM_UID, "sriovnetwork.k8snetworkplumbingwg.io/claim-uid"),
        (names.LABEL_NODE_UID, "sriovnetwork.k8snetworkplumbingwg.io/node-uid"),
        (names.FINALIZER_ATTACHMENT_PROTECTION, "sriovnetwork.k8snetworkplumbingwg.io/attachment-protection"),
        (names.ATTR_NET_ATTACH_DEF_NAME, "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefName"),
        (names.ATTR_NET_ATTACH_DEF_NAMESPACE, "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefNamespace"),
        (names.RESOURCE_NAME_ANNOTATION, "k8s.v1.cni.cncf.io/resourceName"),
        (names.SHADOW_NAME_PREFIX, "dra-sriov-"),
        (names.PROTOCOL_VERSION, 1),
        (names.BINDING_VERSION, 1),
        (names.REGISTRY_VERSION, 1),
    ],
    ids=[
        "driver-name",
        "binding-annotation",
        "registry-annotation",
        "multus-networks-annotation",
        "label-managed-by",
        "label-pod-uid",
        "label-claim-uid",
        "label-node-uid",
        "protection-finalizer",
        "attr-nad-name",
        "attr-nad-namespace",
        "resource-name-annotation",
        "shadow-prefix",
        "identity-protocol-version-1",
        "binding-version-1",
        "registry-version-1",
    ],
)
def test_contract_constant_is_spelled_as_the_design_says(constant: object, expected: object) -> None:
    assert constant == expected


def test_managed_by_value_is_a_valid_label_value() -> None:
    assert re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", names.MANAGED_BY_VALUE)
    assert len(names.MANAGED_BY_VALUE) <= 63


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("uplink_p0", None),
        ("flannel.1", None),
        ("dra0", None),
        ("a" * 15, None),
        ("averyveryverylongif", 'interface name "averyveryverylongif" is 19 bytes, max 15'),
        ("eth/1", "'/', ':', NUL and whitespace are not allowed"),
        ("..", "is reserved"),
        (".", "is reserved"),
        ("", "must not be empty"),
        ("net 1", "not allowed"),
        ("net:1", "not allowed"),
        ("net\t1", "not allowed"),
        ("nul\x00", "not allowed"),
        ("é" * 8, "is 16 bytes, max 15"),
        (7, "must be a string"),
    ],
    ids=[
        "underscore-accepted",
        "dot-accepted",
        "managed-name",
        "exactly-15-bytes",
        "19-bytes-rejected",
        "slash-rejected",
        "dotdot-rejected",
        "dot-rejected",
        "empty-rejected",
        "space-rejected",
        "colon-rejected",
        "tab-rejected",
        "nul-rejected",
        "limit-counts-utf8-bytes",
        "non-string-rejected",
    ],
)
def test_ifname_follows_linux_rules_not_dns(value: object, problem: str | None) -> None:
    got = names.ifname_problem(value)
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got


def _is_uuid(value: object) -> bool:
    return names.uuid_problem(value) is None


@pytest.mark.parametrize(
    ("check", "value", "ok"),
    [
        (_is_uuid, "11111111-2222-3333-4444-555555555555", True),
        (_is_uuid, "11111111-2222-3333-4444-55555555555A", False),
        (_is_uuid, "11111111222233334444555555555555", False),
        (_is_uuid, None, False),
        (names.is_hex64, "ab" * 32, True),
        (names.is_hex64, "ab" * 16, False),
        (names.is_hex64, "AB" * 32, False),
        (names.is_hex64, "ab" * 32 + "\n", False),
        (names.is_dns1123_label, "rail-a-net", True),
        (names.is_dns1123_label, "a" * 63, True),
        (names.is_dns1123_label, "a" * 64, False),
        (names.is_dns1123_label, "-rail", False),
        (names.is_dns1123_label, "Rail", False),
        (names.is_dns1123_label, "rail.a", False),
        (names.is_dns1123_subdomain, "worker-a.example.com", True),
        (names.is_dns1123_subdomain, "worker-a..example", False),
        (names.is_dns1123_subdomain, "a." * 126 + "a", True),
        (names.is_dns1123_subdomain, "a." * 127, False),
        (names.is_pci_address, "0000:03:00.1", True),
        (names.is_pci_address, "0000:81:1f.7", True),
        (names.is_pci_address, "pci:0000:03:00.1", False),
        (names.is_pci_address, "0000:03:20.1", False),
        (names.is_pci_address, "0000:03:00.8", False),
        (names.is_pci_address, "0000:0A:00.1", False),
    ],
    ids=[
        "uuid-lowercase",
        "uuid-uppercase-rejected",
        "uuid-without-dashes-rejected",
        "uuid-none-rejected",
        "hex64-ok",
        "hex64-truncated-rejected",
        "hex64-uppercase-rejected",
        "hex64-trailing-newline-rejected",
        "label-ok",
        "label-63-ok",
        "label-64-rejected",
        "label-leading-dash-rejected",
        "label-uppercase-rejected",
        "label-dot-rejected",
        "subdomain-fqdn-ok",
        "subdomain-empty-label-rejected",
        "subdomain-253-ok",
        "subdomain-254-rejected",
        "pci-ok",
        "pci-max-device-function-ok",
        "pci-prefix-rejected",
        "pci-device-over-1f-rejected",
        "pci-function-over-7-rejected",
        "pci-uppercase-rejected",
    ],
)
def test_format_validators(check: object, value: object, ok: bool) -> None:
    assert callable(check)
    assert check(value) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("worker-a", True),
        ("region-1/worker-a.example.com", True),
        ("worker-a/", False),
        ("/worker-a", False),
        ("x" * 254, False),
    ],
    ids=["single-subdomain", "slash-separated-subdomains", "trailing-slash", "leading-slash", "too-long"],
)
def test_pool_name_is_subdomains_joined_by_slash(value: str, ok: bool) -> None:
    assert (names.pool_name_problem(value) is None) is ok


_LABEL_CHARS = st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-")


@given(st.text(alphabet=_LABEL_CHARS, min_size=0, max_size=70))
def test_label_validator_matches_its_definition(value: str) -> None:
    expected = 0 < len(value) <= 63 and value[0] != "-" and value[-1] != "-"
    assert names.is_dns1123_label(value) is expected


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("net-a", None),
        ("a", None),
        ("a" * 63, None),
        ("a" * 64, "64 characters, max 63"),
        ("Net-a", "'Net-a' must be lowercase alphanumerics"),
        ("-net", "'-net' must be lowercase"),
        ("net-", "'net-' must be lowercase"),
        ("net.a", "'net.a' must be lowercase"),
        ("", "must not be empty"),
        (7, "must be a string, got int"),
    ],
    ids=[
        "plain",
        "single-char",
        "63-chars",
        "64-chars-names-the-length",
        "upper-case-names-the-value",
        "leading-dash",
        "trailing-dash",
        "dot",
        "empty",
        "not-a-string",
    ],
)
def test_dns1123_label_problem_names_the_value_and_the_rule(value: object, problem: str | None) -> None:
    got = names.dns1123_label_problem(value)
    assert got is None if problem is None else (got is not None and problem in got)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("example.com", None),
        ("rail-a-net", None),
        ("a" * 253, None),
        ("a" * 254, "254 characters, max 253"),
        ("a..b", "'a..b' must be dot-separated"),
        (".a", "'.a' must be dot-separated"),
        ("A.b", "'A.b' must be dot-separated"),
        ("", "must not be empty"),
    ],
    ids=[
        "dotted",
        "label",
        "253-chars",
        "254-chars-names-the-length",
        "empty-label",
        "leading-dot",
        "upper-case",
        "empty",
    ],
)
def test_dns1123_subdomain_problem_names_the_value_and_the_rule(value: str, problem: str | None) -> None:
    got = names.dns1123_subdomain_problem(value)
    assert got is None if problem is None else (got is not None and problem in got)


# Kubernetes' own definitions (IsDNS1123Label / IsDNS1123Subdomain), written independently.
_K8S_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_K8S_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_CHARS = st.sampled_from("abcz09-.A_")


@given(st.text(alphabet=_NAME_CHARS, max_size=70) | st.text(max_size=8))
def test_label_and_subdomain_validators_agree_with_kubernetes(value: str) -> None:
    label_ok = len(value) <= 63 and _K8S_LABEL.fullmatch(value) is not None
    subdomain_ok = len(value) <= 253 and _K8S_SUBDOMAIN.fullmatch(value) is not None
    assert names.is_dns1123_label(value) is label_ok
    assert names.is_dns1123_subdomain(value) is subdomain_ok


@given(st.text(alphabet=_NAME_CHARS, min_size=1, max_size=40))
def test_every_dns1123_problem_quotes_the_bad_value(value: str) -> None:
    for problem in (names.dns1123_label_problem(value), names.dns1123_subdomain_problem(value)):
        assert problem is None or repr(value) in problem


@given(st.text(max_size=20))
def test_valid_ifname_always_fits_ifnamsiz(value: str) -> None:
    if names.ifname_problem(value) is None:
        raw = value.encode("utf-8")
        assert 1 <= len(raw) <= 15
        assert value not in (".", "..")
        assert not any(c in "/:\0" or c.isspace() for c in value)


@pytest.mark.parametrize(
    "value", ["\ud800", "net\udfff", "\udbff\udbff"], ids=["lone-high", "lone-low-after-text", "two-highs"]
)
def test_ifname_with_a_lone_surrogate_is_refused_with_a_utf8_message(value: str) -> None:
    # A JSON "\ud800" escape in an annotation decodes to this; it has no UTF-8 (kernel) form.
    problem = names.ifname_problem(value)
    assert problem is not None and "surrogate" in problem
    problem.encode("utf-8")  # the message itself can be logged and sent over gRPC


# Every code point, with lone surrogates (what a JSON "\udXXX" escape decodes to) made likely.
_ANY_CHARS = st.characters(blacklist_categories=()) | st.characters(
    min_codepoint=0xD800, max_codepoint=0xDFFF, blacklist_categories=()
)


@given(st.text(alphabet=_ANY_CHARS, max_size=20))
def test_ifname_check_never_raises_and_its_message_has_a_utf8_form(value: str) -> None:
    problem = names.ifname_problem(value)
    if problem is not None:
        problem.encode("utf-8")


def test_pattern_problem_names_the_type_then_the_value_and_what_was_expected() -> None:
    pattern = re.compile(r"[a-z]+")
    assert names.pattern_problem("abc", pattern, what="lowercase letters") is None
    assert names.pattern_problem(7, pattern, what="lowercase letters") == "must be a string, got int"
    assert names.pattern_problem("ab1", pattern, what="lowercase letters") == "'ab1' is not lowercase letters"
    assert (
        names.pattern_problem(None, pattern, what="x", expected="a string UUID")
        == "must be a string UUID, got NoneType"
    )


def test_pattern_problem_matches_the_whole_value() -> None:
    assert names.pattern_problem("abc-", re.compile(r"[a-z]+"), what="letters") == "'abc-' is not letters"


@pytest.mark.parametrize(
    ("check", "bad", "message"),
    [
        (
            names.uuid_problem,
            "ABC",
            "'ABC' is not a lowercase UUID like 11111111-2222-3333-4444-555555555555",
        ),
        (names.uuid_problem, 1, "must be a string UUID, got int"),
        (names.hex64_problem, "ab", "'ab' is not 64 lowercase hex characters (a full SHA-256 digest)"),
        (
            names.pci_address_problem,
            "pci:0000:03:00.1",
            "'pci:0000:03:00.1' is not a lowercase PCI address like 0000:03:00.1 (no 'pci:' prefix)",
        ),
    ],
)
def test_single_pattern_validators_keep_their_messages(check: object, bad: object, message: str) -> None:
    assert check(bad) == message  # type: ignore[operator]
