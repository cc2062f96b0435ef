"""The Pod side of selection merging: reading a Pod snapshot from a plain Pod object."""

from __future__ import annotations

from typing import Any

import pytest
from tests.fakes.selection_pods import NS, POD_UID, pod_dict

from sriov_dra.core.plugin import selection_update
from sriov_dra_rules import errors

# --- pod snapshot ----------------------------------------------------------------------------


def test_pod_snapshot_reads_metadata_and_absent_annotations() -> None:
    snap = selection_update.pod_snapshot(pod_dict(None))
    assert (snap.namespace, snap.name, snap.uid, snap.resource_version, snap.annotations) == (
        NS,
        "demo",
        POD_UID,
        "7",
        None,
    )
    assert selection_update.pod_snapshot(pod_dict({"a": "b"})).annotations == {"a": "b"}


@pytest.mark.parametrize(
    "pod_obj",
    [
        {},
        {"metadata": {"namespace": NS, "name": "demo", "uid": POD_UID}},
        {
            "metadata": {
                "namespace": NS,
                "name": "demo",
                "uid": POD_UID,
                "resourceVersion": "7",
                "annotations": {"a": 1},
            }
        },
    ],
    ids=["no-metadata", "no-resource-version", "non-string-annotation"],
)
def test_pod_snapshot_rejects_malformed_pods(pod_obj: dict[str, Any]) -> None:
    with pytest.raises(errors.ContractViolation):
        selection_update.pod_snapshot(pod_obj)
