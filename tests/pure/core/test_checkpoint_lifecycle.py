"""Tests for sriov_dra.core.plugin.checkpoint_lifecycle: phase moves, narrow updates, claim reuse, CDI consumers."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import checkpoint_records as fx

from sriov_dra.core.plugin import checkpoint_lifecycle as lifecycle
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra_rules import errors

P = model.Phase


def phases(rec: model.ClaimRecord) -> list[model.Phase]:
    return [b.phase for b in rec.managed_bindings()]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (P.PENDING, P.DELETING),
        (P.READY, P.DELETING),
        (P.DELETING, P.DELETING),
        (P.RELEASE_COMPLETE, P.RELEASE_COMPLETE),
    ],
    ids=["pending-to-deleting", "ready-to-deleting", "deleting-stays", "release-complete-never-downgraded"],
)
def test_mark_deleting(before: model.Phase, after: model.Phase) -> None:
    assert phases(lifecycle.mark_deleting(fx.record(indexes=(0, 1), phase=before))) == [after, after]


def test_mark_release_complete_moves_deleting_and_keeps_release_complete() -> None:
    rec = fx.record(indexes=(0, 1), phase=P.DELETING)
    rec = replace(rec, devices=(rec.devices[0], fx.with_phase(rec, P.RELEASE_COMPLETE).devices[1]))
    assert phases(lifecycle.mark_release_complete(rec)) == [P.RELEASE_COMPLETE, P.RELEASE_COMPLETE]


@pytest.mark.parametrize("phase", [P.PENDING, P.READY], ids=["pending", "ready"])
def test_mark_release_complete_requires_deleting_first(phase: model.Phase) -> None:
    with pytest.raises(errors.ContractViolation, match="persist Deleting before recording ReleaseComplete"):
        lifecycle.mark_release_complete(fx.record(phase=phase))


def test_marks_leave_devices_without_bindings_alone() -> None:
    rec = fx.record(managed=False)
    assert lifecycle.mark_deleting(rec) == rec
    assert lifecycle.mark_release_complete(rec) == rec


@given(st.lists(st.sampled_from(list(P)), min_size=1, max_size=4))
def test_mark_deleting_is_idempotent_and_never_moves_backwards(start: list[model.Phase]) -> None:
    rec = fx.record(indexes=tuple(range(len(start))))
    rec = replace(
        rec,
        devices=tuple(
            replace(d, managed=replace(d.managed, phase=p)) for d, p in zip(rec.devices, start, strict=True)
        ),  # type: ignore[type-var]
    )
    once = lifecycle.mark_deleting(rec)
    assert lifecycle.mark_deleting(once) == once
    for old, new in zip(start, phases(once), strict=True):
        assert new is (P.RELEASE_COMPLETE if old is P.RELEASE_COMPLETE else P.DELETING)


def _b(**changes: object) -> model.ManagedBinding:
    return replace(fx.binding(fx.CLAIM_1, fx.POD_A, 0), **changes)  # type: ignore[arg-type]


ALLOWED = [
    ("pending-to-ready", _b(phase=P.PENDING), _b(phase=P.READY)),
    ("ready-to-pending-for-repair", _b(phase=P.READY), _b(phase=P.PENDING, shadow_uid="")),
    ("observe-shadow-uid", _b(phase=P.PENDING, shadow_uid=""), _b(phase=P.PENDING)),
    ("adopt-uid-while-deleting", _b(phase=P.DELETING, shadow_uid=""), _b(phase=P.DELETING)),
    ("release-complete-same", _b(phase=P.RELEASE_COMPLETE), _b(phase=P.RELEASE_COMPLETE)),
]


@pytest.mark.parametrize(("old", "new"), [(o, n) for _, o, n in ALLOWED], ids=[i for i, _, _ in ALLOWED])
def test_check_binding_update_allows_narrow_moves(
    old: model.ManagedBinding, new: model.ManagedBinding
) -> None:
    lifecycle.check_binding_update(old, new, claim="ns-a/claim-a")


REFUSED = [
    ("ready-to-deleting", _b(), _b(phase=P.DELETING), errors.ContractViolation, "not a narrow update"),
    ("deleting-to-ready", _b(phase=P.DELETING), _b(), errors.ContractViolation, "not a narrow update"),
    (
        "release-complete-to-deleting",
        _b(phase=P.RELEASE_COMPLETE),
        _b(phase=P.DELETING),
        errors.ContractViolation,
        "not a narrow update",
    ),
    ("rendered-config-changed", _b(), _b(rendered_config="{}"), errors.ContractViolation, "rendered_config"),
    ("interface-changed", _b(), _b(interface="dra5"), errors.ContractViolation, "interface"),
    (
        "source-changed",
        _b(),
        _b(source=replace(_b().source, resource_version="5")),
        errors.ContractViolation,
        "source",
    ),
    ("shadow-uid-replaced", _b(), _b(shadow_uid=fx.OTHER_SHADOW_UID), errors.Conflict, "was replaced"),
]


@pytest.mark.parametrize(
    ("old", "new", "cls", "fragment"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_check_binding_update_refuses(
    old: model.ManagedBinding, new: model.ManagedBinding, cls: type[errors.SriovDraError], fragment: str
) -> None:
    with pytest.raises(cls, match=fragment) as info:
        lifecycle.check_binding_update(old, new, claim="ns-a/claim-a")
    if cls is errors.Conflict:
        assert info.value.reason is errors.Reason.SHADOW_CONFLICT


def test_apply_binding_update_with_function_touches_every_binding() -> None:
    rec = fx.record(indexes=(0, 1), phase=P.PENDING)
    out = lifecycle.apply_binding_update(rec, lambda b: replace(b, phase=P.READY))
    assert phases(out) == [P.READY, P.READY]


def test_apply_binding_update_with_mapping_touches_only_named_bindings() -> None:
    rec = fx.record(indexes=(0, 1), phase=P.PENDING, shadow_uid="")
    first = rec.devices[0].managed
    assert first is not None
    out = lifecycle.apply_binding_update(rec, {first.attachment_id: replace(first, shadow_uid=fx.SHADOW_UID)})
    assert [b.shadow_uid for b in out.managed_bindings()] == [fx.SHADOW_UID, ""]


def test_apply_binding_update_refuses_an_unknown_attachment_id() -> None:
    rec = fx.record()
    foreign = fx.binding(fx.CLAIM_2, fx.POD_A, 0)
    with pytest.raises(errors.ContractViolation, match="has no managed binding"):
        lifecycle.apply_binding_update(rec, {foreign.attachment_id: foreign})


def test_apply_binding_update_refuses_a_key_that_differs_from_its_value() -> None:
    rec = fx.record(indexes=(0, 1))
    first, second = rec.managed_bindings()
    with pytest.raises(errors.ContractViolation, match="carries"):
        lifecycle.apply_binding_update(rec, {first.attachment_id: second})


def test_apply_binding_update_refuses_a_function_returning_a_non_binding() -> None:
    with pytest.raises(errors.ContractViolation, match="returned NoneType"):
        lifecycle.apply_binding_update(fx.record(), lambda b: None)  # type: ignore[arg-type,return-value]


def test_check_set_claim_allows_a_first_record() -> None:
    lifecycle.check_set_claim(None, fx.record())


@pytest.mark.parametrize("phase", list(P), ids=[p.value for p in P])
def test_check_set_claim_blocks_another_pod_while_any_record_remains(phase: model.Phase) -> None:
    old = fx.record(fx.CLAIM_1, fx.POD_A, phase=phase)
    with pytest.raises(errors.LifecycleBlocked) as info:
        lifecycle.check_set_claim(old, fx.record(fx.CLAIM_1, fx.POD_B))
    assert info.value.reason is errors.Reason.CLAIM_RELEASE_IN_PROGRESS
    assert fx.POD_A in str(info.value) and fx.POD_B in str(info.value)


def test_check_set_claim_blocks_another_pod_for_an_unmanaged_record() -> None:
    with pytest.raises(errors.LifecycleBlocked):
        lifecycle.check_set_claim(fx.record(managed=False), fx.record(fx.CLAIM_1, fx.POD_B, managed=False))


@pytest.mark.parametrize("phase", [P.DELETING, P.RELEASE_COMPLETE], ids=["deleting", "release-complete"])
def test_check_set_claim_blocks_the_same_pod_during_release(phase: model.Phase) -> None:
    with pytest.raises(errors.LifecycleBlocked, match="being released"):
        lifecycle.check_set_claim(fx.record(phase=phase), fx.record(phase=P.PENDING))


def test_check_set_claim_refuses_adding_bindings_to_a_record_written_without_them() -> None:
    with pytest.raises(errors.ContractViolation, match="must keep its managed bindings"):
        lifecycle.check_set_claim(fx.record(managed=False), fx.record())


def test_check_set_claim_refuses_changing_frozen_binding_content() -> None:
    old = fx.record(phase=P.PENDING)
    new = lifecycle.apply_binding_update(old, lambda b: b)
    dev = new.devices[0]
    assert dev.managed is not None
    changed = replace(new, devices=(replace(dev, managed=replace(dev.managed, rendered_config="{}")),))
    with pytest.raises(errors.ContractViolation, match="frozen"):
        lifecycle.check_set_claim(old, changed)


def test_check_set_claim_allows_the_same_pod_to_restore_identical_bindings() -> None:
    lifecycle.check_set_claim(fx.record(phase=P.PENDING), fx.record(phase=P.READY))


def test_locally_released_needs_bindings_all_release_complete() -> None:
    assert lifecycle.locally_released(fx.record(phase=P.RELEASE_COMPLETE))
    assert not lifecycle.locally_released(fx.record(phase=P.DELETING))
    assert not lifecycle.locally_released(fx.record(managed=False))


def test_release_in_progress_for_deleting_or_release_complete_only() -> None:
    assert [lifecycle.release_in_progress(fx.record(phase=p)) for p in P] == [False, False, True, True]


def test_pod_cdi_addresses_count_unreleased_claims_of_that_pod_only() -> None:
    records = [
        fx.record(fx.CLAIM_1, fx.POD_A, indexes=(1,), phase=P.READY),
        fx.record(fx.CLAIM_2, fx.POD_A, indexes=(0,), phase=P.DELETING),
        fx.record(fx.CLAIM_3, fx.POD_A, indexes=(2,), phase=P.RELEASE_COMPLETE),
        fx.record(fx.CLAIM_3, fx.POD_B, indexes=(3,), managed=False),
    ]
    assert lifecycle.pod_cdi_pci_addresses(records, fx.POD_A) == (fx.pci(0), fx.pci(1))


def test_pod_cdi_addresses_exclude_the_claim_being_released_now() -> None:
    records = [fx.record(fx.CLAIM_1, fx.POD_A, indexes=(0,)), fx.record(fx.CLAIM_2, fx.POD_A, indexes=(1,))]
    assert lifecycle.pod_cdi_pci_addresses(records, fx.POD_A, releasing=fx.CLAIM_2) == (fx.pci(0),)
    assert lifecycle.pod_cdi_pci_addresses(records[:1], fx.POD_A, releasing=fx.CLAIM_1) == ()


def test_pod_cdi_addresses_are_sorted_and_unique() -> None:
    records = [fx.record(fx.CLAIM_1, fx.POD_A, indexes=(3, 1, 2), managed=False)]
    assert lifecycle.pod_cdi_pci_addresses(records, fx.POD_A) == (fx.pci(1), fx.pci(2), fx.pci(3))
