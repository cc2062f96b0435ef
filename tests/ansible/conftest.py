"""Shared fixtures of the ansible tier: the collection on a collections path, and a runner.

The repository root is the collection root. ``collection_root`` is a session directory holding
``ansible_collections/sriovnet/dra`` as a symlink to the repository, so ``ansible-playbook
sriovnet.dra.<playbook>`` and FQCN modules resolve to the files under test. Commands run with the
project venv's ``bin`` first on ``PATH`` and colours off; a failed command fails the test with
the tail of its output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
LOCAL_PLAYBOOK = (
    "ansible-playbook",
    "-i",
    "localhost,",
    "-c",
    "local",
    "-e",
    f"ansible_python_interpreter={sys.executable}",
)
"""``ansible-playbook`` against this machine with this Python; append the playbook's path."""


def node_inventory(path: Path) -> Path:
    """Write an inventory at ``path`` with this machine (this Python) as the one host of ``sriov_dra_nodes``."""
    path.write_text(
        "all:\n  children:\n    sriov_dra_nodes:\n      hosts:\n        localhost:\n"
        f"          ansible_connection: local\n          ansible_python_interpreter: {sys.executable}\n"
    )
    return path


@pytest.fixture(scope="session")
def collection_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A collections path whose ``ansible_collections/sriovnet/dra`` is this repository."""
    root = tmp_path_factory.mktemp("collections")
    (root / "ansible_collections" / "sriovnet").mkdir(parents=True)
    (root / "ansible_collections" / "sriovnet" / "dra").symlink_to(REPO)
    return root


@pytest.fixture(scope="session")
def ansible_env(collection_root: Path) -> dict[str, str]:
    """Environment for ansible, molecule and friends (no colours, this collection first)."""
    env = dict(os.environ)
    env.update(
        {
            "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
            "ANSIBLE_COLLECTIONS_PATH": str(collection_root),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "NO_COLOR": "1",
            "PY_COLORS": "0",
            "ANSIBLE_STDOUT_CALLBACK": "default",
            "ANSIBLE_DEPRECATION_WARNINGS": "0",
        }
    )
    env.pop("K8S_AUTH_KUBECONFIG", None)
    return env


def run(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: Path = REPO,
    timeout_s: float = 540,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run a command; with ``check`` a non-zero exit fails the test showing the output's tail."""
    proc = subprocess.run(
        list(argv), env=dict(env), cwd=cwd, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    if check and proc.returncode != 0:
        out = (proc.stdout + "\n" + proc.stderr)[-6000:]
        pytest.fail(f"{' '.join(argv)} exited {proc.returncode}:\n{out}", pytrace=False)
    return proc


def existing(reads: Mapping[str, Callable[[], object]]) -> list[str]:
    """The names in ``reads`` whose read answers (not 404), in order; other API errors raise."""
    from kubernetes import client as k8s

    found = []
    for what, read in reads.items():
        try:
            read()
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise
            continue
        found.append(what)
    return found
