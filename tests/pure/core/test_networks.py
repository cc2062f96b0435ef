"""Parsing of the Multus networks annotation as Multus v4.3.0 parses it: both notations, upstream reports."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import interface_naming, networks, selection_fields
from sriov_dra_rules import errors, names

POD_NS = "ns-pod"
ANN = f'metadata.annotations["{names.NETWORKS_ANNOTATION}"]'


def parse(value: str | None) -> tuple[networks.Selection, ...]:
    return networks.parse_networks(value, pod_namespace=POD_NS, pod="Pod ns-pod/demo")


def requests(value: str | None) -> list[tuple[str, str, str | None]]:
    return [s.request for s in parse(value)]


def rejection(value: str) -> errors.InvalidSpec:
    with pytest.raises(errors.InvalidSpec) as info:
        parse(value)
    assert info.value.reason is errors.Reason.INVALID_NETWORKS_ANNOTATION
    return info.value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, []),
        ("", []),
        ("[]", []),
        (" [ ] ", []),
        ("net-a", [(POD_NS, "net-a", None)]),
        ("ns-a/net-a", [("ns-a", "net-a", None)]),
        ("net-a@net1", [(POD_NS, "net-a", "net1")]),
        ("ns-a/net-a@if1", [("ns-a", "net-a", "if1")]),
        (" net-a , net-b ", [(POD_NS, "net-a", None), (POD_NS, "net-b", None)]),
        (" ns-a / net-a @ if1 ", [("ns-a", "net-a", "if1")]),
        ("net-a@uplink_p0", [(POD_NS, "net-a", "uplink_p0")]),
        ("ns-a/net-a@flannel.1", [("ns-a", "net-a", "flannel.1")]),
        ("null", [(POD_NS, "null", None)]),
        ('[{"name":"net-a"}]', [(POD_NS, "net-a", None)]),
        ('[{"name":"net-a","namespace":""}]', [(POD_NS, "net-a", None)]),
        ('[{"name":"net-a","interface":""}]', [(POD_NS, "net-a", None)]),
        ('[{"name":"net.example","namespace":"ns-a","interface":"eth1"}]', [("ns-a", "net.example", "eth1")]),
        ('\n[ {"name":"a"} ,\t{"name":"b"} ]\n', [(POD_NS, "a", None), (POD_NS, "b", None)]),
    ],
    ids=[
        "absent-is-empty",
        "empty-string-is-empty",
        "empty-json-list",
        "empty-json-list-with-spaces",
        "comma-name-defaults-namespace",
        "comma-namespace-slash-name",
        "comma-name-at-interface",
        "comma-namespace-name-interface",
        "surrounding-whitespace-trimmed",
        "whitespace-around-separators-trimmed-like-multus",
        "underscore-interface-accepted",
        "dotted-interface-at-split-before-slash",
        "comma-null-is-a-name",
        "json-name-only",
        "json-empty-namespace-defaults",
        "json-empty-interface-is-unset",
        "json-dotted-name-allowed",
        "json-whitespace-between-elements",
    ],
)
def test_valid_annotations_parse_to_requests(
    value: str | None, expected: list[tuple[str, str, str | None]]
) -> None:
    assert requests(value) == expected


def test_comma_and_json_interface_forms_give_same_selection() -> None:
    assert requests("net-a@vlan101") == requests('[{"name":"net-a","interface":"vlan101"}]')


def test_every_known_field_with_valid_values_is_accepted() -> None:
    element = {
        "name": "net-a",
        "namespace": "ns-a",
        "interface": "net1",
        "ips": ["10.1.1.104/24", "fd00:10::201", "192.0.2.7"],
        "mac": "02:00:5e:10:00:01",
        "infiniband-guid": "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01",
        "default-route": ["10.1.1.1", "fd00:10::1"],
        "portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp", "hostIP": "0.0.0.0"}],
        "bandwidth": {"ingressRate": 1000, "ingressBurst": 10, "egressRate": 1000, "egressBurst": 10},
        "cni-args": {"anything": [1, {"x": None}]},
        "deviceID": "0000:03:00.1",
        "ipam-claim-reference": "claim-a",
    }
    (sel,) = parse(json.dumps([element]))
    assert sel.raw == element
    assert list(sel.raw) == list(element)  # key order kept


def test_json_elements_keep_exact_source_text() -> None:
    first = '{"cni-args":{"ratio":1.50,"big":123456789012345678901234567890},"name":"a"}'
    second = '{ "name" : "b" , "ipam-claim-reference" : "c\\u00e9" }'
    sels = parse(f"[ {first} ,\n {second} ]")
    assert [s.raw_text for s in sels] == [first, second]
    assert [s.notation for s in sels] == [networks.Notation.JSON, networks.Notation.JSON]


def test_comma_entries_become_minimal_objects() -> None:
    sels = parse("net-a, ns-b/net-b@if2")
    assert [s.raw for s in sels] == [
        {"name": "net-a"},
        {"name": "net-b", "namespace": "ns-b", "interface": "if2"},
    ]
    assert [s.raw_text for s in sels] == [
        '{"name":"net-a"}',
        '{"name":"net-b","namespace":"ns-b","interface":"if2"}',
    ]
    assert sels[0].written_namespace is None and sels[1].written_namespace == "ns-b"


@pytest.mark.parametrize(
    ("value", "path", "message"),
    [
        (
            '[ { "name": "net-a", "ips": [ "10.1.1.104/24" ] ]',
            ANN,
            "malformed JSON at line 1 column 49 (char 48)",
        ),
        ('[{"name":"net-a","ips":"10.0.0.5/24"}]', f"{ANN}[0].ips", "expected list, got a string"),
        ('[{"name":"net-a","ips":["fd00:10::201"],}]', ANN, "malformed JSON"),
        ("net-a@averyveryverylongif", f"{ANN}[0].interface", "at most 15 bytes"),
        ("net-a@eth/1", f"{ANN}[0]", "namespace 'net-a@eth'"),
        ("ns-a/net-a@eth/1", f"{ANN}[0]", "more than one '/'"),
        ("net-a@eth 1", f"{ANN}[0].interface", "white space"),
        ("a@b@c", f"{ANN}[0]", "more than one '@'"),
        ("a/b/c", f"{ANN}[0]", "more than one '/'"),
        ("Net-A", f"{ANN}[0]", "name 'Net-A'"),
        ("net.a", f"{ANN}[0]", "use the JSON form"),
        ("NS/net-a", f"{ANN}[0]", "namespace 'NS'"),
        ('{"name":"net-a"}', ANN, "must be a JSON list of objects, got an object"),
        ('"net-a"', ANN, "got a string"),
        ("[null]", f"{ANN}[0]", "must be a JSON object, got null"),
        ('["net-a"]', f"{ANN}[0]", "must be a JSON object, got a string"),
        ('[{"name":7}]', f"{ANN}[0].name", "expected string, got a number"),
        ('[{"Name":7}]', f"{ANN}[0].Name", "expected string, got a number"),
        ('[{"name":"a","namespace":5}]', f"{ANN}[0].namespace", "expected string, got a number"),
        ('[{"name":"a","interfaceRequest":1}]', f"{ANN}[0].interfaceRequest", "expected string"),
        ('[{"name":"a","mac":"zz:zz"}]', f"{ANN}[0].mac", "is not a MAC"),
        ('[{"name":"a","MAC":"zz:zz"}]', f"{ANN}[0].mac", "is not a MAC"),
        ('[{"name":"a","infiniband-guid":7}]', f"{ANN}[0].infiniband-guid", "expected string"),
        ('[{"name":"a","ips":["10.0.0.1/33"]}]', f"{ANN}[0].ips", "[0]: '10.0.0.1/33'"),
        ('[{"name":"a","ips":["fe80::1%eth0"]}]', f"{ANN}[0].ips", "is not an IP address"),
        ('[{"name":"a","ips":["10.0.0.1/255.255.255.0"]}]', f"{ANN}[0].ips", "prefix length"),
        ('[{"name":"a","ips":[1]}]', f"{ANN}[0].ips", "[0]: expected string, got a number"),
        ('[{"name":"a","ips":[null]}]', f"{ANN}[0].ips", "[0]: '' is not an IP address"),
        ('[{"name":"a","default-route":["10.0.0.1/24"]}]', f"{ANN}[0].default-route", "no prefix length"),
        (
            '[{"name":"a","portMappings":[{"hostPort":"80"}]}]',
            f"{ANN}[0].portMappings",
            "hostPort: expected integer",
        ),
        (
            '[{"name":"a","portMappings":[{"hostPort":80.0}]}]',
            f"{ANN}[0].portMappings",
            "fraction or exponent",
        ),
        (
            '[{"name":"a","portMappings":[{"HOSTPORT":1e2}]}]',
            f"{ANN}[0].portMappings",
            "HOSTPORT: expected integer",
        ),
        (
            '[{"name":"a","portMappings":[{"hostPort":9223372036854775808}]}]',
            f"{ANN}[0].portMappings",
            "64-bit",
        ),
        (
            '[{"name":"a","bandwidth":{"ingressRate":true}}]',
            f"{ANN}[0].bandwidth",
            "expected integer, got a boolean",
        ),
        ('[{"name":"a","cni-args":[]}]', f"{ANN}[0].cni-args", "expected object, got a list"),
        ('[{"name":"a","deviceID":1}]', f"{ANN}[0].deviceID", "expected string"),
        ('[{"name":"a","name":7}]', f"{ANN}[0].name", "expected string, got a number"),
        ('[{"name":"a","x":NaN}]', ANN, "NaN is not valid JSON"),
        ("[" * 100000 + "]" * 100000, ANN, "malformed JSON"),
    ],
    ids=[
        "missing-brace-is-parse-error-with-offset",
        "ips-string-not-list",
        "trailing-comma-in-object-is-invalid-json",
        "comma-interface-over-15-bytes",
        "comma-interface-with-slash-splits-at-the-slash",
        "comma-namespaced-interface-with-slash",
        "comma-interface-with-space",
        "two-at-signs",
        "two-slashes",
        "upper-case-comma-name",
        "dotted-comma-name-points-to-json",
        "upper-case-comma-namespace",
        "json-object-not-list",
        "json-string-not-list",
        "null-element",
        "string-element",
        "name-wrong-type",
        "case-variant-key-is-still-typed",
        "namespace-wrong-type",
        "interface-request-wrong-type",
        "bad-mac",
        "bad-mac-under-a-case-variant",
        "guid-wrong-type",
        "cidr-prefix-too-long",
        "ip-with-zone",
        "cidr-netmask-form",
        "ips-item-wrong-type",
        "ips-null-item-is-no-address",
        "default-route-is-ip-not-cidr",
        "port-as-string",
        "port-as-float",
        "port-exponent-under-a-case-variant",
        "port-past-int64",
        "bandwidth-boolean",
        "cni-args-not-object",
        "device-id-wrong-type",
        "an-overwritten-repeat-is-still-typed",
        "nan-rejected",
        "deep-nesting-rejected-not-crash",
    ],
)
def test_invalid_annotations_name_index_and_field(value: str, path: str, message: str) -> None:
    err = rejection(value)
    assert any(e.path == path and message in e.message for e in err.errors), err.errors
    assert "Pod ns-pod/demo" in str(err)


def test_every_problem_is_reported_at_once() -> None:
    err = rejection('[{"name":"a","ips":"x"},{"nam":"b","name":7,"mac":"x"}]')
    assert {e.path for e in err.errors} == {f"{ANN}[0].ips", f"{ANN}[1].name", f"{ANN}[1].mac"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('[{"name":"net-a","interfaceRequest":"vlan101"}]', [(POD_NS, "net-a", "vlan101")]),
        ('[{"name":"net-a","interface":"eth1","interfaceRequest":"vlan101"}]', [(POD_NS, "net-a", "eth1")]),
        ('[{"Name":"net-a","NAMESPACE":"ns-a","Interface":"eth1"}]', [("ns-a", "net-a", "eth1")]),
        ('[{"name":"a","ipss":["10.0.0.1"],"ipam-claim-reference":7}]', [(POD_NS, "a", None)]),
        ('[{"name":"a","name":"b"}]', [(POD_NS, "b", None)]),
        ('[{"name":"a","Name":"b","name":"c"}]', [(POD_NS, "c", None)]),
        ('[{"name":"a","cni-args":{"x":1,"x":2}}]', [(POD_NS, "a", None)]),
        ('[{"name":"a","namespace":null,"ips":null,"mac":null,"interface":null}]', [(POD_NS, "a", None)]),
        ('[{"name":"a","interface":"eth1","interface":null}]', [(POD_NS, "a", "eth1")]),
        (
            '[{"name":"a","portMappings":[{"hostPort":70000,"port":"x"},null],"bandwidth":{"rate":"x"}}]',
            [(POD_NS, "a", None)],
        ),
        ('[{"name":"a","default-route":["",null,"10.0.0.1"]}]', [(POD_NS, "a", None)]),
        (
            '[{"name":"Net_A","namespace":"NS","interface":"eth 0 with spaces"}]',
            [("NS", "Net_A", "eth 0 with spaces")],
        ),
        ("[{}]", [(POD_NS, "", None)]),
        ('[{"name":"a","interface":"\\ud800"}]', [(POD_NS, "a", "\ufffd")]),
        ("net-a,", [(POD_NS, "net-a", None), (POD_NS, "", None)]),
        ("   ", [(POD_NS, "", None)]),
        ("net-a@", [(POD_NS, "net-a", None)]),
        ("/net-a", [(POD_NS, "net-a", None)]),
        ("ns-a/", [("ns-a", "", None)]),
        ("ns-a/net-a@eth:1", [("ns-a", "net-a", "eth:1")]),
    ],
    ids=[
        "interface-request-is-the-fallback-interface",
        "interface-wins-over-interface-request",
        "case-variant-keys-read-as-the-field",
        "unknown-keys-ignored",
        "repeated-key-last-wins",
        "last-of-case-variants-wins",
        "nested-repeated-key-ignored",
        "null-fields-leave-defaults",
        "null-after-a-value-keeps-a-text-field",
        "ports-unchecked-beyond-type-unknown-nested-keys-ignored",
        "empty-and-null-default-route-entries",
        "json-names-and-interfaces-are-not-checked-by-multus",
        "missing-name-is-empty",
        "lone-surrogate-becomes-a-replacement-character",
        "trailing-comma-is-an-empty-name",
        "blank-annotation-is-one-empty-name",
        "at-without-interface-means-none",
        "slash-without-namespace-defaults-it",
        "slash-without-name-is-an-empty-name",
        "comma-interface-with-colon-is-multus-s-business",
    ],
)
def test_what_multus_reads_is_read_the_same(value: str, expected: list[tuple[str, str, str | None]]) -> None:
    """Multus v4.3.0 starts the Pod's delegates from these (or fails later, looking up an empty name)."""
    assert requests(value) == expected


