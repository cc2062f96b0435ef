"""core.plugin.auto_attach_gate: a Node label turns auto-attach on per node; recorded bindings keep it on."""

from __future__ import annotations

import pytest

from sriov_dra.core.plugin import auto_attach_gate

LABEL = "sriovnetwork.k8snetworkplumbingwg.io/multus-auto-attach"


def test_the_label_set_to_true_turns_auto_attach_on() -> None:
    got = auto_attach_gate.decide(LABEL, "worker-1", {LABEL: "true", "rail": "a"}, [])
    assert got == auto_attach_gate.Decision(True, f"Node worker-1 carries {LABEL}=true")


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
    assert got.on is False
    assert got.why == (
        f"Node worker-1 {found}: manual mode (the preflight gate sets {LABEL}=true once every node check "
        "passed; docs/install.md)"
    )


def test_recorded_auto_attached_bindings_keep_auto_attach_on_without_the_label() -> None:
    got = auto_attach_gate.decide(LABEL, "worker-1", {}, ["uid-b", "uid-a"])
    assert got.on is True
    assert got.why == (
        f"Node worker-1 does not carry {LABEL}, but the checkpoint holds auto-attached bindings (claims uid-a, "
        "uid-b) that only auto-attach releases; drain the node (playbooks/drain.yml) to turn auto-attach off"
    )
