"""Merge and removal of managed selections (docs/design.md#selections) and the JSON Patch that publishes them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import json_patch_apply
from tests.fakes.selection_pods import (
    A0,
    A1,
    B2,
    CLAIM_A,
    NETS,
    NS,
    OTHER_POD_UID,
    POD_UID,
    REG,
    after,
    binding,
    edited,
    merged,
    pod,
    pod_dict,
    reg_text,
    texts,
    tuple_text,
)

from sriov_dra.core import networks, registry
from sriov_dra.core.plugin import selection_ownership, selections
from sriov_dra_rules import errors, names

# --- merge: writing --------------------------------------------------------------------------


def test_merge_into_pod_without_annotations_creates_the_map_under_preconditions() -> None:
    update = selections.merge_managed_selections(pod(None), [A0, A1])
    assert update.changed
    assert update.networks == f"[{tuple_text(A0)},{tuple_text(A1)}]"
    assert update.registry == reg_text(A0, A1)
    assert update.patch == (
        {"op": "test", "path": "/metadata/uid", "value": POD_UID},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {NETS: update.networks, REG: update.registry},
        },
    )
    assert update.added == (f"{NS}/{A0.entry.name}@dra0", f"{NS}/{A1.entry.name}@dra1")


def test_merge_patch_escapes_slashes_in_annotation_keys() -> None:
    update = selections.merge_managed_selections(pod({"other": "x"}), [A0])
    paths = [op["path"] for op in update.patch]
    assert paths == [
        "/metadata/uid",
        "/metadata/resourceVersion",
        "/metadata/annotations/k8s.v1.cni.cncf.io~1networks",
        "/metadata/annotations/sriovnetwork.k8snetworkplumbingwg.io~1managed-networks",
    ]


@pytest.mark.parametrize(
    "annotations",
    [None, {}, {"other": "keep", NETS: '[{"name":"net-x","ips":["10.0.0.5/24"]}]'}],
    ids=["no-annotations-map", "empty-map", "existing-entries"],
)
def test_applying_the_patch_to_the_live_pod_gives_the_returned_annotations(
    annotations: dict[str, str] | None,
) -> None:
    update = selections.merge_managed_selections(pod(annotations), [A0, A1])
    patched = json_patch_apply.apply_patch(pod_dict(annotations), update.patch)
    assert patched["metadata"]["annotations"] == update.annotations
    with pytest.raises(errors.Conflict):
        json_patch_apply.apply_patch(pod_dict(annotations, rv="8"), update.patch)


def test_managed_entries_have_exactly_name_namespace_interface() -> None:
    update = selections.merge_managed_selections(pod({}), [A0])
    (sel,) = networks.parse_networks(update.networks, pod_namespace=NS)
    assert sel.raw == {"name": A0.entry.name, "namespace": NS, "interface": "dra0"}


def test_unrelated_entries_keep_exact_text_order_and_options() -> None:
    manual = [
        '{"name":"net-x","ips":["10.0.0.5/24"],"mac":"02:00:5e:00:53:01"}',
        '{ "namespace" : "other", "name" : "net-y", "bandwidth": {"ingressRate": 10} }',
        '{"name":"net-z","cni-args":{"ratio":1.50},"ipam-claim-reference":"c-1"}',
    ]
    update = selections.merge_managed_selections(pod({NETS: "[ " + " , ".join(manual) + " ]"}), [A0, A1])
    assert texts(update.networks) == [*manual, tuple_text(A0), tuple_text(A1)]


def test_user_entries_with_keys_multus_ignores_are_kept_and_read_as_multus_reads_them() -> None:
    manual = [
        '{"name":"net-x","interfaceRequest":"vlan101"}',
        '{"Name":"net-y","NAMESPACE":"other","foo":{"bar":[1]},"ipam-claim-reference":7}',
        '{"name":"net-z","name":"net-w","portMappings":[{"hostPort":70000,"extra":1}]}',
    ]
    update = selections.merge_managed_selections(pod({NETS: "[" + ",".join(manual) + "]"}), [A0, A1])
    assert texts(update.networks) == [*manual, tuple_text(A0), tuple_text(A1)]
    assert [s.request for s in networks.parse_networks(update.networks, pod_namespace=NS)][:3] == [
        (NS, "net-x", "vlan101"),
        ("other", "net-y", None),
        (NS, "net-w", None),
    ]


def test_a_user_entry_taking_a_managed_name_through_interface_request_is_a_collision() -> None:
    with pytest.raises(errors.Conflict) as info:
        selections.merge_managed_selections(pod({NETS: '[{"name":"net-x","interfaceRequest":"dra0"}]'}), [A0])
    assert info.value.reason is errors.Reason.DUPLICATE_INTERFACE_NAME


def test_comma_notation_is_rewritten_as_minimal_json_objects_when_a_change_is_needed() -> None:
    update = selections.merge_managed_selections(pod({NETS: "net-x, other/net-y@if2"}), [A0])
    assert update.networks == (
        '[{"name":"net-x"},{"name":"net-y","namespace":"other","interface":"if2"},' + tuple_text(A0) + "]"
    )


def test_comma_notation_is_left_alone_when_nothing_changes() -> None:
    update = selections.merge_managed_selections(pod({NETS: "net-x, other/net-y@if2"}), [])
    assert not update.changed
    assert update.networks == "net-x, other/net-y@if2"
    assert update.patch == ()


def test_merge_is_idempotent_and_returns_the_original_strings() -> None:
    first = selections.merge_managed_selections(pod({NETS: '[{"name":"net-x"}]'}), [A0, A1])
    second = selections.merge_managed_selections(after(first), [A0, A1])
    assert not second.changed
    assert second.patch == ()
    assert second.annotations == first.annotations
    assert second.networks is first.annotations[NETS]


def test_semantically_identical_registry_with_other_formatting_is_not_rewritten() -> None:
    spaced = json.dumps(json.loads(reg_text(A0)), indent=2)
    annotations = {NETS: f"[ {tuple_text(A0)} ]", REG: spaced}
    update = selections.merge_managed_selections(pod(annotations), [A0])
    assert not update.changed
    assert update.registry == spaced
    assert update.networks == annotations[NETS]


def test_new_entries_are_appended_after_existing_ones_in_binding_order() -> None:
    update = selections.merge_managed_selections(pod(merged(B2)), [A1, A0])
    assert texts(update.networks) == [tuple_text(B2), tuple_text(A1), tuple_text(A0)]
    decoded = registry.decode_registry(update.registry)
    assert [e.interface for e in decoded.entries] == ["dra2", "dra1", "dra0"]


def test_two_vfs_from_the_same_source_nad_get_two_selections() -> None:
    same_a = binding(CLAIM_A, 0, "dra0", "rail-a-net")
    same_b = binding(CLAIM_A, 1, "dra1", "rail-a-net")
    update = selections.merge_managed_selections(pod({}), [same_a, same_b])
    assert texts(update.networks) == [tuple_text(same_a), tuple_text(same_b)]


def test_recorded_selection_deleted_by_someone_else_is_restored_in_registry_order() -> None:
    annotations = merged(B2)
    annotations[NETS] = '[{"name":"net-x"}]'
    update = selections.merge_managed_selections(pod(annotations), [A0])
    assert texts(update.networks) == ['{"name":"net-x"}', tuple_text(B2), tuple_text(A0)]


def test_generated_prefix_without_registry_is_left_as_a_manual_entry() -> None:
    foreign = '{"name":"dra-sriov-0123456789abcdef0123456789abcdef","interface":"x1"}'
    update = selections.merge_managed_selections(pod({NETS: f"[{foreign}]"}), [A0])
    assert texts(update.networks) == [foreign, tuple_text(A0)]


def test_manual_interface_collisions_are_not_renamed_by_the_merge() -> None:
    manual_net1 = '[{"name":"net-a"},{"name":"net-b","interface":"net1"}]'
    update = selections.merge_managed_selections(pod({NETS: manual_net1}), [A0])
    assert texts(update.networks)[:2] == ['{"name":"net-a"}', '{"name":"net-b","interface":"net1"}']


# --- removal ---------------------------------------------------------------------------------


def test_removal_drops_only_this_claims_exact_entries() -> None:
    base = merged(A0, A1, B2, base={NETS: '[{"name":"net-x","ips":["10.0.0.5/24"]}]', "other": "o"})
    update = selections.remove_managed_selections(pod(base), CLAIM_A)
    assert texts(update.networks) == ['{"name":"net-x","ips":["10.0.0.5/24"]}', tuple_text(B2)]
    assert update.registry == reg_text(B2)
    assert update.annotations["other"] == "o"
    assert update.removed == (f"{NS}/{A0.entry.name}@dra0", f"{NS}/{A1.entry.name}@dra1")


def test_removing_the_last_claim_removes_registry_and_empty_networks() -> None:
    update = selections.remove_managed_selections(pod(merged(A0)), CLAIM_A)
    assert update.annotations == {}
    assert [op["op"] for op in update.patch] == ["test", "test", "remove", "remove"]


def test_removing_the_last_claim_keeps_manual_entries() -> None:
    update = selections.remove_managed_selections(pod(merged(A0, base={NETS: "net-x"})), CLAIM_A)
    assert update.networks == '[{"name":"net-x"}]'
    assert REG not in update.annotations


def test_edited_entry_of_a_released_claim_is_left_in_place_and_reported() -> None:
    annotations = merged(A0, A1)
    edited_a1 = edited(A1, ips=["10.0.0.9/24"])
    annotations[NETS] = f"[{tuple_text(A0)},{edited_a1}]"
    update = selections.remove_managed_selections(pod(annotations), CLAIM_A)
    assert texts(update.networks) == [edited_a1]
    assert REG not in update.annotations
    assert [k.path for k in update.kept] == [networks.field_path(1)]


@pytest.mark.parametrize(
    "annotations",
    [{}, {NETS: "net-x"}, None],
    ids=["no-registry", "manual-only", "no-annotations"],
)
def test_removal_without_owned_entries_changes_nothing(annotations: dict[str, str] | None) -> None:
    update = selections.remove_managed_selections(pod(annotations), CLAIM_A)
    assert not update.changed and update.patch == ()


def test_removal_of_a_claim_not_in_the_registry_changes_nothing() -> None:
    base = merged(B2)
    update = selections.remove_managed_selections(pod(base), CLAIM_A)
    assert not update.changed
    assert update.annotations == base


def test_removal_refuses_a_registry_of_another_pod() -> None:
    with pytest.raises(errors.Conflict):
        selections.remove_managed_selections(pod({REG: reg_text(A0, pod_uid=OTHER_POD_UID)}), CLAIM_A)


def test_removal_is_idempotent() -> None:
    once = selections.remove_managed_selections(pod(merged(A0, B2)), CLAIM_A)
    twice = selections.remove_managed_selections(after(once), CLAIM_A)
    assert not twice.changed and twice.annotations == once.annotations


# --- properties ------------------------------------------------------------------------------

manual_objects = st.fixed_dictionaries(
    {"name": st.from_regex(r"man-[a-z0-9]{1,6}", fullmatch=True)},
    optional={
        "namespace": st.sampled_from(["", NS, "other"]),
        "interface": st.from_regex(r"m[0-9]{1,3}", fullmatch=True),
        "ips": st.lists(st.sampled_from(["10.0.0.5/24", "fd00::5", "192.0.2.1"]), max_size=2),
        "cni-args": st.dictionaries(
            st.sampled_from(["a", "b"]), st.floats(allow_nan=False, allow_infinity=False)
        ),
        "ipam-claim-reference": st.sampled_from(["c-1", "c-2"]),
    },
)
separators = st.sampled_from([(",", ":"), (", ", ": "), (" , ", " : ")])


@st.composite
def pods(draw: st.DrawFn) -> tuple[dict[str, str], list[selection_ownership.ManagedBinding]]:
    """A Pod with manual entries (JSON or comma), maybe claim B already merged, and claim A's bindings."""
    annotations: dict[str, str] = {}
    objects = draw(st.lists(manual_objects, max_size=6))
    if objects:
        if draw(st.booleans()):
            annotations[NETS] = json.dumps(objects, separators=draw(separators))
        else:
            annotations[NETS] = ",".join(
                (f"{o['namespace']}/" if o.get("namespace") else "") + str(o["name"]) for o in objects
            )
    if draw(st.booleans()):
        annotations["other"] = draw(st.text(max_size=10))
    if draw(st.booleans()):
        annotations = merged(B2, base=annotations)
    count = draw(st.integers(min_value=1, max_value=3))
    # Claim B (if merged) holds dra2; claim A's plan skips it, as interface_naming.assign_interfaces would.
    return annotations, [binding(CLAIM_A, 10 + i, f"dra{i}", f"src-{i}") for i in (0, 1, 3)[:count]]


