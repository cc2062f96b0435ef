"""Tests for sriov_dra.guard.shim's shared definitions: guard config, synthesized Multus config, wire format."""

from __future__ import annotations

import ast
import io
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.guard import shim
from sriov_dra_rules import multus_cache

PRIMARY = {
    "cniVersion": "1.0.0",
    "name": "lab-primary",
    "plugins": [{"type": "macvlan", "master": "eth1"}, {"type": "tuning", "capabilities": {"mac": True}}],
}


def _conf(tmp_path: Path, mode: str = "thin", **multus: Any) -> dict[str, Any]:
    primary = tmp_path / "10-primary.conflist"
    primary.write_text(json.dumps(PRIMARY))
    return {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "type": "multus-guard",
        "capabilities": {"mac": True},
        "runtimeConfig": {"mac": "02:00:00:00:00:01"},
        "guard": {"socket": str(tmp_path / "g.sock"), "timeoutSeconds": 5},
        "multus": {"mode": mode, "primaryConfig": str(primary), **multus},
    }


def _parse(obj: dict[str, Any]) -> shim.GuardConf:
    return shim.parse_conf(json.dumps(obj).encode())


def test_shim_imports_only_the_standard_library_and_the_shared_rules() -> None:
    """The rules package itself is held to the standard library by tests/pure/rules."""
    tree = ast.parse(Path(shim.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    stdlib = {"__future__", "enum", "json", "os", "pathlib", "socket", "stat", "sys", "time", "typing"}
    assert imported <= stdlib | {"sriov_dra_rules"}


def test_parse_conf_reads_every_key(tmp_path: Path) -> None:
    conf = _parse(
        _conf(tmp_path, "thick", daemonSocketDir="/run/m/", clusterNetwork="/host/p", config={"cniDir": "/c"})
    )
    assert (conf.mode, conf.daemon_socket_dir, conf.cluster_network, conf.extra) == (
        "thick",
        "/run/m/",
        "/host/p",
        {"cniDir": "/c"},
    )
    assert conf.timeout_s == 5.0 and conf.socket == str(tmp_path / "g.sock")
    assert (conf.plugin_checkpoint, conf.verify_ordinary_selections) == (
        "/var/lib/kubelet/plugins/sriovnetwork.k8snetworkplumbingwg.io/checkpoint.json",
        False,
    )
    obj = _conf(tmp_path)
    obj["guard"].update(pluginCheckpoint="/s/checkpoint.json", verifyOrdinarySelections=True)
    assert (_parse(obj).plugin_checkpoint, _parse(obj).verify_ordinary_selections) == (
        "/s/checkpoint.json",
        True,
    )


@pytest.mark.parametrize(
    ("change", "mentions"),
    [
        (lambda c: c["multus"].pop("mode"), "multus.mode"),
        (lambda c: c["multus"].update(mode="fat"), "multus.mode"),
        (lambda c: c["multus"].pop("primaryConfig"), "primaryConfig"),
        (lambda c: c["multus"].update(config={"delegates": []}), "delegates"),
        (lambda c: c["guard"].update(timeoutSeconds=0), "timeoutSeconds"),
        (lambda c: c["guard"].update(timeoutSeconds=True), "timeoutSeconds"),
        (lambda c: c["guard"].update(timeoutSeconds=1e308), "up to 3600"),
        (lambda c: c["guard"].update(timeoutSeconds=10**400), "timeoutSeconds must be a positive number"),
        (lambda c: c.update(multus="thin"), "multus must be an object, got a string"),
        (lambda c: c.pop("cniVersion"), "cniVersion"),
        (lambda c: c["multus"].update(kubeconfig=""), "kubeconfig"),
        (lambda c: c["guard"].update(pluginCheckpoint=""), "guard.pluginCheckpoint"),
        (
            lambda c: c["guard"].update(verifyOrdinarySelections="true"),
            "verifyOrdinarySelections must be true or false",
        ),
    ],
    ids=[
        "mode-missing",
        "mode-unknown",
        "primary-missing",
        "reserved-key-in-multus-config",
        "timeout-zero",
        "timeout-boolean",
        "timeout-past-an-hour",
        "timeout-a-400-digit-integer",
        "multus-not-an-object",
        "cni-version-missing",
        "empty-kubeconfig",
        "empty-plugin-checkpoint",
        "verify-ordinary-selections-a-string",
    ],
)
def test_parse_conf_refuses_with_the_key_named(tmp_path: Path, change: Any, mentions: str) -> None:
    obj = _conf(tmp_path)
    change(obj)
    with pytest.raises(shim.GuardConfError) as info:
        _parse(obj)
    assert mentions in str(info.value)


def test_thick_config_holds_socket_dir_primary_and_runtime_values(tmp_path: Path) -> None:
    conf = _parse(_conf(tmp_path, "thick", daemonSocketDir="/run/m/", config={"logLevel": "debug"}))
    out = shim.multus_config(conf)
    assert out == {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "logLevel": "debug",
        "capabilities": {"mac": True},
        "runtimeConfig": {"mac": "02:00:00:00:00:01"},
        "type": "multus-shim",
        "daemonSocketDir": "/run/m/",
        "delegates": [PRIMARY],
        "retryDeleteOnError": True,
    }


@pytest.mark.parametrize("mode", ["thick", "thin"])
def test_multus_keeps_the_cache_after_a_failed_delegate_del_unless_the_admin_says_otherwise(
    tmp_path: Path, mode: str
) -> None:
    assert shim.multus_config(_parse(_conf(tmp_path, mode)), teardown=True)["retryDeleteOnError"] is True
    conf = _parse(_conf(tmp_path, mode, config={"retryDeleteOnError": False}))
    assert shim.multus_config(conf, teardown=True)["retryDeleteOnError"] is False


@pytest.mark.parametrize("mode", ["thick", "thin"])
def test_cluster_network_setting_replaces_the_inlined_primary(tmp_path: Path, mode: str) -> None:
    conf = _parse(_conf(tmp_path, mode, clusterNetwork="/host/etc/cni/net.d/10-primary.conflist"))
    out = shim.multus_config(conf)
    assert out["clusterNetwork"] == "/host/etc/cni/net.d/10-primary.conflist" and "delegates" not in out


def test_thin_config_inlines_the_primary_and_names_the_kubeconfig(tmp_path: Path) -> None:
    conf = _parse(_conf(tmp_path, "thin", kubeconfig="/k", config={"cniDir": "/c"}))
    out = shim.multus_config(conf)
    assert out["type"] == "multus" and out["kubeconfig"] == "/k" and out["delegates"] == [PRIMARY]
    assert out["cniDir"] == "/c" and "clusterNetwork" not in out


@pytest.mark.parametrize("mode", ["thick", "thin"])
def test_unreadable_primary_fails_add_but_not_teardown(tmp_path: Path, mode: str) -> None:
    obj = _conf(tmp_path, mode)
    obj["multus"]["primaryConfig"] = str(tmp_path / "gone.conflist")
    conf = _parse(obj)
    with pytest.raises(shim.GuardConfError, match=r"gone\.conflist"):
        shim.multus_config(conf)
    out = shim.multus_config(conf, teardown=True)
    assert out["clusterNetwork"] == str(tmp_path / "gone.conflist") and "delegates" not in out


def test_synthesized_config_never_refers_to_multus_own_file(tmp_path: Path) -> None:
    for mode in ("thin", "thick"):
        assert "00-multus.conf" not in json.dumps(shim.multus_config(_parse(_conf(tmp_path, mode))))


def test_multus_binary_is_explicit_or_found_on_cni_path(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "multus-shim"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert shim.multus_binary(_parse(_conf(tmp_path, "thick")), f"/nowhere:{tmp_path / 'bin'}") == str(fake)
    assert shim.multus_binary(_parse(_conf(tmp_path, "thin", binary="/x/multus")), "") == "/x/multus"
    with pytest.raises(shim.GuardConfError, match="multus not found"):
        shim.multus_binary(_parse(_conf(tmp_path, "thin")), str(tmp_path / "bin"))


def test_request_carries_only_cni_variables() -> None:
    data = json.loads(shim.encode_request({"CNI_COMMAND": "ADD", "HOME": "/root", "CNI_ARGS": "a=b"}, b"{}"))
    assert data == {
        "protocol": shim.PROTOCOL,
        "env": {"CNI_COMMAND": "ADD", "CNI_ARGS": "a=b"},
        "stdin": "{}",
    }


@given(st.integers(min_value=0, max_value=255), st.text())
def test_property_response_round_trips(code: int, stdout: str) -> None:
    assert shim.decode_response(shim.encode_response(code, stdout)) == (code, stdout)


@pytest.mark.parametrize(
    "data",
    [b"[]", b'{"exitCode": "0", "stdout": ""}', b'{"exitCode": true, "stdout": ""}', b'{"exitCode": 0}'],
    ids=["not-object", "string-code", "boolean-code", "no-stdout"],
)
def test_malformed_response_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        shim.decode_response(data)


def test_read_all_enforces_the_size_limit() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"x" * 100)
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(ValueError, match="larger than 10"):
            shim.read_all(b, limit=10)


def test_cni_error_object_shape() -> None:
    assert json.loads(shim.cni_error("0.4.0", 11, "m", "d")) == {
        "cniVersion": "0.4.0",
        "code": 11,
        "msg": "m",
        "details": "d",
    }


@pytest.mark.parametrize(
    ("text", "mentions"),
    [
        (b'{"cniVersion": "1.0.0", "name": "a", "name": "b"}', '$.name: duplicate key "name"'),
        (
            b'{"cniVersion": "1.0.0", "name": "a", "guard": {"timeoutSeconds": NaN}}',
            "NaN is not a JSON number",
        ),
        (b'{"cniVersion": "1.0.0", "name": "\xff"}', "not UTF-8 text"),
    ],
    ids=["repeated-key", "nan", "not-utf8"],
)
def test_parse_conf_reads_stdin_with_the_one_strict_json_reader(text: bytes, mentions: str) -> None:
    with pytest.raises(shim.GuardConfError) as info:
        shim.parse_conf(text)
    assert str(info.value).startswith("the CNI config on stdin is not JSON: ") and mentions in str(info.value)


def test_parse_conf_refuses_nesting_too_deep_to_decode_with_a_guard_conf_error() -> None:
    with pytest.raises(shim.GuardConfError) as info:
        shim.parse_conf(b"[" * 100_000 + b"]" * 100_000)
    assert "not JSON" in str(info.value) and "nested too deeply" in str(info.value)


def test_primary_config_nested_too_deeply_fails_add_with_a_guard_conf_error(tmp_path: Path) -> None:
    conf = _parse(_conf(tmp_path))
    Path(conf.primary_config).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(shim.GuardConfError) as info:
        shim.multus_config(conf)
    assert conf.primary_config in str(info.value) and "nested too deeply" in str(info.value)


class _Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)


def test_add_over_the_message_limit_is_refused_by_the_shim_with_the_size_not_a_broken_pipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    obj = _conf(tmp_path)
    obj["guard"]["verifyOrdinarySelections"] = True  # every ADD goes to the daemon
    obj["runtimeConfig"]["padding"] = "x" * shim.MAX_MESSAGE_BYTES
    monkeypatch.setattr(shim.sys, "stdin", _Stdin(json.dumps(obj).encode()))
    monkeypatch.setattr(shim.os, "environ", {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1"})
    assert shim.main() == 1
    error = json.loads(capsys.readouterr().out)
    assert error["code"] == shim.CniErrorCode.INVALID_CONFIG
    assert f"limit of {shim.MAX_MESSAGE_BYTES} bytes" in error["msg"]


# --------------------------------------------------------------------- Multus's delegate cache on DEL

CACHE = json.dumps(
    [
        {
            "Conf": {"cniVersion": "1.0.0", "name": "lab-primary", "type": ""},
            "ConfList": {"cniVersion": "1.0.0", "name": "lab-primary", "plugins": [{"type": "macvlan"}]},
            "Name": "lab-primary",
            "ifnameRequest": "",
            "Bytes": "eyJjbmlWZXJzaW9uIjoiMS4wLjAifQ==",
        },
        {"Conf": {"cniVersion": "1.0.0", "name": "rail-a", "type": "sriov"}, "Name": "ns/dra-sriov-a"},
    ]
).encode()
"""A delegate cache as Multus v4.3.0 writes it (``json.Marshal`` of ``[]*DelegateNetConf``)."""


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "0 bytes"),
        (b"\n  ", "only whitespace"),
        (CACHE[: len(CACHE) // 2], "not JSON"),
        (b"\xef\xbb\xbf" + CACHE, "not JSON"),
        (b'[{"Name": NaN}]', "not JSON"),
        (b"null", "a JSON null, not a list"),
        (b'{"Name": "x"}', "a JSON object, not a list"),
        (b"[]", "an empty list"),
        (b'[{"Name": "x"}, null]', "delegate [1] is not a JSON object"),
    ],
    ids=[
        "zero-bytes",
        "whitespace",
        "half-written",
        "byte-order-mark",
        "nan",
        "null",
        "object",
        "empty-list",
        "null-entry",
    ],
)
def test_cache_multus_cannot_use_is_named_with_its_problem(data: bytes, problem: str) -> None:
    found = multus_cache.cache_problem(data)
    assert found is not None and problem in found


def test_cache_as_multus_writes_it_is_usable() -> None:
    assert multus_cache.cache_problem(CACHE) is None


@given(st.integers(min_value=0, max_value=len(CACHE) - 1))
def test_property_every_truncation_of_a_cache_is_unusable(cut: int) -> None:
    assert multus_cache.cache_problem(CACHE[:cut]) is not None


@given(st.binary(max_size=300))
def test_property_any_bytes_give_a_problem_or_none_never_an_exception(data: bytes) -> None:
    found = multus_cache.cache_problem(data)
    assert found is None or (isinstance(found, str) and found)


def test_cache_dir_is_multus_default_or_multus_config(tmp_path: Path) -> None:
    assert shim.multus_cache_dir(_parse(_conf(tmp_path, "thin"))) == "/var/lib/cni/multus"
    assert shim.multus_cache_dir(_parse(_conf(tmp_path, "thin", config={"cniDir": "/c"}))) == "/c"


def test_thick_daemon_config_cni_dir_wins_as_in_multus_overlay(tmp_path: Path) -> None:
    daemon = tmp_path / "daemon-config.json"
    daemon.write_text(json.dumps({"cniVersion": "1.0.0", "cniDir": "/d"}))
    conf = _parse(_conf(tmp_path, "thick", daemonConfigFile=str(daemon), config={"cniDir": "/c"}))
    assert shim.multus_cache_dir(conf) == "/d"
    daemon.write_text(json.dumps({"cniVersion": "1.0.0"}))
    assert shim.multus_cache_dir(conf) == "/c"


@pytest.mark.parametrize(
    ("daemon_text", "mentions"),
    [
        (None, "cannot read Multus daemon config"),
        ('{"cniDir": "/a", "cniDir": "/b"}', 'duplicate key "cniDir"'),
        ('["cniDir"]', "is not a JSON object"),
        ('{"cniDir": 5}', "cniDir in"),
        ('{"cniDir": ""}', "non-empty path"),
    ],
    ids=["missing-file", "repeated-key", "not-an-object", "not-a-string", "empty"],
)
def test_thick_cache_dir_is_not_guessed_from_a_daemon_config_it_cannot_read(
    tmp_path: Path, daemon_text: str | None, mentions: str
) -> None:
    daemon = tmp_path / "daemon-config.json"
    if daemon_text is not None:
        daemon.write_text(daemon_text)
    conf = _parse(_conf(tmp_path, "thick", daemonConfigFile=str(daemon)))
    with pytest.raises(shim.GuardConfError, match=mentions) as info:
        shim.multus_cache_dir(conf)
    assert str(daemon) in str(info.value) or "cniDir" in str(info.value)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("0123abcdef", True),
        ("c-1.2_x", True),
        ("", False),
        ("../etc", False),
        ("a/b", False),
        (".x", False),
        ("é", False),
    ],
)
def test_only_a_cni_container_id_names_a_cache_file(value: str, valid: bool) -> None:
    assert multus_cache.is_container_id(value) is valid


