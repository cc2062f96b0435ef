"""Which ADD needs the guard daemon, read from the plugin's real checkpoint files (docs/design.md#guard).

The plugin's own writer (``host.checkpoint.CheckpointStore``) records the bindings; the shim's rule
(``sriov_dra_rules.guard_route``) reads them without the plugin, its lock or the API server. The
shim itself then runs as the runtime runs it (``python -S``): an ordinary Pod's ADD execs Multus,
a managed Pod's ADD, or one it cannot tell about, needs the daemon and says why when it is down.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.fakes import checkpoint_records as cr
from tests.pure.guard.test_shim import _conf

import sriov_dra_rules
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.guard import shim
from sriov_dra.host import checkpoint, checkpoint_files
from sriov_dra_rules import guard_route

ARGS = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns-a;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=c1"


def _args(uid: str | None) -> str:
    return ARGS if uid is None else f"{ARGS};K8S_POD_UID={uid}"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[checkpoint.CheckpointStore]:
    """The plugin's checkpoint in ``<tmp>/plugin``, opened by its own writer (which holds its lock)."""
    (tmp_path / "plugin").mkdir()
    s = checkpoint.CheckpointStore(tmp_path / "plugin" / "checkpoint.json")
    s.load()
    try:
        yield s
    finally:
        s.close()


def test_no_checkpoint_at_all_means_no_pod_is_managed(tmp_path: Path) -> None:
    for uid in (cr.POD_A, None):
        route = guard_route.decide(tmp_path / "plugin" / "checkpoint.json", _args(uid))
        assert route.managed is False and "no managed binding" in route.why


@pytest.mark.parametrize("phase", list(model.Phase), ids=[p.value for p in model.Phase])
def test_a_pod_with_a_binding_in_any_phase_is_managed_and_only_that_pod(
    store: checkpoint.CheckpointStore, phase: model.Phase
) -> None:
    store.set_claim(cr.record(cr.CLAIM_1, cr.POD_A, phase=phase))
    assert guard_route.decide(store.path, _args(cr.POD_A)) == guard_route.Route(
        True, f"Pod UID {cr.POD_A} has managed bindings in {store.path}"
    )
    assert guard_route.decide(store.path, _args(cr.POD_B)).managed is False


def test_records_without_managed_bindings_manage_nothing(store: checkpoint.CheckpointStore) -> None:
    store.set_claim(cr.record(cr.CLAIM_1, cr.POD_A, managed=False))
    assert guard_route.decide(store.path, _args(cr.POD_A)).managed is False
    assert guard_route.decide(store.path, _args(None)).managed is False  # nothing managed here at all


@pytest.mark.parametrize("args", [ARGS, f"{ARGS};K8S_POD_UID=", f"{ARGS};", "K8S_POD_UID=a=b"])
def test_no_pod_uid_while_bindings_are_recorded_cannot_tell(
    store: checkpoint.CheckpointStore, args: str
) -> None:
    store.set_claim(cr.record(cr.CLAIM_1, cr.POD_A))
    route = guard_route.decide(store.path, args)
    assert route.managed is None and "name no K8S_POD_UID" in route.why


def test_the_checkpoint_is_read_while_the_plugin_holds_its_lock_and_after_it_stopped(tmp_path: Path) -> None:
    (tmp_path / "plugin").mkdir()
    running = checkpoint.CheckpointStore(tmp_path / "plugin" / "checkpoint.json")
    running.load()
    running.set_claim(cr.record(cr.CLAIM_1, cr.POD_A))
    assert guard_route.decide(running.path, _args(cr.POD_A)).managed is True
    running.close()  # the plugin crash-loops or is being upgraded
    assert guard_route.decide(running.path, _args(cr.POD_A)).managed is True


def test_the_durable_slot_file_wins_over_a_stale_readable_copy(store: checkpoint.CheckpointStore) -> None:
    store.set_claim(cr.record(cr.CLAIM_1, cr.POD_A))
    store.path.unlink()  # a person deleted the readable copy; the slot file is the record
    assert guard_route.decide(store.path, _args(cr.POD_A)).managed is True


def test_a_damaged_checkpoint_cannot_tell_and_names_the_file(store: checkpoint.CheckpointStore) -> None:
    store.set_claim(cr.record(cr.CLAIM_1, cr.POD_A))
    slots = store.path.with_name("checkpoint.slots")
    slots.write_bytes(b"\0" * slots.stat().st_size)
    route = guard_route.decide(store.path, _args(cr.POD_B))
    assert route.managed is None and str(store.path) in route.why and "no valid slot" in route.why


