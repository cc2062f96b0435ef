"""Tests for ``sriov_dra_rules.cni_install``: the guard's CNI install contract, held once.

The runtime's choice of file, the guard file's keys (refused exactly where the standalone shim
refuses them), which primary may be pinned, Multus's pinning, and the guard's own installer
(``sriov_dra.guard.install``) producing documents the contract accepts.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from sriov_dra.guard import install, shim
from sriov_dra_rules import cni_install

GUARD = cni_install.GUARD_FILE
PRIMARY = {"cniVersion": "1.0.0", "name": "cbr0", "plugins": [{"type": "flannel"}]}

LAYOUTS = [
    (["00-multus-guard.conflist", "00-multus.conf", "10-flannel.conflist"], GUARD),
    (["00-multus.conf", "10-flannel.conflist"], "00-multus.conf"),
    (["00-aaa.conf", "00-multus-guard.conflist", "10-calico.conflist"], "00-aaa.conf"),
    (["00-multus-guard.conflist", "05-cilium.json"], GUARD),
    (["00-multus-guard.conflist", ".00-hidden.conf", "99-loopback.conf"], GUARD),
    (["00-multus-guard.conflist.bak", "10-flannel.conflist"], "10-flannel.conflist"),
    ([".00-a.conflist.x.tmp", "00-a.conflist.bak", "05-b.conf", "10-c.json"], "05-b.conf"),
    ([], None),
]


@pytest.mark.parametrize(
    ("names", "chosen"),
    LAYOUTS,
    ids=[
        "guard-first-before-multus-own-file",
        "guard-missing-multus-first",
        "earlier-file-bypasses-guard",
        "json-config-after-guard",
        "hidden-dot-file-is-not-a-config",
        "backup-copy-is-not-a-config",
        "temporaries-and-other-suffixes-are-not-configs",
        "empty-directory",
    ],
)
def test_runtime_choice_is_the_bytewise_first_visible_config_file(
    tmp_path: Path, names: list[str], chosen: str | None
) -> None:
    for name in names:
        (tmp_path / name).write_text("{}")
    (tmp_path / "00-a-directory.conf").mkdir()
    assert cni_install.runtime_choice(tmp_path) == chosen
    if GUARD in names:
        if chosen == GUARD:
            cni_install.check_sorts_first(tmp_path, GUARD)
        else:
            with pytest.raises(
                cni_install.ContractError, match=re.escape(f"guard config {GUARD} sorts after {chosen} in ")
            ):
                cni_install.check_sorts_first(tmp_path, GUARD)


def test_an_unlistable_config_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(cni_install.ContractError) as caught:
        cni_install.conf_files(tmp_path / "nowhere")
    assert (
        str(caught.value)
        == f"cannot list the CNI config directory {tmp_path / 'nowhere'}: No such file or directory"
    )


def _guard_doc(primary: str = "/etc/cni/net.d/10-flannel.conflist") -> dict[str, Any]:
    return {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "plugins": [
            {
                "type": "multus-guard",
                "guard": {"socket": "/run/sriov-dra/multus-guard.sock"},
                "multus": {"mode": "thick", "primaryConfig": primary},
            }
        ],
    }


def _set(path: tuple[Any, ...], value: object) -> dict[str, Any]:
    doc = _guard_doc()
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


SHIM_CASES = [
    ("valid", _guard_doc(), None),
    ("mode-unknown", _set(("plugins", 0, "multus", "mode"), "fat"), 'plugins[0].multus.mode must be "thick" or "thin"'),
    ("guard-not-object", _set(("plugins", 0, "guard"), [1]), "plugins[0].guard must be an object, got a list"),
    ("multus-not-object", _set(("plugins", 0, "multus"), "x"), "plugins[0].multus must be an object, got a string"),
    ("timeout-zero", _set(("plugins", 0, "guard", "timeoutSeconds"), 0), "timeoutSeconds must be a positive number"),
    ("timeout-bool", _set(("plugins", 0, "guard", "timeoutSeconds"), True), "timeoutSeconds must be a positive number"),
    ("timeout-fraction", _set(("plugins", 0, "guard", "timeoutSeconds"), 2.5), None),
    ("socket-empty", _set(("plugins", 0, "guard", "socket"), ""), "plugins[0].guard.socket must be a non-empty string"),
    ("binary-number", _set(("plugins", 0, "multus", "binary"), 3), "plugins[0].multus.binary must be a non-empty string"),
    ("kubeconfig-null-is-default", _set(("plugins", 0, "multus", "kubeconfig"), None), None),
    ("config-reserved-key", _set(("plugins", 0, "multus", "config"), {"delegates": []}), "must not set ['delegates']"),
    ("config-not-object", _set(("plugins", 0, "multus", "config"), []), "plugins[0].multus.config must be an object"),
    ("config-free-key", _set(("plugins", 0, "multus", "config"), {"logLevel": "debug"}), None),
    ("name-empty", _set(("name",), ""), "key name must be a non-empty string"),
    ("version-missing", _set(("cniVersion",), None), "key cniVersion must be a non-empty string"),
]  # fmt: skip


@pytest.mark.parametrize(("doc", "said"), [c[1:] for c in SHIM_CASES], ids=[c[0] for c in SHIM_CASES])
def test_the_contract_refuses_a_guard_file_where_the_shims_own_check_does(
    doc: dict[str, Any], said: str | None
) -> None:
    """One check (guard_conf.check_entry) for both: the contract words its refusal for the file."""
    if said is None:
        assert cni_install.validate_guard_config(GUARD, doc) is doc["plugins"][0]
    else:
        with pytest.raises(cni_install.ContractError) as caught:
            cni_install.validate_guard_config(GUARD, doc)
        assert str(caught.value).startswith(f"guard config {GUARD}: ")
        assert said in str(caught.value)


def test_the_contract_refuses_more_than_the_shim_names_and_relative_primaries() -> None:
    doc = _guard_doc(primary="10-flannel.conflist")
    with pytest.raises(cni_install.ContractError, match="primaryConfig must be the absolute path"):
        cni_install.validate_guard_config(GUARD, doc)
    with pytest.raises(cni_install.ContractError, match=r"must be a \.conflist"):
        cni_install.validate_guard_config("00-multus-guard.conf", _guard_doc())


def _write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("name", "doc", "said"),
    [
        ("10-flannel.conflist", PRIMARY, None),
        ("00-multus.conf", PRIMARY, "is a Multus-generated file (recursion)"),
        ("00-multus-other.conflist", PRIMARY, "is a Multus-generated file (recursion)"),
        (GUARD, PRIMARY, "points at the guard's own file (recursion)"),
        ("10-x.conf", {"cniVersion": "1.0.0", "name": "m", "type": "multus"}, "has plugin type multus (recursion)"),
        ("10-x.conflist", {"cniVersion": "1.0.0", "name": "m", "plugins": [{"type": "multus-guard"}]},
         "has plugin type multus-guard (recursion)"),
        ("10-x.conflist", [PRIMARY], "must hold a JSON object, got a list"),
    ],
    ids=["cluster-network", "multus-generated", "multus-prefix", "guard-itself", "multus-type", "guard-type", "not-object"],
)  # fmt: skip
def test_which_primary_may_be_pinned(tmp_path: Path, name: str, doc: object, said: str | None) -> None:
    path = _write(tmp_path / name, doc)
    if said is None:
        assert cni_install.check_primary_file(tmp_path, GUARD, str(path)) == doc
    else:
        with pytest.raises(cni_install.ContractError) as caught:
            cni_install.check_primary_file(tmp_path, GUARD, str(path))
        assert said in str(caught.value)


def test_a_missing_primary_is_named_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(cni_install.ContractError) as caught:
        cni_install.check_primary_file(tmp_path, GUARD, str(tmp_path / "10-gone.conflist"))
    assert (
        str(caught.value)
        == f"cannot read primary network config {tmp_path / '10-gone.conflist'}: No such file or directory"
    )


def test_the_guard_must_enable_every_capability_of_its_primary(tmp_path: Path) -> None:
    plugins = [
        {"type": "flannel"},
        {"type": "portmap", "capabilities": {"portMappings": True, "aliases": False}},
    ]
    path = _write(
        tmp_path / "10-flannel.conflist", {"cniVersion": "1.0.0", "name": "cbr0", "plugins": plugins}
    )
    entry = copy.deepcopy(_guard_doc(str(path))["plugins"][0])
    with pytest.raises(cni_install.ContractError, match=r"capabilities \['portMappings'\] of the primary"):
        cni_install.check_primary(tmp_path, GUARD, entry)
    entry["capabilities"] = {"portMappings": True}
    assert cni_install.check_primary(tmp_path, GUARD, entry)["name"] == "cbr0"


PRIMARIES = [
    {"cniVersion": "1.0.0", "name": "cbr0", "plugins": [{"type": "flannel"}, {"type": "portmap", "capabilities": {"portMappings": True}}]},
    {"cniVersion": "0.4.0", "name": "k8s-pod-network", "type": "calico", "capabilities": {"bandwidth": True, "ips": False}},
    {"cniVersion": "1.0.0", "name": "plain", "type": "bridge"},
]  # fmt: skip


@pytest.mark.parametrize(
    "primary", PRIMARIES, ids=["conflist-with-portmap", "conf-with-bandwidth", "no-capabilities"]
)
@pytest.mark.parametrize("mode", ["thick", "thin"])
def test_the_guards_own_document_passes_the_contract_and_the_shim(
    tmp_path: Path, primary: dict[str, object], mode: str
) -> None:
    path = _write(tmp_path / "10-primary.conflist", primary)
    install.write_conflist(tmp_path, install.guard_conflist(primary_config=path, mode=mode))
    assert (
        cni_install.check_installed(str(tmp_path), GUARD, None)
        == f"{tmp_path / GUARD}: mode {mode}, primary pinned to {path}"
    )
    doc = cni_install.load_json(tmp_path / GUARD, "guard config")
    conf = shim.parse_conf(
        json.dumps({"cniVersion": doc["cniVersion"], "name": doc["name"], **doc["plugins"][0]}).encode()
    )
    assert (conf.mode, conf.primary_config) == (mode, str(path))


@pytest.mark.parametrize(
    ("daemon", "said"),
    [
        ({"multusConfigFile": "auto", "multusMasterCNI": "10-flannel.conflist"}, None),
        ({"multusConfigFile": "/etc/cni/multus/00-multus.conf"}, None),
        ({"multusConfigFile": "auto"}, "multusConfigFile is auto but multusMasterCNI is not set"),
        (
            {"multusMasterCNI": GUARD},
            f"multusMasterCNI {GUARD} is the guard's or Multus's own file (recursion)",
        ),
        ({"multusMasterCNI": "00-multus.conf"}, "is the guard's or Multus's own file (recursion)"),
    ],
    ids=["pinned", "fixed-config-file", "unpinned", "master-is-guard", "master-is-multus"],
)
def test_thick_multus_must_pin_a_real_primary(
    tmp_path: Path, daemon: dict[str, str], said: str | None
) -> None:
    path = _write(tmp_path / "daemon-config.json", daemon)
    if said is None:
        assert cni_install.check_multus_daemon_config(path, GUARD) == daemon
    else:
        with pytest.raises(cni_install.ContractError) as caught:
            cni_install.check_multus_daemon_config(path, GUARD)
        assert str(caught.value).startswith(f"Multus daemon config {path}: ") and said in str(caught.value)


@pytest.mark.parametrize(
    ("files", "mode", "master", "same_dir", "problem"),
    [
        (["10-flannel.conflist"], "thin", "10-flannel.conflist", True, None),
        (["10-flannel.conflist"], "thin", None, True, "auto-discovery"),
        (["10-flannel.conflist"], "thick", None, True, None),
        (["10-flannel.conflist"], "thin", None, False, None),
        (["10-flannel.conflist"], "thick", GUARD, True, "multusMasterCNI names"),
        (["00-cilium.conflist", "10-flannel.conflist"], "thick", "10-flannel.conflist", True, "bypassed"),
    ],
    ids=[
        "thin-pinned",
        "thin-unpinned-picks-guard-file",
        "thick-unpinned-skips-00-multus-prefix",
        "thin-separate-autoconfig-dir",
        "master-is-guard-file",
        "other-file-sorts-first",
    ],
)
def test_installation_problems(
    tmp_path: Path, files: list[str], mode: str, master: str | None, same_dir: bool, problem: str | None
) -> None:
    for name in files:
        _write(tmp_path / name, PRIMARY)
    install.write_conflist(tmp_path, install.guard_conflist(primary_config=tmp_path / files[-1], mode=mode))
    autoconfig = tmp_path if same_dir else tmp_path / "elsewhere"
    found = cni_install.installation_problems(
        tmp_path, mode=mode, multus_master_cni=master, autoconfig_dir=autoconfig
    )
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and problem in found[0]


@pytest.mark.parametrize(("installed", "asked"), [("thick", "thin"), ("thin", "thick")])
def test_a_guard_installed_in_the_other_multus_mode_fails_naming_both_modes_and_the_flag(
    tmp_path: Path, installed: str, asked: str
) -> None:
    path = _write(tmp_path / "10-primary.conflist", PRIMARIES[2])
    install.write_conflist(tmp_path, install.guard_conflist(primary_config=path, mode=installed))
    assert cni_install.check_installed(str(tmp_path), GUARD, None, installed).startswith(
        f"{tmp_path / GUARD}: mode {installed}"
    )
    with pytest.raises(cni_install.ContractError) as caught:
        cni_install.check_installed(str(tmp_path), GUARD, None, asked)
    assert str(caught.value) == (
        f"{tmp_path / GUARD}: the guard runs Multus {installed}, but the check was asked for {asked}; if this "
        f"node runs {installed}, pass --multus-mode {installed} (module option multus_mode; the preflight role "
        f"takes the inventory's multus_mode), else reinstall with the multus and guard roles in mode {asked}"
    )
