"""sriov-cni's VF settings are checked with one rule on every path that makes or reads a config
(docs/design.md#render): the plugin's template check, the operator's SriovNetwork renderer and the
guard's check of a shadow. A value sriov-cni would misread (``"On"`` switches spoof checking off)
or refuse at every ADD (a QoS without a VLAN) is refused before anything is written, with the same
words on each path, naming the field, the value, what sriov-cni accepts and the fix.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.fakes import managed_pods as mp
from tests.fakes import render_sources, sriov_networks

from sriov_dra.core import binding_annotation, render, sriov_cni_fields
from sriov_dra.core.operator import network_config
from sriov_dra.guard import decisions, shadow_checks
from sriov_dra_rules import errors

# (case id, sriov-cni settings, SriovNetwork spec, words every path's message carries)
REFUSED: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("spoofchk-capitalised", {"vlan": 1, "spoofchk": "On"}, {"spoofChk": "On"}, 'turns it on only for exactly "on"'),
    ("trust-yes", {"vlan": 1, "trust": "yes"}, {"trust": "yes"}, "would switch trust mode off"),
    ("spoofchk-yaml-boolean", {"vlan": 1, "spoofchk": True}, {"spoofChk": True}, 'quote it: "on"'),
    ("trust-yaml-boolean-off", {"vlan": 1, "trust": False}, {"trust": False}, 'quote it: "off"'),
    ("link-state-up", {"vlan": 1, "link_state": "up"}, {"linkState": "up"}, "auto, enable, disable"),
    ("vlan-above-4094", {"vlan": 4095}, {"vlan": 4095}, "outside 0-4094"),
    ("vlan-negative", {"vlan": -1}, {"vlan": -1}, "outside 0-4094"),
    ("qos-above-7", {"vlan": 10, "vlanQoS": 8}, {"vlan": 10, "vlanQoS": 8}, "outside 0-7"),
    ("qos-on-vlan-0", {"vlan": 0, "vlanQoS": 3}, {"vlanQoS": 3}, "needs a non-zero vlan"),
    ("proto-unknown", {"vlan": 10, "vlanProto": "802.1x"}, {"vlan": 10, "vlanProto": "802.1x"}, "802.1q or 802.1ad"),
    ("proto-ad-on-vlan-0", {"vlan": 0, "vlanProto": "802.1ad"}, {"vlanProto": "802.1ad"}, "802.1ad needs a non-zero vlan"),
    ("rate-negative", {"min_tx_rate": -1}, {"minTxRate": -1}, "outside 0-4294967295"),
    ("rate-past-u32", {"max_tx_rate": 2**32}, {"maxTxRate": 2**32}, "outside 0-4294967295"),
    ("min-above-max", {"min_tx_rate": 200, "max_tx_rate": 100}, {"minTxRate": 200, "maxTxRate": 100}, "is above"),
]  # fmt: skip

ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("spoofchk-on-trust-off", {"spoofchk": "on", "trust": "off"}),
    ("empty-means-unset", {"spoofchk": "", "link_state": ""}),
    ("every-link-state", {"link_state": "disable"}),
    ("qos-with-vlan", {"vlan": 100, "vlanQoS": 7}),
    ("proto-any-case", {"vlan": 100, "vlanProto": "802.1AD"}),
    ("min-with-unlimited-max", {"min_tx_rate": 100, "max_tx_rate": 0}),
    ("min-equal-max", {"min_tx_rate": 100, "max_tx_rate": 100}),
]


def _template(settings: dict[str, Any]) -> dict[str, object]:
    return render_sources.nad({"cniVersion": "1.0.0", "name": "net-a", "type": "sriov", **settings})


@pytest.mark.parametrize(("settings", "words"), [(c[1], c[3]) for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_template_with_a_setting_sriov_cni_misreads_or_refuses_is_an_invalid_network_template(
    settings: dict[str, Any], words: str
) -> None:
    exc = render_sources.reject(_template(settings))
    assert exc.reason is errors.Reason.INVALID_NETWORK_TEMPLATE
    assert any(words in e.message and e.path.startswith("spec.config.") for e in exc.errors), exc.errors
    assert "ns-a/net-a" in exc.summary


@pytest.mark.parametrize(("spec", "words"), [(c[2], c[3]) for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_sriov_network_with_a_setting_sriov_cni_misreads_or_refuses_is_an_invalid_network_spec(
    spec: dict[str, Any], words: str
) -> None:
    with pytest.raises(errors.InvalidSpec) as caught:
        network_config.render_config(sriov_networks.simple(**spec))
    assert caught.value.reason is errors.Reason.INVALID_NETWORK_SPEC
    assert any(words in e.message and e.path.startswith("spec.") for e in caught.value.errors)
    assert "SriovNetwork ns1/test" in caught.value.summary


def _cut(message: str) -> str:
    """``message`` without its field paths (``spec.config.vlan`` and ``spec.vlan`` name one field)."""
    return " ".join(w for w in message.split() if not w.startswith("spec."))


@pytest.mark.parametrize("case", REFUSED, ids=[c[0] for c in REFUSED])
def test_the_template_and_the_operator_paths_refuse_with_the_same_words(case: Any) -> None:
    _, settings, spec, _ = case
    template = {_cut(e.message) for e in render_sources.reject(_template(settings)).errors}
    with pytest.raises(errors.InvalidSpec) as caught:
        network_config.render_config(sriov_networks.simple(**spec))
    assert {_cut(e.message) for e in caught.value.errors} <= template


@pytest.mark.parametrize("settings", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_settings_sriov_cni_applies_as_written_render_unchanged(settings: dict[str, Any]) -> None:
    out = json.loads(render.render_shadow_config(_template(settings), render_sources.PCI).config_text)
    assert {k: out[k] for k in settings} == settings
    assert sriov_cni_fields.problems_of(settings, {}) == []


def test_the_operator_renders_every_accepted_setting_and_drops_none() -> None:
    spec = {"vlan": 100, "vlanQoS": 7, "vlanProto": "802.1ad", "spoofChk": "on", "trust": "off"}
    spec |= {"linkState": "auto", "minTxRate": 10, "maxTxRate": 0}
    doc = json.loads(network_config.render_config(sriov_networks.simple(**spec)))
    assert {k: doc[k] for k in ("vlan", "vlanQoS", "vlanProto", "spoofchk", "trust", "link_state")} == {
        "vlan": 100,
        "vlanQoS": 7,
        "vlanProto": "802.1ad",
        "spoofchk": "on",
        "trust": "off",
        "link_state": "auto",
    }
    assert (doc["min_tx_rate"], doc["max_tx_rate"]) == (10, 0)


def test_the_guard_refuses_a_shadow_frozen_with_a_setting_sriov_cni_misreads() -> None:
    planned = mp.plan_shadow(
        pod_namespace="ai-workloads",
        pod_name="trainer",
        pod_uid=mp.POD_UID,
        source=mp.source_nad("ai-workloads", "rail-a-net", mp.host_local_template("rail-a", "192.0.2.0/24")),
        pci="0000:03:00.1",
        interface="dra0",
        device="vf-0",
    )
    nad = mp.with_uid(planned.nad, "d0d0d0d0-0000-4000-8000-00000000000a")
    doc = json.loads(nad["spec"]["config"])
    doc["spoofchk"] = "On"
    config = json.dumps(doc, separators=(",", ":"))
    nad["spec"]["config"] = config
    binding = json.loads(nad["metadata"]["annotations"]["sriovnetwork.k8snetworkplumbingwg.io/binding"])
    binding["configSHA256"] = binding_annotation.config_sha256(config)
    nad["metadata"]["annotations"]["sriovnetwork.k8snetworkplumbingwg.io/binding"] = json.dumps(binding)
    view = shadow_checks.PodView(
        namespace="ai-workloads", name="trainer", uid=mp.POD_UID, node_name=mp.NODE_NAME, annotations={}
    )
    verdict = shadow_checks.check_shadow(nad, pod=view, entry=None)
    assert [v.reason for v in verdict.violations] == [decisions.Reason.INVALID_SHADOW_CONFIG]
    assert 'turns it on only for exactly "on"' in verdict.violations[0].message
