"""``ansible-galaxy collection build`` produces a tarball that installs and whose modules, and the ``vfs``
role's boot program, import and run."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from tests.ansible import collection_build
from tests.ansible.conftest import LOCAL_PLAYBOOK, run

from sriov_dra_lab.fakes import fake_pci, fake_sysfs

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
        "LICENSE",
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
    fake_sysfs.build(tmp_path, fake_pci.two_root_pfs(2))
    proc = run(
        ["ansible", "localhost", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}",
         "-m", "sriovnet.dra.sriov_facts", "-a", f"host_root={tmp_path}", "-o"],
        env,
    )  # fmt: skip
    assert '"pcie_root": "pci0000:80"' in proc.stdout or "pci0000:80" in proc.stdout


def test_installed_vf_plan_filter_selects_nodes_and_pfs_through_the_shared_rules(
    installed: tuple[Path, dict[str, str]],
) -> None:
    _, env = installed
    policies = [
        {
            "metadata": {"namespace": "o", "name": "a"},
            "spec": {
                "nodeSelector": {"sriov": "true"},
                "numVfs": 4,
                "nicSelector": {"pfNames": ["ens1f0#0-1"]},
            },
        },
        {
            "metadata": {"namespace": "o", "name": "b"},
            "spec": {"nodeSelector": {"sriov": "false"}, "numVfs": 8, "nicSelector": {"pfNames": ["ens1f0"]}},
        },
    ]
    pfs = [{"pci_address": "0000:03:00.0", "name": "ens1f0", "vendor": "8086", "device_id": "1592"}]
    plan = f"sriovnet.dra.sriov_vf_plan({{'sriov': 'true'}}, {json.dumps(pfs)})"
    expr = "{{ " + json.dumps(policies) + " | " + plan + " | to_json }}"
    proc = run(["ansible", "localhost", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}",
                "-m", "debug", "-a", json.dumps({"msg": expr}), "-o"], env)  # fmt: skip
    result = json.loads(proc.stdout.split("=>", 1)[1])
    assert json.loads(result["msg"]) == [
        {"pf": "ens1f0", "pci_address": "0000:03:00.0", "num_vfs": 4, "vf_driver": None, "policies": ["o/a"]}
    ]


def _installed_vf_plan(
    env: dict[str, str], policies: list[dict[str, object]], pfs: list[dict[str, object]]
) -> str:
    """Run the installed ``sriov_vf_plan`` filter in ``ansible``; its output, success or failure."""
    plan = f"sriovnet.dra.sriov_vf_plan({{}}, {json.dumps(pfs)})"
    expr = "{{ " + json.dumps(policies) + " | " + plan + " | to_json }}"
    proc = subprocess.run(
        ["ansible", "localhost", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}",
         "-m", "debug", "-a", json.dumps({"msg": expr}), "-o"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return proc.stdout.strip() + "\n" + proc.stderr


def test_installed_vf_plan_reads_ids_ranges_and_externally_managed_pfs_as_the_operator_does(
    installed: tuple[Path, dict[str, str]],
) -> None:
    _, env = installed
    pfs = [
        {"pci_address": "0000:03:00.0", "name": "ens1f0", "vendor": "15b3", "device_id": "101d", "numvfs": 2}
    ]

    def policy(**spec: object) -> dict[str, object]:
        return {"metadata": {"namespace": "o", "name": "a"}, "spec": {"numVfs": 4, **spec}}

    upper = _installed_vf_plan(env, [policy(nicSelector={"vendor": "15B3"})], pfs)
    first_line = upper.splitlines()[0]
    assert [e["pf"] for e in json.loads(json.loads(first_line.split("=>", 1)[1])["msg"])] == ["ens1f0"]
    reversed_range = _installed_vf_plan(env, [policy(nicSelector={"pfNames": ["ens1f0#3-1"]})], pfs)
    assert (
        "spec.nicSelector.pfNames[0]" in reversed_range and "ends (1) before it starts (3)" in reversed_range
    )
    external = _installed_vf_plan(
        env, [policy(externallyManaged=True, nicSelector={"pfNames": ["ens1f0"]})], pfs
    )
    assert "PF ens1f0 is externally managed and has 2 VFs, but the policy needs 4" in external


def test_installed_playbooks_resolve_by_fqcn(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    _, env = installed
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  children:\n    sriov_dra_nodes:\n      hosts:\n        localhost:\n")
    for playbook in ("site", "inventory_check", "preflight", "drain", "cleanup"):
        run(["ansible-playbook", "--syntax-check", "-i", str(inventory), f"sriovnet.dra.{playbook}"], env)


def _boot_command(unit: Path) -> list[str]:
    """The unit's ``ExecStart`` as argv (continuation lines joined; plain words, as the role renders them)."""
    lines = unit.read_text().replace("\\\n", " ").splitlines()
    (exec_start,) = [line for line in lines if line.startswith("ExecStart=")]
    return shlex.split(exec_start.removeprefix("ExecStart="))


