"""The runtime Containerfile: hadolint-clean, pinned base, non-root, and every command the roles run exists.

No container engine is available here, so the file is linted and checked, and its build stage is
replayed (its ``COPY`` lines laid out as a container engine does, symlinks kept, then the wheel built
from that context), not built as an image.
"""

from __future__ import annotations

import re
import shutil
import sys
import tomllib
import zipfile
from pathlib import Path

import yaml
from tests.ansible.conftest import REPO, VENV_BIN, run

CONTAINERFILE = REPO / "collection" / "image" / "Containerfile"


def test_hadolint_passes(ansible_env: dict[str, str]) -> None:
    hadolint = shutil.which("hadolint", path=str(VENV_BIN)) or "hadolint"
    run([hadolint, "--failure-threshold", "info", str(CONTAINERFILE)], ansible_env)


def test_base_image_is_pinned_by_digest_and_the_final_user_is_not_root() -> None:
    text = CONTAINERFILE.read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", text, re.M)
    assert base is not None and re.fullmatch(r"[^@\s]+@sha256:[0-9a-f]{64}", base.group(1))
    assert re.findall(r"^FROM (\S+)", text, re.M) == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    users = re.findall(r"^USER (\S+)$", text, re.M)
    assert users and users[-1] == "65532:65532"


def _commands() -> set[str]:
    """First element of every container command in the role templates and shipped manifests."""
    found = set()
    sources = list(REPO.glob("roles/*/templates/*.yaml.j2")) + list(
        REPO.glob("roles/*/files/manifests/**/*.yaml")
    )
    for path in sources:
        for match in re.finditer(r'command:\s*\["([^"]+)"', path.read_text()):
            found.add(match.group(1))
        for match in re.finditer(r"command:\n\s+- (\S+)", path.read_text()):
            found.add(match.group(1))
    return found


def test_every_command_the_roles_run_is_an_entrypoint_of_the_image() -> None:
    scripts = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"])
    ours = {c for c in _commands() if not c.startswith("/")}  # /... are Multus's own image
    assert ours - {"python3"} <= scripts, f"missing [project.scripts]: {sorted(ours - {'python3'} - scripts)}"
    assert {"sriov-dra-plugin", "sriov-dra-guard"} <= ours


def test_the_shipped_operator_deployment_runs_non_root() -> None:
    deployment = yaml.safe_load(
        (REPO / "roles/operator/files/manifests/operator/deployment.yaml").read_text()
    )
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def _build_stage_context(dest: Path) -> Path:
    """Lay out what the build stage's ``COPY`` lines put in its ``WORKDIR``, as an engine does.

    A directory source is copied with its symlinks kept as symlinks (a container engine does not
    follow them), so a link whose target the stage does not copy stays dangling here too.
    Returns the ``WORKDIR`` (``dest`` + the stage's ``WORKDIR``).
    """
    stage = CONTAINERFILE.read_text().split("\nFROM ")[1]
    (workdir,) = re.findall(r"^WORKDIR (\S+)$", stage, re.M)
    root = dest / workdir.lstrip("/")
    for line in re.findall(r"^COPY (?!--)(.+)$", stage, re.M):
        *sources, target = line.split()
        for source in sources:
            src = REPO / source
            to = root / target / src.name if target.endswith("/") else root / target
            if src.is_dir():
                shutil.copytree(src, to, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                to.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, to, follow_symlinks=False)
    return root


def test_the_build_stage_builds_a_wheel_that_carries_every_role_manifest(
    ansible_env: dict[str, str], tmp_path: Path
) -> None:
    context = _build_stage_context(tmp_path / "stage")
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-cache-dir",
         "-q", "-w", str(tmp_path / "dist"), str(context)],
        ansible_env,
        cwd=tmp_path,
    )  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("sriov_dra-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        shipped = {n.removeprefix("sriov_dra/"): zf.read(n) for n in zf.namelist() if "/manifests/" in n}
    held = {
        p.relative_to(REPO / "roles" / p.relative_to(REPO).parts[1] / "files").as_posix(): p.read_bytes()
        for p in REPO.glob("roles/*/files/manifests/**/*.yaml")
    }
    assert len(held) >= 11
    assert shipped == held
