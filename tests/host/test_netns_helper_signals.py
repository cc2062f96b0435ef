"""pyroute2's forked namespace helper never runs the parent's Python signal handlers (host/netlink.py).

pyroute2 enters a namespace through a forked child and ends it with SIGTERM. The CLI turns SIGTERM
into KeyboardInterrupt; a child that inherited that handler unwound the parent's copied stack,
ran the lab demo's ``finally`` blocks in the child and stopped the lab under the real demo (the
first ``make lab`` of a fresh clone, slow enough to lose the race, failed with "interrupted").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sriov_dra.host import netlink


def test_a_child_forked_while_opening_a_namespace_gets_default_signal_handlers() -> None:
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        netlink._OPENING.netns = True
        pid = os.fork()
        if pid == 0:  # the child reports its SIGTERM disposition through its exit status
            os._exit(0 if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL else 3)
        netlink._OPENING.netns = False
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        other = os.fork()  # a fork outside a namespace open keeps the handlers
        if other == 0:
            os._exit(0 if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL else 3)
        _, status = os.waitpid(other, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        netlink._OPENING.netns = False
        signal.signal(signal.SIGTERM, previous)


def test_namespace_reads_under_a_raising_sigterm_handler_never_run_parent_code_in_the_helper(
    scratch_netns: str, tmp_path: Path
) -> None:
    """A process with the CLI's handler reads a namespace many times; no helper runs its finally."""
    marker = tmp_path / "finally-ran-in"
    code = f"""
import os, signal
from sriov_dra.host import netlink
def interrupt(*_):
    raise KeyboardInterrupt
signal.signal(signal.SIGTERM, interrupt)
main = os.getpid()
try:
    for _ in range(40):
        netlink.links({scratch_netns!r})
finally:
    if os.getpid() != main:
        open({str(marker)!r}, "a").write(str(os.getpid()) + "\\n")
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ok")
    assert not marker.exists(), f"a forked helper ran the parent's finally block: {marker.read_text()}"
