"""Inputs a mutation fuzzer found, through every strict reader they reach: each is refused with the
project's typed error and a message that has a UTF-8 form (so it can be logged and put on an Event).

The three shapes: an object with a repeated key inside a value that a later repeat of its parent
key replaces; a CIDR prefix past Python's integer-string limit; a repeated key that is a lone
surrogate. ``bench/fuzz_parsers.py`` is the longer run that found them.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from tests.fakes import render_sources, sriov_networks

from sriov_dra.core import binding_annotation, multus_conf, networks, registry, render, vf_config
from sriov_dra.core.operator import network_config, network_refs, sriov_network
from sriov_dra.core.plugin import claim_network_data
from sriov_dra_rules import checkpoint_doc, errors, guard_conf, strict_json

NESTED_REPEAT = '{"a":{"b":1,"b":2},"a":0}'
SURROGATE_REPEAT = '{"\\ud800":1,"\\ud800":2}'
LONG_PREFIX = "10.0.0.5/" + "9" * 4301


def _utf8(text: str) -> None:
    text.encode("utf-8")


def _refused(call: Callable[[], object], *kinds: type[Exception]) -> Exception:
    with pytest.raises(kinds or (errors.SriovDraError,)) as caught:
        call()
    _utf8(str(caught.value))
    for item in getattr(caught.value, "errors", ()):
        _utf8(item.path)
        _utf8(item.message)
    return caught.value


READERS: dict[str, Callable[[str], object]] = {
    "strict JSON": lambda t: strict_json.decode(t),
    "strict JSON, plain numbers": lambda t: strict_json.decode_plain(t),
    "registry annotation": lambda t: registry.decode_registry(t, owner="Pod ns/p"),
    "binding annotation": lambda t: binding_annotation.decode_binding(t, owner="NAD ns/x"),
    "VfConfig parameters": lambda t: vf_config.decode_vf_config(t),
    "Multus config file": lambda t: multus_conf.decode_config(t.encode("utf-8", "surrogatepass"), source="f"),
    "network-status annotation": lambda t: claim_network_data.decode_network_status(t, pod="Pod ns/p"),
    "checkpoint bindings": lambda t: checkpoint_doc.managed_bindings(
        t.encode("utf-8", "surrogatepass"), source="checkpoint.json"
    ),
    "shadow render": lambda t: render.render_shadow_config(render_sources.nad(t), render_sources.PCI),
    "SriovNetwork spec.ipam": lambda t: network_config.render_config(sriov_networks.simple(ipam=t)),
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("text", [NESTED_REPEAT, SURROGATE_REPEAT], ids=["nested-repeat", "surrogate-repeat"])
def test_a_repeated_key_in_a_replaced_value_or_a_surrogate_key_is_the_readers_typed_error(
    reader: str, text: str
) -> None:
    _refused(lambda: READERS[reader](text))


def test_the_repeat_of_the_parent_key_is_reported_at_its_path() -> None:
    exc = _refused(lambda: strict_json.decode(NESTED_REPEAT))
    assert isinstance(exc, errors.InvalidSpec)
    assert [e.path for e in exc.errors] == ["$.a"]
    assert 'duplicate key "a"' in exc.errors[0].message


def test_a_repeated_surrogate_key_is_named_by_its_escape() -> None:
    exc = _refused(lambda: strict_json.decode(SURROGATE_REPEAT))
    assert isinstance(exc, errors.InvalidSpec)
    assert any('duplicate key "\\ud800"' in e.message for e in exc.errors)


def test_the_guard_config_refuses_a_repeated_surrogate_key_with_a_message_that_has_a_utf8_form() -> None:
    _refused(lambda: guard_conf.parse_conf(SURROGATE_REPEAT.encode()), guard_conf.GuardConfError)
    _refused(lambda: guard_conf.parse_conf(NESTED_REPEAT.encode()), guard_conf.GuardConfError)


def test_ipam_subnets_of_an_undecodable_config_is_empty_as_documented() -> None:
    assert claim_network_data.ipam_subnets(NESTED_REPEAT) == ()
    assert claim_network_data.ipam_subnets(SURROGATE_REPEAT) == ()


def test_resolve_source_of_a_network_whose_ipam_repeats_a_nested_key_is_source_nad_not_ready() -> None:
    network = sriov_networks.simple(ipam=NESTED_REPEAT)
    network["status"] = {
        "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}],
    }
    network["metadata"]["generation"] = 1
    out = sriov_network.resolve_source(
        network_refs.ref_of(network),
        network,
        None,
        operator_namespace="sriov",
        resource_prefix="openshift.io",
    )
    assert out.reason is errors.Reason.SOURCE_NAD_NOT_READY


def test_a_prefix_past_the_integer_string_limit_is_an_invalid_networks_annotation() -> None:
    text = json.dumps([{"name": "net-a", "ips": [LONG_PREFIX]}])
    exc = _refused(lambda: networks.parse_networks(text, pod_namespace="ns", pod="Pod ns/p"))
    assert isinstance(exc, errors.InvalidSpec)
    assert exc.reason is errors.Reason.INVALID_NETWORKS_ANNOTATION


def test_a_prefix_with_leading_zeros_is_read_as_go_reads_it() -> None:
    text = json.dumps([{"name": "net-a", "ips": ["10.0.0.5/0024"]}])
    assert networks.parse_networks(text, pod_namespace="ns", pod="Pod ns/p")
