"""The lab ``sriov`` plugin (the sriov-cni stand-in): config checks and errors that need no kernel.

What it does on a real VF, next to the real sriov-cni, runs in the realvf tier
(tests/realvf/guest/test_sriov_cni_standin.py); here: sriov-cni v2.10.0's errors for a missing
``deviceID`` and for the VLAN and link-state values its ``LoadConf`` refuses, with its texts, and
that DEL resets exactly what ADD set.
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


def test_an_add_without_device_id_fails_with_sriov_cnis_code_999_and_message_and_writes_nothing(
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
        ({"vlan": 4095}, "vlan id 4095 invalid: value must be in the range 0-4094"),
        ({"vlan": -1}, "vlan id -1 invalid: value must be in the range 0-4094"),
        ({"vlanQoS": 3}, "vlan id must be configured to set vlan QoS to a non-nil value"),
        ({"vlanProto": "802.1ad"}, "vlan id must be configured to set vlan proto to a non-nil value"),
        ({"vlan": 10, "vlanQoS": 8}, "vlan QoS PCP 8 invalid: value must be in the range 0-7"),
        (
            {"vlan": 0, "vlanQoS": 3},
            "non-zero vlan id must be configured to set vlan QoS to a non-zero value",
        ),
        ({"vlan": 10, "vlanProto": "qinq"}, "vlan Proto qinq invalid: value must be '802.1Q' or '802.1ad'"),
        (
            {"vlan": 0, "vlanProto": "802.1AD"},
            "non-zero vlan id must be configured to set vlan proto 802.1ad",
        ),
        ({"link_state": "up"}, "invalid link_state value: up"),
    ],
)
def test_vf_settings_sriov_cni_refuses_are_refused_with_its_texts(
    conf: dict[str, Any], expected: str
) -> None:
    with pytest.raises(sriov_cni.PluginError) as raised:
        sriov_cni._vf_settings(conf)
    assert (raised.value.code, raised.value.msg) == (999, sriov_cni.LOAD_CONF + expected)


def test_vf_settings_map_to_pf_netlink_keywords() -> None:
    conf = {
        "vlan": 100,
        "vlanQoS": 2,
        "vlanProto": "802.1Q",
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


def test_spoofchk_and_trust_other_than_on_mean_off_as_in_sriov_cni() -> None:
    assert sriov_cni._vf_settings({"spoofchk": "yes", "trust": "On"}) == {"spoofchk": False, "trust": False}
