"""The preflight's ``cni-add`` check: a real ADD/DEL through bridge + host-local in throwaway namespaces.

Uses the pinned containernetworking plugins from the binaries cache. Every outcome must leave no
network namespace and no IPAM data directory behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests import tiers

from sriov_dra_lab import binaries
from sriov_dra_rules import preflight_node

FIX = (
    "make {d}/bridge and {d}/host-local run on this node (same architecture, kernel bridge and veth support) and "
    "retry; the CNI path cannot attach Pods while a plain ADD fails"
)


def _netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("sriovdra-pf-")}


def _root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def _ipam_dirs() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("sriov-dra-preflight-ipam-*")}


@pytest.fixture
def bin_dir(tmp_path: Path) -> Iterator[Path]:
    """A CNI bin dir with the pinned bridge and host-local; asserts nothing is left behind afterwards."""
    if os.geteuid() != 0:
        tiers.unavailable("host", "network namespaces need root")
    if shutil.which("ip") is None:
        tiers.unavailable("host", "the ip command (iproute2) is not installed")
    try:
        plugins = {name: binaries.find(name) for name in ("bridge", "host-local")}
    except binaries.BinaryMissing as exc:
        tiers.unavailable("host", str(exc))
    d = tmp_path / "bin"
    d.mkdir()
    for name, path in plugins.items():
        (d / name).symlink_to(path)
    before = (_netns(), _ipam_dirs())
    yield d
    assert (_netns(), _ipam_dirs()) == before
    assert "pfbr0" not in _root_links()  # the bridge lived in the throwaway "host" namespace only


def _stand_in(path: Path, body: str) -> None:
    path.unlink()
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_a_real_add_and_del_pass_and_release_the_address(bin_dir: Path) -> None:
    check = preflight_node.check_cni_add(str(bin_dir), 20)
    assert check == {
        "name": "cni-add",
        "status": "pass",
        "detail": "ADD gave 198.18.0.2/29 via bridge + host-local between throwaway namespaces; DEL released it",
        "fix": "",
    }


def test_a_failing_add_fails_with_the_plugin_error_and_the_fix(bin_dir: Path) -> None:
    _stand_in(bin_dir / "bridge", 'cat >/dev/null\necho \'{"code":11,"msg":"no bridge support"}\'\nexit 1\n')
    check = preflight_node.check_cni_add(str(bin_dir), 20)
    assert check["status"] == "fail"
    assert check["detail"].startswith("test ADD failed: ip netns exec sriovdra-pf-")
    assert check["detail"].endswith(' exited 1: {"code":11,"msg":"no bridge support"}')
    assert check["fix"] == FIX.format(d=bin_dir)


def test_an_add_without_an_address_fails(bin_dir: Path) -> None:
    _stand_in(bin_dir / "bridge", 'cat >/dev/null\necho \'{"cniVersion":"1.0.0","interfaces":[]}\'\n')
    check = preflight_node.check_cni_add(str(bin_dir), 20)
    assert (check["status"], check["fix"]) == ("fail", FIX.format(d=bin_dir))
    assert (
        check["detail"]
        == 'test ADD failed: the ADD result has no ips: {"cniVersion": "1.0.0", "interfaces": []}'
    )


def test_a_del_that_keeps_the_reservation_fails_as_a_leak(bin_dir: Path) -> None:
    real = binaries.find("bridge")
    _stand_in(bin_dir / "bridge", f'[ "$CNI_COMMAND" = DEL ] && {{ cat >/dev/null; exit 0; }}\nexec {real}\n')
    check = preflight_node.check_cni_add(str(bin_dir), 20)
    assert check["status"] == "fail"
    assert check["detail"] == "test DEL failed: host-local still holds 198.18.0.2 after DEL"
    assert check["fix"] == FIX.format(d=bin_dir)


def test_without_the_plugins_it_is_skipped_naming_them(tmp_path: Path) -> None:
    check = preflight_node.check_cni_add(str(tmp_path), 5)
    if os.geteuid() != 0:
        assert check["detail"] == (
            "skipped: not root; a test ADD needs network namespaces (run the preflight as root)"
        )
    else:
        assert check["detail"] == (
            f"skipped: bridge, host-local not in {tmp_path}; install the containernetworking plugins there to run "
            "a test ADD"
        )
    assert (check["status"], check["fix"]) == ("skip", "")


def test_not_root_is_skipped_with_the_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(preflight_node.os, "geteuid", lambda: 1000)
    check = preflight_node.check_cni_add(str(tmp_path), 5)
    assert check == {
        "name": "cni-add",
        "status": "skip",
        "detail": "skipped: not root; a test ADD needs network namespaces (run the preflight as root)",
        "fix": "",
    }
