"""Every background thread starts guarded: a crash is logged, recorded, and handed on (servicekit/threads.py)."""

from __future__ import annotations

import logging
import threading

import pytest

from sriov_dra.servicekit import probes, threads


def test_a_crashing_worker_is_logged_recorded_in_health_and_handed_to_on_crash(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = probes.Health()
    seen: list[BaseException] = []

    def work() -> None:
        raise RuntimeError("watch stream closed for good")

    t = threads.start("watch-pods", work, health=state, on_crash=seen.append)
    t.join(5)
    assert not t.is_alive() and t.daemon and t.name == "watch-pods"
    assert [str(e) for e in seen] == ["watch stream closed for good"]
    assert state.alive() == (False, "worker watch-pods crashed: RuntimeError: watch stream closed for good")
    (rec,) = [r for r in caplog.records if r.getMessage() == "worker crashed"]
    assert rec.levelno == logging.ERROR and rec.__dict__["worker"] == "watch-pods" and rec.exc_info


def test_a_worker_that_returns_is_silent_and_keeps_the_service_alive(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = probes.Health()
    done = threading.Event()
    t = threads.start("one-shot", done.set, health=state)
    t.join(5)
    assert done.is_set() and state.alive() == (True, "ok")
    assert not [r for r in caplog.records if r.getMessage() == "worker crashed"]


def test_a_failing_crash_handler_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def boom(_: BaseException) -> None:
        raise ValueError("handler")

    t = threads.start("w", lambda: 1 / 0, on_crash=boom)
    t.join(5)
    assert any(r.getMessage() == "worker crash handler failed" for r in caplog.records)
