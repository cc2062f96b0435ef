"""The lab ``sriov`` plugin's real-VF mode: config checks and errors that need no kernel.

What it does on a real VF (host-device move, PF VF table, DEL restores) runs in the realvf tier
(tests/realvf/guest/test_sriov_cni.py); here: sriov-cni v2.10's error for a missing ``deviceID``,
the VF settings' accepted values, and that DEL resets exactly what ADD set.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra_lab import sriov_cni
from sriov_dra_lab.fakes import net_edit

BEFORE = net_edit.VfState(
    vf=0,
    mac="00:00:00:00:00:00",
    vlan=7,
    qos=1,
    spoofchk=True,
    trust=False,
    link_state=0,
    min_tx_rate=0,
    max_tx_rate=0,
)


def _run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], conf: dict[str, Any], tmp: Path
) -> Any:
    for key, value in {
        "CNI_COMMAND": "ADD",
        "CNI_CONTAINERID": "c",
        "CNI_NETNS": "/nonexistent",
        "CNI_IFNAME": "net1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(conf).encode())))
    status = sriov_cni.run(["--real-vfs", "--state-dir", str(tmp), "--sysfs-root", str(tmp)])
    return status, json.loads(capsys.readouterr().out)


def test_real_vf_add_without_device_id_fails_with_sriov_cni_code_999_and_message_and_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, error = _run(
        monkeypatch, capsys, {"cniVersion": "1.0.0", "name": "rail-a", "type": "sriov"}, tmp_path
    )
    assert (status, error["code"], error["msg"]) == (
        1,
        999,
        "SRIOV-CNI failed to load netconf: LoadConf(): VF pci addr is required",
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"vlan": 4095}, "vlan 4095 is invalid: use a whole number 0-4094"),
        ({"vlan": True}, "vlan True is invalid: use a whole number 0-4094"),
        ({"vlanQoS": 3}, "vlanQoS 3 is invalid: vlan must be set and non-zero when vlanQoS is non-zero"),
        ({"spoofchk": "yes"}, 'spoofchk \'yes\' is invalid: use "on" or "off"'),
        ({"trust": True}, 'trust True is invalid: use "on" or "off"'),
        ({"link_state": "up"}, 'link_state \'up\' is invalid: use "auto", "enable" or "disable"'),
        (
            {"min_tx_rate": 200, "max_tx_rate": 100},
            "min_tx_rate 200 is invalid: it must not be above max_tx_rate",
        ),
    ],
)
def test_real_vf_settings_out_of_range_are_refused_naming_the_key_value_and_accepted_values(
    conf: dict[str, Any], expected: str
) -> None:
    with pytest.raises(sriov_cni.PluginError) as raised:
        sriov_cni._vf_settings(conf)
    assert (raised.value.code, raised.value.msg) == (999, sriov_cni.LOAD_CONF + expected)


def test_real_vf_settings_map_to_pf_netlink_keywords() -> None:
    conf = {
        "vlan": 100,
        "vlanQoS": 2,
        "spoofchk": "off",
        "trust": "on",
        "link_state": "disable",
        "max_tx_rate": 50,
    }
    assert sriov_cni._vf_settings(conf) == {
        "vlan": 100,
        "qos": 2,
        "spoofchk": False,
        "trust": True,
        "link_state": 2,
        "min_tx_rate": None,
        "max_tx_rate": 50,
    }


@given(
    st.fixed_dictionaries(
        {},
        optional={
            "vlan": st.integers(0, 4094),
            "spoofchk": st.sampled_from(["on", "off"]),
            "trust": st.sampled_from(["on", "off"]),
            "link_state": st.sampled_from(["auto", "enable", "disable"]),
            "max_tx_rate": st.integers(0, 10_000),
        },
    )
)
def test_del_resets_exactly_the_settings_add_applied_to_their_values_before_add(conf: dict[str, Any]) -> None:
    applied = sriov_cni._vf_settings(conf)
    reset = sriov_cni._reset_of(applied, BEFORE)
    assert set(reset) == set(applied)
    assert all(reset[key] == getattr(BEFORE, key) for key in reset)
