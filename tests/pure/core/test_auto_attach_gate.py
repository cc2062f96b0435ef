"""core.plugin.auto_attach_gate: a Node label turns auto-attach fully on per node; recorded bindings
keep a node whose gate closed release-only, never fully on."""

from __future__ import annotations

import pytest

from sriov_dra.core.plugin import auto_attach_gate
from sriov_dra.core.plugin.auto_attach_gate import Mode

LABEL = "sriovnetwork.k8snetworkplumbingwg.io/multus-auto-attach"


def test_the_label_set_to_true_turns_auto_attach_fully_on() -> None:
    got = auto_attach_gate.decide(LABEL, "worker-1", {LABEL: "true", "rail": "a"}, [])
    assert got == auto_attach_gate.Decision(Mode.FULL, f"Node worker-1 carries {LABEL}=true")


def test_the_label_set_to_true_turns_auto_attach_fully_on_with_recorded_bindings_too() -> None:
    assert auto_attach_gate.decide(LABEL, "worker-1", {LABEL: "true"}, ["uid-a"]).mode is Mode.FULL


@pytest.mark.parametrize(
    ("labels", "found"),
    [
        ({}, f"does not carry {LABEL}"),
        ({LABEL: "false"}, f"has {LABEL}=false"),
        ({LABEL: "True"}, f"has {LABEL}=True"),
    ],
    ids=["absent", "false", "not-exactly-true"],
)
def test_without_the_label_set_to_true_the_node_stays_manual_naming_the_label_and_who_sets_it(
    labels: dict[str, str], found: str
) -> None:
    got = auto_attach_gate.decide(LABEL, "worker-1", labels, [])
    assert got.mode is Mode.OFF
    assert got.why == (
        f"Node worker-1 {found}: manual mode (the preflight gate sets {LABEL}=true once every node check "
        "passed; docs/install.md)"
    )


@pytest.mark.parametrize("labels", [{}, {LABEL: "false"}], ids=["label-removed", "label-false"])
def test_a_closed_gate_with_recorded_bindings_runs_release_only_naming_the_claims_and_the_way_back(
    labels: dict[str, str],
) -> None:
    got = auto_attach_gate.decide(LABEL, "worker-1", labels, ["uid-b", "uid-a"])
    assert got.mode is Mode.RELEASE_ONLY
    assert "its auto-attach gate is closed" in got.why
    assert "(claims uid-a, uid-b): they are still repaired and released, no new claim is prepared" in got.why
    assert got.why.endswith(
        "fix the failed preflight checks and run the preflight again (it sets the label and restarts the "
        "plugin), or drain the node (playbooks/drain.yml) and run the preflight again (with no binding left it "
        "restarts the plugin in manual mode)"
    )


def test_the_reported_mode_names_are_the_documented_ones() -> None:
    assert [str(m) for m in Mode] == ["full", "release-only", "off"]
