"""The collection's preflight checks are byte copies of the runtime's (one implementation of each check).

``plugins/module_utils/checks.py`` is ``sriov_dra.host.preflight_node`` and
``plugins/module_utils/preflight_rules.py`` is ``sriov_dra.core.preflight_rules``; edit the runtime
file and run ``collection/sync_shared.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.sriovnet.dra.plugins.module_utils import checks, preflight_rules

from sriov_dra.core import preflight_rules as core_rules
from sriov_dra.host import preflight_node

REPO = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize(
    ("collection_copy", "runtime_module"),
    [(checks, preflight_node), (preflight_rules, core_rules)],
    ids=["node-checks", "cluster-rules"],
)
def test_the_collection_copy_is_byte_identical_to_the_runtime_module(collection_copy, runtime_module) -> None:
    assert Path(collection_copy.__file__).read_bytes() == Path(runtime_module.__file__).read_bytes()


def test_the_sync_script_reports_no_difference() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "collection" / "sync_shared.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, "shared modules are in sync")


def test_the_module_and_the_cli_default_to_the_same_node_options() -> None:
    from ansible_collections.sriovnet.dra.plugins.modules import preflight as module

    from sriov_dra.cli import main

    spec = module.argspec()
    module_defaults = {k: v["default"] for k, v in spec.items() if "default" in v}
    args = main.build_parser().parse_args(["preflight"])
    cli_defaults = {k: getattr(args, k) for k in preflight_node.DEFAULTS}
    assert module_defaults == cli_defaults == preflight_node.DEFAULTS
