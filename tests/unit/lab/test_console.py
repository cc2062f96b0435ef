"""What the lab prints for a person: log places, the commands of the hints, the hold's timing."""

from __future__ import annotations

import io
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sriov_dra.lab import binaries, console, stack, topology

KUBECTL = Path("/cache/kubernetes/v1.36.3/bin/kubectl")


def _lab(tmp_path: Path, nodes: tuple[str, ...] = ("lab-node-1", "lab-node-2")) -> Any:
    """The attributes of a running LabStack the hints read."""
    workdir = tmp_path / ".lab"
    return SimpleNamespace(
        workdir=workdir,
        lab_id="ab12",
        cp=SimpleNamespace(
            kubeconfig=workdir / "controlplane" / "admin.kubeconfig", server="https://127.0.0.1:1"
        ),
        nodes=[
            SimpleNamespace(
                name=n,
                policy_namespace=stack.POLICY_NAMESPACE,
                layout=topology.NodeLayout.for_node(workdir, "ab12", n, i),
            )
            for i, n in enumerate(nodes, start=1)
        ],
    )


@pytest.fixture(autouse=True)
def _kubectl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binaries, "find", lambda name: KUBECTL.parent / name)


def test_log_places_name_one_logs_dir_with_controlplane_nodes_and_operator() -> None:
    line = console.log_places(Path("/w/.lab"))
    assert line.startswith(
        "Component logs: /w/.lab/logs/ (controlplane/<component>.log and audit.log, <node>/<service>.log, operator.log)"
    )
    assert "/w/.lab/ansible/ansible-*.log" in line


def test_netns_command_finds_the_sandbox_the_kubelet_simulator_names(tmp_path: Path) -> None:
    expr = console.netns_command(_lab(tmp_path), "ai", "p")
    assert expr == (
        "\"$(ls -d /var/run/netns/sdlab12-$(kubectl -n ai get pod p -o jsonpath='{.metadata.uid}' "
        '| cut -c1-8)-*)"'
    )


def test_lab_up_hints_give_kubeconfig_kubectl_an_example_inspect_and_orphans(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    text = console.lab_hints(lab)
    assert f"export KUBECONFIG={lab.cp.kubeconfig}" in text
    assert f"export PATH={KUBECTL.parent}:$PATH" in text
    assert "kubectl apply -f examples/gpu-nic-pairs/multus-auto-gpu-nic-pairs.yaml" in text
    assert 'inspect gpu-sriov-pairs-demo -n ai-workloads --netns "$(ls -d /var/run/netns/sdlab12-' in text
    checkpoint = lab.workdir / "nodes" / "<node>" / "var" / "lib" / "sriov-dra" / "checkpoint.json"
    assert f"orphans --node <node> --checkpoint {checkpoint}" in text
    assert "lab up --operator-managed" in text
    assert text.splitlines()[-1] == console.log_places(lab.workdir)


def test_pod_hints_print_the_netns_and_the_inspect_command_of_the_demo_table(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    netns = "/var/run/netns/sdlab12-c95ab6ec-9572"
    text = console.pod_hints(lab, "ai-workloads", "gpu-sriov-pairs-demo", node="lab-node-2", netns=netns)
    assert f"network namespace {netns}" in text.splitlines()[0]
    assert f"inspect gpu-sriov-pairs-demo -n ai-workloads --netns {netns}" in text
    assert (
        "orphans --node lab-node-2 --checkpoint "
        + str(lab.workdir / "nodes" / "lab-node-2" / "var" / "lib" / "sriov-dra" / "checkpoint.json")
        in text
    )


def test_hold_returns_the_seconds_until_enter(monkeypatch: pytest.MonkeyPatch) -> None:
    class SlowStdin(io.StringIO):
        def readline(self, size: int | None = -1) -> str:
            time.sleep(0.2)
            return "\n"

    monkeypatch.setattr("sys.stdin", SlowStdin())
    held = console.hold("press Enter")
    assert 0.2 <= held < 5


def test_reset_workdir_removes_a_lab_workdir_and_leaves_any_other_directory(tmp_path: Path) -> None:
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep")
    assert stack.reset_workdir(other) == [] and (other / "notes.txt").exists()
    for marker in ("lab.json", "controlplane", "admin.kubeconfig"):
        lab = tmp_path / f"lab-{marker}"
        (lab / "logs").mkdir(parents=True)
        target = lab / marker
        if marker == "lab.json":
            target.write_text('{"labId": "zz99"}\n')
        elif marker == "controlplane":
            target.mkdir()
        else:
            target.write_text("old lab up layout\n")
        assert stack.reset_workdir(lab) == []
        assert not lab.exists(), marker
