"""The lab's CLI and kubelet simulator on the way down: SIGINT always stops a lab, an API gone first logs one line."""

from __future__ import annotations

import signal
import subprocess
import sys

from sriov_dra.kube import errors
from sriov_dra_lab import kubelet_sim

CHILD = """
import argparse, os, signal, sys, time
from sriov_dra_lab import cli
cli._quiet_lab(argparse.Namespace(log_level="INFO"))
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
except KeyboardInterrupt:
    print("interrupted")
    sys.exit(0)
print("SIGINT ignored")
sys.exit(1)
"""


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_lab_command_started_with_sigint_ignored_still_stops_on_sigint() -> None:
    # A non-interactive shell starts `sriov-dra lab up &` with SIGINT ignored; Python then installs no handler.
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_ignore_sigint,
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "interrupted"), done.stderr


def test_api_server_unreachable_is_a_quiet_sync_failure() -> None:
    gone = errors.ServerError("GET /api/v1/pods: connection refused", status=0)
    assert kubelet_sim.quiet_failure(gone, stopping=False)


def test_any_failure_while_the_simulator_stops_is_quiet() -> None:
    assert kubelet_sim.quiet_failure(RuntimeError("plugin socket closed"), stopping=True)


def test_unexpected_failure_of_a_running_simulator_keeps_its_traceback() -> None:
    assert not kubelet_sim.quiet_failure(RuntimeError("bug"), stopping=False)
    assert not kubelet_sim.quiet_failure(
        errors.ServerError("500 from the apiserver", status=500), stopping=False
    )
