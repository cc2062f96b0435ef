"""Readiness (docs/design.md#repair): the repair worker's first pass counts only once it ran to its end."""

from __future__ import annotations

import pytest
from tests.fakes import claims_api as fx
from tests.fakes import managed_node as mn

from sriov_dra.driver.managed import repair


def test_a_pass_that_raised_does_not_open_the_readiness_gate_and_a_later_complete_one_does(
    node: mn.ManagedNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = node.add_consumer([("nic", mn.DEV_A0)])
    node.prepare(ref)
    worker = node.worker(interval_s=0.05)
    complete = worker.run_once
    calls: list[int] = []

    def first_pass_breaks() -> repair.PassReport:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("checkpoint snapshot failed")
        return complete()

    monkeypatch.setattr(worker, "run_once", first_pass_breaks)
    worker.start()
    try:
        assert worker.wait_first_pass(5.0)
    finally:
        worker.stop()
    assert len(calls) >= 2 and worker.passes >= 1 and worker.last_pass_error == ""
    assert node.phases() == {fx.CLAIM_UID: ["Ready"]}


def test_a_pass_that_keeps_raising_keeps_the_gate_closed_and_says_why(
    node: mn.ManagedNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = node.worker(interval_s=0.02)

    def broken() -> repair.PassReport:
        raise RuntimeError("checkpoint snapshot failed")

    monkeypatch.setattr(worker, "run_once", broken)
    worker.start()
    try:
        assert not worker.wait_first_pass(0.3)
    finally:
        worker.stop()
    assert worker.passes == 0 and "checkpoint snapshot failed" in worker.last_pass_error