def test_a_checkpoint_of_another_version_cannot_tell(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.json"
    path.write_text(json.dumps({"version": 2, "data": {}, "checksum": ""}))
    route = guard_route.decide(path, _args(cr.POD_B))
    assert route.managed is None and "version 2" in route.why


def test_the_readable_copy_of_a_build_without_slot_file_is_read(tmp_path: Path) -> None:
    raw, _ = checkpoint_files.read_only(
        Path(__file__).parents[2] / "fixtures" / "checkpoint" / "v1-indented-managed.json"
    )
    (tmp_path / "checkpoint.json").write_bytes(raw)
    pods = guard_route.managed_pod_uids(tmp_path / "checkpoint.json")
    assert pods and guard_route.decide(tmp_path / "checkpoint.json", _args(next(iter(pods)))).managed is True


# --------------------------------------------------------------------- the shim as the runtime runs it


def _run_shim(tmp_path: Path, store_path: Path, uid: str | None) -> subprocess.CompletedProcess[bytes]:
    """ADD through the shim with a Multus stand-in that prints what it was given (a labelled fake)."""
    fake_multus = tmp_path / "fake-multus"
    fake_multus.write_text(
        "#!/bin/sh\n# FAKE Multus: shows the config and CNI_ARGS the shim exec'd it with\n"
        'printf \'{"stdin":%s,"args":"%s"}\' "$(cat)" "$CNI_ARGS"\n'
    )
    fake_multus.chmod(0o755)
    obj = _conf(tmp_path, binary=str(fake_multus))
    obj["guard"]["pluginCheckpoint"] = str(store_path)
    rules = Path(sriov_dra_rules.__file__).parent.parent
    env = {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_ARGS": _args(uid), "PYTHONPATH": str(rules)}
    return subprocess.run(
        [sys.executable, "-S", shim.__file__],
        input=json.dumps(obj).encode(),
        env=env,
        capture_output=True,
        check=False,
    )


def test_the_shim_execs_multus_for_an_ordinary_pod_and_needs_the_daemon_only_for_a_managed_one(
    tmp_path: Path, store: checkpoint.CheckpointStore
) -> None:
    store.set_claim(cr.record(cr.CLAIM_1, cr.POD_A))

    ordinary = _run_shim(tmp_path, store.path, cr.POD_B)  # the guard daemon is not running
    assert ordinary.returncode == 0, ordinary.stderr
    seen = json.loads(ordinary.stdout)
    assert seen["args"] == _args(cr.POD_B) and seen["stdin"]["type"] == "multus"
    assert seen["stdin"]["delegates"][0]["name"] == "lab-primary"  # the pinned primary, inlined

    for uid, why in ((cr.POD_A, f"Pod UID {cr.POD_A} has managed bindings"), (None, "name no K8S_POD_UID")):
        managed = _run_shim(tmp_path, store.path, uid)
        error = json.loads(managed.stdout)
        assert managed.returncode == 1 and error["code"] == shim.CniErrorCode.TRY_AGAIN, managed.stderr
        assert "guard daemon is not reachable" in error["msg"] and why in error["details"]


def test_a_uid_found_in_the_bytes_only_as_another_field_is_still_decoded_and_unmanaged(
    store: checkpoint.CheckpointStore,
) -> None:
    """The shortcut (a UID absent from the verified bytes) never decides for a UID that is present."""
    store.set_claim(cr.record(cr.POD_B, cr.POD_A))  # POD_B appears, as a claim UID
    assert guard_route.decide(store.path, _args(cr.POD_B)).managed is False
    assert guard_route.decide(store.path, _args(cr.POD_B.upper())).managed is False
    assert guard_route.decide(store.path, _args(cr.POD_A)).managed is True


@pytest.mark.parametrize("count", [1, 9])
def test_the_answer_for_any_uid_is_what_decoding_the_whole_checkpoint_gives(
    store: checkpoint.CheckpointStore, count: int
) -> None:
    pods = [str(uuid.uuid4()) for _ in range(count)]
    for index, pod in enumerate(pods):
        store.set_claim(cr.record(str(uuid.uuid4()), pod, indexes=(index % 64,), managed=index % 2 == 0))
    decoded = guard_route.managed_pod_uids(store.path)
    assert decoded == frozenset(pods[::2])
    for uid in [*pods, str(uuid.uuid4()), "not-a-uuid\\u0041", '"quoted"']:
        assert guard_route.decide(store.path, _args(uid)).managed is (uid in decoded)
