"""What the lab prints for a person: log places, the commands of the hints, the hold's timing."""

from __future__ import annotations

import io
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from sriov_dra_lab import binaries, console, lab_dir, real_stack, stack_base, topology

KUBECTL = Path("/cache/kubernetes/v1.36.3/bin/kubectl")


def _lab(
    tmp_path: Path,
    nodes: tuple[str, ...] = ("lab-node-1", "lab-node-2"),
    policy_namespace: str = stack_base.POLICY_NAMESPACE,
    layout: type[topology.NodeLayout] = topology.NodeLayout,
    multus_mode: str = "thin",
    plugin_as_daemonset: bool = True,
) -> Any:
    """The attributes of a running LabStack the hints read."""
    workdir = tmp_path / ".lab"
    return SimpleNamespace(
        workdir=workdir,
        lab_id="ab12",
        plugin_as_daemonset=plugin_as_daemonset,
        options=SimpleNamespace(multus_mode=multus_mode),
        cp=SimpleNamespace(
            kubeconfig=workdir / "controlplane" / "admin.kubeconfig", server="https://127.0.0.1:1"
        ),
        nodes=[
            SimpleNamespace(
                name=n,
                policy_namespace=policy_namespace,
                layout=layout.for_node(workdir, "ab12", n, i),
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


def test_netns_command_on_real_nodes_reads_the_pods_ready_sandbox_pid_through_crictl_on_its_node(
    tmp_path: Path,
) -> None:
    lab = _lab(tmp_path, layout=real_stack.RealNodeLayout)
    expr = console.netns_command(lab, "ai", "p")
    crictl = (
        f"nsenter --mount={lab.workdir.resolve()}/nodes/$1/ns/mnt {KUBECTL.parent / 'crictl'} "
        "--runtime-endpoint=unix:///run/containerd/containerd.sock"
    )
    assert expr == (
        "\"$(set -- $(kubectl -n ai get pod p -o jsonpath='{.spec.nodeName} {.metadata.uid}'); "
        f"{crictl} inspectp -o go-template --template '/proc/{{{{.info.pid}}}}/ns/net' "
        f'$({crictl} pods -q --state=ready --label=io.kubernetes.pod.uid=$2 2>/dev/null) 2>/dev/null)"'
    )
    # the node's mount-namespace file the expression enters is the one the real node binds
    assert lab.nodes[0].layout.mountns_file == lab.workdir / "nodes" / "lab-node-1" / "ns" / "mnt"


def test_lab_up_hints_show_the_kubectl_exec_that_lists_the_pods_rail_interfaces(tmp_path: Path) -> None:
    text = console.lab_hints(_lab(tmp_path))
    assert "kubectl -n ai-workloads exec gpu-sriov-pairs-demo -- ip -o -f inet addr show" in text


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


def test_lab_up_hints_remove_the_example_with_kubectl_delete_f(tmp_path: Path) -> None:
    text = console.lab_hints(_lab(tmp_path))
    assert "kubectl delete -f examples/gpu-nic-pairs/multus-auto-gpu-nic-pairs.yaml" in text
    assert "kubectl delete namespace" not in text


@pytest.mark.parametrize(
    "files",
    [
        [console.PAIRS_EXAMPLE],
        [console.ONE_NETWORK_EXAMPLE / "one-network.yaml", console.ONE_NETWORK_EXAMPLE / "pod.yaml"],
        [
            console.OPERATOR_EXAMPLE / "workload.yaml",
            console.OPERATOR_EXAMPLE / "sriov-networks-and-policies.yaml",
        ],
    ],
    ids=["pairs", "one-network", "operator"],
)
def test_removal_command_deletes_exactly_the_example_files_none_of_which_lists_an_install_namespace(
    files: list[Path],
) -> None:
    assert console.removal_commands(files) == ["kubectl delete " + " ".join(f"-f {f}" for f in files)]
    listed = {
        d["metadata"]["name"]
        for f in files
        for d in yaml.safe_load_all((console.REPO / f).read_text())
        if isinstance(d, dict) and d.get("kind") == "Namespace"
    }
    assert listed == {"ai-workloads"}, "deleting an example's files must leave the install namespaces"


def test_operator_managed_hints_give_the_operator_example_and_not_the_direct_policies(tmp_path: Path) -> None:
    text = console.lab_hints(_lab(tmp_path, policy_namespace=stack_base.OPERATOR_NAMESPACE))
    assert "gpu-nic-pairs" not in text and "dual-rail-netdevice-policy" not in text
    assert "kubectl apply -f examples/operator-two-rails/workload.yaml" in text
    assert "kubectl apply -f examples/operator-two-rails/sriov-networks-and-policies.yaml" in text
    assert (
        "kubectl delete -f examples/operator-two-rails/workload.yaml "
        "-f examples/operator-two-rails/sriov-networks-and-policies.yaml"
    ) in text
    assert "lab up --operator-managed)" not in text
    assert "--no-node-checks" in text and "--policy-namespace sriov-network-operator --no-node-checks" in text


@pytest.mark.parametrize("mode", ["thin", "thick"])
def test_lab_up_hints_give_the_preflight_in_a_node_namespace_with_the_labs_multus_mode_from_the_host_and_as_playbook(
    tmp_path: Path, mode: str
) -> None:
    lab = _lab(tmp_path, multus_mode=mode)
    text = console.lab_hints(lab)
    layout = lab.nodes[0].layout
    kubeconfig = lab.cp.kubeconfig
    assert (
        f"nsenter --mount={layout.mountns_file} --net={layout.netns_path} "
        f"{console.sriov_dra_command()} preflight --kubeconfig {kubeconfig} --multus-mode {mode}    # on node"
    ) in text
    assert f"preflight --kubeconfig {kubeconfig} --no-node-checks" in text
    ansible = lab.workdir / "ansible"
    assert (f"K8S_AUTH_KUBECONFIG={kubeconfig} ANSIBLE_COLLECTIONS_PATH={ansible / 'collections'} ") in text
    assert f"sriovnet.dra.preflight -i {ansible / 'inventory.yml'}" in text


def test_lab_up_hints_give_a_plugin_processs_checkpoint_to_the_node_preflight(tmp_path: Path) -> None:
    """A plugin process writes its checkpoint where the lab's guard reads it, not the DaemonSet's path."""
    lab = _lab(tmp_path, plugin_as_daemonset=False)
    layout = lab.nodes[0].layout
    assert (
        f"--multus-mode thin --plugin-checkpoint {layout.plugin_state_dir / 'checkpoint.json'}    # on node"
    ) in console.lab_hints(lab)


def test_up_with_no_hold_prints_no_hints_and_says_the_lab_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lab = _lab(tmp_path)
    stopped: list[bool] = []
    lab.logs_dir = lab.workdir / "logs"
    lab.stop = lambda: stopped.append(True)
    monkeypatch.setattr(console, "start", lambda *a, **k: lab)
    assert console.up(workdir=lab.workdir, wait=False) == 0
    out = capsys.readouterr().out
    assert stopped == [True]
    assert "export KUBECONFIG" not in out and "kubectl" not in out
    assert console.NO_HOLD in out and out.rstrip().endswith("lab stopped")


def test_pod_hints_print_the_netns_and_the_inspect_command_of_the_demo_table(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    netns = "/var/run/netns/sdlab12-c95ab6ec-9572"
    text = console.pod_hints(lab, "ai-workloads", "gpu-sriov-pairs-demo", node="lab-node-2", netns=netns)
    first, path, then = text.splitlines()[:3]
    assert first.endswith("network namespace:") and path == netns and then == "In another shell:"
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
    assert lab_dir.reset_workdir(other) == [] and (other / "notes.txt").exists()
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
        assert lab_dir.reset_workdir(lab) == []
        assert not lab.exists(), marker