def test_installed_vfs_role_installs_a_boot_unit_whose_program_runs_from_the_tarball(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    _, env = installed
    root, boot = tmp_path / "root", tmp_path / "boot"
    fake_sysfs.build(root, fake_pci.two_root_pfs(2))  # both PFs already have their 2 VFs: nothing to write
    playbook = tmp_path / "vfs.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: sriovnet.dra.vfs\n"
        f"      vfs_host_root: {root}\n      vfs_systemd_dir: {tmp_path}\n      vfs_boot_dir: {boot}\n"
        f"      vfs_boot_python: {sys.executable}\n      vfs_timeout: 0\n      vfs_systemd_manage: false\n"
        "      vfs_drain: false\n      vfs_restart_plugin: false\n"
        "      vfs_pfs: [{pf: '0000:03:00.0', num_vfs: 2}, {pf: enp129s0f0, num_vfs: 2}]\n"
    )
    run([*LOCAL_PLAYBOOK, str(playbook)], env)
    assert "changed=0" in run([*LOCAL_PLAYBOOK, str(playbook)], env).stdout  # the second run changes nothing

    command = _boot_command(tmp_path / "sriov-dra-vfs.service")
    assert command == [
        sys.executable, "-I", f"{boot}/sriov-dra-vfs.py", "--root", str(root), "--timeout", "0",
        "--drain-confirmed", "0000:03:00.0=2", "0000:81:00.0=2",
    ]  # fmt: skip
    collection = Path(env["ANSIBLE_COLLECTIONS_PATH"]) / "ansible_collections" / "sriovnet" / "dra"
    for name in ("numvfs.py", "numvfs_boot.py", "sysfs.py", "base.py", "sriov_dra_rules/__init__.py"):
        shipped = (
            boot / "lib" / "ansible_collections" / "sriovnet" / "dra" / "plugins" / "module_utils" / name
        )
        assert shipped.read_bytes() == (collection / "plugins" / "module_utils" / name).read_bytes(), name

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "ANSIBLE"))}
    ok = subprocess.run(command, env=clean, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert (ok.returncode, ok.stderr) == (0, "")
    assert ok.stdout.splitlines() == [
        "PF 0000:03:00.0 (0000:03:00.0): 2 VFs as planned (nothing written)",
        "PF 0000:81:00.0 (0000:81:00.0): 2 VFs as planned (nothing written)",
        "sriov-dra-vfs: 2 PFs as planned",
    ]

    (root / "sys" / "bus" / "pci" / "devices" / "0000:03:00.0" / "virtfn1").unlink()
    broken = subprocess.run(command, env=clean, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert broken.returncode == 1
    assert broken.stderr.splitlines() == [
        "PF 0000:03:00.0 (0000:03:00.0): expected 2 VFs but after 0s sysfs shows sriov_numvfs=2 and 1 virtfn "
        "links; the PF driver did not create or remove the VFs. Check dmesg and the driver's SR-IOV support, "
        "then rerun.",
        "sriov-dra-vfs: 1 of 2 PFs are not as planned: 0000:03:00.0",
    ]
    assert broken.stdout.splitlines() == [
        "PF 0000:81:00.0 (0000:81:00.0): 2 VFs as planned (nothing written)"
    ]
