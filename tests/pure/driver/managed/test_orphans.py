"""driver.managed.orphans: shadows of this node correlated with the checkpoint (docs/design.md#orphans)."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from sriov_dra.core import binding_annotation
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import orphans, seams
from sriov_dra_rules import names

from .conftest import NODE_UID, live_shadow, record, with_phase

DEV = "0000-03-02-0"
OTHER_POD = "22222222-3333-4444-5555-666666666666"


def edit(obj: dict[str, Any], change: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    change(out)
    return out


REC = record(DEV)
LIVE = live_shadow(REC)

CASES = [
    ("ready-binding-is-active", {REC.claim_uid: REC}, LIVE, orphans.Status.ACTIVE, ""),
    (
        "pending-binding-is-active",
        {REC.claim_uid: with_phase(REC, model.Phase.PENDING)},
        LIVE,
        orphans.Status.ACTIVE,
        "",
    ),
    ("deleting", {REC.claim_uid: with_phase(REC, model.Phase.DELETING)}, LIVE, orphans.Status.DELETING, ""),
    (
        "release-complete",
        {REC.claim_uid: with_phase(REC, model.Phase.RELEASE_COMPLETE)},
        LIVE,
        orphans.Status.RELEASE_COMPLETE,
        "",
    ),
    ("no-record-is-orphaned", {}, LIVE, orphans.Status.ORPHANED, "no checkpoint record"),
    (
        "record-for-another-pod",
        {REC.claim_uid: record(DEV, pod_uid=OTHER_POD)},
        LIVE,
        orphans.Status.ORPHANED,
        "recorded for Pod",
    ),
    (
        "binding-not-in-record",
        {REC.claim_uid: record("0000-03-02-1")},
        LIVE,
        orphans.Status.ORPHANED,
        "no binding with this identity",
    ),
    (
        "replaced-uid",
        {REC.claim_uid: REC},
        edit(LIVE, lambda o: o["metadata"].update(uid="99999999-0000-4000-8000-000000000000")),
        orphans.Status.ORPHANED,
        "names shadow UID",
    ),
    (
        "unreadable-binding",
        {REC.claim_uid: REC},
        edit(LIVE, lambda o: o["metadata"]["annotations"].update({names.BINDING_ANNOTATION: "{"})),
        orphans.Status.ORPHANED,
        "binding unreadable",
    ),
]


@pytest.mark.parametrize(
    ("records", "nad", "status", "why"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_classification_by_full_identity(records, nad, status, why) -> None:
    report = orphans.classify(nad, records, NODE_UID)
    assert report is not None and report.status is status
    assert why in report.why


@pytest.mark.parametrize(
    "nad",
    [
        pytest.param(
            edit(
                LIVE,
                lambda o: o["metadata"]["labels"].update(
                    {names.LABEL_NODE_UID: "0e0e0e0e-0000-4000-8000-00000000000e"}
                ),
            ),
            id="other-node-label",
        ),
        pytest.param(
            edit(LIVE, lambda o: o["metadata"]["labels"].pop(names.LABEL_MANAGED_BY)), id="not-managed"
        ),
    ],
)
def test_other_nodes_and_unmanaged_objects_are_ignored(nad) -> None:
    assert orphans.classify(nad, {REC.claim_uid: REC}, NODE_UID) is None


def test_a_binding_of_another_node_uid_is_ignored_even_when_labelled_for_this_one() -> None:
    rec = record(DEV)
    b = binding_annotation.decode_binding(LIVE["metadata"]["annotations"][names.BINDING_ANNOTATION])
    text = binding_annotation.encode_binding(replace(b, node_uid="0e0e0e0e-0000-4000-8000-00000000000e"))
    nad = edit(LIVE, lambda o: o["metadata"]["annotations"].update({names.BINDING_ANNOTATION: text}))
    assert orphans.classify(nad, {rec.claim_uid: rec}, NODE_UID) is None


def test_foreign_finalizers_and_termination_are_reported_separately() -> None:
    nad = edit(
        LIVE,
        lambda o: o["metadata"].update(
            finalizers=["example.com/audit", names.FINALIZER_ATTACHMENT_PROTECTION],
            deletionTimestamp="2026-11-30T00:00:00Z",
        ),
    )
    report = orphans.classify(nad, {}, NODE_UID)
    assert report.foreign_finalizers == ("example.com/audit",) and report.protected and report.terminating


def test_correlate_sorts_and_scan_uses_one_labelled_list() -> None:
    class Nads:
        def __init__(self) -> None:
            self.selectors: list[str] = []

        def list_all(self, *, label_selector: str) -> list[dict[str, Any]]:
            self.selectors.append(label_selector)
            return [LIVE]

    class Store:
        def all_claims(self):
            return {REC.claim_uid: REC}

    nads = Nads()
    found = orphans.scan(nads=nads, store=Store(), node=seams.NodeIdentity("node-a", NODE_UID))
    assert [r.status for r in found] == [orphans.Status.ACTIVE]
    assert nads.selectors == [
        f"{names.LABEL_MANAGED_BY}={names.MANAGED_BY_VALUE},{names.LABEL_NODE_UID}={NODE_UID}"
    ]