def test_managed_entries_are_held_to_the_exact_tuple() -> None:
    exact, repeated, variant, extra, comma = parse(
        '[{"name":"s","namespace":"ns-pod","interface":"dra0"},'
        '{"name":"s","namespace":"ns-pod","interface":"dra0","interface":"dra0"},'
        '{"name":"s","namespace":"ns-pod","Interface":"dra0"},'
        '{"name":"s","namespace":"ns-pod","interface":"dra0","ips":[]}]'
    ) + parse("ns-pod/s@dra0")
    assert exact.exact_tuple("ns-pod", "s", "dra0")
    assert not exact.exact_tuple("ns-pod", "s", "dra1")
    assert [s.request for s in (repeated, variant, extra, comma)] == [("ns-pod", "s", "dra0")] * 4
    assert not any(s.exact_tuple("ns-pod", "s", "dra0") for s in (repeated, variant, extra, comma))


def test_parser_accepts_but_final_collision_check_rejects_auto_net1_clash() -> None:
    value = '[{"name":"net-a"},{"name":"net-b","interface":"net1"}]'
    sels = parse(value)
    assert [s.interface for s in sels] == [None, "net1"]
    with pytest.raises(errors.InvalidSpec) as info:
        interface_naming.check_interface_collisions([s.raw for s in sels], pod_namespace=POD_NS)
    assert info.value.reason is errors.Reason.DUPLICATE_INTERFACE_NAME
    assert "net-a" in str(info.value) and "net-b" in str(info.value)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("00:00:5e:00:53:01", True),
        ("00-00-5E-00-53-01", True),
        ("0000.5e00.5301", True),
        ("02:00:5e:10:00:00:00:01", True),
        ("0200.5e10.0000.0001", True),
        ("00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01", True),
        ("00:00:5e:00:53", False),
        ("00:00:5e:00:53:01:02", False),
        ("00:00:5e-00:53:01", False),
        ("0:0:5e:0:53:1", False),
        ("0000.5e00.53", False),
        ("", False),
    ],
    ids=[
        "eui48-colon",
        "eui48-hyphen-upper",
        "eui48-dotted",
        "eui64-colon",
        "eui64-dotted",
        "ipoib-20-bytes",
        "five-bytes",
        "seven-bytes",
        "mixed-separators",
        "single-digit-groups",
        "short-dotted",
        "empty",
    ],
)
def test_mac_forms_match_go_parsemac(text: str, ok: bool) -> None:
    assert selection_fields.mac_is_valid(text) is ok


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("10.0.0.1", True),
        ("010.0.0.1", False),
        ("fd00::1", True),
        ("::ffff:1.2.3.4", True),
        ("fe80::1%eth0", False),
        ("10.0.0.1/24", True),
        ("10.0.0.1/33", False),
        ("fd00::/128", True),
        ("fd00::/129", False),
        ("10.0.0.1/", False),
        ("10.0.0.1/+8", False),
    ],
    ids=[
        "ipv4",
        "ipv4-leading-zero",
        "ipv6",
        "ipv4-mapped",
        "ipv6-zone",
        "ipv4-cidr",
        "ipv4-prefix-33",
        "ipv6-cidr",
        "ipv6-prefix-129",
        "empty-prefix",
        "signed-prefix",
    ],
)
def test_ip_and_cidr_forms_match_go(text: str, ok: bool) -> None:
    valid = selection_fields.cidr_is_valid(text) if "/" in text else selection_fields.ip_is_valid(text)
    assert valid is ok


