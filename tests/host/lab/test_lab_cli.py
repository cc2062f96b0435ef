"""``sriov-dra lab`` (``sriov_dra_lab.cli``): what ``--help`` says, the options ``up`` and ``demo`` take, a quiet terminal."""

from __future__ import annotations

import logging

import pytest

from sriov_dra_lab import cli


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_lab_help_describes_up_and_demo_and_the_one_workdir(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    assert (
        "up start the whole lab (control plane, nodes, roles, plugins, guards, Multus, operator) without the examples"
        in text
    )
    assert "demo the main job (make lab): the same lab, then the three examples" in text
    assert "every component log under logs/" in text


@pytest.mark.parametrize(
    ("command", "phrase"),
    [
        ("demo", "Start the lab, apply the three examples of examples/"),
        ("up", "without applying any example; print KUBECONFIG, the kubectl of the build cache"),
    ],
    ids=["demo-has-a-description", "up-has-a-description"],
)
def test_each_lab_command_help_has_a_description(
    capsys: pytest.CaptureFixture[str], command: str, phrase: str
) -> None:
    assert phrase in _help(capsys, command)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["up"],
            {
                "bare": False,
                "multus": "thin",
                "nodes": 2,
                "operator_managed": False,
                "no_hold": False,
                "node_kind": None,
            },
        ),
        (["up", "--node-kind", "real", "--nodes", "2"], {"node_kind": "real", "nodes": 2}),
        (["demo", "--node-kind", "real"], {"node_kind": "real"}),
        (["demo"], {"node_kind": "real"}),
        (["demo", "--node-kind", "simulated"], {"node_kind": "simulated"}),
        (["down", "--workdir", "/tmp/x"], {"workdir": "/tmp/x"}),
        (["up", "--bare", "--nodes", "3"], {"bare": True, "nodes": 3}),
        (
            ["up", "--multus", "thick", "--operator-managed"],
            {"multus": "thick", "operator_managed": True},
        ),
        (
            ["demo", "--multus", "thick", "--hold"],
            {"multus": "thick", "hold": True, "workdir": ".lab"},
        ),
    ],
    ids=[
        "up-defaults-to-the-whole-lab",
        "up-chooses-real-nodes",
        "demo-chooses-real-nodes",
        "demo-defaults-to-real-nodes",
        "demo-keeps-the-simulator-by-flag",
        "down-takes-the-workdir",
        "up-bare-keeps-the-old-behaviour",
        "up-thick-operator-managed",
        "demo-options",
    ],
)
def test_lab_options_parse(argv: list[str], expected: dict[str, object]) -> None:
    args = vars(cli.build_parser().parse_args(argv))
    assert {k: args[k] for k in expected} == expected


def test_lab_up_bare_with_real_nodes_is_refused_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.run(["up", "--bare", "--node-kind", "real"], inspector=lambda: None)  # type: ignore[arg-type,return-value]
    assert status == 2
    assert "drop --bare or --node-kind real" in capsys.readouterr().err


def test_readiness_poll_retries_and_lab_info_lines_stay_off_the_terminal_even_after_a_level_reset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import signal

    pool = logging.getLogger("urllib3.connectionpool")
    monkeypatch.setattr(pool, "filters", [])
    for name in ("sriov_dra", "sriov_dra_lab"):
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        cli._quiet_lab(cli.build_parser().parse_args(["up"]))
        pool.setLevel(logging.WARNING)  # what the client library does per configuration
        retry = pool.makeRecord(pool.name, logging.WARNING, __file__, 1, "Retrying ... /readyz", (), None)
        error = pool.makeRecord(pool.name, logging.ERROR, __file__, 1, "gave up", (), None)
        assert (pool.filter(retry), bool(pool.filter(error))) == (False, True)
        assert logging.getLogger("sriov_dra").level == logging.WARNING
        assert logging.getLogger("sriov_dra_lab").level == logging.WARNING  # the lab's progress INFO lines
    finally:
        for sig, handler in previous.items():  # _quiet_lab sets both
            signal.signal(sig, handler)
