"""driver.managed_wiring: the Node-UID reader and the bounded wait for the first repair pass."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from sriov_dra.driver import managed_wiring
from sriov_dra.kube import errors as kube_errors

WATCHED = "0a0a0a0a-0000-4000-8000-00000000000a"
LIVE = "0b0b0b0b-0000-4000-8000-00000000000b"


@dataclass
class Reads:
    """FAKE live Node GET: returns ``uid`` or raises ``error``; counts calls."""

    uid: str = LIVE
    error: Exception | None = None
    count: int = 0

    def __call__(self) -> str:
        self.count += 1
        if self.error is not None:
            raise self.error
        return self.uid


def test_the_watched_node_uid_is_used_without_a_live_read() -> None:
    reads = Reads()
    reader = managed_wiring.LiveNodeUid(read=reads, watched=lambda: WATCHED)
    assert [reader(), reader()] == [WATCHED, WATCHED]
    assert reads.count == 0 and reader.live_reads == 0


@pytest.mark.parametrize(
    ("watched", "reads", "want"),
    [
        (lambda: None, Reads(), LIVE),
        (None, Reads(), LIVE),
        (lambda: None, Reads(error=kube_errors.NotFound("get nodes node-a: not found")), None),
    ],
    ids=["watch-has-no-node-live-get", "no-watch-live-get", "node-deleted-is-none"],
)
def test_a_live_get_answers_when_the_watch_cannot(watched, reads: Reads, want: str | None) -> None:
    reader = managed_wiring.LiveNodeUid(read=reads, watched=watched)
    assert reader() == want
    assert reads.count == reader.live_reads == 1


def test_a_failed_live_read_is_raised_not_guessed() -> None:
    reader = managed_wiring.LiveNodeUid(
        read=Reads(error=kube_errors.Forbidden("get nodes node-a: forbidden"))
    )
    with pytest.raises(kube_errors.Forbidden):
        reader()


@dataclass
class FakeWorker:
    """FAKE repair worker: its first pass completes when ``done`` is set."""

    done: threading.Event = field(default_factory=threading.Event)
    passes: int = 0
    last_pass_error: str = ""
    stopped: bool = False

    def wait_first_pass(self, timeout_s: float) -> bool:
        return self.done.wait(timeout_s)

    def stop(self, timeout_s: float = 10.0) -> None:
        self.stopped = True


def test_startup_fails_after_the_bound_naming_the_last_pass_error_and_the_flag() -> None:
    worker = FakeWorker(last_pass_error="ServerError: the API server is unavailable")
    with pytest.raises(managed_wiring.FirstPassTimeout) as caught:
        managed_wiring.wait_first_pass(worker, timeout_s=0.2, progress_every_s=0.05)  # type: ignore[arg-type]
    text = str(caught.value)
    assert "within 0.2 s" in text and "the API server is unavailable" in text
    assert "--repair-first-pass-timeout-s" in text and worker.stopped


def test_the_wait_returns_once_the_first_pass_completed() -> None:
    worker = FakeWorker()
    threading.Timer(0.1, worker.done.set).start()
    managed_wiring.wait_first_pass(worker, timeout_s=5.0, progress_every_s=0.02)  # type: ignore[arg-type]
    assert worker.done.is_set() and not worker.stopped


def test_zero_waits_without_bound_and_logs_progress(caplog: pytest.LogCaptureFixture) -> None:
    worker = FakeWorker(last_pass_error="Timeout: get pods")
    threading.Timer(0.3, worker.done.set).start()
    with caplog.at_level("WARNING", logger=managed_wiring.LOG.name):
        managed_wiring.wait_first_pass(worker, timeout_s=0, progress_every_s=0.05)  # type: ignore[arg-type]
    assert worker.done.is_set() and not worker.stopped
    progress = [r for r in caplog.records if "first pass" in r.getMessage()]
    assert len(progress) >= 2 and all(getattr(r, "reason", "") == "Timeout: get pods" for r in progress)


def test_a_stop_during_the_wait_ends_it_without_a_pass() -> None:
    worker, stop = FakeWorker(), threading.Event()
    threading.Timer(0.1, stop.set).start()
    managed_wiring.wait_first_pass(worker, timeout_s=0, stop=stop, progress_every_s=0.02)  # type: ignore[arg-type]
    assert stop.is_set() and not worker.done.is_set()
