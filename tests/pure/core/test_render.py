"""Tests of sriov_dra.core.render: the shadow CNI config renderer (docs/design.md#render).

Upstream reports covered here: a name-less template (multus-dynamic-networks-controller #45),
deviceID placement in a conflist (multus-cni #289), an empty or absent spec.config (multus-cni
#1362), one CNI name and ipam across shadows (whereabouts #256).
"""

from __future__ import annotations

import copy
import hashlib
import json

import pytest
from hypothesis import given
from tests.fakes.render_sources import (
    CONFLIST,
    INVALID,
    OTHER_PCI,
    PCI,
    SINGLE,
    UNSUPPORTED,
    nad,
    paths,
    reject,
    rendered_doc,
)
from tests.fakes.render_templates import sriov_entry, templates

from sriov_dra.core import render
from sriov_dra_rules import errors, names, strict_json
from sriov_dra_rules.strict_json import JsonValue, RawNumber

# --- outputs ------------------------------------------------------------------------------------


def test_single_plugin_gets_device_id_after_type_and_exact_bytes() -> None:
    result = render.render_shadow_config(nad(SINGLE), PCI)
    expected = (
        b'{"cniVersion":"1.0.0","name":"sriov-net","type":"sriov","deviceID":"0000:3b:02.1","vlan":100,'
        b'"ipam":{"type":"host-local","subnet":"10.56.217.0/24"}}'
    )
    assert result.config_bytes == expected
    assert result.config_sha256 == hashlib.sha256(expected).hexdigest()
    assert (result.cni_name, result.cni_version, result.pci_address) == ("sriov-net", "1.0.0", PCI)
    assert (result.is_conflist, result.plugin_index, result.plugin_type) == (False, None, "sriov")
    assert result.config_text == expected.decode()


def test_example_conflist_gets_device_id_only_on_sriov_entry() -> None:
    result = render.render_shadow_config(nad(CONFLIST), "0000:03:00.1")
    assert result.config_bytes == (
        b'{"cniVersion":"1.0.0","name":"ai-workloads-rail-a","plugins":[{"type":"sriov","deviceID":"0000:03:00.1",'
        b'"ipam":{"type":"whereabouts","range":"192.0.2.0/24"}},{"type":"tuning","mtu":9000}]}'
    )
    assert (result.is_conflist, result.plugin_index) == (True, 0)


def test_operator_indented_source_renders_to_canonical_compact_bytes() -> None:
    # sriov-network-operator writes 4-space indented JSON with its own key order .
    indented = json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "test",
            "type": "sriov",
            "vlan": 0,
            "vlanQoS": 0,
            "logLevel": "info",
            "ipam": {},
        },
        indent=4,
    )
    result = render.render_shadow_config(nad(indented), PCI)
    assert result.config_bytes == (
        b'{"cniVersion":"1.0.0","name":"test","type":"sriov","deviceID":"0000:3b:02.1","vlan":0,"vlanQoS":0,'
        b'"logLevel":"info","ipam":{}}'
    )
    compact = render.render_shadow_config(nad(json.dumps(json.loads(indented))), PCI)
    assert compact.config_bytes == result.config_bytes


def test_rendering_twice_gives_identical_bytes_and_hash() -> None:
    first = render.render_shadow_config(nad(CONFLIST), PCI)
    second = render.render_shadow_config(nad(CONFLIST), PCI)
    assert first == second


def test_rendering_a_rendered_config_is_a_fixed_point() -> None:
    first = render.render_shadow_config(nad({k: v for k, v in CONFLIST.items() if k != "name"}), PCI)
    again = render.render_shadow_config(nad(first.config_text), PCI)
    assert again.config_bytes == first.config_bytes


def test_caller_objects_are_not_modified() -> None:
    source = nad(CONFLIST, annotations={names.RESOURCE_NAME_ANNOTATION: "vendor.example/sriov_a"})
    before = copy.deepcopy(source)
    render.render_shadow_config(source, PCI)
    assert source == before


