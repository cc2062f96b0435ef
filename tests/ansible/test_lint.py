"""ansible-lint with the production profile over the collection (roles, playbooks, molecule, galaxy.yml)."""

from __future__ import annotations

from tests.ansible.conftest import run


def test_ansible_lint_production_profile_passes(ansible_env: dict[str, str]) -> None:
    proc = run(
        ["ansible-lint", "--profile", "production", "-f", "pep8"], ansible_env, timeout_s=580, check=False
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "Failed" not in out
