"""Molecule scenarios of every role (default driver, localhost), each with its idempotence pass.

``vfs`` runs on a fake sysfs tree with the fake SR-IOV kernel, ``multus`` and ``guard`` in
temporary CNI directories, ``plugin``, ``operator`` and ``preflight`` against the session's real
control plane (its admin kubeconfig as ``K8S_AUTH_KUBECONFIG``). A scenario passes only when
molecule reports converge, idempotence (a second converge with zero changes) and verify as
successful.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.ansible.conftest import run

NODE_SCENARIOS = ["vfs", "multus", "guard"]
CLUSTER_SCENARIOS = ["plugin", "operator", "preflight"]
STEPS = ("converge", "idempotence", "verify")


def _molecule(scenario: str, env: dict[str, str]) -> str:
    proc = run(["molecule", "test", "-s", scenario], env, timeout_s=580)
    out = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    for step in STEPS:
        # "vfs ➜ converge: Executed: Successful" with colours, "vfs > converge: ..." in the plain summary
        assert re.search(rf"{scenario} (?:➜|>) {step}: Executed: Successful", out), (
            f"{step} did not succeed:\n{out[-3000:]}"
        )
    return out


@pytest.mark.parametrize("scenario", NODE_SCENARIOS, ids=[f"molecule-{s}" for s in NODE_SCENARIOS])
def test_node_scenario_converges_idempotently_and_verifies(
    scenario: str, ansible_env: dict[str, str]
) -> None:
    _molecule(scenario, ansible_env)


@pytest.mark.parametrize("scenario", CLUSTER_SCENARIOS, ids=[f"molecule-{s}" for s in CLUSTER_SCENARIOS])
def test_cluster_scenario_converges_idempotently_and_verifies(
    scenario: str, ansible_env: dict[str, str], control_plane: object
) -> None:
    kubeconfig = Path(control_plane.kubeconfig)  # type: ignore[attr-defined]
    _molecule(scenario, {**ansible_env, "K8S_AUTH_KUBECONFIG": str(kubeconfig)})