def test_unknown_fields_non_ascii_and_numbers_are_preserved() -> None:
    text = (
        '{"cniVersion":"0.4.0","type":"sriov","vlan":4094,"x-vendor":{"ratio":1e3,"big":123456789012345678901,'
        '"f":1.50,"note":"réseau"},"capabilities":{"mac":true,"ips":true},"trust":"on","spoofchk":"off"}'
    )
    result = render.render_shadow_config(nad(text), PCI)
    out = rendered_doc(result)
    assert out["vlan"] == 4094
    assert out["x-vendor"] == {
        "ratio": RawNumber("1e3"),
        "big": 123456789012345678901,
        "f": RawNumber("1.50"),
        "note": "réseau",
    }
    assert b'"ratio":1e3,"big":123456789012345678901,"f":1.50,"note":"r\xc3\xa9seau"' in result.config_bytes
    assert list(out) == [
        "cniVersion",
        "name",
        "type",
        "deviceID",
        "vlan",
        "x-vendor",
        "capabilities",
        "trust",
        "spoofchk",
    ]


# --- deviceID placement ----------------------------------------------------------------------


def test_tuning_first_conflist_is_rejected_with_rule_and_fix() -> None:
    config = {
        "cniVersion": "0.3.1",
        "name": "sriov-network",
        "plugins": [
            {"type": "tuning", "sysctl": {}},
            {"type": "sriov", "vlan": 100, "ipam": {"type": "host-local", "subnet": "10.56.217.0/24"}},
        ],
    }
    exc = reject(nad(config))
    assert exc.reason == UNSUPPORTED
    assert paths(exc) == ["spec.config.plugins[1].type"]
    assert "must be the first plugin" in exc.errors[0].message
    assert "move it to plugins[0]" in exc.errors[0].message


def test_sriov_first_conflist_gets_device_id_on_sriov_entry_only() -> None:
    config = {
        "cniVersion": "0.3.1",
        "name": "sriov-network",
        "plugins": [
            {"type": "sriov", "vlan": 100, "ipam": {"type": "host-local", "subnet": "10.56.217.0/24"}},
            {"type": "tuning", "sysctl": {}},
        ],
    }
    out = rendered_doc(render.render_shadow_config(nad(config), PCI))
    plugins = out["plugins"]
    assert isinstance(plugins, list)
    assert plugins[0] == {
        "type": "sriov",
        "deviceID": PCI,
        "vlan": 100,
        "ipam": {"type": "host-local", "subnet": "10.56.217.0/24"},
    }
    assert plugins[1] == {"type": "tuning", "sysctl": {}}
    assert "deviceID" not in out and "pciBusID" not in out
    assert (out["name"], out["cniVersion"]) == ("sriov-network", "0.3.1")


@pytest.mark.parametrize(
    ("entry", "expected_entry"),
    [
        ({"type": "sriov", "deviceID": PCI}, {"type": "sriov", "deviceID": PCI}),
        ({"type": "sriov", "deviceID": "0000:3B:02.1"}, {"type": "sriov", "deviceID": PCI}),
        ({"type": "sriov", "deviceID": ""}, {"type": "sriov", "deviceID": PCI}),
        ({"deviceID": PCI, "type": "sriov"}, {"deviceID": PCI, "type": "sriov"}),
        ({"type": "sriov", "pciBusID": PCI}, {"type": "sriov", "deviceID": PCI, "pciBusID": PCI}),
        ({"type": "sriov", "pciBusID": ""}, {"type": "sriov", "deviceID": PCI, "pciBusID": PCI}),
        ({"type": "sriov", "pciBusID": "3b:02.1", "deviceID": PCI}, {"type": "sriov", "pciBusID": PCI, "deviceID": PCI}),
    ],
    ids=[
        "equal-device-id-kept", "equal-device-id-in-other-case-canonicalised", "empty-device-id-set-in-place",
        "device-id-keeps-its-position", "equal-pci-bus-id-kept-and-device-id-added", "empty-pci-bus-id-filled",
        "short-form-pci-bus-id-canonicalised",
    ],
)  # fmt: skip
def test_preexisting_device_keys_equal_to_allocation(
    entry: dict[str, JsonValue], expected_entry: dict[str, JsonValue]
) -> None:
    out = rendered_doc(render.render_shadow_config(nad({"cniVersion": "1.0.0", "plugins": [entry]}), PCI))
    plugins = out["plugins"]
    assert isinstance(plugins, list)
    assert plugins[0] == expected_entry
    first = plugins[0]
    assert isinstance(first, dict)
    assert list(first) == list(expected_entry)


