"""docs/install.md, followed against a lab as a user follows it: its marked commands, in the page's order.

A one-node lab of its own stands for the cluster (the page ends by uninstalling, which the session's lab
must not undergo): a registry on the node's bridge (Debian's ``docker-registry``, which the node's
containerd pulls from over plain HTTP) for ``$REGISTRY``, the lab's own Multus image pushed there for
``$MULTUS``, the lab's node as the inventory's host. The lab starts installed by its own roles run
(``playbooks/lab.yml``); the page's ``site.yml`` then converges every workload to the pushed images. Each
step is the page's block, run by bash in the checkout with the page's variables and a ``HOME`` of its
own; exported variables carry over to the next step, as in one shell. The one thing a user does by
hand, editing the copied template, is done here with the lab's values (how to reach its node, its
primary network and fake sysfs, thin Multus); the images come from ``make push``, beside the inventory.

What each step must show: ``make push`` prints the reference by digest and the registry serves the
digest the build computed; ``site.yml`` (its inventory check first) rolls every workload to the pushed
references, which the node pulled from the registry; the preflight passes; the first Pod gets ``dra0``
on its rail and ``inspect`` passes; ``kubectl delete -f`` of the example leaves the plugin and the guard
running and nothing behind; ``cleanup.yml`` removes the plugin, the guard and the operator.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from tests import install_guide
from tests.e2e.helpers import wait_clean

from sriov_dra_lab import binaries, images, push_registry, stack, stack_base

REPO = Path(__file__).resolve().parents[2]
LAB_ONLY_HOST_VARS = ("ansible_user", "ansible_become")
"""The template's node access, replaced by the lab's (each host's modules run inside its node)."""


def _edit_inventory(path: Path, lab: Any) -> None:
    """The user's edit of the copied template, with the lab's values.

    Kept from the template: its layout and every field the lab does not need to change (namespaces,
    policy namespace, the operator). From the lab's own inventory: its hosts (named as its Nodes, reached
    inside each node), its primary network, Multus mode and fake sysfs; never an image (``make push``
    wrote those beside the inventory). ``vfs_persist: false``: the lab's nodes share this machine's
    ``/etc/systemd``.
    """
    doc = yaml.safe_load(path.read_text())
    lab_doc = yaml.safe_load((lab.workdir / "ansible" / "inventory.yml").read_text())["all"]
    template_vars = doc["all"]["vars"]
    lab_vars = {k: v for k, v in lab_doc["vars"].items() if not k.endswith("_image")}
    assert template_vars["plugin_policy_namespace"] == lab_vars["plugin_policy_namespace"]
    doc["all"]["vars"] = {**template_vars, **lab_vars, "vfs_persist": False}
    doc["all"]["hosts"] = lab_doc["hosts"]
    nodes = doc["all"]["children"]["sriov_dra_nodes"]
    nodes["vars"] = {k: v for k, v in nodes["vars"].items() if k not in LAB_ONLY_HOST_VARS}
    nodes["hosts"] = lab_doc["children"]["sriov_dra_nodes"]["hosts"]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


class Guide:
    """Runs the page's steps in one environment, as one shell would (exported variables carry over)."""

    def __init__(self, env: dict[str, str], state: Path) -> None:
        self.env = env
        self.state = state
        self.state.write_text("")
        self.steps = dict(install_guide.steps())

    def run(self, step: str, *, timeout_s: float = 900) -> str:
        script = f"set -euo pipefail\nsource {self.state}\n{self.steps[step]}\nexport -p > {self.state}\n"
        started = time.monotonic()
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        print(f"install guide: step {step} took {time.monotonic() - started:.0f} s")
        assert done.returncode == 0, (
            f"step {step} exited {done.returncode}:\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
        )
        return done.stdout


@pytest.fixture(scope="module")
def guide_lab(lab: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[stack.LabStack]:
    """A one-node lab on a real node (started after the session's lab proved the machine can)."""
    own = stack.LabStack(
        stack_base.LabOptions(workdir=tmp_path_factory.mktemp("guide"), nodes=1, real_nodes=True)
    )
    own.start()
    try:
        yield own
    finally:
        own.stop()


def _pushed_multus(lab: Any, registry: push_registry.PushRegistry) -> str:
    """The lab's thin Multus image, pushed by digest: the stand-in for upstream's image in ``$MULTUS``."""
    built = lab.built_image(images.MULTUS_THIN)
    target = f"{registry.host}/multus-cni:{built.name.rsplit(':', 1)[1]}"
    copy = ["skopeo", "copy", "--quiet", "--preserve-digests", "--dest-tls-verify=false"]
    subprocess.run(
        [*copy, f"oci-archive:{built.archive}", f"docker://{target}"],
        check=True,
        timeout=300,
    )
    return target


@pytest.mark.timeout(1800)  # the lab's start and the page's site.yml dominate; see the module docstring
def test_the_install_guide_installs_a_first_pod_on_its_rail_and_uninstalls(
    guide_lab: stack.LabStack, tmp_path: Path
) -> None:
    lab = guide_lab
    missing = push_registry.missing_tools()
    assert not missing, f"docs/install.md needs {missing} (tools/install-debian-deps.sh installs them)"
    registry = lab.start_push_registry()
    multus = _pushed_multus(lab, registry)
    home = tmp_path / "home"
    home.mkdir()
    inherited = {  # a user's shell: no test run's Ansible or venv settings, no outer make's (its make[1] banners)
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("K8S_AUTH_", "ANSIBLE_", "VIRTUAL_ENV"))
        and k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    }
    env = {
        **inherited,
        # the page's values
        "REGISTRY": f"{registry.host}/platform",
        "INVENTORY": str(home / "sriov-dra" / "inventory.yml"),
        "MULTUS": multus,
        "KUBECONFIG": str(lab.cp.kubeconfig),
        "K8S_AUTH_KUBECONFIG": str(lab.cp.kubeconfig),
        # the lab's registry is plain HTTP; the build cache is this machine's (HOME is the test's)
        "PUSH_ARGS": "--insecure",
        "SRIOV_DRA_CACHE": str(binaries.cache_root()),
        "HOME": str(home),
        "PATH": f"{binaries.find('kubectl').parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
    }
    guide = Guide(env, tmp_path / "shell-state")
    inventory = Path(env["INVENTORY"])
    apps = client.AppsV1Api(lab.api)
    guide.run("inventory")
    _edit_inventory(inventory, lab)

    pushed = guide.run("push").strip().splitlines()[-1]
    built = subprocess.run(  # the build make push made (cached now): its archive and manifest digest
        ["bash", str(REPO / "tools" / "build-image.sh"), "--product"],
        env=env, capture_output=True, text=True, timeout=600, check=True,
    ).stdout.split()  # fmt: skip
    digest = built[1]
    assert pushed == f"{env['REGISTRY']}/sriov-dra:{lab.workload_image().name.rsplit(':', 1)[1]}@{digest}"
    with urllib.request.urlopen(
        urllib.request.Request(
            f"http://{registry.host}/v2/platform/sriov-dra/manifests/{digest}",
            headers={"Accept": images.MEDIA_MANIFEST},
        ),
        timeout=30,
    ) as served:
        assert "sha256:" + hashlib.sha256(served.read()).hexdigest() == digest
    beside = yaml.safe_load((inventory.parent / "group_vars" / "all" / "sriov-dra-images.yml").read_text())
    multus_ref = f"{multus}@{lab.built_image(images.MULTUS_THIN).digest}"
    assert beside == {"sriov_dra_image": pushed, "multus_image": multus_ref}

    guide.run("collection")
    installed = guide.run("site")
    assert "PLAY [Check the inventory (nothing is installed)]" in installed  # first, before any role
    assert "failed=0" in installed.split("PLAY RECAP")[-1]
    for namespace, name in (
        (stack_base.POLICY_NAMESPACE, "sriov-dra-plugin"),
        (stack_base.POLICY_NAMESPACE, "sriov-dra-guard"),
    ):
        spec = apps.read_namespaced_daemon_set(name, namespace).spec.template.spec
        assert {c.image for c in spec.containers} == {pushed}
    for node in lab.nodes:
        assert node.real is not None
        pulled = node.real.ctr("images", "ls", "-q", f"name=={registry.host}/platform/sriov-dra@{digest}")
        assert pulled.stdout.strip(), f"{node.name} did not pull the pushed image from the registry"

    guide.run("preflight")  # exits non-zero on any failed check (site.yml ran the playbook's already)

    first = guide.run("first-pod")
    assert re.search(r"\bdra0\b.*\b192\.0\.2\.\d+/24\b", first), first

    guide.run("remove-example")
    for name in ("sriov-dra-plugin", "sriov-dra-guard"):
        daemon_set = apps.read_namespaced_daemon_set(name, stack_base.POLICY_NAMESPACE)
        assert daemon_set.status.number_ready == len(lab.nodes), (
            f"{name} after kubectl delete -f of the example"
        )
    found = wait_clean(lab)
    assert found.empty, found.describe()

    guide.run("uninstall")
    left = [d.metadata.name for d in apps.list_namespaced_daemon_set(stack_base.POLICY_NAMESPACE).items]
    assert left == [], f"cleanup.yml left {left}"
