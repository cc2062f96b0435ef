"""Which managed selections are ours and what a merge refuses: ownership, manual and interface conflicts
(docs/design.md#selections)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

import pytest
from tests.fakes.selection_pods import (
    A0,
    A1,
    B2,
    CLAIM_A,
    NETS,
    NS,
    OTHER_POD_UID,
    REG,
    binding,
    edited,
    entry,
    merged,
    pod,
    reg_text,
    tuple_text,
)

from sriov_dra.core import identities, interface_naming, limits, networks
from sriov_dra.core.plugin import selection_ownership, selections
from sriov_dra_rules import errors

# --- merge: refusals -------------------------------------------------------------------------


def conflict(
    annotations: Mapping[str, str] | None, bindings: Sequence[selection_ownership.ManagedBinding]
) -> errors.Conflict:
    with pytest.raises(errors.Conflict) as info:
        selections.merge_managed_selections(pod(annotations), bindings)
    return info.value


@pytest.mark.parametrize(
    "manual",
    [
        '{"name":"rail-a-net"}',
        '{"name":"rail-a-net","namespace":"ai","interface":"net5"}',
    ],
    ids=["namespace-defaulted-to-pod", "explicit-namespace-and-interface"],
)
def test_manual_selection_of_a_managed_source_is_refused_with_migration_hint(manual: str) -> None:
    err = conflict({NETS: f'[{{"name":"net-x"}},{manual}]'}, [A0])
    assert err.reason is errors.Reason.MANUAL_SELECTION_CONFLICTS_WITH_MANAGED_TEMPLATE
    (problem,) = err.errors
    assert problem.path == networks.field_path(1)
    assert "ai/rail-a-net" in problem.message and "remove this entry" in problem.message


def test_manual_selection_of_the_comma_form_source_is_refused() -> None:
    err = conflict({NETS: "net-x,rail-a-net"}, [A0])
    assert err.reason is errors.Reason.MANUAL_SELECTION_CONFLICTS_WITH_MANAGED_TEMPLATE


def test_same_source_name_in_another_namespace_is_not_a_conflict() -> None:
    update = selections.merge_managed_selections(pod({NETS: "other/rail-a-net"}), [A0])
    assert update.changed


@pytest.mark.parametrize(
    "value",
    [
        f"[{edited(A0, ips=['10.0.0.9/24'])}]",
        f"[{edited(A0, interface='dra7')}]",
        f"[{edited(A0, namespace=None)}]",
        f"{A0.entry.name}@dra0",
        "[" + tuple_text(A0)[:-1] + ',"interface":"dra0"}]',
        "[" + tuple_text(A0).replace('"interface"', '"Interface"') + "]",
        "[" + tuple_text(A0).replace('"interface"', '"interfaceRequest"') + "]",
        "[" + tuple_text(A0)[:-1] + ',"interfaceRequest":"dra0"}]',
    ],
    ids=[
        "options-added",
        "interface-changed",
        "namespace-dropped",
        "rewritten-in-comma-form",
        "a-key-repeated",
        "a-case-variant-key",
        "interface-request-instead-of-interface",
        "interface-request-added",
    ],
)
def test_edited_managed_entry_is_an_ownership_conflict(value: str) -> None:
    annotations = merged(A0)
    annotations[NETS] = value
    err = conflict(annotations, [A0])
    assert err.reason is errors.Reason.OWNERSHIP_CONFLICT
    assert "was edited" in str(err) and "restore" in str(err)


def test_generated_name_selected_without_registry_provenance_is_a_conflict() -> None:
    err = conflict({NETS: f"[{tuple_text(A0)}]"}, [A0])
    assert err.reason is errors.Reason.OWNERSHIP_CONFLICT
    assert "no provenance" in str(err)


def test_duplicated_managed_entry_is_a_conflict() -> None:
    annotations = merged(A0)
    annotations[NETS] = f"[{tuple_text(A0)},{tuple_text(A0)}]"
    err = conflict(annotations, [A0])
    assert "more than once" in str(err)


def test_registry_of_another_pod_uid_is_a_conflict() -> None:
    err = conflict({REG: reg_text(B2, pod_uid=OTHER_POD_UID)}, [A0])
    assert err.reason is errors.Reason.OWNERSHIP_CONFLICT
    assert OTHER_POD_UID in str(err) and "copied from another Pod" in str(err)


def test_registry_entry_disagreeing_with_checkpoint_is_a_conflict() -> None:
    changed_uid = selection_ownership.ManagedBinding(
        dataclasses.replace(A0.entry, uid=identities.ObjectUid("d0d0d0d0-0000-4000-8000-0000000000ff")),
        source_namespace=NS,
        source_name="rail-a-net",
    )
    err = conflict(merged(A0), [changed_uid])
    assert "disagrees with the plugin checkpoint" in str(err)


def test_registry_entry_of_the_claim_missing_from_checkpoint_is_a_conflict() -> None:
    err = conflict(merged(A0, A1), [A0])
    assert A1.entry.name in str(err)


def test_malformed_registry_is_a_contract_violation_and_nothing_is_guessed() -> None:
    with pytest.raises(errors.ContractViolation) as info:
        selections.merge_managed_selections(pod({REG: '{"version":1,"podUID":'}), [A0])
    assert info.value.reason is errors.Reason.CONTRACT_VIOLATION


def test_unknown_registry_version_is_refused() -> None:
    text = json.dumps({**json.loads(reg_text(A0)), "version": 2})
    with pytest.raises(errors.ContractViolation) as info:
        selections.merge_managed_selections(pod({REG: text}), [A0])
    assert info.value.reason is errors.Reason.UNSUPPORTED_VERSION


def test_malformed_networks_is_never_rewritten() -> None:
    with pytest.raises(errors.InvalidSpec) as info:
        selections.merge_managed_selections(
            pod({NETS: '[ { "name": "net-a", "ips": [ "10.1.1.104/24" ] ]'}), [A0]
        )
    assert info.value.reason is errors.Reason.INVALID_NETWORKS_ANNOTATION


def test_binding_outside_the_pod_namespace_is_a_contract_violation() -> None:
    foreign = selection_ownership.ManagedBinding(
        entry(CLAIM_A, 0, "dra0", namespace="elsewhere"), NS, "rail-a-net"
    )
    with pytest.raises(errors.ContractViolation):
        selections.merge_managed_selections(pod({}), [foreign])


@pytest.mark.parametrize(
    ("manual", "layout"),
    [
        ('{"name":"net-x","interface":"dra0"}', interface_naming.MultusLayout()),
        ('{"name":"net-x"}', interface_naming.MultusLayout(primary_ifname="dra0")),
    ],
    ids=["manual-explicit-name", "primary-interface"],
)
def test_managed_interface_name_already_in_use_is_refused(
    manual: str, layout: interface_naming.MultusLayout
) -> None:
    with pytest.raises(errors.Conflict) as info:
        selections.merge_managed_selections(pod({NETS: f"[{manual}]"}), [A0], layout=layout)
    assert info.value.reason is errors.Reason.DUPLICATE_INTERFACE_NAME
    assert "dra0" in str(info.value) and A0.entry.name in str(info.value)


def test_node_default_network_shifts_implicit_names_onto_a_managed_name() -> None:
    """Multus numbers ``a`` net1 on a default node but net2 after one ``defaultNetworks`` entry."""
    named = binding(CLAIM_A, 0, "net2", "rail-a-net")
    annotations = {NETS: "a"}
    merged = selections.merge_managed_selections(pod(annotations), [named])
    assert merged.added == (f"{NS}/{named.entry.name}@net2",)
    node = interface_naming.MultusLayout(default_networks=("x",))
    with pytest.raises(errors.Conflict) as info:
        selections.merge_managed_selections(pod(annotations), [named], layout=node)
    assert info.value.reason is errors.Reason.DUPLICATE_INTERFACE_NAME
    assert "'net2'" in str(info.value) and f"{NS}/a" in str(info.value)


def test_result_exactly_at_the_size_limit_is_accepted_and_one_byte_over_is_refused() -> None:
    probe = selections.merge_managed_selections(pod({"filler": ""}), [A0, A1])
    room = limits.TOTAL_ANNOTATION_SIZE_LIMIT_B - limits.annotations_size(probe.annotations)
    fits = selections.merge_managed_selections(pod({"filler": "x" * room}), [A0, A1])
    assert limits.annotations_size(fits.annotations) == limits.TOTAL_ANNOTATION_SIZE_LIMIT_B
    with pytest.raises(errors.InvalidSpec) as info:
        selections.merge_managed_selections(pod({"filler": "x" * (room + 1)}), [A0, A1])
    assert info.value.reason is errors.Reason.ANNOTATION_TOO_LARGE


def test_very_many_vfs_fail_whole_instead_of_publishing_a_partial_list() -> None:
    many = [binding(CLAIM_A, i, f"dra{i}", f"src-{i}") for i in range(1100)]
    with pytest.raises(errors.InvalidSpec) as info:
        selections.merge_managed_selections(pod({}), many)
    assert info.value.reason is errors.Reason.ANNOTATION_TOO_LARGE