@pytest.mark.parametrize(
    ("config", "path", "reason"),
    [
        ({"cniVersion": "1.0.0", "type": "sriov", "deviceID": OTHER_PCI}, "spec.config.deviceID", UNSUPPORTED),
        ({"cniVersion": "1.0.0", "type": "sriov", "pciBusID": OTHER_PCI}, "spec.config.pciBusID", UNSUPPORTED),
        ({"cniVersion": "1.0.0", "type": "sriov", "deviceID": "pci:0000:3b:02.1"}, "spec.config.deviceID", UNSUPPORTED),
        ({"cniVersion": "1.0.0", "type": "sriov", "deviceID": 5}, "spec.config.deviceID", INVALID),
        ({"cniVersion": "1.0.0", "type": "sriov", "deviceID": None}, "spec.config.deviceID", INVALID),
        ({"cniVersion": "1.0.0", "plugins": [{"type": "sriov"}, {"type": "tuning", "deviceID": PCI}]},
         "spec.config.plugins[1].deviceID", UNSUPPORTED),
        ({"cniVersion": "1.0.0", "plugins": [{"type": "sriov"}, {"type": "tuning", "pciBusID": OTHER_PCI}]},
         "spec.config.plugins[1].pciBusID", UNSUPPORTED),
        ({"cniVersion": "1.0.0", "deviceID": PCI, "plugins": [{"type": "sriov"}]}, "spec.config.deviceID", UNSUPPORTED),
    ],
    ids=[
        "conflicting-device-id", "conflicting-pci-bus-id", "prefixed-device-id-conflicts", "numeric-device-id",
        "null-device-id", "device-id-on-metaplugin", "pci-bus-id-on-metaplugin", "device-id-on-conflist-root",
    ],
)  # fmt: skip
def test_device_keys_that_cannot_be_bound_are_rejected(
    config: dict[str, JsonValue], path: str, reason: errors.Reason
) -> None:
    exc = reject(nad(config))
    assert exc.reason == reason
    assert paths(exc) == [path]


def test_host_device_chain_is_rejected() -> None:
    exc = reject(nad({"cniVersion": "1.0.0", "plugins": [{"type": "sriov"}, {"type": "host-device"}]}))
    assert exc.reason == UNSUPPORTED
    assert paths(exc) == ["spec.config.plugins[1].type"]
    assert "another binding model" in exc.errors[0].message


# --- inline config required --------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [None, {}, {"config": ""}, {"config": "   \n\t"}, {"config": None}],
    ids=["spec-absent", "spec-without-config", "config-empty", "config-whitespace", "config-null"],
)
def test_empty_or_absent_config_is_invalid_and_names_the_template(spec: object) -> None:
    source = nad()
    if spec is not None:
        source["spec"] = spec
    exc = reject(source)
    assert exc.reason == INVALID
    assert paths(exc) == ["spec.config"]
    assert "ns-a/net-a" in str(exc)
    assert "inline" in exc.errors[0].message


@pytest.mark.parametrize(
    ("spec", "path"),
    [({"config": {"type": "sriov"}}, "spec.config"), ("config", "spec"), ({"config": 3}, "spec.config")],
    ids=["config-object-instead-of-string", "spec-not-object", "config-number"],
)
def test_config_of_wrong_type_is_invalid(spec: object, path: str) -> None:
    source = nad()
    source["spec"] = spec
    exc = reject(source)
    assert exc.reason == INVALID
    assert paths(exc) == [path]


