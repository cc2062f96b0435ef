"""Tests for ``plugins/modules/checkpoint_info.py``: the bindings the drain and cleanup roles wait for.

The checkpoints are written by the plugin's own store (``sriov_dra.host.checkpoint``), so the module
reads exactly the files a node holds: the durable ``checkpoint.slots`` and the readable copy.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.module_utils import basic
from ansible_collections.sriovnet.dra.plugins.modules import checkpoint_info
from tests.fakes import checkpoint_records as fx
from tests.pure.plugins import harness

from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.host import checkpoint as store_mod
from sriov_dra_rules import checkpoint_doc, slot_format


def _prepared(tmp_path: Path, *records: model.ClaimRecord) -> Path:
    """A plugin directory whose checkpoint, written by the plugin's store, holds ``records``."""
    path = tmp_path / checkpoint_doc.CHECKPOINT_FILE_NAME
    store = store_mod.CheckpointStore(path)
    store.load()
    for record in records:
        store.set_claim(record)
    store.close()
    return path


def _shadow(record: model.ClaimRecord, index: int = 0) -> str:
    binding = record.devices[index].managed
    assert binding is not None
    return f"{binding.shadow_namespace}/{binding.shadow_name}"


def test_a_prepared_claim_is_listed_with_its_pod_device_phase_and_shadow(tmp_path):
    pending = fx.record(fx.CLAIM_2, fx.POD_B, indexes=(1, 2), name="claim-b", phase=model.Phase.PENDING)
    ready = fx.record()
    path = _prepared(tmp_path, ready, pending)
    result = harness.run_module(checkpoint_info, {"path": str(path)}, check_mode=True)
    assert result["changed"] is False
    assert result["exists"] is True
    assert result["source"] == str(tmp_path / checkpoint_doc.SLOTS_FILE_NAME)
    assert result["bindings"] == [
        {"claim_uid": fx.CLAIM_1, "namespace": "ns-a", "name": "claim-a", "pod_uid": fx.POD_A,
         "device": fx.device_name(0), "phase": "Ready", "shadow": _shadow(ready)},
        {"claim_uid": fx.CLAIM_2, "namespace": "ns-a", "name": "claim-b", "pod_uid": fx.POD_B,
         "device": fx.device_name(1), "phase": "Pending", "shadow": _shadow(pending, 0)},
        {"claim_uid": fx.CLAIM_2, "namespace": "ns-a", "name": "claim-b", "pod_uid": fx.POD_B,
         "device": fx.device_name(2), "phase": "Pending", "shadow": _shadow(pending, 1)},
    ]  # fmt: skip


def test_a_claim_without_auto_attach_is_not_a_binding(tmp_path):
    path = _prepared(tmp_path, fx.record(managed=False))
    assert harness.run_module(checkpoint_info, {"path": str(path)})["bindings"] == []


def test_a_deleted_readable_copy_does_not_hide_a_prepared_claim(tmp_path):
    """The walkthrough's case: checkpoint.json removed by hand while a claim was prepared."""
    record = fx.record()
    path = _prepared(tmp_path, record)
    path.unlink()
    result = harness.run_module(checkpoint_info, {"path": str(path)})
    assert [b["shadow"] for b in result["bindings"]] == [_shadow(record)]
    assert result["source"] == str(tmp_path / checkpoint_doc.SLOTS_FILE_NAME)


def test_a_stale_readable_copy_loses_to_the_durable_slot_file(tmp_path):
    """After a power loss checkpoint.json may be older than checkpoint.slots (it is never flushed)."""
    path = _prepared(tmp_path)
    empty_copy = path.read_bytes()
    record = fx.record()
    _prepared(tmp_path, record)
    path.write_bytes(empty_copy)  # the copy as a power loss may leave it
    result = harness.run_module(checkpoint_info, {"path": str(path)})
    assert [b["shadow"] for b in result["bindings"]] == [_shadow(record)]


def test_a_directory_of_a_build_before_the_slot_file_is_read_from_checkpoint_json(tmp_path):
    record = fx.record()
    path = _prepared(tmp_path, record)
    (tmp_path / checkpoint_doc.SLOTS_FILE_NAME).unlink()
    result = harness.run_module(checkpoint_info, {"path": str(path)})
    assert result["source"] == str(path)
    assert [b["claim_uid"] for b in result["bindings"]] == [fx.CLAIM_1]


def test_no_checkpoint_at_all_fails_naming_the_path_instead_of_reading_as_nothing_prepared(tmp_path):
    """A typo in the path, or the wrong node, must never let a drain or an uninstall pass."""
    path = tmp_path / "typo" / "checkpoint.json"
    with pytest.raises(harness.ModuleFailed) as failed:
        harness.run_module(checkpoint_info, {"path": str(path)})
    assert failed.value.msg.startswith(
        f"no plugin checkpoint at {path} (neither checkpoint.slots nor checkpoint.json exists there): check the path"
    )
    assert "drain_checkpoint_missing_ok" in failed.value.msg


