"""driver.settings: flags, environment variables, defaults and actionable validation."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
from pathlib import Path

import pytest

from sriov_dra.core import interface_naming
from sriov_dra.driver import main, settings
from sriov_dra.servicekit import logs

BASE = {"NODE_NAME": "node-a"}


def parse(argv: list[str], env: dict[str, str] | None = None) -> settings.PluginSettings:
    return settings.parse(argv, BASE if env is None else env)


def test_defaults_match_upstream_paths_and_multus_mode() -> None:
    got = parse([])
    assert got.node_name == "node-a"
    assert got.kubeconfig is None
    assert got.sysfs_root == Path("/")
    assert got.cdi_root == Path("/var/run/cdi")
    assert got.state_dir == Path("/var/lib/kubelet/plugins/sriovnetwork.k8snetworkplumbingwg.io")
    assert got.sockets.dra == Path("/var/lib/kubelet/plugins/sriovnetwork.k8snetworkplumbingwg.io/dra.sock")
    assert got.sockets.registration == Path(
        "/var/lib/kubelet/plugins_registry/sriovnetwork.k8snetworkplumbingwg.io-reg.sock"
    )
    assert got.policy_namespace == "dra-driver-sriov"
    assert got.configuration_mode is settings.ConfigurationMode.MULTUS
    assert got.multus_auto_attach is False
    assert got.log_format is logs.LogFormat.JSON
    assert got.metrics_bind_address == ""


def test_flag_wins_over_environment_which_wins_over_default() -> None:
    env = {**BASE, "NAMESPACE": "from-env", "CDI_ROOT": "/env/cdi"}
    got = parse(["--policy-namespace", "from-flag"], env)
    assert got.policy_namespace == "from-flag"
    assert got.cdi_root == Path("/env/cdi")


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["--multus-auto-attach"], {}, True),
        (["--multus-auto-attach=false"], {}, False),
        ([], {"MULTUS_AUTO_ATTACH": "true"}, True),
        ([], {"MULTUS_AUTO_ATTACH": "0"}, False),
    ],
    ids=["bare-flag", "flag-false", "env-true", "env-zero"],
)
def test_multus_auto_attach_is_read_from_flag_or_environment(
    argv: list[str], env: dict[str, str], expected: bool
) -> None:
    assert parse(argv, {**BASE, **env}).multus_auto_attach is expected


def test_the_auto_attach_node_label_is_read_from_flag_or_environment_and_empty_by_default() -> None:
    assert parse(["--multus-auto-attach"]).multus_auto_attach_node_label == ""
    env = {**BASE, "MULTUS_AUTO_ATTACH": "true", "MULTUS_AUTO_ATTACH_NODE_LABEL": "example.com/gate"}
    assert parse([], env).multus_auto_attach_node_label == "example.com/gate"


def test_the_plugin_pod_is_named_by_flag_or_the_downward_api_environment_and_unnamed_by_default() -> None:
    assert (parse([]).pod_name, parse([]).pod_namespace) == ("", "")
    by_env = parse([], {**BASE, "POD_NAME": "sriov-dra-plugin-x7k2p", "POD_NAMESPACE": "dra-driver-sriov"})
    assert (by_env.pod_name, by_env.pod_namespace) == ("sriov-dra-plugin-x7k2p", "dra-driver-sriov")
    by_flag = parse(["--pod-name=p", "--pod-namespace=ns"])
    assert (by_flag.pod_name, by_flag.pod_namespace) == ("p", "ns")


@pytest.mark.parametrize(
    ("flags", "closed", "mode"),
    [
        ([], "", "off"),
        (["--multus-auto-attach"], "", "full"),
        (["--multus-auto-attach"], "the gate is closed", "release-only"),
    ],
    ids=["manual", "full", "gate-closed-on-bindings"],
)
def test_the_auto_attach_mode_follows_the_flag_and_the_gate(flags: list[str], closed: str, mode: str) -> None:
    got = dataclasses.replace(parse(flags), auto_attach_gate_closed=closed)
    assert str(got.auto_attach_mode) == mode


@pytest.mark.parametrize(
    ("argv", "env", "needles"),
    [
        ([], {}, ["--node-name / NODE_NAME", "is required"]),
        (
            [],
            {**BASE, "CONFIGURATION_MODE": "STANDALONE"},
            ["STANDALONE", "not supported", "CONFIGURATION_MODE=MULTUS"],
        ),
        (
            ["--multus-auto-attach"],
            {**BASE, "CONFIGURATION_MODE": "STANDALONE"},
            ["--multus-auto-attach needs MULTUS"],
        ),
        ([], {**BASE, "CONFIGURATION_MODE": "multus"}, ["'multus' is not MULTUS (case-sensitive)"]),
        ([], {**BASE, "MULTUS_AUTO_ATTACH": "maybe"}, ["MULTUS_AUTO_ATTACH", "'maybe' is not true or false"]),
        (["--cdi-root", "var/run/cdi"], BASE, ["--cdi-root / CDI_ROOT", "absolute path"]),
        (["--namespace", "Bad_NS"], BASE, ["--namespace / NAMESPACE"]),
        (["--log-format", "xml"], BASE, ["'xml' is not json or text"]),
        (["--metrics-bind-address", "9464"], BASE, ["METRICS_BIND_ADDRESS", "host:port"]),
        (["--metrics-bind-address", "example.com:9464"], BASE, ["is not an IP address"]),
        (["--fake-sysfs-kernel"], BASE, ["invalid command line", "--fake-sysfs-kernel"]),
        (["positional"], BASE, ["invalid command line"]),
        (
            ["--multus-auto-attach-node-label=example.com/gate"],
            BASE,
            ["--multus-auto-attach-node-label / MULTUS_AUTO_ATTACH_NODE_LABEL", "needs --multus-auto-attach"],
        ),
        (
            ["--multus-auto-attach", "--multus-auto-attach-node-label=a/b/c"],
            BASE,
            ["'a/b/c' is not a label key", "at most one '/'"],
        ),
    ],
    ids=[
        "missing-node-name",
        "standalone-rejected",
        "auto-attach-needs-multus",
        "mode-is-case-sensitive",
        "bad-boolean",
        "relative-path",
        "bad-namespace",
        "bad-log-format",
        "address-without-host",
        "address-hostname",
        "no-fake-kernel-flag-in-the-product",
        "positional-argument",
        "node-label-gate-needs-auto-attach",
        "node-label-gate-is-a-label-key",
    ],
)
def test_invalid_settings_name_the_flag_the_value_and_the_fix(
    argv: list[str], env: dict[str, str], needles: list[str]
) -> None:
    with pytest.raises(settings.SettingsError) as caught:
        parse(argv, env)
    for needle in needles:
        assert needle in str(caught.value)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(settings.SettingsError) as caught:
        parse(["--cdi-root", "rel", "--log-format", "xml"], {"CONFIGURATION_MODE": "STANDALONE"})
    assert len(caught.value.errors) == 4


def test_multus_layout_defaults_to_multus_defaults_and_no_config_file() -> None:
    got = parse([])
    assert got.multus_layout == interface_naming.DEFAULT_LAYOUT
    assert got.multus_config_file is None


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (
            ["--multus-default-networks", "x, y", "--multus-primary-interface", "ovn0"],
            {},
            interface_naming.MultusLayout("ovn0", ("x", "y"), ("kube-system",), False),
        ),
        (
            [],
            {"MULTUS_SYSTEM_NAMESPACES": "kube-system,infra", "MULTUS_AUXILIARY_CHAIN": "true"},
            interface_naming.MultusLayout("eth0", (), ("kube-system", "infra"), True),
        ),
        (["--multus-system-namespaces="], {}, interface_naming.MultusLayout(system_namespaces=())),
        (["--multus-auxiliary-chain"], {}, interface_naming.MultusLayout(auxiliary_chain=True)),
    ],
    ids=["flags-in-order", "environment", "empty-system-namespaces-means-none", "bare-auxiliary-chain-flag"],
)
def test_multus_layout_is_read_from_flags_or_environment(
    argv: list[str], env: dict[str, str], expected: interface_naming.MultusLayout
) -> None:
    assert parse(argv, {**BASE, **env}).multus_layout == expected


def test_multus_config_file_is_kept_as_an_absolute_path() -> None:
    got = parse([], {**BASE, "MULTUS_CONFIG_FILE": "/etc/cni/net.d/multus.d/daemon-config.json"})
    assert got.multus_config_file == Path("/etc/cni/net.d/multus.d/daemon-config.json")


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (
            ["--multus-config-file", "daemon-config.json"],
            ["--multus-config-file / MULTUS_CONFIG_FILE", "absolute"],
        ),
        (["--multus-primary-interface", "a/b"], ["MULTUS_PRIMARY_INTERFACE", "'/'"]),
        (["--multus-system-namespaces", "kube-system,Infra"], ["MULTUS_SYSTEM_NAMESPACES", "'Infra'"]),
        (["--multus-auxiliary-chain=maybe"], ["MULTUS_AUXILIARY_CHAIN", "'maybe' is not true or false"]),
    ],
    ids=["relative-config-file", "bad-primary-interface", "bad-system-namespace", "bad-auxiliary-chain"],
)
def test_invalid_multus_layout_settings_name_the_flag_and_value(argv: list[str], needles: list[str]) -> None:
    with pytest.raises(settings.SettingsError) as caught:
        parse(argv)
    for needle in needles:
        assert needle in str(caught.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0", ""), ("", ""), (":9464", ":9464"), ("127.0.0.1:0", "127.0.0.1:0"), ("[::1]:9464", "[::1]:9464")],
    ids=["zero-disables", "empty-disables", "all-interfaces", "any-free-port", "ipv6"],
)
def test_metrics_bind_address_forms(value: str, expected: str) -> None:
    assert parse(["--metrics-bind-address", value]).metrics_bind_address == expected


def test_json_logs_carry_extra_fields_and_an_rfc3339_timestamp() -> None:
    stream = io.StringIO()
    logs.configure(logs.LogFormat.JSON, "info", stream=stream)
    try:
        logging.getLogger("t").info("vf driver bound", extra={"pci": "0000:03:02.0", "op": "bind"})
    finally:
        logs.configure(logs.LogFormat.TEXT, "warning", stream=io.StringIO())
    doc = json.loads(stream.getvalue())
    assert doc["msg"] == "vf driver bound"
    assert (doc["pci"], doc["op"], doc["level"], doc["logger"]) == ("0000:03:02.0", "bind", "info", "t")
    assert doc["ts"].endswith("Z")


def test_text_logs_print_extra_fields_as_key_value() -> None:
    stream = io.StringIO()
    logs.configure(logs.LogFormat.TEXT, "info", stream=stream)
    try:
        logging.getLogger("t").warning("prepare failed", extra={"reason": "InvalidClaim", "claim": "a/b"})
    finally:
        logs.configure(logs.LogFormat.TEXT, "warning", stream=io.StringIO())
    line = stream.getvalue()
    assert "WARNING t: prepare failed" in line
    assert "reason=InvalidClaim claim=a/b" in line


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        (
            {**BASE, "CONFIGURATION_MODE": "STANDALONE"},
            "STANDALONE (CNI run by the plugin through NRI) is not supported",
        ),
        ({}, "--node-name / NODE_NAME: is required"),
    ],
    ids=["standalone-mode", "no-node-name"],
)
def test_entrypoint_exits_2_and_prints_the_problem_before_touching_anything(
    env: dict[str, str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main.main([], env) == main.EXIT_BAD_SETTINGS
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "env", "want"),
    [
        ([], {}, 300.0),
        (["--repair-first-pass-timeout-s=45"], {}, 45.0),
        ([], {"REPAIR_FIRST_PASS_TIMEOUT_S": "0"}, 0.0),
        (["--repair-first-pass-timeout-s=2.5"], {"REPAIR_FIRST_PASS_TIMEOUT_S": "9"}, 2.5),
    ],
    ids=["default-300s", "flag", "environment-zero-means-unbounded", "flag-wins-over-environment"],
)
def test_repair_first_pass_timeout_is_read_from_flag_or_environment(
    argv: list[str], env: dict[str, str], want: float
) -> None:
    assert parse(argv, {**BASE, **env}).repair_first_pass_timeout_s == want


@pytest.mark.parametrize(
    "value", ["-1", "soon", "nan", "inf"], ids=["negative", "not-a-number", "nan", "infinite"]
)
def test_an_invalid_repair_first_pass_timeout_names_the_flag_and_value(value: str) -> None:
    with pytest.raises(settings.SettingsError) as caught:
        parse([f"--repair-first-pass-timeout-s={value}"])
    text = str(caught.value)
    assert "--repair-first-pass-timeout-s / REPAIR_FIRST_PASS_TIMEOUT_S" in text and repr(value) in text


@pytest.mark.parametrize(
    ("argv", "env", "want"),
    [([], {}, 8), (["--api-max-in-flight=1"], {}, 1), ([], {"API_MAX_IN_FLIGHT": "16"}, 16)],
    ids=["default-8", "flag-1-one-after-the-other", "environment-at-the-pool-size"],
)
def test_api_max_in_flight_is_read_from_flag_or_environment(
    argv: list[str], env: dict[str, str], want: int
) -> None:
    assert parse(argv, {**BASE, **env}).api_max_in_flight == want


@pytest.mark.parametrize(
    "value", ["0", "17", "-2", "many"], ids=["zero", "above-the-pool", "negative", "not-a-number"]
)
def test_an_invalid_api_max_in_flight_names_the_flag_and_value(value: str) -> None:
    with pytest.raises(settings.SettingsError) as caught:
        parse([f"--api-max-in-flight={value}"])
    text = str(caught.value)
    assert "--api-max-in-flight / API_MAX_IN_FLIGHT" in text and repr(value) in text


@pytest.mark.parametrize(
    ("argv", "env", "want"),
    [
        ([], {}, "NoSchedule"),
        (["--unhealthy-taint-effect=NoExecute"], {}, "NoExecute"),
        ([], {"UNHEALTHY_TAINT_EFFECT": "NoExecute"}, "NoExecute"),
    ],
    ids=["default-no-schedule", "flag-opts-in-to-eviction", "environment"],
)
def test_unhealthy_taint_effect_is_no_schedule_unless_no_execute_is_asked_for(
    argv: list[str], env: dict[str, str], want: str
) -> None:
    assert parse(argv, {**BASE, **env}).unhealthy_taint_effect == want


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("unhealthy-taint-effect", "noexecute"),
        ("unhealthy-taint-effect", "PreferNoSchedule"),
        ("taint-clear-after-s", "-5"),
    ],
    ids=["effect-is-case-sensitive", "effect-the-api-refuses", "negative-clear-time"],
)
def test_invalid_taint_settings_name_the_flag_and_value(flag: str, value: str) -> None:
    with pytest.raises(settings.SettingsError) as caught:
        parse([f"--{flag}={value}"])
    text = str(caught.value)
    assert f"--{flag} / " in text and repr(value) in text


def test_taint_clear_after_s_defaults_to_30_seconds() -> None:
    assert parse([]).taint_clear_after_s == 30.0
    assert parse(["--taint-clear-after-s=5"]).taint_clear_after_s == 5.0