# --- one logical network across shadows -----------------------------------------------------------


def test_two_shadows_of_one_template_share_name_and_ipam_and_differ_only_in_device() -> None:
    template = {
        "cniVersion": "1.0.0",
        "type": "sriov",
        "ipam": {
            "type": "host-local",
            "subnet": "10.56.217.0/24",
            "dataDir": "/var/lib/cni/networks",
            "routes": [],
        },
    }
    first = render.render_shadow_config(nad(template), PCI)
    second = render.render_shadow_config(nad(template), OTHER_PCI)
    one, two = rendered_doc(first), rendered_doc(second)
    assert one["name"] == two["name"] == "net-a"
    assert one["ipam"] == two["ipam"] == template["ipam"]
    assert (one.pop("deviceID"), two.pop("deviceID")) == (PCI, OTHER_PCI)
    assert one == two
    assert first.config_sha256 != second.config_sha256


@pytest.mark.parametrize(
    "ipam_text",
    [
        '{"type":"whereabouts","range":"192.0.2.0/24","network_name":""}',
        '{"type":"whereabouts","range":"192.0.2.0/24"}',
        '{"range":"192.0.2.0/24","type":"whereabouts","network_name":"rail-a","exclude":[],"routes":[{"dst":"0.0.0.0/0"}]}',
        '{"type":"whereabouts","range":"192.0.2.0/24","node_slice_size":""}',
        '{"type":"host-local","ranges":[[{"subnet":"10.0.0.0/24","gateway":"10.0.0.1"}]],"dataDir":"/run/x"}',
        '{}',
        '{"type":"static","addresses":[{"address":"10.1.1.5/24"}],"x-ext":{"n":18446744073709551617}}',
    ],
    ids=[
        "explicit-empty-network-name-kept", "omitted-network-name-stays-omitted",
        "key-order-and-empty-exclude-kept", "disabled-node-slice-size-kept", "host-local-ranges-and-data-dir",
        "empty-ipam-object", "unknown-ipam-extension-with-big-int",
    ],
)  # fmt: skip
def test_ipam_subtree_is_copied_byte_for_byte(ipam_text: str) -> None:
    source = (
        '{"cniVersion":"1.0.0","name":"rail-a","plugins":[{"type":"sriov","ipam":'
        + ipam_text
        + '},{"type":"tuning"}]}'
    )
    result = render.render_shadow_config(nad(source), PCI)
    assert b'"ipam":' + ipam_text.encode() + b"}" in result.config_bytes


@pytest.mark.parametrize(
    ("ipam", "path", "reason"),
    [
        ({"type": "whereabouts", "range": "192.0.2.0/24", "node_slice_size": "/28"},
         "spec.config.ipam.node_slice_size", UNSUPPORTED),
        ({"type": "whereabouts", "range": "192.0.2.0/24", "node_slice_size": 28},
         "spec.config.ipam.node_slice_size", UNSUPPORTED),
        ("host-local", "spec.config.ipam", INVALID),
        ([], "spec.config.ipam", INVALID),
        ({"type": 1}, "spec.config.ipam.type", INVALID),
    ],
    ids=["whereabouts-fast-node-slice", "node-slice-size-number", "ipam-string", "ipam-array", "ipam-type-number"],
)  # fmt: skip
def test_ipam_that_cannot_be_preserved_safely_is_rejected(
    ipam: JsonValue, path: str, reason: errors.Reason
) -> None:
    exc = reject(nad({"cniVersion": "1.0.0", "type": "sriov", "ipam": ipam}))
    assert exc.reason == reason
    assert paths(exc) == [path]


