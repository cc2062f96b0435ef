"""Tests for sriov_dra.guard.install: the shim file and the runtime-facing conflist.

The ordering and pinning rules are the shared contract's (tests/pure/rules/test_cni_install.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sriov_dra.guard import install, shim
from sriov_dra_rules import cni_install

PRIMARY = {
    "cniVersion": "0.4.0",
    "name": "cbr0",
    "plugins": [
        {"type": "flannel", "capabilities": {"portMappings": False}},
        {"type": "portmap", "capabilities": {"portMappings": True}},
        {"type": "bandwidth", "capabilities": {"bandwidth": True}},
    ],
}


def _primary(tmp_path: Path, doc: dict[str, object] = PRIMARY, name: str = "10-flannel.conflist") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_guard_file_sorts_before_multus_own_and_every_primary() -> None:
    assert sorted(["10-flannel.conflist", "00-multus.conf", "00-multus.conflist", install.CONFLIST_NAME])[
        0
    ] == (install.CONFLIST_NAME)


def test_conflist_carries_primary_capabilities_and_version(tmp_path: Path) -> None:
    text = install.guard_conflist(
        primary_config=_primary(tmp_path), mode="thick", multus={"daemonSocketDir": "/run/multus/"}
    )
    doc = json.loads(text)
    assert doc["cniVersion"] == "0.4.0" and doc["name"] == "multus-cni-network"
    [plugin] = doc["plugins"]
    assert plugin["type"] == "multus-guard"
    assert plugin["capabilities"] == {"bandwidth": True, "portMappings": True}
    assert plugin["multus"] == {
        "mode": "thick",
        "primaryConfig": str(tmp_path / "10-flannel.conflist"),
        "daemonSocketDir": "/run/multus/",
    }


def test_conflist_is_what_the_shim_accepts(tmp_path: Path) -> None:
    doc = json.loads(install.guard_conflist(primary_config=_primary(tmp_path), mode="thin"))
    plugin = doc["plugins"][0]
    conf = shim.parse_conf(
        json.dumps({"cniVersion": doc["cniVersion"], "name": doc["name"], **plugin}).encode()
    )
    assert conf.mode == "thin" and conf.primary_config.endswith("10-flannel.conflist")


def test_conflist_refuses_an_invalid_multus_key(tmp_path: Path) -> None:
    with pytest.raises(cni_install.ContractError, match=r"multus.config must not set \['type'\]"):
        install.guard_conflist(
            primary_config=_primary(tmp_path), mode="thin", multus={"config": {"type": "x"}}
        )


def test_single_plugin_primary_capabilities(tmp_path: Path) -> None:
    primary = _primary(
        tmp_path, {"cniVersion": "1.0.0", "type": "bridge", "capabilities": {"ips": True}}, "10-b.conf"
    )
    assert json.loads(install.guard_conflist(primary_config=primary, mode="thin"))["plugins"][0][
        "capabilities"
    ] == {"ips": True}


def _run(path: Path, command: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """The installed shim as the runtime runs it: its own #! line, no environment but CNI_*."""
    env = {"CNI_COMMAND": command, "CNI_CONTAINERID": "c1", "CNI_PATH": str(path.parent)}
    return subprocess.run([str(path)], input=stdin, env=env, capture_output=True, check=False)


def test_shim_file_is_the_module_behind_a_python_line_naming_its_rules(tmp_path: Path) -> None:
    path = install.write_shim(tmp_path, interpreter="/usr/bin/python3")
    digest = install.rules_digest(install.rules_sources())
    data = path.read_bytes()
    assert data.startswith(b"#!/usr/bin/python3 -IS\n")
    source = Path(shim.__file__).read_bytes()
    assert data.split(b"\n", 1)[1] == source.replace(
        b"\nRULES_VERSION: str | None = None\n", f"\nRULES_VERSION: str | None = {digest!r}\n".encode()
    )
    assert os.access(path, os.X_OK) and path.name == "multus-guard"
    rules = tmp_path / "multus-guard.d" / digest / "sriov_dra_rules"
    assert {p.name: p.read_bytes() for p in rules.glob("*.py")} == install.rules_sources()
    assert sorted(p.name for p in (tmp_path / "multus-guard.d").iterdir()) == [digest]