def test_allow_missing_reports_no_checkpoint_for_a_node_where_the_plugin_never_ran(tmp_path):
    path = tmp_path / "checkpoint.json"
    result = harness.run_module(checkpoint_info, {"path": str(path), "allow_missing": True})
    assert result == {
        "changed": False,
        "exists": False,
        "source": None,
        "bindings": [],
        "msg": f"no plugin checkpoint at {path} (allow_missing: a node where the plugin never ran)",
    }


def test_a_slot_file_without_a_valid_slot_fails_naming_it_and_is_not_counted_as_empty(tmp_path, monkeypatch):
    path = _prepared(tmp_path, fx.record())
    slots = tmp_path / checkpoint_doc.SLOTS_FILE_NAME
    slots.write_bytes(b"\x5a" * slots.stat().st_size)
    monkeypatch.setattr("time.sleep", lambda _s: None)
    with pytest.raises(harness.ModuleFailed) as failed:
        harness.run_module(checkpoint_info, {"path": str(path)})
    assert failed.value.msg.startswith(
        f"checkpoint slot file {slots} holds no valid slot (slot 0: no slot header"
    )
    assert failed.value.result["reason"] == "ContractViolation"


def test_an_edited_checkpoint_fails_its_checksum_and_names_the_file(tmp_path):
    record = fx.record()
    path = _prepared(tmp_path, record)
    (tmp_path / checkpoint_doc.SLOTS_FILE_NAME).unlink()
    document = json.loads(path.read_bytes())
    document["data"]["claims"][fx.CLAIM_1]["devices"][0].pop("managedBinding")  # "drained" by hand
    path.write_text(json.dumps(document))
    with pytest.raises(harness.ModuleFailed) as failed:
        harness.run_module(checkpoint_info, {"path": str(path)})
    assert failed.value.msg.startswith(f"checkpoint {path} is corrupt: checksum mismatch (recorded '")
    assert failed.value.result["source"] == str(path)


def test_a_repeated_key_is_refused_not_resolved(tmp_path):
    path = tmp_path / "checkpoint.json"
    path.write_text('{"version": 1, "version": 1, "checksum": "", "data": {"claims": {}}}')
    with pytest.raises(harness.ModuleFailed) as failed:
        harness.run_module(checkpoint_info, {"path": str(path)})
    assert failed.value.msg.startswith(f"checkpoint {path} is not valid JSON: ")
    assert "version" in failed.value.msg


def test_a_newer_checkpoint_version_is_refused_with_its_reason(tmp_path):
    path = tmp_path / "checkpoint.json"
    path.write_text('{"version": 2, "checksum": "", "data": {}}')
    with pytest.raises(harness.ModuleFailed) as failed:
        harness.run_module(checkpoint_info, {"path": str(path)})
    assert failed.value.result["reason"] == "UnsupportedVersion"
    assert "has version 2; this reader understands version 1" in failed.value.msg


def test_a_directory_given_as_path_names_the_file_to_give_instead(tmp_path):
    with pytest.raises(harness.ModuleFailed) as failed:
        harness.run_module(checkpoint_info, {"path": str(tmp_path)})
    assert failed.value.msg == (
        f"{tmp_path} is a directory; give the checkpoint file inside it ({tmp_path / 'checkpoint.json'})"
    )


def test_a_checkpoint_only_root_may_read_names_the_file_and_become(tmp_path, monkeypatch):
    path = _prepared(tmp_path, fx.record())

    def denied(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(harness.ModuleFailed) as failed:
        harness.run_module(checkpoint_info, {"path": str(path)})
    assert failed.value.msg == (
        f"cannot read the plugin checkpoint {tmp_path / 'checkpoint.slots'}: Permission denied; run the task with "
        "become (the files are root's, mode 0600)"
    )


def test_a_damaged_newest_slot_is_warned_about_and_the_bindings_only_the_copy_lists_are_counted(
    tmp_path, monkeypatch
):
    """The older slot is what a torn write leaves as truth, but a gate must not pass on damage."""
    record = fx.record()
    path = _prepared(tmp_path, record)  # slot 0: the empty checkpoint of the load; slot 1: the claim
    slots = tmp_path / checkpoint_doc.SLOTS_FILE_NAME
    raw = bytearray(slots.read_bytes())
    newest = slot_format.parse(bytes(raw), source="x")
    assert newest.slot == 1
    raw[newest.capacity + slot_format.HEADER.size + 10] ^= 0xFF
    slots.write_bytes(bytes(raw))
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, text: warned.append(text))
    monkeypatch.setattr("time.sleep", lambda _s: None)
    result = harness.run_module(checkpoint_info, {"path": str(path)})
    assert [b["shadow"] for b in result["bindings"]] == [_shadow(record)]
    assert result["source"] == str(slots)
    assert result["msg"] == f"1 managed binding(s) in {slots} ({_shadow(record)})"
    assert warned == [
        f"{slots}: slot 1: generation {newest.generation} does not match its digest (a write cut short, or damage); "
        "the other slot was read",
        f"{path} lists 1 managed binding(s) that {slots} does not ({_shadow(record)}); they are counted. The copy is "
        "older after a power loss (the plugin rewrites it when it starts) or newer after damage to the newest slot: "
        "check the plugin's log",
    ]


