"""``ansible-playbook sriovnet.dra.site`` refuses an inventory that cannot install, before anything is installed.

Against the real test control plane, with one node host (this machine, its CNI directories under a
temporary root): an image still carrying the example's placeholder digest, a Multus image the same, a host
that is not a Kubernetes Node, a host whose tasks do not run as root (its interpreter drops to ``nobody``),
a policy namespace holding none of the cluster's policies, and an operator-managed install whose plugin
watches another namespace are each refused naming the field and the fix, and nothing is installed: no
Multus daemon config or guard conflist on the node, no plugin namespace in the cluster. The same
inventory, corrected, passes ``sriovnet.dra.inventory_check``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from tests.ansible.conftest import REPO, run

from sriov_dra.kube import apply

NODE = "sriovnet-inventory-node"
NAMESPACE = "sriovnet-inventory-plugin"
IMAGE = f"registry.example.com/sriov-dra:0.1.0@sha256:{'ab' * 32}"
MULTUS = f"registry.example.com/multus-cni:v4.3.0-thick@sha256:{'cd' * 32}"
CRDS = REPO / "runtime" / "sriov_dra" / "manifests" / "crds"


@pytest.fixture(scope="module")
def node(api: Any) -> Iterator[str]:
    """A Node object (no kubelet) for the inventory host, and the plugin's CRDs."""
    core = k8s.CoreV1Api(api)
    core.create_node(
        k8s.V1Node(metadata=k8s.V1ObjectMeta(name=NODE, labels={"kubernetes.io/hostname": NODE}))
    )
    crds = [d for f in sorted(CRDS.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    apply.apply_objects(api, crds)
    apply.wait_crds_established(api, [d["metadata"]["name"] for d in crds])
    try:
        yield NODE
    finally:
        core.delete_node(NODE)


def _inventory(tmp_path: Path, **overrides: Any) -> Path:
    """An inventory written from the example's fields: this machine as node host ``NODE``, its CNI dir under tmp."""
    conf = tmp_path / "net.d"
    conf.mkdir(exist_ok=True)
    (conf / "10-flannel.conflist").write_text(
        json.dumps({"cniVersion": "1.0.0", "name": "cbr0", "plugins": []})
    )
    example = yaml.safe_load((REPO / "playbooks" / "inventory" / "example.yml").read_text())
    variables = {
        **example["all"]["vars"],
        "sriov_dra_image": IMAGE,
        "multus_image": MULTUS,
        "plugin_namespace": NAMESPACE,
        "multus_cni_conf_dir": str(conf),
        "guard_cni_conf_dir": str(conf),
        **overrides.pop("vars", {}),
    }
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        **overrides.pop("host", {}),
    }
    name = overrides.pop("name", NODE)
    assert not overrides, overrides
    doc = {
        "all": {
            "vars": variables,
            "hosts": {
                "localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
            },
            "children": {"sriov_dra_nodes": {"hosts": {name: host}}},
        }
    }
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _as_nobody(tmp_path: Path) -> str:
    """An interpreter that runs this Python as uid/gid 65534 (modules reach it on stdin: pipelining)."""
    wrapper = tmp_path / "python-as-nobody"
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    wrapper.write_text(
        f'#!/bin/sh\nexec {setpriv} --reuid=65534 --regid=65534 --clear-groups {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


@contextlib.contextmanager
def _policy_elsewhere(api: Any) -> Iterator[None]:
    """A SriovResourcePolicy in a namespace of its own, for the duration."""
    namespace = "sriovnet-inventory-policies"
    core = k8s.CoreV1Api(api)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
    policy = {
        "apiVersion": "sriovnetwork.k8snetworkplumbingwg.io/v1alpha1",
        "kind": "SriovResourcePolicy",
        "metadata": {"name": "rails", "namespace": namespace},
        "spec": {"configs": [{"resourceFilters": [{"pfNames": ["ens1f0"]}]}]},
    }
    apply.apply_objects(api, [policy])
    try:
        yield
    finally:
        core.delete_namespace(namespace, propagation_policy="Background")


REFUSALS = {
    "placeholder-image": (
        {
            "vars": {
                "sriov_dra_image": "registry.example.com/sriov-dra:0.1.0@sha256:REPLACE_WITH_THE_DIGEST_OF_YOUR_BUILD"
            }
        },
        "guard_image 'registry.example.com/sriov-dra:0.1.0@sha256:REPLACE_WITH_THE_DIGEST_OF_YOUR_BUILD' is not pinned "
        "by digest; run make push REPOSITORY=<registry>/<path>/sriov-dra INVENTORY=<your inventory>",
    ),
    "placeholder-multus": (
        {"vars": {"multus_image": "ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0-thick@sha256:REPLACE"}},
        "multus_image 'ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0-thick@sha256:REPLACE' is not pinned by digest",
    ),
    "not-a-node": (
        {"name": "worker-1.example.com"},
        "host worker-1.example.com: the cluster has no Node named 'worker-1.example.com' (sriov_dra_node_name, else "
        "the inventory host name)",
    ),
    "not-root": (
        {"host": {"ansible_python_interpreter": "AS_NOBODY"}},
        f"host {NODE}: tasks run as uid 65534",
    ),
    "policy-namespace": (
        {"vars": {"plugin_policy_namespace": "sriov-network-operator"}},
        "the cluster's SriovResourcePolicies are in sriovnet-inventory-policies, none in plugin_policy_namespace "
        "sriov-network-operator, which the plugin would watch",
    ),
    "operator-managed": (
        {"vars": {"vfs_from_policies": True}},
        "vfs_from_policies is true (an operator-managed install: SriovNetworkNodePolicies create the VFs and the "
        "operator writes the plugin's SriovResourcePolicies into operator_namespace sriov-network-operator), but "
        "plugin_policy_namespace is dra-driver-sriov",
    ),
    "guard-mode": (
        {"vars": {"guard_mode": "thin"}},
        "guard_mode is thin but multus_mode is thick",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_site_refuses_before_anything_is_installed(
    control_plane: Any, api: Any, node: str, ansible_env: dict[str, str], tmp_path: Path, case: str
) -> None:
    overrides, message = REFUSALS[case]
    overrides = json.loads(json.dumps(overrides).replace('"AS_NOBODY"', json.dumps(_as_nobody(tmp_path))))
    inventory = _inventory(tmp_path, **overrides)
    env = {**ansible_env, "K8S_AUTH_KUBECONFIG": str(control_plane.kubeconfig), "ANSIBLE_PIPELINING": "1"}
    with _policy_elsewhere(api) if case == "policy-namespace" else contextlib.nullcontext():
        refused = run(["ansible-playbook", "-i", str(inventory), "sriovnet.dra.site"], env, check=False)
    assert refused.returncode != 0
    text = " ".join(refused.stdout.split())  # folded messages read as one line
    assert message in text, refused.stdout[-4000:]
    assert "TASK [sriovnet.dra.multus : Write thick Multus's daemon config" not in refused.stdout
    assert sorted(p.name for p in (tmp_path / "net.d").iterdir()) == ["10-flannel.conflist"]
    with pytest.raises(k8s.ApiException) as missing:
        k8s.CoreV1Api(api).read_namespace(NAMESPACE)
    assert missing.value.status == 404


def test_inventory_check_passes_the_corrected_inventory_and_changes_nothing(
    control_plane: Any, node: str, ansible_env: dict[str, str], tmp_path: Path
) -> None:
    inventory = _inventory(tmp_path)
    env = {**ansible_env, "K8S_AUTH_KUBECONFIG": str(control_plane.kubeconfig)}
    passed = run(["ansible-playbook", "-i", str(inventory), "sriovnet.dra.inventory_check"], env)
    assert "failed=0" in passed.stdout and "changed=0" in passed.stdout
    assert sorted(p.name for p in (tmp_path / "net.d").iterdir()) == ["10-flannel.conflist"]
