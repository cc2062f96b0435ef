"""How the process of an instance that hands the node over ends: replaced in place, or exited.

docs/plugin.md#rolling-update. The old instance is a real plugin process (``owner_process``, the
plugin's own :meth:`Plugin.run` and hand-over, without the API server) holding the real POSIX
locks of a state directory; the test process plays the newer instance through the checkpoint's
own locks and owner record. After the hand-over the process replaces itself (exec) and its fresh
start runs the plugin's ``main`` with the same flags, printing ``fresh start`` first.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import waiting

from sriov_dra.driver import main, settings
from sriov_dra.host import checkpoint, checkpoint_files

REPO = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "NODE_NAME": "node-a"}


def _flags(base: Path, pod_uid: str) -> list[str]:
    return [
        f"--kubelet-plugins-directory-path={base / 'plugins'}",
        f"--kubelet-registrar-directory-path={base / 'registry'}",
        f"--state-dir={base / 'state'}",
        f"--cdi-root={base / 'cdi'}",
        "--log-format=text",
        *([f"--pod-uid={pod_uid}"] if pod_uid else []),
    ]


def owner_process(root: str, pod_uid: str, sigterm_after_hand_over: bool) -> None:
    """The instance owning the node (``pod_uid`` empty: none), with a thread of its own that keeps
    writing ``<root>/stray`` (any thread of the instance); hands over once asked, through the
    plugin's own :meth:`run`. With ``sigterm_after_hand_over`` a FAULT signals the process right
    after the hand-over ended (the retired record written), before the process is replaced."""
    base = Path(root)
    argv = _flags(base, pod_uid)
    if (base / "owned").exists():
        print("fresh start", flush=True)
        sys.exit(main.main(argv))
    (base / "owned").touch()
    plugin = main.Plugin(settings.parse(argv, ENV))
    plugin.store = checkpoint.CheckpointStore(base / "state" / "checkpoint.json")
    plugin.store.load()
    plugin.start = lambda: None  # type: ignore[method-assign]  # owns the node without the API server
    if sigterm_after_hand_over:
        record_retired = checkpoint_files.record_retired

        def retired_then_signalled(directory: Path, instance: str) -> None:
            record_retired(directory, instance)
            os.kill(os.getpid(), signal.SIGTERM)

        checkpoint_files.record_retired = retired_then_signalled  # type: ignore[assignment]

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


class Owner:
    """The old instance's process (:func:`owner_process`) and its log file."""

    def __init__(self, root: Path, pod_uid: str, *, sigterm_after_hand_over: bool = False) -> None:
        (root / "state").mkdir()
        for instance in (pod_uid, "new") if pod_uid else ():
            checkpoint_files.record_instance(root / "state", instance)
        self.log = root / "log"
        code = (
            "from tests.host.driver.test_handover_process import owner_process;"
            f" owner_process({str(root)!r}, {pod_uid!r}, {sigterm_after_hand_over})"
        )
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=log, text=True, cwd=REPO, env=ENV
            )
        assert self.line() == "serving"

    def line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def exit_status(self) -> tuple[int, str]:
        """Wait (at most 20 s) for the process to end: its status and what it printed since."""
        try:
            out, _ = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the old instance's process did not end; its log:\n{self.log.read_text()}")
        return self.proc.returncode, out


@pytest.fixture
def owners() -> Iterator[list[Owner]]:
    started: list[Owner] = []
    yield started
    for owner in started:
        owner.proc.kill()
        owner.proc.communicate()


def _take_node(state: Path) -> checkpoint.CheckpointStore:
    """The newer instance: ask for the writer lock and load (returns once the owner released it)."""
    store = checkpoint.CheckpointStore(state / "checkpoint.json")
    store.load()
    return store