def test_a_corrupt_readable_copy_is_warned_about_and_the_durable_record_decides(tmp_path, monkeypatch):
    path = _prepared(tmp_path)
    path.write_text("{")
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, text: warned.append(text))
    result = harness.run_module(checkpoint_info, {"path": str(path)})
    assert result["bindings"] == []
    assert result["msg"] == f"no managed binding in {tmp_path / 'checkpoint.slots'}"
    assert len(warned) == 1
    assert warned[0].startswith(
        f"the readable copy is not used (the plugin rewrites it when it starts): checkpoint {path} is not valid JSON"
    )


def _damage_newest_slot(slots: Path) -> slot_format.ReadResult:
    raw = bytearray(slots.read_bytes())
    newest = slot_format.parse(bytes(raw), source="x")
    raw[newest.slot * newest.capacity + slot_format.HEADER.size + 10] ^= 0xFF
    slots.write_bytes(bytes(raw))
    return newest


@pytest.mark.parametrize("copy", ["deleted", "corrupt"])
def test_a_damaged_newest_slot_without_a_copy_to_compare_fails_instead_of_reading_the_older_slot(
    tmp_path, monkeypatch, copy
):
    """The older slot may lack a binding the damaged one held: no gate may pass on it alone."""
    path = _prepared(tmp_path, fx.record())
    slots = tmp_path / checkpoint_doc.SLOTS_FILE_NAME
    newest = _damage_newest_slot(slots)
    if copy == "deleted":
        path.unlink()
    else:
        path.write_text("{")
    monkeypatch.setattr("time.sleep", lambda _s: None)
    with pytest.raises(harness.ModuleFailed) as failed:
        harness.run_module(checkpoint_info, {"path": str(path)})
    assert failed.value.msg.startswith(
        f"{slots} has a slot that is not valid (slot {newest.slot}: generation {newest.generation} does not match its "
        "digest (a write cut short, or damage)), and its readable copy cannot be compared ("
    )
    assert failed.value.msg.endswith(
        "so this checkpoint cannot show that the node holds none. Start the plugin on the node (it rewrites "
        "checkpoint.json from its durable record when it starts) and rerun"
    )


def test_a_torn_slot_the_plugin_already_reconciled_passes_with_a_warning(tmp_path, monkeypatch):
    """After a crash tore a write, the plugin's start rewrites the copy from the valid slot: they agree."""
    path = _prepared(tmp_path, fx.record())
    slots = tmp_path / checkpoint_doc.SLOTS_FILE_NAME
    _damage_newest_slot(slots)
    path.write_bytes(
        slot_format.parse(slots.read_bytes(), source="x").payload
    )  # what the plugin's start writes
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, text: warned.append(text))
    monkeypatch.setattr("time.sleep", lambda _s: None)
    result = harness.run_module(checkpoint_info, {"path": str(path)})
    assert result["bindings"] == []  # the older slot: the empty checkpoint of the load
    assert len(warned) == 1 and "does not match its digest" in warned[0]


def test_a_file_of_another_name_is_refused_not_read_without_its_slot_file(tmp_path):
    """A misspelling, or an alias of the copy: either could hide the durable record beside the real file."""
    path = _prepared(tmp_path, fx.record())
    (tmp_path / "ckpt.json").write_bytes(path.read_bytes())
    for other in (tmp_path / "checkpoint.jsn", tmp_path / "ckpt.json"):
        with pytest.raises(harness.ModuleFailed) as failed:
            harness.run_module(checkpoint_info, {"path": str(other)})
        assert failed.value.msg.startswith(
            f"{other} is not named checkpoint.json or checkpoint.slots: give the plugin's"
        )


def test_a_symlink_to_the_copy_reads_the_slot_file_beside_the_real_file(tmp_path):
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    record = fx.record()
    path = _prepared(plugin_dir, record)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    empty = _prepared(elsewhere)
    path.write_bytes(empty.read_bytes())  # the copy lags (a power loss); the slot file holds the claim
    link_dir = tmp_path / "links"
    link_dir.mkdir()
    (link_dir / "checkpoint.json").symlink_to(path)
    result = harness.run_module(checkpoint_info, {"path": str(link_dir / "checkpoint.json")})
    assert result["source"] == str(plugin_dir / checkpoint_doc.SLOTS_FILE_NAME)
    assert [b["shadow"] for b in result["bindings"]] == [_shadow(record)]


def test_a_slot_file_path_in_a_directory_of_an_older_build_reads_its_checkpoint_json(tmp_path):
    record = fx.record()
    path = _prepared(tmp_path, record)
    slots = tmp_path / checkpoint_doc.SLOTS_FILE_NAME
    slots.unlink()
    result = harness.run_module(checkpoint_info, {"path": str(slots), "allow_missing": True})
    assert result["source"] == str(path)
    assert [b["shadow"] for b in result["bindings"]] == [_shadow(record)]
