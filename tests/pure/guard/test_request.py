"""Tests for sriov_dra.guard.request: CNI environment and CNI_ARGS parsing, the K8S_POD_UID edit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.guard import decisions, request

CONF = json.dumps(
    {
        "cniVersion": "1.0.0",
        "name": "net",
        "type": "multus-guard",
        "multus": {"mode": "thin", "primaryConfig": "/p"},
    }
).encode()
ARGS = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns-a;K8S_POD_NAME=pod-a;K8S_POD_INFRA_CONTAINER_ID=abc"
UID = "11111111-2222-3333-4444-555555555555"


def _env(**overrides: str) -> dict[str, str]:
    env = {
        "CNI_COMMAND": "ADD",
        "CNI_CONTAINERID": "c1",
        "CNI_NETNS": "/var/run/netns/x",
        "CNI_IFNAME": "eth0",
        "CNI_ARGS": ARGS,
        "CNI_PATH": "/opt/cni/bin",
    }
    env.update(overrides)
    return {k: v for k, v in env.items() if v != "<unset>"}


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("", ()),
        ("A=1", (("A", "1"),)),
        ("A=1;B=", (("A", "1"), ("B", ""))),
        (ARGS, tuple(tuple(i.split("=")) for i in ARGS.split(";"))),
    ],
    ids=["empty", "one-item", "empty-value-kept", "kubernetes-args"],
)
def test_cni_args_parse(text: str, items: tuple[tuple[str, str], ...]) -> None:
    assert request.parse_cni_args(text) == items


@pytest.mark.parametrize(
    "text",
    ["A=1;", "A=1;;B=2", "A", "A=b=c", "=1"],
    ids=["trailing-semicolon", "empty-item", "no-equals", "value-with-equals", "empty-key"],
)
def test_malformed_cni_args_are_refused_like_multus(text: str) -> None:
    with pytest.raises(decisions.Rejected) as info:
        request.parse_cni_args(text)
    assert info.value.reason is decisions.Reason.INVALID_CNI_REQUEST


def test_add_request_exposes_pod_identity() -> None:
    req = request.parse_request(_env(CNI_ARGS=ARGS + f";K8S_POD_UID={UID}"), CONF)
    assert (req.pod_namespace, req.pod_name, req.pod_uid, req.ifname) == ("ns-a", "pod-a", UID, "eth0")


@pytest.mark.parametrize(
    "env",
    [
        _env(CNI_CONTAINERID="<unset>"),
        _env(CNI_NETNS="<unset>"),
        _env(CNI_ARGS="K8S_POD_NAME=p"),
        _env(CNI_ARGS="K8S_POD_NAMESPACE=n"),
        _env(CNI_COMMAND="<unset>"),
    ],
    ids=["no-container-id", "no-netns", "no-pod-namespace", "no-pod-name", "no-command"],
)
def test_incomplete_add_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(decisions.Rejected) as info:
        request.parse_request(env, CONF)
    assert info.value.reason is decisions.Reason.INVALID_CNI_REQUEST


def test_del_needs_no_pod_identity_and_ignores_cni_args() -> None:
    req = request.parse_request(_env(CNI_COMMAND="DEL", CNI_ARGS="broken;;", CNI_NETNS="<unset>"), CONF)
    assert req.command == "DEL" and req.cni_args == ()


def test_malformed_guard_config_is_refused() -> None:
    with pytest.raises(decisions.Rejected) as info:
        request.parse_request(_env(), b'{"cniVersion":"1.0.0"}')
    assert "name" in str(info.value)


def test_missing_pod_uid_is_appended_once_and_well_formed() -> None:
    req = request.parse_request(_env(), CONF)
    env = request.env_for_multus(req, UID)
    assert env["CNI_ARGS"] == ARGS + f";K8S_POD_UID={UID}"
    assert request.parse_cni_args(env["CNI_ARGS"])[-1] == ("K8S_POD_UID", UID)


def test_empty_pod_uid_is_filled_in_place() -> None:
    req = request.parse_request(_env(CNI_ARGS="K8S_POD_UID=;K8S_POD_NAMESPACE=ns-a;K8S_POD_NAME=pod-a"), CONF)
    env = request.env_for_multus(req, UID)
    assert env["CNI_ARGS"] == f"K8S_POD_UID={UID};K8S_POD_NAMESPACE=ns-a;K8S_POD_NAME=pod-a"


@pytest.mark.parametrize(
    ("env", "uid"),
    [
        (_env(CNI_ARGS=ARGS + ";K8S_POD_UID=" + UID), "22222222-3333-4444-5555-666666666666"),
        (_env(CNI_COMMAND="DEL"), UID),
    ],
    ids=["runtime-uid-kept", "del-never-edited"],
)
def test_environment_is_otherwise_unchanged(env: dict[str, str], uid: str) -> None:
    req = request.parse_request(env, CONF)
    assert request.env_for_multus(req, uid) == env


_key = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=1, max_size=12).filter(
    lambda k: k != "K8S_POD_UID"
)
_value = st.text(alphabet=st.characters(exclude_characters=";=", exclude_categories=("Cs",)), max_size=12)


@given(st.lists(st.tuples(_key, _value), max_size=6))
def test_property_uid_edit_keeps_every_item_in_order_and_parses(items: list[tuple[str, str]]) -> None:
    base = [("K8S_POD_NAMESPACE", "n"), ("K8S_POD_NAME", "p"), *items]
    text = ";".join(f"{k}={v}" for k, v in base)
    req = request.parse_request(_env(CNI_ARGS=text), CONF)
    out: Any = request.parse_cni_args(request.env_for_multus(req, UID)["CNI_ARGS"])
    assert list(out) == [*base, ("K8S_POD_UID", UID)]


def test_guard_config_nested_too_deeply_is_an_invalid_request() -> None:
    with pytest.raises(decisions.Rejected) as info:
        request.parse_request(_env(), b"[" * 100_000 + b"]" * 100_000)
    assert info.value.reason is decisions.Reason.INVALID_CNI_REQUEST
