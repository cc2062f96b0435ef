"""The collection's CNI installation rules agree with the guard's own (``sriov_dra.guard.install``).

``plugins/module_utils/cni.py`` re-implements, for managed nodes without ``sriov_dra``, the rules the
guard ships: which file the runtime uses, which capabilities the guard must carry, and that the
guard's document passes the shim's parser. Each layout is fed to both.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.sriovnet.dra.plugins.module_utils import cni

from sriov_dra.guard import install, shim

LAYOUTS = [
    ["00-multus-guard.conflist", "00-multus.conf", "10-flannel.conflist"],
    ["00-multus.conf", "10-flannel.conflist"],
    ["00-aaa.conf", "00-multus-guard.conflist", "10-calico.conflist"],
    ["00-multus-guard.conflist", "05-cilium.json"],
    ["00-multus-guard.conflist", ".00-hidden.conf", "99-loopback.conf"],
    ["00-multus-guard.conflist.bak", "10-flannel.conflist"],
]
LAYOUT_IDS = [
    "guard-first-before-multus-own-file",
    "guard-missing-multus-first",
    "earlier-file-bypasses-guard",
    "json-config-after-guard",
    "hidden-dot-file-is-not-a-config",
    "backup-copy-is-not-a-config",
]


@pytest.mark.parametrize("names", LAYOUTS, ids=LAYOUT_IDS)
def test_the_runtime_choice_is_the_same(tmp_path: Path, names: list[str]) -> None:
    for name in names:
        (tmp_path / name).write_text("{}")
    guard_choice = install.runtime_choice(tmp_path)
    ours = cni.conf_files(str(tmp_path))
    assert (ours[0] if ours else None) == guard_choice
    sorts_first = guard_choice == install.CONFLIST_NAME
    if "00-multus-guard.conflist" in names:
        try:
            cni.check_sorts_first(str(tmp_path), install.CONFLIST_NAME)
            ours_first = True
        except cni.CniConfigError:
            ours_first = False
        assert ours_first == sorts_first


PRIMARIES = [
    {"cniVersion": "1.0.0", "name": "cbr0", "plugins": [{"type": "flannel"}, {"type": "portmap", "capabilities": {"portMappings": True}}]},
    {"cniVersion": "0.4.0", "name": "k8s-pod-network", "type": "calico", "capabilities": {"bandwidth": True, "ips": False}},
    {"cniVersion": "1.0.0", "name": "plain", "type": "bridge"},
]  # fmt: skip


@pytest.mark.parametrize(
    "primary", PRIMARIES, ids=["conflist-with-portmap", "conf-with-bandwidth", "no-capabilities"]
)
@pytest.mark.parametrize("mode", ["thick", "thin"])
def test_the_guards_own_document_passes_our_contract(
    tmp_path: Path, primary: dict[str, object], mode: str
) -> None:
    path = tmp_path / "10-primary.conflist"
    path.write_text(json.dumps(primary))
    doc = json.loads(install.guard_conflist(primary_config=path, mode=mode))
    entry = cni.validate_guard_config(install.CONFLIST_NAME, doc)
    cni.check_primary(str(tmp_path), install.CONFLIST_NAME, entry)
    assert cni.enabled_capabilities(primary) == sorted(install.primary_capabilities(primary))
    # and the shim parses what our contract accepts
    conf = shim.parse_conf(
        json.dumps({"cniVersion": doc["cniVersion"], "name": doc["name"], **entry}).encode()
    )
    assert (conf.mode, conf.primary_config) == (mode, str(path))
