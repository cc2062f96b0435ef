"""The kubelet simulator's checkpoint survives restarts and refuses a corrupt file."""

from __future__ import annotations

from pathlib import Path

import pytest

from sriov_dra.kubeletapi import messages
from sriov_dra_lab import kubelet_state

CLAIM = kubelet_state.ClaimRecord("ns", "c1", "uid-1", ("a.example", "b.example"), ("pod-1", "pod-2"), True)
BOX = kubelet_state.SandboxRecord(
    pod_namespace="ns",
    pod_name="p",
    pod_uid="pod-1",
    container_id="ab" * 32,
    netns="/var/run/netns/x",
    network_file="00-x.conflist",
    result={"ips": [{"address": "10.0.0.2/24"}]},
    cdi_devices={"uid-1": ["v/c=d"]},
)


def test_claims_and_sandboxes_round_trip(tmp_path: Path) -> None:
    state = kubelet_state.SimState(tmp_path / "state.json")
    state.save([CLAIM])
    state.put_sandbox(BOX)
    again = kubelet_state.SimState(tmp_path / "state.json")
    again.load()
    assert again.claims == [CLAIM] and again.all_sandboxes() == [BOX]
    again.drop_sandbox("pod-1")
    third = kubelet_state.SimState(tmp_path / "state.json")
    third.load()
    assert third.sandbox("pod-1") is None and third.claims == [CLAIM]


@pytest.mark.parametrize(
    "content",
    [
        '{"version": 2, "claims": [], "sandboxes": {}}',
        "{not json",
        '{"version": 1, "claims": [{"name": "x"}]}',
    ],
    ids=["unknown-version", "not-json", "missing-fields"],
)
def test_unreadable_checkpoint_is_an_error_naming_the_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(content)
    with pytest.raises(kubelet_state.StateCorrupt, match=str(path)):
        kubelet_state.SimState(path).load()
    assert path.read_text() == content, "left untouched"


def test_restored_manager_knows_prepared_claims_and_their_pods() -> None:
    manager = kubelet_state.CheckpointedDraManager()
    manager.restore_claims([CLAIM])
    assert manager.is_prepared(messages.ClaimRef("ns", "c1", "uid-1"))
    assert not manager.is_prepared(messages.ClaimRef("ns", "c1", "uid-other")), "same name, other UID"
    assert manager.export_claims() == [CLAIM]
    with pytest.raises(ValueError, match="empty claim cache"):
        manager.restore_claims([CLAIM])


def test_unprepare_of_one_pod_keeps_a_claim_another_pod_uses() -> None:
    manager = kubelet_state.CheckpointedDraManager()
    manager.restore_claims([CLAIM])
    result = manager.unprepare_pod("pod-1")
    assert result.ok and result.calls == () and result.released == ()
    assert [c.pod_uids for c in manager.export_claims()] == [("pod-2",)]