# --- properties ------------------------------------------------------------------------------

labels = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?", fullmatch=True)
ifnames_st = st.from_regex(r"[a-zA-Z0-9_.-]{1,15}", fullmatch=True).filter(lambda s: s not in (".", ".."))
requests_st = st.lists(st.tuples(st.none() | labels, labels, st.none() | ifnames_st), max_size=8)


@given(st.text(max_size=200))
def test_parse_is_total_on_arbitrary_text(value: str) -> None:
    try:
        result = parse(value)
    except errors.InvalidSpec as err:
        assert err.reason is errors.Reason.INVALID_NETWORKS_ANNOTATION
        assert err.errors
    else:
        assert all(isinstance(s, networks.Selection) for s in result)


@given(st.text(alphabet='[]{}",:@/ \nab1.-~\\', max_size=80))
def test_parse_is_total_on_json_like_text(value: str) -> None:
    try:
        parse(value)
    except errors.InvalidSpec as err:
        assert err.reason is errors.Reason.INVALID_NETWORKS_ANNOTATION


@given(requests_st)
def test_comma_and_json_notations_parse_to_the_same_requests(
    items: list[tuple[str | None, str, str | None]],
) -> None:
    comma = ",".join((f"{ns}/" if ns else "") + name + (f"@{i}" if i else "") for ns, name, i in items)
    objects = [
        {"name": name, **({"namespace": ns} if ns else {}), **({"interface": i} if i else {})}
        for ns, name, i in items
    ]
    expected = [(ns or POD_NS, name, i) for ns, name, i in items]
    assert requests(json.dumps(objects)) == expected
    if items:
        assert requests(comma) == expected


