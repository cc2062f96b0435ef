"""``processes.signals_deferred``: a second Ctrl-C or a SIGTERM cannot cut a lab's cleanup short."""

from __future__ import annotations

import os
import signal

import pytest

from sriov_dra_lab import processes


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_during_cleanup_lets_it_finish_then_interrupts(signum: int) -> None:
    """The handlers are restored to what they were (``SIG_IGN`` for SIGINT when the run was started
    as a background job of a non-interactive shell, Python's default handler otherwise)."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt), processes.signals_deferred():
        os.kill(os.getpid(), signum)
        steps.append("after the signal")
    assert steps == ["after the signal"]
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_a_cleanup_without_signal_restores_the_handlers_and_raises_nothing() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with processes.signals_deferred():
        inside = {sig: signal.getsignal(sig) for sig in before}
    assert all(inside[sig] != before[sig] for sig in before)
    assert {sig: signal.getsignal(sig) for sig in before} == before