def test_a_process_without_a_pod_uid_idles_after_its_hand_over_instead_of_asking_for_the_node_back(
    short_dir: Path, owners: list[Owner]
) -> None:
    owner = Owner(short_dir, "")
    owners.append(owner)
    store = _take_node(short_dir / "state")
    try:
        checkpoint_files.record_owner(short_dir / "state", "successor")  # serves: confirms
        assert owner.line() == "fresh start"
        waiting.eventually(
            "the fresh start to idle",
            lambda: "idle until its Pod is deleted" in owner.log.read_text(),
            timeout_s=30,
            interval_s=0.05,
        )
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert not store.successor_waiting(), "the fresh start asks for the node it handed over"
            time.sleep(0.02)
        assert owner.proc.poll() is None
    finally:
        store.close()


@pytest.mark.parametrize(("confirmed", "status"), [(True, 0), (False, 1)], ids=["confirmed", "undone"])
def test_a_stop_signal_during_the_confirmation_wait_ends_the_process_once_the_hand_over_ends(
    short_dir: Path, owners: list[Owner], confirmed: bool, status: int
) -> None:
    """SIGTERM while the old instance waits for its successor's confirmation: the process ends the
    hand-over, then exits (0 handed over, 1 undone); it never replaces itself, so it never idles on
    nor takes the node back after it was told to stop."""
    owner = Owner(short_dir, "old")
    owners.append(owner)
    store = _take_node(short_dir / "state")
    try:
        owner.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert owner.proc.poll() is None, "exited before the hand-over ended"
        if confirmed:
            checkpoint_files.record_owner(short_dir / "state", "new")
    finally:
        store.close()  # undone: the successor goes away before it serves
    returned, printed = owner.exit_status()
    assert (returned, printed) == (status, ""), owner.log.read_text()
    assert ("old" in checkpoint_files.retired(short_dir / "state")) is confirmed


def test_a_stop_signal_right_after_the_hand_over_ended_exits_instead_of_replacing_the_process(
    short_dir: Path, owners: list[Owner]
) -> None:
    owner = Owner(short_dir, "old", sigterm_after_hand_over=True)
    owners.append(owner)
    store = _take_node(short_dir / "state")
    try:
        checkpoint_files.record_owner(short_dir / "state", "new")
        returned, printed = owner.exit_status()
    finally:
        store.close()
    assert (returned, printed) == (0, ""), owner.log.read_text()


def test_a_stop_signal_held_pending_across_the_exec_stops_the_fresh_start_before_it_takes_the_node(
    short_dir: Path,
) -> None:
    """A stop signal that arrives while the old process execs stays blocked and pending into the
    fresh start (no handler is installed yet); the fresh start must take it and stop, exit 0,
    without starting (nothing here serves an API server: a start would fail, exit 1)."""
    fresh = f"import sys; from sriov_dra.driver import main; sys.exit(main.main({_flags(short_dir, '')!r}))"
    code = (
        "import os, signal, sys;"
        " signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM});"
        " os.kill(os.getpid(), signal.SIGTERM);"
        f" os.execv(sys.executable, [sys.executable, '-c', {fresh!r}])"
    )
    log = short_dir / "log"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-c", code], stderr=err, cwd=REPO, env=ENV)
    try:
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        proc.kill()
    assert "signal received" in log.read_text()
    assert not (short_dir / "state" / "checkpoint.lock").exists(), "the fresh start took the node"


def test_an_instance_that_handed_over_leaves_no_thread_that_writes_to_the_node(
    short_dir: Path, owners: list[Owner]
) -> None:
    """After the confirmed hand-over the old instance's process is replaced in place (same PID, a
    fresh start that idles): a thread of the old instance that went on writing stops for good."""
    owner = Owner(short_dir, "old")
    owners.append(owner)
    store = _take_node(short_dir / "state")
    try:
        checkpoint_files.record_owner(short_dir / "state", "new")
        assert owner.line() == "fresh start", "not replaced in place"
        written = (short_dir / "stray").read_text()
        time.sleep(0.5)
        assert (short_dir / "stray").read_text() == written, "a thread of the old instance still writes"
        waiting.eventually(
            "the fresh start to idle",
            lambda: "idle until its Pod is deleted" in owner.log.read_text(),
            timeout_s=30,
            interval_s=0.05,
        )
        assert owner.proc.poll() is None
    finally:
        store.close()
