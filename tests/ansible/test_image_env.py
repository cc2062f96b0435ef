"""The product image's Python environment, as the lab's processes and the benches carry it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sriov_dra_lab import image_env


def test_the_image_runs_its_services_without_docstrings_and_compiles_its_bytecode_at_that_level() -> None:
    env = image_env.python_env()
    assert env["PYTHONOPTIMIZE"] == "2"
    assert "PYTHONDONTWRITEBYTECODE" not in env, "the venv must still write the bytecode it lacks"
    text = image_env.CONTAINERFILE.read_text()
    levels = re.findall(r"compileall\b[^\n]*?-o (\d)", text)
    # the venv (build stage) and the base's standard library (final stage), at the level the services run at
    assert levels == [env["PYTHONOPTIMIZE"]] * 2
    final = re.split(r"^FROM\s.*$", text, flags=re.M)[-1]
    assert re.search(r"compileall\b.*sysconfig.*stdlib", final.replace("\\\n", " ")), "the stdlib is compiled"


def test_the_images_bytecode_is_checked_by_source_hash_so_copied_mtimes_cannot_make_it_stale() -> None:
    text = image_env.CONTAINERFILE.read_text().replace("\\\n", " ")
    calls = re.findall(r"-m compileall\b[^\n]*", text)
    assert len(calls) == 2
    assert all("--invalidation-mode checked-hash" in c for c in calls), calls


def test_continuation_lines_are_joined_and_a_later_env_replaces_an_earlier_key(tmp_path: Path) -> None:
    containerfile = tmp_path / "Containerfile"
    containerfile.write_text(
        "FROM base\nENV PYTHONOPTIMIZE=1 PYTHONHASHSEED=0\nRUN true\n"
        'ENV PATH=/x:$PATH \\\n    PYTHONOPTIMIZE=2 \\\n    PYTHONDONTWRITEBYTECODE=1 \\\n    LABEL_TEXT="a b"\n'
    )
    assert image_env.python_env(containerfile) == {"PYTHONOPTIMIZE": "2", "PYTHONHASHSEED": "0"}


def test_only_the_final_stages_env_reaches_the_image(tmp_path: Path) -> None:
    containerfile = tmp_path / "Containerfile"
    containerfile.write_text(
        "FROM base AS build\nENV PYTHONOPTIMIZE=1 PYTHONPATH=/build\nRUN true\n"
        "FROM base\nENV PYTHONUNBUFFERED=1\n"
    )
    assert image_env.python_env(containerfile) == {"PYTHONUNBUFFERED": "1"}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("FROM base\nRUN true\n", "no ENV instruction"),
        ("FROM base\nENV PYTHONOPTIMIZE=2\nFROM other\nRUN true\n", "no ENV instruction"),
        ("FROM base\nENV PYTHONOPTIMIZE=2\nENV PYTHONHASHSEED 0\n", "KEY=value"),
    ],
)
def test_an_unreadable_env_is_an_error_naming_the_file(tmp_path: Path, text: str, problem: str) -> None:
    containerfile = tmp_path / "Containerfile"
    containerfile.write_text(text)
    with pytest.raises(ValueError, match=problem) as info:
        image_env.python_env(containerfile)
    assert str(containerfile) in str(info.value)


@pytest.mark.parametrize(
    "entrypoint", ["sriov-dra", "sriov-dra-plugin", "sriov-dra-guard", "sriov-dra-operator"]
)
def test_every_service_entrypoint_answers_help_with_the_images_python_environment(entrypoint: str) -> None:
    """Under ``PYTHONOPTIMIZE=2`` every ``__doc__`` is None: nothing may build its help from one."""
    venv_bin = Path(sys.executable).parent
    done = subprocess.run(
        [str(venv_bin / entrypoint), "--help"],
        env={"PATH": "/usr/bin:/bin", **image_env.python_env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout
