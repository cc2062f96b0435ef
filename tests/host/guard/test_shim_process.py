"""The ``multus-guard`` shim run as the container runtime runs it: its own process, ``python -S``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.pure.guard.test_shim import _conf

import sriov_dra_rules
from sriov_dra.guard import shim


def test_a_teardown_whose_multus_binary_cannot_run_answers_a_cni_error_naming_the_key(tmp_path: Path) -> None:
    """DEL/CHECK exec Multus directly; a missing ``multus.binary`` must not end in a traceback."""
    conf = json.dumps(_conf(tmp_path, binary=str(tmp_path / "nonexistent" / "multus"))).encode()
    rules = Path(sriov_dra_rules.__file__).parent.parent
    done = subprocess.run(
        [sys.executable, "-S", shim.__file__],
        input=conf,
        env={
            "CNI_COMMAND": "CHECK",
            "CNI_CONTAINERID": "c1",
            "CNI_PATH": str(tmp_path),
            "PYTHONPATH": str(rules),
        },
        capture_output=True,
        check=False,
    )
    error = json.loads(done.stdout)
    assert done.returncode == 1 and error["code"] == shim.CniErrorCode.INVALID_CONFIG, done.stderr
    assert "cannot run Multus" in error["msg"] and "multus.binary" in error["msg"]
