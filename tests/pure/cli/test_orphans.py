"""``sriov-dra orphans`` messages: a missing checkpoint off-node, and an empty result."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sriov_dra.cli import orphans
from sriov_dra.core.plugin import checkpoint_codec
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.host import slot_file
from sriov_dra.kube import client as kube_client
from sriov_dra.kube import nad_client, node_info


def _args(checkpoint: Path, **extra: Any) -> Any:
    return SimpleNamespace(
        kubeconfig="/nonexistent/kubeconfig",
        checkpoint=str(checkpoint),
        node="lab-node-1",
        node_uid=None,
        output="table",
        apply=False,
        **extra,
    )


@pytest.fixture(autouse=True)
def _no_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kube_client, "from_kubeconfig", lambda path: SimpleNamespace(close=lambda: None))
    monkeypatch.setattr(node_info, "node_uid", lambda api, node, timeout_s: "uid-1")
    monkeypatch.setattr(nad_client, "NadClient", lambda api: SimpleNamespace(list_all=lambda **_: []))


def test_missing_checkpoint_says_to_pass_checkpoint_off_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "checkpoint.json"
    assert orphans.run(_args(missing), io.StringIO()) == 1
    err = capsys.readouterr().err
    assert err == (
        f"sriov-dra orphans: no plugin checkpoint at {missing}; "
        "pass --checkpoint <path> when not running on the node\n"
    )


def test_empty_result_says_no_managed_shadows_for_the_node_without_an_empty_table(tmp_path: Path) -> None:
    """As ``kubectl get`` says "No resources found": one sentence, no header above nothing."""
    path = tmp_path / "checkpoint.json"
    path.write_bytes(checkpoint_codec.encode_checkpoint(model.Checkpoint()))
    out = io.StringIO()
    assert orphans.run(_args(path), out) == 0
    assert out.getvalue().splitlines() == ["no managed shadow NADs for node lab-node-1"]


def test_the_durable_slot_file_beside_the_checkpoint_is_read_before_its_readable_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The readable ``checkpoint.json`` may lag after a power loss; ``checkpoint.slots`` is the record."""
    path = tmp_path / "checkpoint.json"
    path.write_bytes(checkpoint_codec.encode_checkpoint(model.Checkpoint()))
    slot_file.SlotFile(tmp_path / "checkpoint.slots").create(b'{"version": 1}')
    assert orphans.run(_args(path), io.StringIO()) == 1
    err = capsys.readouterr().err
    assert f"checkpoint {tmp_path / 'checkpoint.slots'} is corrupt" in err
