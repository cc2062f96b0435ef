"""Tests for sriov_dra_rules.errors: the message every typed error carries."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import networks
from sriov_dra_rules import errors

# Any code point, with lone surrogates (what a JSON "\udXXX" escape in user input decodes to) likely.
_ANY_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=())
    | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, blacklist_categories=()),
    max_size=12,
)


def test_message_names_reason_summary_and_every_field() -> None:
    err = errors.InvalidSpec(
        "Pod ns/p is invalid",
        reason=errors.Reason.INVALID_NETWORKS_ANNOTATION,
        errors=[errors.FieldError("a.b", "is wrong"), errors.FieldError("c[0]", "is missing")],
    )
    assert str(err) == "InvalidNetworksAnnotation: Pod ns/p is invalid: a.b: is wrong; c[0]: is missing"


def test_detail_is_the_message_without_its_reason() -> None:
    err = errors.InvalidSpec(
        "SriovNetwork ns/n cannot be rendered", errors=[errors.FieldError("spec.ipam", "x")]
    )
    assert err.detail == "SriovNetwork ns/n cannot be rendered: spec.ipam: x"
    assert str(err) == f"InvalidSpec: {err.detail}"
    assert errors.InvalidSpec("plain").detail == "plain"


def test_lone_surrogate_from_a_hostile_value_is_escaped_so_the_message_has_a_utf8_form() -> None:
    # An address written as "\ud800" in a Pod's networks annotation ends up in the message.
    with pytest.raises(errors.InvalidSpec) as caught:
        networks.parse_networks('[{"name":"a","ips":["\\ud800"]}]', pod_namespace="ns")
    text = str(caught.value)
    text.encode("utf-8")  # can be logged, put in a gRPC error string and an Event
    assert "\\ud800" in text and "is not an IP address" in text


@given(_ANY_TEXT, _ANY_TEXT, _ANY_TEXT)
def test_every_message_has_a_utf8_form_and_is_unchanged_when_the_inputs_have_one(
    summary: str, path: str, message: str
) -> None:
    err = errors.ContractViolation(summary, errors=[errors.FieldError(path, message)])
    text = str(err)
    text.encode("utf-8")
    plain = f"ContractViolation: {summary}: {path}: {message}"
    try:
        plain.encode("utf-8")
    except UnicodeEncodeError:
        return
    assert text == plain
