"""The lab's CLI on the way down: SIGINT always stops a lab, even one started with SIGINT ignored."""

from __future__ import annotations

import signal
import subprocess
import sys

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
