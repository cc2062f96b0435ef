"""The guard role writes exactly the document ``sriov_dra.guard.install.guard_conflist`` builds.

The role renders the conflist with Jinja (managed nodes have no ``sriov_dra``); the guard's own
installer is the reference. Both modes, with a primary that enables a capability.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.ansible.conftest import LOCAL_PLAYBOOK, run

from sriov_dra.guard import install

PRIMARY = {
    "cniVersion": "1.0.0",
    "name": "cbr0",
    "plugins": [
        {"type": "flannel"},
        {"type": "portmap", "capabilities": {"portMappings": True, "aliases": False}},
    ],
}


@pytest.mark.parametrize(("mode", "verify"), [("thick", False), ("thin", False), ("thick", True)])
def test_guard_role_conflist_equals_the_guard_installers(
    mode: str, verify: bool, tmp_path: Path, ansible_env: dict[str, str]
) -> None:
    conf = tmp_path / "net.d"
    (conf / "multus.d").mkdir(parents=True)
    primary = conf / "10-flannel.conflist"
    primary.write_text(json.dumps(PRIMARY))
    (conf / "multus.d" / "daemon-config.json").write_text(json.dumps({"multusMasterCNI": primary.name}))
    playbook = tmp_path / "guard.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  roles:\n    - role: sriovnet.dra.guard\n"
        f"      guard_cluster: false\n      guard_mode: {mode}\n      guard_primary_cni: {primary.name}\n"
        f"      guard_cni_conf_dir: {conf}\n      guard_verify_ordinary_selections: {str(verify).lower()}\n"
    )
    run([*LOCAL_PLAYBOOK, str(playbook)], ansible_env)
    # No clusterNetwork in either mode: the primary is inlined so thick Multus's DEL stays lossless.
    expected = json.loads(
        install.guard_conflist(
            primary_config=primary, mode=mode, multus=None, verify_ordinary_selections=verify
        )
    )
    assert json.loads((conf / install.CONFLIST_NAME).read_text()) == expected