def test_installed_shim_runs_the_installed_rules_and_no_other_copy(tmp_path: Path) -> None:
    """Run with -I -S from its #! line, the shim loads guard_conf from its own versioned directory."""
    path = install.write_shim(tmp_path, interpreter=sys.executable)
    assert json.loads(_run(path, "VERSION").stdout)["supportedVersions"][-1] == "1.1.0"
    done = _run(
        path, "ADD", json.dumps({"cniVersion": "1.0.0", "name": "n", "multus": {"mode": "fat"}}).encode()
    )
    error = json.loads(done.stdout)
    assert done.returncode == 1 and error["code"] == shim.CniErrorCode.INVALID_CONFIG
    assert error["msg"] == 'multus-guard: config key multus.mode must be "thick" or "thin", got \'fat\''
    digest = install.rules_digest(install.rules_sources())
    guardconf = tmp_path / "multus-guard.d" / digest / "sriov_dra_rules" / "guard_conf.py"
    guardconf.write_text(guardconf.read_text().replace('must be "thick" or "thin"', "MARKED"))
    for pyc in guardconf.parent.glob("__pycache__/guard_conf.*.pyc"):
        pyc.unlink()
    assert "MARKED" in json.loads(_run(path, "ADD", b'{"cniVersion": "1.0.0", "name": "n"}').stdout)["msg"]
    assert not list(guardconf.parent.glob("__pycache__/guard_conf.*.pyc")), "the shim wrote bytecode"


def test_the_installed_shim_loads_no_socket_module_until_it_asks_the_daemon(tmp_path: Path) -> None:
    """An ordinary Pod's ADD and every teardown exec Multus without the daemon: the shim's own start
    (every module it imports before it decides) leaves the socket module out."""
    path = install.write_shim(tmp_path, interpreter=sys.executable)
    env = {"CNI_COMMAND": "VERSION", "CNI_CONTAINERID": "c1", "CNI_PATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-IS", "-X", "importtime", str(path)], env=env, capture_output=True, check=True
    )
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.decode().splitlines() if "|" in line}
    assert {"json", "sriov_dra_rules.guard_route"} <= imported
    assert "socket" not in imported


def test_an_installed_shim_without_its_rules_fails_with_try_again_and_the_fix(tmp_path: Path) -> None:
    path = install.write_shim(tmp_path, interpreter=sys.executable)
    shutil.rmtree(tmp_path / "multus-guard.d")
    done = _run(path, "ADD", b"{}")
    error = json.loads(done.stdout)
    assert done.returncode == 1 and error["code"] == shim.CniErrorCode.TRY_AGAIN
    assert "run sriov-dra-guard install again" in error["msg"]


def test_an_installed_shim_on_a_python_older_than_its_rules_answers_a_cni_error_naming_the_fix(
    tmp_path: Path,
) -> None:
    """The node's python3 runs the shim; on 3.9/3.10 the rules (``enum.StrEnum``) cannot load."""
    path = install.write_shim(tmp_path, interpreter=sys.executable)
    old_python = "import runpy, sys; sys.version_info = (3, 10, 12, 'final', 0); runpy.run_path(sys.argv[1])"
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", old_python, str(path)],
        env={"CNI_COMMAND": "VERSION"},
        capture_output=True,
        check=False,
    )
    error = json.loads(done.stdout)
    assert done.returncode == 1 and error["code"] == shim.CniErrorCode.TRY_AGAIN
    assert "needs 3.11 or later" in error["msg"] and "guard_shim_interpreter" in error["msg"]


def test_reinstalling_another_version_keeps_only_the_rules_the_shim_names(tmp_path: Path) -> None:
    parent = tmp_path / "multus-guard.d"
    (parent / "0123456789abcdef" / "sriov_dra_rules").mkdir(parents=True)  # an older version's rules
    (parent / ".0123456789abcdef.tmp-99").mkdir()  # an interrupted install's temporary
    path = install.write_shim(tmp_path, interpreter=sys.executable)
    digest = install.rules_digest(install.rules_sources())
    assert sorted(p.name for p in parent.iterdir()) == [digest]
    assert f"RULES_VERSION: str | None = {digest!r}" in path.read_text()
    before = (parent / digest / "sriov_dra_rules" / "names.py").stat().st_ino
    install.write_shim(tmp_path, interpreter=sys.executable)  # the same version: kept as it is
    assert (parent / digest / "sriov_dra_rules" / "names.py").stat().st_ino == before


def test_an_upgrade_keeps_the_rules_the_replaced_shim_named_until_the_next_install(tmp_path: Path) -> None:
    """A CNI call that exec'd the old shim just before the upgrade must still find its rules."""
    parent = tmp_path / "multus-guard.d"
    old, stale = "0123456789abcdef", "fedcba9876543210"
    for version in (old, stale):
        (parent / version / "sriov_dra_rules").mkdir(parents=True)
    (tmp_path / "multus-guard").write_bytes(install.shim_text(sys.executable, old))
    assert install.installed_rules_version(tmp_path / "multus-guard") == old
    install.write_shim(tmp_path, interpreter=sys.executable)
    digest = install.rules_digest(install.rules_sources())
    assert sorted(p.name for p in parent.iterdir()) == sorted([digest, old])
    install.write_shim(tmp_path, interpreter=sys.executable)  # the next install: the old one goes
    assert sorted(p.name for p in parent.iterdir()) == [digest]


