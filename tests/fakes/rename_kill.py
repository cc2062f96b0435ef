"""FAKE crash at the rename point: run a write in a child process whose ``os.replace`` blocks, then SIGKILL it.

Fault injection at the filesystem boundary for the host-tier crash tests: the child announces
``at-rename`` when the write reaches ``os.replace`` (after the temporary file is written and
fsynced), so the kill lands exactly between the temporary write and the rename.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_CHILD_PRELUDE = """\
import os, sys, time
from pathlib import Path

def blocked_replace(src, dst):
    sys.stdout.write("at-rename\\n")
    sys.stdout.flush()
    time.sleep(60)
"""


def kill_at_rename(*, setup: str, write: str) -> None:
    """Run ``setup`` then ``write`` (Python source, run from the repository root) in a child, SIGKILL it at the rename.

    ``setup`` runs with the real ``os.replace`` (it may commit earlier state); ``write`` runs with
    ``os.replace`` blocked. Raises AssertionError when the child exits before reaching the rename
    or is not the one killed.
    """
    child = (
        _CHILD_PRELUDE + textwrap.dedent(setup) + "\nos.replace = blocked_replace\n" + textwrap.dedent(write)
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, cwd=REPO)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"at-rename\n"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
