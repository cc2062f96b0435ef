"""The node goes only to a newer plugin instance, and a hand-over ends confirmed or undone.

docs/plugin.md#rolling-update. Each instance here is a real process holding the real POSIX locks
of a state directory (``instance_process``); the test process plays the other instance through
``driver.rolling_update``, in the interleavings a rollout can produce.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests import waiting
from tests.fakes.claim_handler import FakeClaimHandler

from sriov_dra.driver import rolling_update, settings
from sriov_dra.host import checkpoint, checkpoint_files
from sriov_dra.kubeletapi import endpoints, plugin_server

REPO = Path(__file__).resolve().parents[3]


def instance_process(state_dir: str, instance: str, confirm: bool) -> None:
    """An instance taking the node: ask for the writer lock and load, print ``loaded``; with
    ``confirm`` record itself as the serving owner and print ``serving``; then hold the node."""
    store = checkpoint.CheckpointStore(Path(state_dir) / "checkpoint.json")
    store.load()
    print("loaded", flush=True)
    if confirm:
        checkpoint_files.record_owner(Path(state_dir), instance)
        print("serving", flush=True)
    time.sleep(600)


Spawn = Callable[..., "subprocess.Popen[str]"]
"""``spawn(state_dir, instance, *, confirm)``: start :func:`instance_process` in its own process."""


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    started: list[subprocess.Popen[str]] = []

    def start(state_dir: Path, instance: str, *, confirm: bool) -> subprocess.Popen[str]:
        code = (
            "from tests.host.driver.test_rolling_update import instance_process;"
            f" instance_process({str(state_dir)!r}, {instance!r}, {confirm})"
        )
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.communicate()


def _owned_by_this_process(state_dir: Path, *order: str) -> checkpoint.CheckpointStore:
    for instance in order:
        checkpoint_files.record_instance(state_dir, instance)
    store = checkpoint.CheckpointStore(state_dir / "checkpoint.json")
    store.load()
    return store


def _asks(store: checkpoint.CheckpointStore) -> None:
    waiting.eventually(
        "the other instance to ask for the node", store.successor_waiting, timeout_s=30, interval_s=0.02
    )


def _read_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def test_the_owner_refuses_a_request_of_an_older_instance_restarted_during_its_hand_over(
    tmp_path: Path, spawn: Spawn
) -> None:
    """The old instance drained and died before it recorded itself retired; the new one took the
    node; the old one's container restarted and asks again. The new owner must not give it back."""
    store = _owned_by_this_process(tmp_path, "old", "new")  # this process: the new instance, owning
    spawn(tmp_path, "old", confirm=False)
    _asks(store)
    handed, stop = threading.Event(), threading.Event()
    watcher = threading.Thread(
        target=rolling_update.watch_successor, args=(store, stop, handed.set, tmp_path, "new"), daemon=True
    )
    watcher.start()
    try:
        assert not handed.wait(20 * rolling_update.HANDOVER_POLL_S), (
            "the node went back to the older instance"
        )
        checkpoint_files.record_instance(tmp_path, "newer")  # only a newer instance's request counts
        assert handed.wait(5)
    finally:
        stop.set()
        watcher.join(5)


def test_an_older_instance_restarted_while_a_newer_one_holds_the_node_idles_and_takes_it_only_when_free(
    tmp_path: Path, spawn: Spawn
) -> None:
    for instance in ("old", "new"):
        checkpoint_files.record_instance(tmp_path, instance)
    new = spawn(tmp_path, "new", confirm=True)
    assert _read_line(new) == "loaded"
    assert rolling_update.how_to_start(tmp_path, "old") is rolling_update.Start.IDLE
    new.kill()
    new.wait()
    assert rolling_update.how_to_start(tmp_path, "old") is rolling_update.Start.TAKE, "nobody holds the node"
    assert rolling_update.how_to_start(tmp_path, "newest") is rolling_update.Start.ASK
    assert checkpoint_files.instances(tmp_path) == ("old", "new", "newest")


def _hand_over(
    store: checkpoint.CheckpointStore, state_dir: Path, drain: Callable[[], None] | None
) -> rolling_update.Outcome:
    """This process, the old instance, hands over (``drain``: its kubelet calls' drain)."""
    return rolling_update.hand_over(
        stop_serving=drain,
        stop_workers=[],
        store=store,
        state_dir=state_dir,
        instance="old",
        lock=threading.Lock(),
        poll_s=0.01,
    )


def test_a_hand_over_whose_requester_went_away_during_the_drain_keeps_the_node(
    tmp_path: Path, spawn: Spawn
) -> None:
    store = _owned_by_this_process(tmp_path, "old", "new")
    asking = spawn(tmp_path, "new", confirm=False)
    _asks(store)

    def drain() -> None:  # the requester fails while the old instance drains its calls
        asking.kill()
        asking.wait()

    outcome = _hand_over(store, tmp_path, drain)
    assert outcome is rolling_update.Outcome.ABORTED
    assert store.all_claims() == {}, "the store stays open: this instance still holds the writer lock"
    assert "old" not in checkpoint_files.retired(tmp_path)


