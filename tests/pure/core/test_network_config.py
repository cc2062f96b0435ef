"""Tests for sriov_dra.core.operator.network_config: a SriovNetwork's CNI config, byte-identical to upstream's template."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from tests.fakes import operator_objects as oo
from tests.fakes.sriov_networks import simple

from sriov_dra.core.operator import go_json, network_config
from sriov_dra_rules import errors, strict_json

R = errors.Reason
OP = oo.OP_NS


def test_golden_simple_config_is_upstreams_indented_text() -> None:
    # Golden TestRendering simple case, after the controller's json.Indent(..., "", "    ").
    assert network_config.render_config(simple()) == (
        '{\n    "cniVersion": "1.0.0",\n    "name": "test",\n    "type": "sriov",\n    "vlan": 0,\n'
        '    "vlanQoS": 0,\n    "ipam": {}\n}'
    )


def test_every_optional_key_in_template_order() -> None:
    net = simple(
        vlan=100,
        spoofChk="on",
        trust="off",
        vlanQoS=3,
        vlanProto="802.1ad",
        minTxRate=0,
        maxTxRate=1000,
        capabilities='{"mac": true}',
        linkState="enable",
        logLevel="debug",
        logFile="/tmp/sriov.log",
        ipam='{"type": "host-local"}',
    )
    doc = json.loads(network_config.render_config(net))
    assert list(doc) == [
        "cniVersion",
        "name",
        "type",
        "vlan",
        "spoofchk",
        "trust",
        "vlanQoS",
        "vlanProto",
        "min_tx_rate",
        "max_tx_rate",
        "capabilities",
        "link_state",
        "logLevel",
        "logFile",
        "ipam",
    ]
    assert (
        doc["vlan"] == 100 and doc["vlanQoS"] == 3 and doc["min_tx_rate"] == 0 and doc["max_tx_rate"] == 1000
    )
    assert doc["capabilities"] == {"mac": True}


@pytest.mark.parametrize(
    ("spec", "absent"),
    [
        ({"spoofChk": ""}, "spoofchk"),
        ({"linkState": ""}, "link_state"),
        ({"vlanProto": ""}, "vlanProto"),
        ({"logLevel": ""}, "logLevel"),
        ({}, "max_tx_rate"),
        ({}, "capabilities"),
        ({}, "vlanProto"),
    ],
    ids=[
        "empty-spoofchk-omitted",
        "empty-link-state-omitted",
        "empty-vlan-proto-omitted",
        "empty-log-level-omitted",
        "unset-rate-pointer-omitted",
        "unset-capabilities-omitted",
        "unset-vlan-proto-omitted",
    ],
)
def test_optional_keys_are_omitted_as_upstream_does(spec: dict[str, Any], absent: str) -> None:
    assert absent not in json.loads(network_config.render_config(simple(**spec)))


def test_meta_plugins_make_a_conflist_with_sriov_first() -> None:
    net = simple(metaPlugins='{"type": "tuning", "sysctl": {"net.ipv4.conf.IFNAME.arp_notify": "1"}}')
    doc = json.loads(network_config.render_config(net))
    assert list(doc) == ["cniVersion", "name", "plugins"]
    assert [p["type"] for p in doc["plugins"]] == ["sriov", "tuning"]
    assert "cniVersion" not in doc["plugins"][0] and doc["plugins"][0]["ipam"] == {}


def test_ipam_whitespace_between_tokens_is_dropped_as_upstream_does() -> None:
    ipam = '{ "type" : "whereabouts",\n\t"range": "10.0.0.0/24" ,"n":[ 1 , 2.50 ] }\r\n'
    config = network_config.render_config(simple(ipam=ipam))
    assert config.endswith(
        '    "ipam": {\n        "type": "whereabouts",\n        "range": "10.0.0.0/24",\n'
        '        "n": [\n            1,\n            2.50\n        ]\n    }\n}'
    )


@pytest.mark.parametrize(
    ("ipam", "path"),
    [
        ('{"type":"whereabouts","network_name":"rail a"}', "spec.ipam.network_name"),
        ('{"type":"static","routes":[{"dst":"0.0.0.0/0","gw":"10.0.0.1\u00a0"}]}', "spec.ipam.routes[0].gw"),
        ('{"type":"x","data dir":"/d"}', 'spec.ipam["data dir"]'),
        ('{"type":"x","n":"ideographic\u3000space"}', "spec.ipam.n"),
    ],
    ids=["space-in-value", "nbsp-in-nested-value", "space-in-key", "ideographic-space"],
)
def test_ipam_string_holding_whitespace_is_refused_naming_its_path(ipam: str, path: str) -> None:
    # Upstream deletes every Go space from spec.ipam, inside strings too ("rail a" -> "raila"):
    # neither its value nor the administrator's can be rendered without surprising someone.
    with pytest.raises(errors.InvalidSpec) as exc:
        network_config.render_config(simple(ipam=ipam))
    assert exc.value.reason is R.INVALID_NETWORK_SPEC
    assert [e.path for e in exc.value.errors] == [path]
    assert "\\u0020 escape" in exc.value.errors[0].message


def test_ipam_escaped_space_is_kept_as_written() -> None:
    config = network_config.render_config(
        simple(ipam='{"type":"whereabouts","range":"192.0.2.0/24","network_name":"rail\\u0020a"}')
    )
    assert '"network_name": "rail\\u0020a"' in config
    doc: Any = strict_json.decode(config)
    assert doc["ipam"]["network_name"] == "rail a"


def _problems(**spec: Any) -> list[errors.FieldError]:
    with pytest.raises(errors.InvalidSpec) as exc:
        network_config.render_config(simple(**spec))
    assert exc.value.reason is R.INVALID_NETWORK_SPEC
    assert "SriovNetwork ns1/test cannot be rendered" in str(exc.value)
    return list(exc.value.errors)


@pytest.mark.parametrize(
    ("ipam", "got"),
    [
        ("[]", "a list"),
        ('"host-local"', "a string"),
        ("5", "a number"),
        ("null", "null"),
        ("true", "a boolean"),
    ],
    ids=["list", "string", "number", "null", "boolean"],
)
def test_ipam_that_is_json_but_not_an_object_is_refused(ipam: str, got: str) -> None:
    (problem,) = _problems(ipam=ipam)
    assert problem.path == "spec.ipam"
    assert problem.message.startswith(f"expected a JSON object, got {got}; ")


def test_ipam_cannot_add_a_second_vlan_key() -> None:
    ipam = '{"type":"host-local","subnet":"10.0.0.0/24"},"vlan":300'
    (problem,) = _problems(ipam=ipam, vlan=100)
    assert problem.path == "spec.ipam" and "Extra data" in problem.message and "column 45" in problem.message


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"ipam": '{"type":"host-local","subnet":"10.0.0.0/24","subnet":"10.9.0.0/24"}'}, "spec.ipam.subnet"),
        ({"capabilities": '{"mac":true,"mac":false}'}, "spec.capabilities.mac"),
        (
            {"metaPlugins": '{"type":"tuning"},{"type":"bandwidth","type":"tuning"}'},
            "spec.metaPlugins[1].type",
        ),
    ],
    ids=["ipam-subnet-twice", "capabilities-mac-twice", "second-meta-plugin-type-twice"],
)
def test_repeated_key_is_refused_with_its_path(spec: dict[str, Any], path: str) -> None:
    (problem,) = _problems(**spec)
    assert problem.path == path and "duplicate key" in problem.message


@pytest.mark.parametrize(
    ("spec", "path", "needle"),
    [
        ({"capabilities": "[]"}, "spec.capabilities", "expected a JSON object, got a list"),
        ({"capabilities": '{"mac":NaN}'}, "spec.capabilities", "NaN is not a JSON number"),
        ({"capabilities": '{"mac":true},"x":1'}, "spec.capabilities", "Extra data"),
        ({"metaPlugins": '"tuning"'}, "spec.metaPlugins[0]", "expected a JSON object (one CNI plugin config), got a string"),
        ({"metaPlugins": '{"type":"tuning"},5'}, "spec.metaPlugins[1]", "got a number"),
        ({"metaPlugins": '{"type":"tuning"},'}, "spec.metaPlugins", "column 19"),
        ({"metaPlugins": '{"type":"tuning"}]},{"x":1'}, "spec.metaPlugins", "malformed JSON"),
        ({"metaPlugins": "  "}, "spec.metaPlugins", "holds no plugin"),
        ({"ipam": "  "}, "spec.ipam", "Expecting value"),
    ],
    ids=[
        "capabilities-list", "capabilities-nan", "capabilities-break-out", "meta-plugin-string",
        "meta-plugin-number", "meta-plugins-trailing-comma", "meta-plugins-break-out", "meta-plugins-blank",
        "ipam-blank",
    ],
)  # fmt: skip
def test_capabilities_and_meta_plugins_are_decoded_strictly_on_their_own(
    spec: dict[str, Any], path: str, needle: str
) -> None:
    (problem,) = _problems(**spec)
    assert problem.path == path and needle in problem.message


def test_every_problem_is_reported_at_once() -> None:
    problems = _problems(ipam="[]", capabilities="{", vlan="100", metaPlugins="1")
    assert [p.path for p in problems] == [
        "spec.vlan",
        "spec.capabilities",
        "spec.ipam",
        "spec.metaPlugins[0]",
    ]


def test_log_file_cannot_break_out_of_its_string() -> None:
    log_file = '/var/log/a","vlan":7,"x":"y'
    config = network_config.render_config(simple(vlan=100, logFile=log_file))
    doc = strict_json.decode(config)
    assert isinstance(doc, dict)
    assert doc["logFile"] == log_file and doc["vlan"] == 100 and "x" not in doc


def test_windows_style_log_file_keeps_its_backslashes() -> None:
    log_file = "C:\\new\\tmp.log"
    config = network_config.render_config(simple(logFile=log_file))
    assert '"logFile": "C:\\\\new\\\\tmp.log"' in config
    doc = strict_json.decode(config)
    assert isinstance(doc, dict) and doc["logFile"] == log_file


def test_problem_message_names_the_network_the_field_and_the_problem() -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        network_config.render_config(simple(ipam="[]"))
    assert exc.value.detail.startswith(
        "SriovNetwork ns1/test cannot be rendered: spec.ipam: expected a JSON object, got a list; "
    )


_ANY_TEXT = st.text(max_size=40)


@given(
    name=_ANY_TEXT,
    log_file=_ANY_TEXT,
    log_level=_ANY_TEXT,
    vlan_proto=st.sampled_from(["", "802.1q", "802.1Q"]),
    meta=st.booleans(),
)
def test_any_string_field_round_trips_exactly(
    name: str, log_file: str, log_level: str, vlan_proto: str, meta: bool
) -> None:
    net = simple(logFile=log_file, logLevel=log_level, vlanProto=vlan_proto)
    net["metadata"]["name"] = name
    if meta:
        net["spec"]["metaPlugins"] = '{"type":"tuning"}'
    doc: Any = strict_json.decode(network_config.render_config(net))  # strict: a second key would be refused
    sriov = doc["plugins"][0] if meta else doc
    assert doc["name"] == name
    assert sriov.get("logFile", "") == log_file and sriov.get("logLevel", "") == log_level
    assert sriov.get("vlanProto", "") == vlan_proto and sriov["vlan"] == 0
    assert list(sriov)[-1] == "ipam"


_JSONISH = st.text(
    alphabet=st.sampled_from(list('{}[]",:0123456789.eE-+ \n\ttruefalsnulNa\\\u00a0x')), max_size=30
)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=6),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
    max_leaves=8,
)
_IPAM_TEXT = st.one_of(
    _JSONISH,
    st.builds(lambda v, i: json.dumps(v, indent=i), _VALUES, st.sampled_from([None, 1, "\t"])),
    st.builds(lambda v, tail: json.dumps(v) + tail, st.dictionaries(st.text(max_size=4), _VALUES), _JSONISH),
)


@given(_IPAM_TEXT)
def test_any_ipam_text_is_an_object_rendered_verbatim_or_refused(ipam: str) -> None:
    try:
        config = network_config.render_config(simple(ipam=ipam))
    except errors.InvalidSpec as exc:
        assert exc.reason is R.INVALID_NETWORK_SPEC
        assert exc.errors and all(e.path.startswith("spec.ipam") for e in exc.errors)
        return
    doc = strict_json.decode(config)
    assert isinstance(doc, dict)
    expected = strict_json.decode(ipam) if ipam else {}
    assert isinstance(expected, dict) and doc["ipam"] == expected


def _upstream_paste(network: dict[str, Any]) -> str:
    """Upstream's template (sriov-cni-config.yaml) as text pasting, then json.Indent: the oracle."""
    spec, name = network["spec"], network["metadata"]["name"]
    parts = ["{", '"cniVersion":"1.0.0",', f'"name":"{name}",']
    meta = spec.get("metaPlugins")
    if meta:
        parts.append('"plugins":[{')
    parts.append(f'"type":"sriov","vlan":{spec.get("vlan") or 0},')
    for key, out, allowed in (("spoofChk", "spoofchk", ("on", "off")), ("trust", "trust", ("on", "off"))):
        if spec.get(key) in allowed:
            parts.append(f'"{out}":"{spec[key]}",')
    if 0 <= (spec.get("vlanQoS") or 0) <= 7:
        parts.append(f'"vlanQoS":{spec.get("vlanQoS") or 0},')
    if spec.get("vlanProto"):
        parts.append(f'"vlanProto":"{spec["vlanProto"]}",')
    for key, out in (("minTxRate", "min_tx_rate"), ("maxTxRate", "max_tx_rate")):
        if spec.get(key) is not None and spec[key] >= 0:
            parts.append(f'"{out}":{spec[key]},')
    if spec.get("capabilities"):
        parts.append(f'"capabilities":{spec["capabilities"]},')
    if spec.get("linkState") in ("enable", "disable", "auto"):
        parts.append(f'"link_state":"{spec["linkState"]}",')
    for key in ("logLevel", "logFile"):
        if spec.get(key):
            parts.append(f'"{key}":"{spec[key]}",')
    ipam = spec.get("ipam")
    parts.append('"ipam":' + ("".join(ipam.split()) if ipam else "{}") + "}")
    if meta:
        parts.append(f",{meta}]}}")
    return go_json.go_json_indent("".join(parts))


