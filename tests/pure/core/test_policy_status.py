"""One node's status entry of a policy object: written on a finding, cleared to True, never repeated."""

from __future__ import annotations

from sriov_dra.core.plugin import policy_status
from sriov_dra.core.policy_findings import Diagnostic
from sriov_dra_rules import errors

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"
NOTHING = Diagnostic(
    errors.Reason.DEVICE_NOT_ELIGIBLE, "SriovResourcePolicy/p", "spec.configs[0]", "matches nothing", True
)
TYPO = Diagnostic(
    errors.Reason.SELECTOR_MATCHES_NOTHING, "SriovResourcePolicy/p", "spec.configs[1]", "no PF", False
)


def test_a_healthy_object_without_an_entry_gets_no_status() -> None:
    assert policy_status.node_entry("n1", 3, [], None, T0) is None


def test_a_finding_is_a_false_condition_with_the_first_reason_and_every_message() -> None:
    entry = policy_status.node_entry("n1", 3, [NOTHING, TYPO], None, T0)
    assert entry is not None and entry["node"] == "n1" and entry["observedGeneration"] == 3
    (condition,) = entry["conditions"]
    assert condition == {
        "type": "Valid",
        "status": "False",
        "reason": "DeviceNotEligible",
        "message": "spec.configs[0]: matches nothing; spec.configs[1]: no PF",
        "lastTransitionTime": T0,
        "observedGeneration": 3,
    }


def test_the_same_entry_for_the_same_generation_is_not_written_again() -> None:
    entry = policy_status.node_entry("n1", 3, [NOTHING], None, T0)
    assert policy_status.node_entry("n1", 3, [NOTHING], entry, T1) is None


def test_a_new_generation_is_written_keeping_the_transition_time_while_the_status_holds() -> None:
    entry = policy_status.node_entry("n1", 3, [NOTHING], None, T0)
    again = policy_status.node_entry("n1", 4, [NOTHING], entry, T1)
    assert again is not None and again["conditions"][0]["lastTransitionTime"] == T0


def test_a_fixed_object_turns_true_with_a_new_transition_time() -> None:
    entry = policy_status.node_entry("n1", 3, [NOTHING], None, T0)
    fixed = policy_status.node_entry("n1", 3, [], entry, T1)
    assert fixed is not None
    assert fixed["conditions"][0] | {"message": ""} == {
        "type": "Valid",
        "status": "True",
        "reason": "NoFindings",
        "message": "",
        "lastTransitionTime": T1,
        "observedGeneration": 3,
    }


def test_entry_of_finds_only_this_nodes_entry() -> None:
    obj = {"status": {"nodes": [{"node": "n2", "conditions": []}, {"node": "n1", "observedGeneration": 1}]}}
    assert policy_status.entry_of(obj, "n1") == {"node": "n1", "observedGeneration": 1}
    assert policy_status.entry_of(obj, "n3") is None
    assert policy_status.entry_of({"status": {"nodes": "bad"}}, "n1") is None


def test_a_long_message_is_cut_to_the_condition_limit() -> None:
    long = Diagnostic(errors.Reason.INVALID_ATTRIBUTE, "DeviceAttributes/a", "spec", "x" * 40000, True)
    entry = policy_status.node_entry("n1", 1, [long], None, T0)
    assert entry is not None and len(entry["conditions"][0]["message"]) == policy_status.MESSAGE_LIMIT
