"""ansible-lint with the production profile over the collection (roles, playbooks, molecule, galaxy.yml).

It runs with a fresh ``HOME``: ansible-lint also searches ``~/.ansible/collections``, and a copy of
this collection installed there by anything earlier (a molecule prerun, a user's ``ansible-galaxy
collection install``) would shadow the tree under test, so a new module would not resolve.
"""

from __future__ import annotations

from pathlib import Path

from tests.ansible.conftest import run


def test_ansible_lint_production_profile_passes(ansible_env: dict[str, str], tmp_path: Path) -> None:
    proc = run(
        ["ansible-lint", "--profile", "production", "-f", "pep8"],
        {**ansible_env, "HOME": str(tmp_path)},
        timeout_s=580,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "Failed" not in out