_ARGS = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=c1"


@pytest.mark.parametrize(
    ("mode", "args", "expected"),
    [
        ("thick", _ARGS, f"{_ARGS};K8S_POD_UID="),
        ("thick", f"{_ARGS};K8S_POD_UID=u-1", f"{_ARGS};K8S_POD_UID=u-1"),
        ("thick", f"{_ARGS};K8S_POD_UID=", f"{_ARGS};K8S_POD_UID="),
        ("thin", _ARGS, _ARGS),
        ("thick", "", ""),
        ("thick", f"{_ARGS};", f"{_ARGS};"),
        ("thick", "K8S_POD_NAME=a=b", "K8S_POD_NAME=a=b"),
    ],
    ids=[
        "thick-without-uid-gets-an-empty-one",
        "thick-with-uid-unchanged",
        "thick-with-empty-uid-unchanged",
        "thin-unchanged",
        "no-args-unchanged",
        "trailing-semicolon-left-for-multus-to-refuse",
        "item-with-two-equals-left-for-multus-to-refuse",
    ],
)
def test_thick_del_without_pod_uid_gets_an_empty_one_and_nothing_else_changes(
    tmp_path: Path, mode: str, args: str, expected: str
) -> None:
    env = {"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c1", "CNI_ARGS": args, "PATH": "/bin"}
    out = shim.thick_del_env(_parse(_conf(tmp_path, mode)), env)
    assert out == {**env, "CNI_ARGS": expected}