@given(requests_st, st.sampled_from(["", " ", "\n  "]))
def test_rendering_element_texts_round_trips(
    items: list[tuple[str | None, str, str | None]], ws: str
) -> None:
    objects = [
        {"name": name, "namespace": ns or "", "interface": i or "", "cni-args": {"n": 1.5}}
        for ns, name, i in items
    ]
    value = "[" + ws + ("," + ws).join(json.dumps(o) for o in objects) + ws + "]"
    sels = parse(value)
    again = parse(networks.render_networks([s.raw_text for s in sels]))
    assert [s.raw_text for s in again] == [s.raw_text for s in sels] == [json.dumps(o) for o in objects]
    assert [s.request for s in again] == [s.request for s in sels]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
ignored_keys = st.text(min_size=1, max_size=12).filter(
    lambda k: k.casefold() not in {f.casefold() for f in selection_fields.FIELDS}
)


@given(requests_st, st.lists(st.tuples(ignored_keys, json_values), max_size=4))
def test_property_keys_multus_ignores_never_change_what_is_selected(
    items: list[tuple[str | None, str, str | None]], extra: list[tuple[str, object]]
) -> None:
    objects = [
        {**dict(extra), "name": name, **({"namespace": ns} if ns else {}), **({"interface": i} if i else {})}
        for ns, name, i in items
    ]
    assert requests(json.dumps(objects)) == [(ns or POD_NS, name, i) for ns, name, i in items]
