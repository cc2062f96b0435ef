"""The product's wheel (what the image installs) carries the product only.

Builds ``pip wheel --no-deps`` of the repository root's distribution from a copy of its sources
(the working tree is left alone) and reads the archive: no lab package, no fake sysfs or PCI
module, no fault killer, no simulated Node heartbeats, no netlink editors for veths, and no
``cryptography`` among its requirements (only the lab's PKI needs it).
"""

from __future__ import annotations

import email.parser
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAB_ONLY_NAMES = (
    "fake_sysfs",
    "fake_pci",
    "fault_kill",
    "heartbeats",
    "net_edit",
    "launch_plugin",
    "kubelet_sim",
)
"""Module names of the lab's stand-ins (``sriov_dra_lab.fakes`` and the plugin launcher)."""


@pytest.fixture(scope="module")
def product_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(REPO / "runtime", src / "runtime", ignore=ignore)
    rules = Path("plugins", "module_utils", "sriov_dra_rules")
    shutil.copytree(REPO / rules, src / rules, ignore=ignore)
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("sriov_dra-*.whl")
    return zipfile.ZipFile(wheel)


def test_product_wheel_holds_no_lab_and_no_test_stand_ins(product_wheel: zipfile.ZipFile) -> None:
    names = product_wheel.namelist()
    modules = [n for n in names if n.endswith(".py")]
    assert any(n == "sriov_dra/driver/main.py" for n in modules)  # the product is there
    assert [n for n in names if n.split("/")[0] == "sriov_dra_lab"] == []
    assert [n for n in modules if Path(n).stem in LAB_ONLY_NAMES] == []
    assert "sriov_dra/kube/nodes.py" not in modules  # the heartbeats' old place


def test_product_code_has_no_fault_killer_or_link_editors(product_wheel: zipfile.ZipFile) -> None:
    faults = product_wheel.read("sriov_dra/driver/faults.py").decode()
    netlink = product_wheel.read("sriov_dra/host/netlink.py").decode()
    assert "os.kill" not in faults and "import signal" not in faults and "class KillAt" not in faults
    assert "SRIOV_DRA_TEST_KILL_AT" not in product_wheel.read("sriov_dra/driver/main.py").decode()
    for editor in (
        "def create_veth_pair",
        "def move_link",
        "def create_netns",
        "def set_vf",
        "def add_route",
    ):
        assert editor not in netlink


def test_product_wheel_requires_no_cryptography(product_wheel: zipfile.ZipFile) -> None:
    (meta_name,) = [n for n in product_wheel.namelist() if n.endswith(".dist-info/METADATA")]
    meta = email.parser.Parser().parsestr(product_wheel.read(meta_name).decode())
    requires = meta.get_all("Requires-Dist") or []
    runtime = [r for r in requires if "extra ==" not in r]
    assert any(r.startswith("kubernetes") for r in runtime)
    assert [r for r in requires if r.lower().startswith("cryptography")] == []