def unrelated(value: str | None) -> list[tuple[tuple[str, str, str | None], Mapping[str, Any]]]:
    return [
        (s.request, s.raw)
        for s in networks.parse_networks(value, pod_namespace=NS)
        if not s.name.startswith(names.SHADOW_NAME_PREFIX)
    ]


@given(pods())
def test_property_merge_is_idempotent(
    case: tuple[dict[str, str], list[selection_ownership.ManagedBinding]],
) -> None:
    annotations, bindings = case
    first = selections.merge_managed_selections(pod(annotations), bindings)
    second = selections.merge_managed_selections(after(first), bindings)
    assert not second.changed and second.patch == ()
    assert second.annotations == first.annotations


@given(pods())
def test_property_unrelated_entries_are_preserved_exactly(
    case: tuple[dict[str, str], list[selection_ownership.ManagedBinding]],
) -> None:
    annotations, bindings = case
    update = selections.merge_managed_selections(pod(annotations), bindings)
    assert unrelated(update.networks) == unrelated(annotations.get(NETS))
    original = networks.parse_networks(annotations.get(NETS), pod_namespace=NS)
    if original and original[0].notation is networks.Notation.JSON:
        assert texts(update.networks)[: len(original)] == [s.raw_text for s in original]
    assert {k: v for k, v in update.annotations.items() if k not in (NETS, REG)} == {
        k: v for k, v in annotations.items() if k not in (NETS, REG)
    }


@given(pods())
def test_property_remove_undoes_merge(
    case: tuple[dict[str, str], list[selection_ownership.ManagedBinding]],
) -> None:
    annotations, bindings = case
    merged_pod = after(selections.merge_managed_selections(pod(annotations), bindings))
    restored = selections.remove_managed_selections(merged_pod, CLAIM_A).annotations
    assert restored.get(REG) == annotations.get(REG)
    assert {k: v for k, v in restored.items() if k != NETS} == {
        k: v for k, v in annotations.items() if k != NETS
    }
    assert [(s.request, s.raw) for s in networks.parse_networks(restored.get(NETS), pod_namespace=NS)] == [
        (s.request, s.raw) for s in networks.parse_networks(annotations.get(NETS), pod_namespace=NS)
    ]
    if annotations.get(NETS, "").startswith("["):
        assert texts(restored.get(NETS)) == texts(annotations.get(NETS))
