"""``sriov-dra preflight`` and the Ansible ``preflight`` module give one verdict with one reason.

Both run for real on the same fake node tree (CNI binaries that answer VERSION, the guard's
conflist, thick Multus's daemon config, a temporary CNI config dir): the CLI as its console script
(``--no-cluster-checks -o json``), the module through ``ansible`` (an AnsiballZ run, which carries
``sriov_dra_rules`` to the "managed node"). For a valid node and for a primary that is Multus's
``00-multus.conf``, missing, corrupt, has a repeated key, is not UTF-8 or is a directory, every
check's status, detail and fix must be identical, and ``guard-config`` must give the expected reason.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests.ansible import node_fixture
from tests.ansible.conftest import VENV_BIN, run


def _cli(options: dict[str, object], env: dict[str, str]) -> list[dict[str, str]]:
    argv = [str(VENV_BIN / "sriov-dra"), "preflight", "--no-cluster-checks", "-o", "json"]
    proc = run([*argv, *node_fixture.cli_flags(options)], env, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    assert proc.returncode == (1 if report["failed_checks"] else 0)
    checks: list[dict[str, str]] = report["checks"]
    return checks


def _module(options: dict[str, object], env: dict[str, str]) -> list[dict[str, str]]:
    argv = ["ansible", "localhost", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}"]
    proc = run([*argv, "-m", "sriovnet.dra.preflight", "-a", json.dumps(options), "-o"], env)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("localhost | "))
    result = json.loads(line.split(" => ", 1)[1])
    checks: list[dict[str, str]] = result["checks"]
    assert result["failed_checks"] == [c["name"] for c in checks if c["status"] == "fail"]
    return checks


@pytest.mark.parametrize("case", node_fixture.BROKEN_CASES)
def test_cli_and_module_preflight_agree_on_the_same_node(
    case: str, tmp_path: Path, ansible_env: dict[str, str]
) -> None:
    options = {**node_fixture.prepare(tmp_path / "node"), "add_check": False}
    reason = node_fixture.break_node(options, case)
    cli, module = _cli(options, ansible_env), _module(options, ansible_env)
    assert cli == module
    verdict = {c["name"]: c for c in cli}["guard-config"]
    assert verdict["detail"].startswith(reason)
    assert verdict["status"] == ("pass" if case == "valid" else "fail")
    others = [c["name"] for c in cli if c["name"] != "guard-config" and c["status"] == "fail"]
    assert others == []  # only the primary was broken