def test_the_rules_bytecode_is_for_the_shims_plain_python_even_when_installed_with_pythonoptimize(
    tmp_path: Path,
) -> None:
    """The image's services run with PYTHONOPTIMIZE=2; the shim runs as ``python3 -IS`` (level 0)."""
    code = "import sys; from pathlib import Path; from sriov_dra.guard import install; install.write_shim(Path(sys.argv[1]), interpreter=sys.executable)"
    subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], env={**os.environ, "PYTHONOPTIMIZE": "2"}, check=True
    )
    digest = install.rules_digest(install.rules_sources())
    cache = tmp_path / "multus-guard.d" / digest / "sriov_dra_rules" / "__pycache__"
    tag = sys.implementation.cache_tag
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        f"{n[:-3]}.{tag}.pyc" for n in install.rules_sources()
    )


def test_a_rules_directory_edited_by_hand_is_replaced_on_reinstall(tmp_path: Path) -> None:
    install.write_shim(tmp_path, interpreter=sys.executable)
    digest = install.rules_digest(install.rules_sources())
    names = tmp_path / "multus-guard.d" / digest / "sriov_dra_rules" / "names.py"
    names.write_text("edited\n")
    install.write_shim(tmp_path, interpreter=sys.executable)
    assert names.read_bytes() == install.rules_sources()["names.py"]


def test_remove_shim_leaves_no_shim_and_no_rules(tmp_path: Path) -> None:
    install.write_shim(tmp_path, interpreter=sys.executable)
    removed = install.remove_shim(tmp_path)
    assert removed[0] == tmp_path / "multus-guard"
    assert list(tmp_path.iterdir()) == []
    assert install.remove_shim(tmp_path) == []


def test_concurrent_installs_into_one_bin_dir_all_succeed_and_leave_one_complete_rules_copy(
    tmp_path: Path,
) -> None:
    """Two init containers (or an install beside one) on a node: the bin-dir lock serializes them."""
    code = (
        "import sys; from pathlib import Path; from sriov_dra.guard import install; "
        "install.write_shim(Path(sys.argv[1]), interpreter=sys.executable)"
    )
    for round_ in range(5):
        bin_dir = tmp_path / f"bin{round_}"
        bin_dir.mkdir()
        procs = [subprocess.Popen([sys.executable, "-c", code, str(bin_dir)]) for _ in range(3)]
        assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
        digest = install.rules_digest(install.rules_sources())
        assert sorted(p.name for p in (bin_dir / "multus-guard.d").iterdir()) == [digest]
        rules = bin_dir / "multus-guard.d" / digest / "sriov_dra_rules"
        assert {p.name: p.read_bytes() for p in rules.glob("*.py")} == install.rules_sources()
        assert json.loads(_run(bin_dir / "multus-guard", "VERSION").stdout)["cniVersion"] == "1.1.0"


@pytest.mark.parametrize("key", ["mode", "primaryConfig"])
def test_further_multus_keys_cannot_override_the_checked_mode_or_primary_config(
    tmp_path: Path, key: str
) -> None:
    primary = tmp_path / "10-primary.conflist"
    primary.write_text(json.dumps({"cniVersion": "1.0.0", "name": "p", "plugins": [{"type": "loopback"}]}))
    with pytest.raises(cni_install.ContractError, match=f"multus.{key} cannot be given"):
        install.guard_conflist(primary_config=primary, mode="thick", multus={key: "/etc/passwd"})


def test_an_identical_reinstall_rewrites_neither_the_shim_nor_the_conflist(tmp_path: Path) -> None:
    bin_dir, conf_dir = tmp_path / "bin", tmp_path / "net.d"
    shim_path = install.write_shim(bin_dir, interpreter=sys.executable)
    text = install.guard_conflist(primary_config=_primary(tmp_path), mode="thin")
    conf_path = install.write_conflist(conf_dir, text)
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (shim_path, conf_path)}

    assert install.write_shim(bin_dir, interpreter=sys.executable) == shim_path
    assert install.write_conflist(conf_dir, text) == conf_path

    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (shim_path, conf_path)} == before


def test_a_reinstall_over_a_changed_mode_or_content_replaces_the_file(tmp_path: Path) -> None:
    shim_path = install.write_shim(tmp_path, interpreter=sys.executable)
    expected = shim_path.read_bytes()
    shim_path.chmod(0o700)
    install.write_shim(tmp_path, interpreter=sys.executable)
    assert oct(shim_path.stat().st_mode & 0o777) == oct(0o755)
    shim_path.write_bytes(b"#!/bin/sh\nexit 0\n")
    install.write_shim(tmp_path, interpreter=sys.executable)
    assert shim_path.read_bytes() == expected
