"""Tests for sriov_dra.core.multusconf: the one reading of Multus's layout keys (plugin and guard)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import ifnames, multusconf
from sriov_dra_rules import errors

SRC = "/etc/cni/net.d/multus.d/daemon-config.json"


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (
            {"defaultNetworks": ["x"], "cniVersion": "1.0.0"},
            {"defaultNetworks": ["x"], "cniVersion": "1.0.0"},
        ),
        (
            {
                "cniVersion": "1.0.0",
                "name": "multus-cni-network",
                "plugins": [{"type": "multus", "defaultNetworks": ["x"], "systemNamespaces": []}],
            },
            {"type": "multus", "defaultNetworks": ["x"], "systemNamespaces": []},
        ),
        (
            {"plugins": [{"type": "tuning"}, {"type": "multus-shim", "defaultNetworks": "a,b"}]},
            {"type": "multus-shim", "defaultNetworks": "a,b"},
        ),
    ],
    ids=[
        "daemon-config-or-conf-is-the-object",
        "thin-conflist-multus-plugin",
        "first-multus-plugin-of-a-chain",
    ],
)
def test_decode_config_returns_the_multus_netconf(document: dict[str, Any], expected: dict[str, Any]) -> None:
    assert multusconf.decode_config(json.dumps(document).encode(), source=SRC) == expected


@pytest.mark.parametrize(
    ("data", "phrase"),
    [
        (b"{not json", "is not JSON"),
        (b"[]", "not an object"),
        (b'{"plugins": {"type": "multus"}}', "plugins must be a list of objects"),
        (b'{"plugins": [{"type": "bridge"}]}', "without a Multus plugin"),
    ],
    ids=["not-json", "not-an-object", "plugins-not-a-list", "conflist-without-multus"],
)
def test_unusable_config_file_is_refused_naming_the_file(data: bytes, phrase: str) -> None:
    with pytest.raises(errors.InvalidSpec) as info:
        multusconf.decode_config(data, source=SRC)
    assert phrase in str(info.value) and SRC in str(info.value)


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ({}, ((), ("kube-system",))),
        ({"defaultNetworks": ["x", "y"]}, (("x", "y"), ("kube-system",))),
        ({"defaultNetworks": " x , y ,"}, (("x", "y"), ("kube-system",))),
        ({"systemNamespaces": ["kube-system", "infra"]}, ((), ("kube-system", "infra"))),
        ({"systemNamespaces": []}, ((), ())),
        ({"systemNamespaces": None, "defaultNetworks": None}, ((), ())),
    ],
    ids=[
        "absent-keys-keep-multus-defaults",
        "default-networks-in-order",
        "comma-separated-string",
        "system-namespaces-replace-the-default",
        "empty-list-means-none",
        "null-means-none",
    ],
)
def test_layout_keys_overlay_the_base(keys: dict[str, Any], expected: tuple[Any, Any]) -> None:
    out = multusconf.layout_from_keys(keys, source=SRC)
    assert (out.default_networks, out.system_namespaces) == expected


def test_absent_keys_keep_the_flags_and_present_keys_win() -> None:
    base = ifnames.MultusLayout(
        primary_ifname="ovn0",
        default_networks=("flag-net",),
        system_namespaces=("infra",),
        auxiliary_chain=True,
    )
    kept = multusconf.layout_from_keys({}, source=SRC, base=base)
    assert kept == base
    out = multusconf.layout_from_keys({"defaultNetworks": ["file-net"]}, source=SRC, base=base)
    assert out == ifnames.MultusLayout("ovn0", ("file-net",), ("infra",), True)
    assert not multusconf.layout_from_keys({}, source=SRC, base=base, auxiliary_chain=False).auxiliary_chain


def test_every_malformed_key_is_reported_with_the_file() -> None:
    with pytest.raises(errors.InvalidSpec) as info:
        multusconf.layout_from_keys({"defaultNetworks": [1], "systemNamespaces": {"a": 1}}, source=SRC)
    assert [e.path for e in info.value.errors] == ["defaultNetworks", "systemNamespaces"]
    assert SRC in str(info.value) and "[1]" in str(info.value)


@pytest.mark.parametrize(
    ("keys", "expected"),
    [({"auxiliaryCNIChainName": "aux"}, "aux"), ({"auxiliaryCNIChainName": ""}, None), ({}, None)],
    ids=["named", "empty-is-none", "absent-is-none"],
)
def test_auxiliary_chain_name(keys: dict[str, Any], expected: str | None) -> None:
    assert multusconf.auxiliary_chain_name(keys) == expected


def test_a_node_with_a_default_network_numbers_the_first_selection_net2() -> None:
    layout = multusconf.layout_from_keys(
        multusconf.decode_config(b'{"defaultNetworks": ["x"]}', source=SRC), source=SRC
    )
    got = [d.name for d in ifnames.final_interface_names([{"name": "a"}], pod_namespace="ns", layout=layout)]
    assert got == ["eth0", "net1", "net2"]


_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-/.", min_size=1, max_size=12)


@given(st.lists(_NAME, max_size=5), st.lists(_NAME, max_size=5))
def test_list_and_comma_forms_read_the_same_and_keep_order(
    networks: list[str], namespaces: list[str]
) -> None:
    as_lists = {"defaultNetworks": networks, "systemNamespaces": namespaces}
    as_text = {"defaultNetworks": ",".join(networks), "systemNamespaces": ",".join(namespaces)}
    for keys in (as_lists, as_text):
        out = multusconf.layout_from_keys(keys, source=SRC)
        assert out.default_networks == tuple(networks) and out.system_namespaces == tuple(namespaces)


@given(
    st.dictionaries(
        st.text(max_size=8).filter(lambda k: k != "plugins"),
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
        max_size=6,
    )
)
def test_decode_config_round_trips_a_plain_object(document: dict[str, Any]) -> None:
    assert multusconf.decode_config(json.dumps(document).encode(), source=SRC) == document
