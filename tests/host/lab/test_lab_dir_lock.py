"""A running lab's work directory is its own: ``lab down`` and a second ``lab up`` refuse it.

The process that runs a lab holds ``<workdir>/lab.lock`` (``lab_dir.hold``, from before it resets
the directory until its stop); another process sees it and is told which process to stop, instead
of killing the running lab's node processes or deleting its work directory.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sriov_dra_lab import cli, lab_dir

HOLDER = "import sys, time; from pathlib import Path; from sriov_dra_lab import lab_dir; lab_dir.hold(Path(sys.argv[1])); print('held', flush=True); time.sleep(60)"


def _running_lab(workdir: Path) -> subprocess.Popen[str]:
    workdir.mkdir()
    (workdir / lab_dir.STATE_FILE).write_text(json.dumps({"labId": "zzlock"}) + "\n")
    (workdir / "controlplane").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(workdir)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_lab_down_and_a_new_lab_up_refuse_a_running_labs_directory_and_touch_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workdir = tmp_path / "lab"
    holder = _running_lab(workdir)
    try:
        assert (
            cli.run(["down", "--workdir", str(workdir)], inspector=lambda: pytest.fail("no inspector")) == 1
        )
        assert capsys.readouterr().err == (
            f"sriov-dra: a lab is still running in {workdir} (process {holder.pid}); stop it first: Ctrl-C where "
            f"it runs, or kill -TERM {holder.pid}, and wait until it prints 'lab stopped'\n"
        )
        with pytest.raises(lab_dir.LabRunning):
            lab_dir.reset_workdir(workdir)
        assert sorted(p.name for p in workdir.iterdir()) == ["controlplane", "lab.json", "lab.lock"]
        with pytest.raises(lab_dir.LabRunning):
            lab_dir.hold(workdir)
    finally:
        holder.kill()
        holder.communicate()
    assert lab_dir.down(workdir) == []  # the lab is gone: its directory may be cleaned again
    lab_dir.hold(workdir)  # as the next lab up does, before it resets the directory
    try:
        assert lab_dir.reset_workdir(workdir) == []
        assert [p.name for p in workdir.iterdir()] == ["lab.lock"]  # the lock the new lab holds stays
    finally:
        lab_dir.release(workdir)


def test_a_lab_command_checking_the_directory_at_that_moment_is_named_not_a_traceback(tmp_path: Path) -> None:
    """``lab down`` takes a shared look at the lock: a lab up at that instant is told to retry."""
    workdir = tmp_path / "lab"
    workdir.mkdir()
    (workdir / lab_dir.LOCK_FILE).write_text("")
    fd = os.open(workdir / lab_dir.LOCK_FILE, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        with pytest.raises(
            lab_dir.LabRunning, match="is being checked or stopped by another sriov-dra lab command"
        ):
            lab_dir.hold(workdir)
    finally:
        os.close(fd)
