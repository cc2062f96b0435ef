"""The renderer refuses what sriov-cni's config loader would refuse: its NetConf keys in any case, typed.

sriov-cni decodes its config with Go's encoding/json, which matches keys to fields exactly or
case-insensitively (``core.sriov_cni_netconf``); the VF settings' limits then apply to the value a
field gets (``core.sriov_cni_fields``). The realvf tier checks a generated sample against the real
binary (tests/realvf/guest/test_shadow_configs_in_sriov_cni.py); here, named cases.
"""

from __future__ import annotations

import pytest
from tests.fakes.render_sources import INVALID, PCI, nad, paths, reject, rendered_doc

from sriov_dra.core import render, sriov_cni_netconf
from sriov_dra_rules import strict_json
from sriov_dra_rules.strict_json import JsonValue

SINGLE: dict[str, JsonValue] = {"cniVersion": "1.0.0", "name": "rail", "type": "sriov"}


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        ({"VLAN": 5000}, "spec.config.VLAN"),
        ({"Vlan": "100"}, "spec.config.Vlan"),
        ({"mtu": "9000"}, "spec.config.mtu"),
        ({"dns": "1.1.1.1"}, "spec.config.dns"),
        ({"dns": {"nameservers": "1.1.1.1"}}, "spec.config.dns.nameservers"),
        ({"capabilities": {"mac": "yes"}}, "spec.config.capabilities"),
        ({"runtimeConfig": {"MAC": 7}}, "spec.config.runtimeConfig.MAC"),
        ({"OrigVfState": {"LinkState": -1}}, "spec.config.OrigVfState.LinkState"),
        ({"VFID": 1.5}, "spec.config.VFID"),
        ({"\u017fpoofchk": 5}, 'spec.config["\u017fpoofchk"]'),
        ({"vlan": 10, "VLAN": 10}, "spec.config.VLAN"),
        ({"deviceId": PCI}, "spec.config.deviceId"),
        ({"NAME": 5}, "spec.config.NAME"),
    ],
    ids=[
        "vlan-upper-case-out-of-range",
        "vlan-title-case-string",
        "mtu-string",
        "dns-string",
        "dns-nameservers-string",
        "capabilities-not-booleans",
        "runtime-config-mac-number",
        "orig-vf-state-negative-uint32",
        "vfid-fraction",
        "long-s-spoofchk-number",
        "vlan-twice",
        "device-id-in-another-case",
        "name-in-another-case",
    ],
)
def test_a_key_sriov_cni_reads_in_any_case_with_a_value_it_refuses_is_an_invalid_template(
    extra: dict[str, JsonValue], path: str
) -> None:
    exc = reject(nad(strict_json.encode({**SINGLE, **extra})))
    assert exc.reason == INVALID
    assert paths(exc) == [path], exc


@pytest.mark.parametrize(
    "extra",
    [
        {"MTU": 9000},
        {"mac": "02:00:00:00:00:01"},
        {"dns": {"nameservers": ["192.0.2.53"], "domain": "rail"}},
        {"capabilities": {"mac": True, "ips": False}},
        {"runtimeConfig": {"mac": "02:00:00:00:00:01"}},
        {"Vlan": 100, "vlanqos": 3},
        {"prevResult": None, "Master": None},
        {"x-vendor": {"vlan": "not sriov-cni's"}},
    ],
    ids=["mtu", "mac", "dns", "capabilities", "runtime-config", "vlan-any-case", "nulls", "unknown-key"],
)
def test_keys_sriov_cni_reads_with_values_it_decodes_render(extra: dict[str, JsonValue]) -> None:
    out = rendered_doc(render.render_shadow_config(nad(strict_json.encode({**SINGLE, **extra})), PCI))
    assert {key: out[key] for key in extra} == extra


def test_a_conflists_entry_is_read_with_the_lists_name_and_version_as_libcni_hands_it_over() -> None:
    config = {"cniVersion": "1.0.0", "name": "rail", "plugins": [{"type": "sriov", "name": 5}]}
    assert rendered_doc(render.render_shadow_config(nad(strict_json.encode(config)), PCI))["name"] == "rail"


@pytest.mark.parametrize(
    ("key", "folded"),
    [
        ("vlanQoS", "VLANQOS"),
        ("\u017fpoofchk", "SPOOFCHK"),
        ("\u212aey", "KEY"),
        ("r\u00e9seau", "R\u00e9SEAU"),
    ],
)
def test_keys_fold_as_go_compares_them_with_field_names(key: str, folded: str) -> None:
    assert sriov_cni_netconf.fold(key) == folded
