"""``ansible-galaxy collection build`` produces a tarball that installs and whose modules import and run."""

from __future__ import annotations

import json
import sys
import tarfile
from pathlib import Path

import pytest
from tests.ansible import collection_build
from tests.ansible.conftest import run

from sriov_dra.host import fakesysfs

MODULES = ["sriov_numvfs", "sriov_facts", "cni_config", "preflight"]


@pytest.fixture(scope="module")
def installed(
    tmp_path_factory: pytest.TempPathFactory, ansible_env: dict[str, str]
) -> tuple[Path, dict[str, str]]:
    work = tmp_path_factory.mktemp("build")
    tarball = collection_build.build(work / "dist", ansible_env)
    dest = work / "installed"
    run(
        ["ansible-galaxy", "collection", "install", "--offline", "--force", "-p", str(dest), str(tarball)],
        ansible_env,
    )
    return tarball, {**ansible_env, "ANSIBLE_COLLECTIONS_PATH": str(dest)}


def test_tarball_holds_collection_content_only(installed: tuple[Path, dict[str, str]]) -> None:
    tarball, _ = installed
    with tarfile.open(tarball) as tf:
        tops = {name.split("/", 1)[0] for name in tf.getnames()}
    assert tops == {
        "MANIFEST.json",
        "FILES.json",
        "README.md",
        "meta",
        "plugins",
        "roles",
        "playbooks",
        "changelogs",
        "collection",
    }


@pytest.mark.parametrize("module", MODULES)
def test_installed_module_imports_and_documents_itself(
    installed: tuple[Path, dict[str, str]], module: str
) -> None:
    _, env = installed
    root = env["ANSIBLE_COLLECTIONS_PATH"]
    code = (
        f"import ansible_collections.sriovnet.dra.plugins.modules.{module} as m; print(m.argspec() and 'ok')"
    )
    assert run([sys.executable, "-c", code], {**env, "PYTHONPATH": root}).stdout.strip() == "ok"
    doc = json.loads(run(["ansible-doc", "--json", f"sriovnet.dra.{module}"], env).stdout)
    assert doc[f"sriovnet.dra.{module}"]["doc"]["module"] == module


def test_installed_module_runs_against_a_fake_tree(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    _, env = installed
    fakesysfs.build(tmp_path, fakesysfs.two_root_pfs(2))
    proc = run(
        ["ansible", "localhost", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}",
         "-m", "sriovnet.dra.sriov_facts", "-a", f"host_root={tmp_path}", "-o"],
        env,
    )  # fmt: skip
    assert '"pcie_root": "pci0000:80"' in proc.stdout or "pci0000:80" in proc.stdout


def test_installed_playbooks_resolve_by_fqcn(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    _, env = installed
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  children:\n    sriov_dra_nodes:\n      hosts:\n        localhost:\n")
    for playbook in ("site", "preflight", "drain", "cleanup"):
        run(["ansible-playbook", "--syntax-check", "-i", str(inventory), f"sriovnet.dra.{playbook}"], env)
