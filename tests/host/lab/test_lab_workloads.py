"""Which of the roles' workloads the lab deploys, per node kind, and how their Pods are told apart from leftovers.

On real nodes Multus (thin or thick) runs as the multus role's DaemonSet (the Multus image of that mode
assembled from the pinned binaries), the guard and the plugin as their roles' DaemonSets and the operator as the operator
role's Deployment (the built product image), each pinned by digest; simulated nodes have no container
runtime, so every ``*_deploy_*`` switch is off there. The play in ``playbooks/lab.yml`` sets none of them, so the inventory decides.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from sriov_dra_lab import images, leftovers, multus_pods, plugin_pods, real_stack
from sriov_dra_lab.stack_base import DRIVER_NAME, LabOptions
from sriov_dra_lab.stack_install import StackInstall

REPO = Path(__file__).resolve().parents[3]
SWITCHES = (
    "multus_deploy_daemonset",
    "guard_deploy_daemonset",
    "plugin_deploy_daemonset",
    "operator_deploy_deployment",
)
PRODUCT = images.BuiltImage(
    key=images.PRODUCT,
    name="sriov-dra.local/sriov-dra:0.1.0",
    digest="sha256:" + "ab" * 32,
    archive=Path("/nonexistent.oci.tar"),
)


MULTUS_THIN = images.BuiltImage(
    key=images.MULTUS_THIN,
    name="sriov-dra.local/multus-cni:v4.3.0",
    digest="sha256:" + "cd" * 32,
    archive=Path("/nonexistent-multus.oci.tar"),
)


MULTUS_THICK = images.BuiltImage(
    key=images.MULTUS_THICK,
    name="sriov-dra.local/multus-cni:v4.3.0-thick",
    digest="sha256:" + "ef" * 32,
    archive=Path("/nonexistent-multus-thick.oci.tar"),
)


class _Install(StackInstall):
    """StackInstall with only the options it reads, and fixed built images instead of the cache's index."""

    def __init__(self, options: LabOptions) -> None:
        self.options = options

    def built_image(self, key: str) -> images.BuiltImage:
        return {images.PRODUCT: PRODUCT, images.MULTUS_THIN: MULTUS_THIN, images.MULTUS_THICK: MULTUS_THICK}[
            key
        ]


def test_the_lab_playbook_sets_no_deploy_switch_so_the_inventory_decides() -> None:
    plays = yaml.safe_load((REPO / "playbooks" / "lab.yml").read_text())
    set_in_plays = [(p["name"], k) for p in plays for k in p.get("vars", {}) if k in SWITCHES]
    assert len(plays) == 3  # not vacuous: the cluster play and the two node plays
    assert set_in_plays == []


def test_simulated_nodes_deploy_no_workload(tmp_path: Path) -> None:
    found = _Install(LabOptions(workdir=tmp_path))._deploy_vars()
    assert found == dict.fromkeys(SWITCHES, False)


DIGEST_REF = f"sriov-dra.local/sriov-dra:0.1.0@sha256:{'ab' * 32}"


def test_real_nodes_deploy_thin_multus_the_guard_the_plugin_and_the_operator_from_the_built_images_by_digest(
    tmp_path: Path,
) -> None:
    install = _Install(LabOptions(workdir=tmp_path, real_nodes=True))
    found = install._deploy_vars()
    assert found["guard_image"] == found["plugin_image"] == found["operator_image"] == DIGEST_REF
    assert found["multus_image"] == f"sriov-dra.local/multus-cni:v4.3.0@sha256:{'cd' * 32}"
    assert [k for k in SWITCHES if not found[k]] == []
    assert install.node_images() == [PRODUCT, MULTUS_THIN]  # imported before the kubelet starts


def test_the_plugin_daemonset_reads_each_nodes_fake_tree_at_one_node_path_and_runs_only_on_labelled_nodes(
    tmp_path: Path,
) -> None:
    found = _Install(LabOptions(workdir=tmp_path, real_nodes=True))._deploy_vars()
    assert found["plugin_sysfs_root"] == plugin_pods.SYSFS_ROOT
    assert found["plugin_cdi_root"] == plugin_pods.CDI_ROOT
    assert found["plugin_node_selector"] == {plugin_pods.SRIOV_READY_LABEL: "true"}
    # Each node binds its own tree and CDI directory at those node paths (real_stack.node_binds).
    layout = real_stack.RealNodeLayout.for_node(tmp_path, "abcd", "lab-node-1", 1)
    binds = dict((target, source) for source, target in real_stack.node_binds(layout))
    assert binds[plugin_pods.SYSFS_ROOT] == layout.sysfs_root
    assert binds[plugin_pods.CDI_ROOT] == layout.cdi_root
    # The checkpoint is the role's default, under the kubelet's plugins directory on the node's disk.
    assert layout.plugin_state_dir == layout.host_dir("/var/lib/kubelet") / "plugins" / DRIVER_NAME


