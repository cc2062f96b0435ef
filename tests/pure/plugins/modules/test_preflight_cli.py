"""Tests for ``sriov-dra preflight`` without a cluster: node checks, output, exit codes.

The node checks themselves are ``sriov_dra_rules.preflight_node`` with the shared install contract
``sriov_dra_rules.cni_install`` (tested in ``tests/pure/rules`` and for the real ADD in
``tests/host``); here the CLI's options reach them as the module's do, so the CLI and the module
give the same result on every layout (a real AnsiballZ run of the module is in
``tests/ansible/test_preflight_parity.py``).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.sriovnet.dra.plugins.modules import preflight as module
from tests.ansible import node_fixture
from tests.pure.plugins import harness

from sriov_dra.cli import main
from sriov_dra.cli import preflight as cli


@pytest.fixture
def node(tmp_path: Path) -> dict[str, Any]:
    return {**node_fixture.prepare(tmp_path / "node"), "add_check": False}


def _by_name(found: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in found}


def _both(options: dict[str, Any]) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """(the CLI's node checks for these options given as flags, the module's run with them)."""
    args = main.build_parser().parse_args(["preflight", *node_fixture.cli_flags(options)])
    return _by_name(cli.node_results(args)), _by_name(harness.run_module(module, options)["checks"])


def test_a_good_node_passes_the_guard_checks_of_cli_and_module(node: dict[str, Any]) -> None:
    ours, collection = _both(node)
    conf = node["cni_conf_dir"]
    assert (
        ours["guard-first"]
        == collection["guard-first"]
        == {
            "name": "guard-first",
            "status": "pass",
            "detail": f"first CNI config in {conf} is 00-multus-guard.conflist",
            "fix": "",
        }
    )
    assert ours["guard-config"]["detail"] == (
        f"{conf}/00-multus-guard.conflist: mode thick, primary pinned to {conf}/10-flannel.conflist"
    )
    assert ours == collection


def _unpinned(node: dict[str, Any]) -> None:
    Path(node["multus_daemon_config"]).write_text(json.dumps({"multusConfigFile": "auto"}))


def _recursive(node: dict[str, Any]) -> None:
    primary = Path(node["cni_conf_dir"]) / "10-flannel.conflist"
    primary.write_text(json.dumps({"cniVersion": "1.0.0", "name": "x", "plugins": [{"type": "multus-shim"}]}))


def _uncapable(node: dict[str, Any]) -> None:
    primary = Path(node["cni_conf_dir"]) / "10-flannel.conflist"
    plugins = [{"type": "flannel"}, {"type": "portmap", "capabilities": {"portMappings": True}}]
    primary.write_text(json.dumps({"cniVersion": "1.0.0", "name": "cbr0", "plugins": plugins}))


def _not_json(node: dict[str, Any]) -> None:
    (Path(node["cni_conf_dir"]) / "00-multus-guard.conflist").write_text("{")


def _repeated_key(node: dict[str, Any]) -> None:
    guard = Path(node["cni_conf_dir"]) / "00-multus-guard.conflist"
    text = json.dumps(json.loads(guard.read_text()), separators=(",", ":"))
    guard.write_text(text.replace('"multus":{', '"multus":{"mode":"thin",', 1))


def _zero_timeout(node: dict[str, Any]) -> None:
    guard = Path(node["cni_conf_dir"]) / "00-multus-guard.conflist"
    doc = json.loads(guard.read_text())
    doc["plugins"][0]["guard"]["timeoutSeconds"] = 0
    guard.write_text(json.dumps(doc))


BROKEN = [
    (_unpinned, "multusConfigFile is auto but multusMasterCNI is not set"),
    (_recursive, "has plugin type multus-shim (recursion)"),
    (_uncapable, "capabilities ['portMappings'] of the primary"),
    (_not_json, "is not valid JSON"),
    (_repeated_key, 'is not valid JSON: $.plugins[0].multus.mode: duplicate key "mode"'),
    (_zero_timeout, "plugins[0].guard.timeoutSeconds must be a positive number of seconds up to 3600, got 0"),
]


@pytest.mark.parametrize(
    ("breaks", "said"),
    BROKEN,
    ids=[
        "unpinned-thick-primary",
        "recursive-primary",
        "missing-capability",
        "not-json",
        "repeated-key",
        "timeout-the-shim-refuses",
    ],
)
def test_a_broken_guard_setup_fails_guard_config_in_cli_and_module_with_the_same_reason_and_fix(
    node: dict[str, Any], breaks: Any, said: str
) -> None:
    breaks(node)
    ours, collection = _both(node)
    assert ours["guard-config"]["status"] == "fail"
    assert said in ours["guard-config"]["detail"]
    assert ours["guard-config"]["fix"] == (
        "correct the file or key this check's detail names, then rerun the sriovnet.dra.multus and sriovnet.dra.guard roles"
    )
    assert ours == collection


def test_a_repeated_key_is_named_with_both_values(node: dict[str, Any]) -> None:
    _repeated_key(node)
    ours, collection = _both(node)
    assert ours["guard-config"]["detail"] == collection["guard-config"]["detail"]
    assert ours["guard-config"]["detail"].endswith(
        'is not valid JSON: $.plugins[0].multus.mode: duplicate key "mode" in one object with the values "thin" '
        'and "thick" (readers disagree on which value wins); keep exactly one'
    )


def test_a_missing_conf_dir_fails_guard_first_with_the_create_fix(
    node: dict[str, Any], tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere"
    ours, collection = _both({**node, "cni_conf_dir": str(missing)})
    assert (
        ours["guard-first"]["fix"]
        == collection["guard-first"]["fix"]
        == (f"create {missing} and run the sriovnet.dra.guard role")
    )
    assert ours["guard-first"]["detail"].startswith(f"cannot list the CNI config directory {missing}")


def test_node_checks_alone_need_no_kubeconfig(
    node: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["preflight", "--no-cluster-checks", "-o", "json", "--kubeconfig", str(tmp_path / "none")]
    code = main.main([*argv, *node_fixture.cli_flags(node)])
    report = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in report["checks"]] == [
        c["name"] for c in harness.run_module(module, node)["checks"]
    ]
    assert (code, report["failed_checks"]) == (0, [])


def test_no_checks_at_all_exits_2_saying_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(["preflight", "--no-cluster-checks", "--no-node-checks"]) == 2
    assert capsys.readouterr().err == (
        "sriov-dra preflight: --no-cluster-checks and --no-node-checks leave nothing to check; drop one\n"
    )


FOUND = [
    {"name": "kubernetes-version", "status": "pass", "detail": "the API server is v1.36.3", "fix": ""},
    {
        "name": "plugin-rbac",
        "status": "fail",
        "detail": "ServiceAccount a/b may not: get core/pods",
        "fix": "bind",
    },
    {"name": "cni-add", "status": "skip", "detail": "skipped: not root", "fix": ""},
]


def test_text_output_is_one_line_per_check_and_the_fix_under_a_failure() -> None:
    out = io.StringIO()
    cli.render(FOUND, "text", out)
    assert out.getvalue() == (
        "PASS kubernetes-version: the API server is v1.36.3\n"
        "FAIL plugin-rbac: ServiceAccount a/b may not: get core/pods\n"
        "     fix: bind\n"
        "SKIP cni-add: skipped: not root\n"
    )


def test_json_output_carries_every_check_and_the_failed_names() -> None:
    out = io.StringIO()
    cli.render(FOUND, "json", out)
    assert json.loads(out.getvalue()) == {"checks": FOUND, "failed_checks": ["plugin-rbac"]}


def test_without_a_kubeconfig_it_exits_2_naming_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "kubeconfig"
    assert main.main(["preflight", "--kubeconfig", str(missing), "--no-node-checks"]) == 2
    assert f"no kubeconfig at {missing}; pass --kubeconfig (or --no-cluster-checks" in capsys.readouterr().err


def test_node_checks_and_add_check_can_be_switched_off() -> None:
    args = main.build_parser().parse_args(
        ["preflight", "--no-node-checks", "--no-add-check", "--output", "json"]
    )
    assert (args.node_checks, args.add_check, args.output) == (False, False, "json")


def test_an_empty_cni_config_directory_says_there_is_no_config_not_none(node: dict[str, Any]) -> None:
    conf = Path(node["cni_conf_dir"])
    for f in conf.iterdir():
        if f.is_file():
            f.unlink()
    ours, collection = _both(node)
    assert ours["guard-first"]["status"] == "fail"
    assert ours["guard-first"]["detail"] == collection["guard-first"]["detail"] == f"no CNI config in {conf}"
    assert ours["guard-first"]["fix"].endswith("(files now: none)")
