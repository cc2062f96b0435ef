"""``sriov-dra``: the admin commands' help and options, and ``lab`` registered by the lab distribution."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sriov_dra.cli import main


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit):
        main.build_parser().parse_args([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("command", "phrase"),
    [
        ("inspect", "Print the correlation of a Pod's VFs"),
        ("orphans", "Off the node, pass --checkpoint"),
        ("preflight", "the node checks read THIS machine's files"),
    ],
    ids=["inspect-has-a-description", "orphans-has-a-description", "preflight-says-node-checks-are-local"],
)
def test_each_admin_command_help_has_a_description(
    capsys: pytest.CaptureFixture[str], command: str, phrase: str
) -> None:
    assert phrase in " ".join(_help(capsys, command).split())


def test_preflight_help_shows_defaults_and_node_checks_on_by_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = " ".join(_help(capsys, "preflight").split())
    assert "on by default" in text and "(default: True)" in text
    assert "(default: /opt/cni/bin)" in text and "(default: text)" in text


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect", "p", "-o", "json"],
        ["orphans", "--node", "n", "-o", "json"],
        ["preflight", "-o", "json"],
    ],
    ids=["inspect", "orphans", "preflight"],
)
def test_every_admin_command_accepts_o_for_output(argv: list[str]) -> None:
    assert main.build_parser().parse_args(argv).output == "json"


NO_LAB_PROBE = """
import json, sys
from sriov_dra.cli import main
try:
    main.main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "sriov_dra_lab")))
"""


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["inspect", "p", "--kubeconfig", "/nonexistent/kubeconfig"], ["preflight", "--help"]],
    ids=["help", "inspect", "preflight-help"],
)
def test_help_and_admin_commands_import_nothing_from_the_lab(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_LAB_PROBE, *argv], capture_output=True, text=True, timeout=120, check=False
    )
    assert json.loads(done.stdout.splitlines()[-1]) == [], done.stderr


def test_the_lab_registers_its_subcommand_through_the_entry_point_group() -> None:
    registered = main._registered()
    assert registered["lab"].value == "sriov_dra_lab.cli:run"
    assert registered["lab"].dist is not None and registered["lab"].dist.name == "sriov-dra-lab"


def test_lab_command_without_the_lab_distribution_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(main, "_registered", dict)
    assert main.main(["lab", "demo", "--hold"]) == 2
    err = capsys.readouterr().err
    assert "the lab is not installed" in err and "pip install -e ./lab" in err


def test_lab_arguments_reach_the_registered_command_unparsed(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main.main(["--log-level", "WARNING", "lab", "up", "--help"])
    assert done.value.code == 0
    assert "usage: sriov-dra lab up" in capsys.readouterr().out


def test_admin_command_still_refuses_unknown_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main.main(["preflight", "--no-such-flag"])
    assert done.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err