# --- strict JSON at the template ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path", "mentions"),
    [
        ("null", "spec.config", "root is null"),
        ('[{"type":"sriov"}]', "spec.config", "root is a list"),
        ('"sriov"', "spec.config", "root is a string"),
        ("42", "spec.config", "root is a number"),
        ('{"cniVersion":"1.0.0","type":"sriov",}', "spec.config", "malformed JSON"),
        ('{"cniVersion":"1.0.0","type":"sriov","vlan":NaN}', "spec.config", "NaN"),
        ('{"cniVersion":"1.0.0","type":"sriov","type":"macvlan"}', "spec.config.type", "duplicate key"),
        ('{"cniVersion":"1.0.0","name":"a","name":"b","type":"sriov"}', "spec.config.name", "duplicate key"),
        ('{"cniVersion":"1.0.0","cniVersion":"0.4.0","type":"sriov"}', "spec.config.cniVersion", "duplicate key"),
        ('{"cniVersion":"1.0.0","plugins":[{"type":"sriov"}],"plugins":[]}', "spec.config.plugins", "duplicate key"),
        ('{"cniVersion":"1.0.0","type":"sriov","ipam":{},"ipam":{}}', "spec.config.ipam", "duplicate key"),
        ('{"cniVersion":"1.0.0","plugins":[{"type":"sriov","deviceID":"0000:3b:02.1","deviceID":"0000:3b:02.2"}]}',
         "spec.config.plugins[0].deviceID", "duplicate key"),
        ('{"cniVersion":"1.0.0","plugins":[{"type":"sriov","pciBusID":"","pciBusID":""}]}',
         "spec.config.plugins[0].pciBusID", "duplicate key"),
        ('{"cniVersion":"1.0.0","plugins":[{"type":"sriov","type":"sriov"}]}', "spec.config.plugins[0].type", "duplicate key"),
        ('{"cniVersion":"1.0.0","type":"sriov","ipam":{"range":"a","range":"b"}}', "spec.config.ipam.range", "duplicate key"),
        ('{"cniVersion":"1.0.0","type":"sriov","x":"\\udfff"}', "spec.config.x", "surrogate"),
    ],
    ids=[
        "null-root", "array-root", "string-root", "number-root", "malformed", "nan", "duplicate-root-type",
        "duplicate-name", "duplicate-cni-version", "duplicate-plugins", "duplicate-ipam",
        "duplicate-device-id-in-plugin", "duplicate-pci-bus-id-in-plugin", "duplicate-type-in-plugin",
        "duplicate-inside-ipam", "lone-surrogate",
    ],
)  # fmt: skip
def test_template_must_be_strict_json_object(text: str, path: str, mentions: str) -> None:
    exc = reject(nad(text))
    assert exc.reason == INVALID
    assert paths(exc) == [path]
    assert mentions in exc.errors[0].message


@pytest.mark.parametrize(
    ("field", "value"),
    [("vlan", "100"), ("vlan", True), ("vlan", RawNumber("1e3")), ("vlanQoS", RawNumber("1.0")),
     ("max_tx_rate", [1]), ("trust", True), ("spoofchk", 1), ("link_state", {})],
    ids=["vlan-string", "vlan-bool", "vlan-exponent", "vlan-qos-fraction", "rate-array", "trust-bool",
         "spoofchk-number", "link-state-object"],
)  # fmt: skip
def test_sriov_fields_of_wrong_type_are_invalid(field: str, value: JsonValue) -> None:
    text = strict_json.encode({"cniVersion": "1.0.0", "type": "sriov", "vlan": 1, field: value})
    exc = reject(nad(text))
    assert exc.reason == INVALID
    assert paths(exc) == [f"spec.config.{field}"]


# --- error collection ---------------------------------------------------------------------------------