def test_real_nodes_with_thick_multus_run_the_thick_image_as_the_multus_roles_daemonset_on_labelled_nodes(
    tmp_path: Path,
) -> None:
    install = _Install(LabOptions(workdir=tmp_path, real_nodes=True, multus_mode="thick"))
    found = install._deploy_vars()
    assert found["multus_deploy_daemonset"] is True
    assert found["multus_image"] == f"sriov-dra.local/multus-cni:v4.3.0-thick@sha256:{'ef' * 32}"
    # the daemon starts only where the node run wrote its daemon config (the lab labels the node then)
    assert found["multus_node_selector"] == {multus_pods.CONFIG_LABEL: "true"}
    assert install.node_images() == [PRODUCT, MULTUS_THICK]


def test_thin_multus_daemonset_runs_on_every_node(tmp_path: Path) -> None:
    found = _Install(LabOptions(workdir=tmp_path, real_nodes=True))._deploy_vars()
    assert found["multus_deploy_daemonset"] is True and "multus_node_selector" not in found


def test_real_nodes_without_the_operator_deploy_no_operator(tmp_path: Path) -> None:
    found = _Install(LabOptions(workdir=tmp_path, real_nodes=True, operator=False))._deploy_vars()
    assert [k for k in SWITCHES if found[k]] == [
        "multus_deploy_daemonset",
        "guard_deploy_daemonset",
        "plugin_deploy_daemonset",
    ]
    assert "operator_image" not in found


class _Crictl:
    """LABELLED FAKE of a real node's ``crictl pods -o json`` (the CRI boundary), listing ``items``."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def crictl(self, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        assert args == ("pods", "-o", "json")
        return subprocess.CompletedProcess(list(args), 0, json.dumps({"items": self.items}), "")


def _box(sandbox_id: str, namespace: str, name: str) -> dict[str, Any]:
    return {"id": sandbox_id, "metadata": {"namespace": namespace, "name": name}, "state": "SANDBOX_READY"}


ITEMS = [
    _box("aaa", "sriov-network-operator", "sriov-dra-operator-1"),
    _box("bbb", "ai-workloads", "gpu-sriov-pairs-demo"),
    _box("ccc", "kube-system", "kube-multus-ds-x"),
]


def test_a_workload_sandbox_is_a_leftover_and_the_lab_services_sandboxes_are_not() -> None:
    node: Any = _Crictl(ITEMS)
    assert real_stack.sandboxes(node) == ["ai-workloads/gpu-sriov-pairs-demo SANDBOX_READY"]
    assert real_stack.service_sandbox_ids(node) == {"aaa", "ccc"}


def test_a_stopped_sandbox_of_a_deleted_pod_awaits_the_kubelets_gc_and_is_no_leftover() -> None:
    stopped = {**_box("ddd", "ai-workloads", "gone"), "state": "SANDBOX_NOTREADY"}
    stopped["metadata"] = {**stopped["metadata"], "uid": "uid-gone"}
    kept = {**_box("eee", "ai-workloads", "still-here"), "state": "SANDBOX_NOTREADY"}
    kept["metadata"] = {**kept["metadata"], "uid": "uid-live"}
    node: Any = _Crictl([*ITEMS, stopped, kept])
    # Without the API's Pods every workload sandbox counts; with them, only the deleted Pod's stopped one is skipped.
    assert len(real_stack.sandboxes(node)) == 3
    assert real_stack.sandboxes(node, {"uid-live"}) == [
        "ai-workloads/gpu-sriov-pairs-demo SANDBOX_READY",  # ready: counted even when its Pod is gone
        "ai-workloads/still-here SANDBOX_NOTREADY",  # its Pod is still in the API
    ]


def test_a_host_local_reservation_names_its_holder_by_its_first_line(tmp_path: Path) -> None:
    held = tmp_path / "10.244.1.7"
    held.write_text("aaa\r\neth0")
    assert leftovers._holder(held) == "aaa"
    assert leftovers._holder(tmp_path / "gone") == ""
