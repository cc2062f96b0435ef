"""The node goes only to a newer plugin instance, and a hand-over ends confirmed or undone.

docs/plugin.md#rolling-update. Each instance here is a real process holding the real POSIX locks
of a state directory (``instance_process``); the test process plays the other instance through
``driver.rolling_update``, in the interleavings a rollout can produce.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests import waiting
from tests.fakes.claim_handler import FakeClaimHandler

from sriov_dra.driver import main, rolling_update, settings
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


def test_a_hand_over_ends_once_the_successor_serves_the_node(tmp_path: Path, spawn: Spawn) -> None:
    store = _owned_by_this_process(tmp_path, "old", "new")
    checkpoint_files.record_owner(tmp_path, "old")
    successor = spawn(tmp_path, "new", confirm=True)
    _asks(store)
    thread, outcomes = _hand_over_in_thread(store, tmp_path)
    assert _read_line(successor) == "loaded" and _read_line(successor) == "serving"
    thread.join(10)
    assert outcomes == [rolling_update.Outcome.HANDED_OVER]
    assert checkpoint_files.retired(tmp_path) == ["old"]
    assert checkpoint_files.owner(tmp_path) == "new"


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


def old_instance_process(root: str) -> None:
    """The old instance: owns the node, with a thread of its own writing ``<root>/stray`` every
    20 ms (standing for any thread of the instance: a kubelet call abandoned after the drain's
    grace, a worker); hands over once a successor asks, through the plugin's own :meth:`run`.
    Its fresh start after the hand-over (the process replaced in place) prints ``fresh start``."""
    base = Path(root)
    if "old" in checkpoint_files.retired(base / "state"):
        print("fresh start", flush=True)
        time.sleep(600)
        return
    cfg = settings.parse(
        [
            f"--kubelet-plugins-directory-path={base / 'plugins'}",
            f"--kubelet-registrar-directory-path={base / 'registry'}",
            f"--state-dir={base / 'state'}",
            f"--cdi-root={base / 'cdi'}",
            "--pod-uid=old",
        ],
        {"NODE_NAME": "node-a"},
    )
    plugin = main.Plugin(cfg)
    plugin.store = checkpoint.CheckpointStore(base / "state" / "checkpoint.json")
    plugin.store.load()
    plugin.start = lambda: None  # type: ignore[method-assign]  # owns the node without the API server

    def stray() -> None:
        for n in itertools.count():
            (base / "stray").write_text(str(n))
            time.sleep(0.02)

    def watch() -> None:
        assert plugin.store is not None
        while not plugin.store.successor_waiting():
            time.sleep(0.02)
        plugin.hand_over()

    threading.Thread(target=stray).start()
    threading.Thread(target=watch, daemon=True).start()
    print("serving", flush=True)
    sys.exit(plugin.run())


def test_an_instance_that_handed_over_leaves_no_thread_that_writes_to_the_node(
    tmp_path: Path, spawn: Spawn
) -> None:
    """After the confirmed hand-over the old instance's process is replaced in place (same PID, a
    fresh start that idles): a thread of the old instance that went on writing stops for good."""
    (tmp_path / "state").mkdir()
    for instance in ("old", "new"):
        checkpoint_files.record_instance(tmp_path / "state", instance)
    code = f"from tests.host.driver.test_rolling_update import old_instance_process; old_instance_process({str(tmp_path)!r})"
    old = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert _read_line(old) == "serving"
        new = spawn(tmp_path / "state", "new", confirm=True)
        assert _read_line(new) == "loaded"
        waiting.eventually(
            "the old instance to record the confirmed hand-over",
            lambda: "old" in checkpoint_files.retired(tmp_path / "state"),
            timeout_s=30,
            interval_s=0.02,
        )
        time.sleep(1.0)  # the process ends its instance right after the hand-over
        written = (tmp_path / "stray").read_text()
        time.sleep(0.5)
        assert (tmp_path / "stray").read_text() == written, "a thread of the old instance still writes"
        assert old.poll() is None and _read_line(old) == "fresh start", "not replaced in place"
    finally:
        old.kill()
        old.communicate()