def test_every_problem_is_reported_at_once_and_invalid_wins_over_unsupported() -> None:
    config = {
        "cniVersion": "0.2.0",
        "name": "bad name",
        "plugins": [
            {
                "type": "sriov",
                "deviceID": OTHER_PCI,
                "vlan": "1",
                "ipam": {"type": "whereabouts", "range": "192.0.2.0/24", "node_slice_size": "/28"},
            },
            {"type": "macvlan"},
            {"type": "tuning", "pciBusID": PCI},
        ],
    }
    exc = reject(nad(config))
    assert exc.reason == INVALID
    assert paths(exc) == [
        "spec.config.cniVersion",
        "spec.config.name",
        "spec.config.plugins[1].type",
        "spec.config.plugins[2].pciBusID",
        "spec.config.plugins[0].deviceID",
        "spec.config.plugins[0].vlan",
        "spec.config.plugins[0].ipam.node_slice_size",
    ]
    assert str(exc).startswith("InvalidNetworkTemplate: network template ns-a/net-a cannot be used")


def test_misplaced_sriov_entry_is_still_checked() -> None:
    config = {
        "cniVersion": "1.0.0",
        "plugins": [{"type": "tuning"}, {"type": "sriov", "deviceID": OTHER_PCI}],
    }
    assert paths(reject(nad(config))) == ["spec.config.plugins[1].type", "spec.config.plugins[1].deviceID"]


# --- PCI address (rules in test_pci.py) -------------------------------------------------------


def test_invalid_pci_is_reported_before_template_problems() -> None:
    exc = reject(nad("not json"), pci="pci:0000:03:00.1")
    assert exc.reason == errors.Reason.INVALID_PCI_ADDRESS


# --- properties over generated templates ------------------------------------------------------------------


@given(templates())
def test_property_name_ipam_and_everything_but_device_keys_are_unchanged(
    case: tuple[dict[str, JsonValue], dict[str, object]],
) -> None:
    source, source_nad = case
    result = render.render_shadow_config(source_nad, PCI)
    out = rendered_doc(result)
    metadata = source_nad["metadata"]
    assert isinstance(metadata, dict)
    expected_name = source.get("name") or metadata["name"]
    assert result.cni_name == out["name"] == expected_name
    src_entry, out_entry = sriov_entry(source), sriov_entry(out)
    if "ipam" in src_entry:
        assert strict_json.encode(out_entry["ipam"]) == strict_json.encode(src_entry["ipam"])
    assert out_entry["deviceID"] == PCI
    if "pciBusID" in src_entry:
        assert out_entry["pciBusID"] == PCI
    strip = ("deviceID", "pciBusID")
    if "plugins" in source:
        assert isinstance(out["plugins"], list) and isinstance(source["plugins"], list)
        assert strict_json.encode(out["plugins"][1:]) == strict_json.encode(source["plugins"][1:])
        assert _without(out_entry, strip) == _without(src_entry, strip)
        assert _without(out, ("name", "plugins")) == _without(source, ("name", "plugins"))
    else:
        assert _without(out, ("name", *strip)) == _without(source, ("name", *strip))


@given(templates())
def test_property_rendering_is_deterministic_and_idempotent(
    case: tuple[dict[str, JsonValue], dict[str, object]],
) -> None:
    _, source_nad = case
    first = render.render_shadow_config(source_nad, PCI)
    assert render.render_shadow_config(copy.deepcopy(source_nad), PCI) == first
    again = render.render_shadow_config(nad(first.config_text, name="unused-name"), PCI)
    assert again.config_bytes == first.config_bytes
    assert first.config_sha256 == hashlib.sha256(first.config_bytes).hexdigest()


def _without(obj: dict[str, JsonValue], keys: tuple[str, ...]) -> str:
    """Canonical text of ``obj`` minus ``keys``; comparing text also compares key order."""
    return strict_json.encode({k: v for k, v in obj.items() if k not in keys})


def test_deeply_nested_template_is_an_invalid_template_not_a_crash() -> None:
    depth = 100_000
    config = '{"cniVersion":"1.0.0","type":"sriov","x":' + "[" * depth + "]" * depth + "}"
    with pytest.raises(errors.InvalidSpec) as caught:
        render.render_shadow_config(nad(config), PCI)
    assert caught.value.reason is INVALID
    assert [e.path for e in caught.value.errors] == ["spec.config"]
    assert "nested too deeply" in str(caught.value)