_PLAIN = st.text(
    alphabet=st.characters(
        blacklist_categories=["Cc", "Cs", "Zs", "Zl", "Zp"], blacklist_characters='"\\\x85'
    ),
    max_size=12,
)
_OBJECT = st.dictionaries(
    _PLAIN,
    st.none() | st.booleans() | st.integers() | _PLAIN | st.lists(st.integers(), max_size=2),
    max_size=4,
)


@given(
    name=_PLAIN,
    fields=st.fixed_dictionaries(
        {},
        optional={
            "vlan": st.integers(0, 4094),
            "vlanQoS": st.integers(0, 7),
            "minTxRate": st.integers(0, 10),
            "maxTxRate": st.integers(0, 10),
            "spoofChk": st.sampled_from(["on", "off", ""]),
            "trust": st.sampled_from(["on", "off", ""]),
            "linkState": st.sampled_from(["enable", "disable", "auto"]),
            "vlanProto": st.sampled_from(["802.1q", "802.1ad", ""]),
            "logLevel": st.sampled_from(["info", "debug", ""]),
            "logFile": _PLAIN,
            "ipam": st.builds(lambda o, i: json.dumps(o, indent=i, ensure_ascii=False), _OBJECT, st.sampled_from([None, 2])),
            "capabilities": st.builds(json.dumps, _OBJECT),
            "metaPlugins": st.lists(_OBJECT, min_size=1, max_size=3).map(lambda os_: ", ".join(map(json.dumps, os_))),
        },
    ),
)  # fmt: skip
def test_valid_networks_render_byte_identical_to_upstreams_template(
    name: str, fields: dict[str, Any]
) -> None:
    # combinations sriov-cni refuses at ADD are refused instead (test_sriov_network_vf_settings)
    assume(fields.get("vlan") or not (fields.get("vlanQoS") or fields.get("vlanProto") == "802.1ad"))
    assume(not fields.get("maxTxRate") or fields.get("minTxRate", 0) <= fields["maxTxRate"])
    net = simple(**fields)
    net["metadata"]["name"] = name
    assert network_config.render_config(net) == _upstream_paste(net)