def _hand_over_in_thread(
    store: checkpoint.CheckpointStore, state_dir: Path
) -> tuple[threading.Thread, list[object]]:
    outcomes: list[object] = []

    def run() -> None:
        outcomes.append(_hand_over(store, state_dir, None))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcomes


def test_a_hand_over_whose_successor_took_the_lock_and_died_before_serving_is_undone(
    tmp_path: Path, spawn: Spawn
) -> None:
    store = _owned_by_this_process(tmp_path, "old", "new")
    checkpoint_files.record_owner(tmp_path, "old")
    successor = spawn(tmp_path, "new", confirm=False)
    _asks(store)
    thread, outcomes = _hand_over_in_thread(store, tmp_path)
    assert _read_line(successor) == "loaded"  # it holds the writer lock now
    time.sleep(0.2)
    assert thread.is_alive(), "the hand-over counted as done before the successor served the node"
    successor.kill()
    successor.wait()
    thread.join(10)
    assert outcomes == [rolling_update.Outcome.ABORTED]
    assert "old" not in checkpoint_files.retired(tmp_path)


@pytest.mark.parametrize("recorded_owner", ["old", "new"], ids=["itself", "the-successor-already"])
def test_a_hand_over_ends_once_the_successor_serves_the_node(
    tmp_path: Path, spawn: Spawn, recorded_owner: str
) -> None:
    """Also when the owner record still names the successor from an earlier hand-over (it served,
    went away, the old instance took the node back): its name written again confirms."""
    store = _owned_by_this_process(tmp_path, "old", "new")
    checkpoint_files.record_owner(tmp_path, recorded_owner)
    successor = spawn(tmp_path, "new", confirm=True)
    _asks(store)
    thread, outcomes = _hand_over_in_thread(store, tmp_path)
    assert _read_line(successor) == "loaded" and _read_line(successor) == "serving"
    thread.join(10)
    assert outcomes == [rolling_update.Outcome.HANDED_OVER]
    assert checkpoint_files.retired(tmp_path) == ["old"]
    assert checkpoint_files.owner(tmp_path) == "new"


def test_an_instance_that_cannot_record_itself_as_the_owner_does_not_serve(short_dir: Path) -> None:
    """Without the record the instance it took the node from would wait for a confirmation forever."""
    (short_dir / checkpoint_files.OWNER_FILE_NAME).mkdir()  # the record cannot be replaced
    cfg = settings.parse(
        [f"--kubelet-plugins-directory-path={short_dir}", f"--state-dir={short_dir}", "--pod-uid=new"],
        {"NODE_NAME": "node-a"},
    )
    with pytest.raises(OSError):
        rolling_update.serving(cfg, "new")


def _dead_socket(path: Path) -> None:
    """A unix socket file nobody listens on (an instance killed before it removed it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))


def test_the_owner_removes_a_dead_instances_socket_too_young_at_start_on_a_later_sweep(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner sweeps the dead sockets every DEAD_SOCKET_SWEEP_S while it owns the node, not only
    at start: a socket a killed instance bound less than a minute before is removed later."""
    monkeypatch.setattr(rolling_update, "DEAD_SOCKET_SWEEP_S", 0.05)
    driver = "driver.example.com"
    own = endpoints.plugin_sockets(
        driver, plugins_dir=short_dir / "p", registry_dir=short_dir / "r", instance="own"
    )
    dead = endpoints.plugin_sockets(
        driver, plugins_dir=short_dir / "p", registry_dir=short_dir / "r", instance="dead"
    )
    for path in (dead.dra, dead.registration):
        _dead_socket(path)
    (short_dir / "state").mkdir()
    store = _owned_by_this_process(short_dir / "state", "own")
    stop = threading.Event()
    watcher = threading.Thread(
        target=rolling_update.watch_successor,
        args=(store, stop, lambda: None, short_dir / "state", "own"),
        kwargs={"sweep": lambda: rolling_update.remove_dead_instances(own, driver)},
        daemon=True,
    )
    watcher.start()
    try:
        time.sleep(0.3)
        assert dead.dra.exists() and dead.registration.exists(), "a socket bound just now is kept"
        minute_ago = time.time() - 2 * plugin_server.DEAD_SOCKET_MIN_AGE_S
        for path in (dead.dra, dead.registration):
            os.utime(path, (minute_ago, minute_ago))
        waiting.eventually(
            "the owner to remove the dead instance's sockets",
            lambda: not dead.dra.exists() and not dead.registration.exists(),
            timeout_s=10,
            interval_s=0.05,
        )
    finally:
        stop.set()
        watcher.join(5)
        store.close()


def test_a_new_instance_without_a_registration_verdict_stops_and_never_asks_for_the_node(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rolling_update, "REGISTRATION_WAIT_S", 0.05)
    sockets = endpoints.plugin_sockets(
        "driver.example.com", plugins_dir=short_dir / "p", registry_dir=short_dir / "r", instance="i"
    )
    server = plugin_server.KubeletPluginServer(
        driver_name="driver.example.com", handler=FakeClaimHandler(), sockets=sockets
    )
    reason = rolling_update.await_registration(threading.Event(), server, sockets.registration)
    assert reason is not None and "no registration verdict" in reason and "keeps the node" in reason
