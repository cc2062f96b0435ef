"""Tests for sriov_dra.core.multus_conf: the one reading of Multus's layout keys (plugin and guard)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import interface_naming, multus_conf
from sriov_dra_rules import errors

SRC = "/etc/cni/net.d/multus.d/daemon-config.json"


def _at(path: str) -> str:
    """The path of a field of the file as decode_config names it (``$.a.b``; ``$`` is the file)."""
    return path if path.startswith("$") else f"${path}" if path.startswith("[") else f"$.{path}"


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
            {"plugins": [{"type": "tuning"}, {"type": "multus-shim", "defaultNetworks": ["a", "b"]}]},
            {"type": "multus-shim", "defaultNetworks": ["a", "b"]},
        ),
    ],
    ids=[
        "daemon-config-or-conf-is-the-object",
        "thin-conflist-multus-plugin",
        "first-multus-plugin-of-a-chain",
    ],
)
def test_decode_config_returns_the_multus_netconf(document: dict[str, Any], expected: dict[str, Any]) -> None:
    assert multus_conf.decode_config(json.dumps(document).encode(), source=SRC) == expected


@pytest.mark.parametrize(
    ("data", "path", "phrase"),
    [
        (b"{not json", "$", "malformed JSON at line 1 column 2"),
        (b"[]", "$", "the JSON root is a list, not an object"),
        (b"\xff{}", "$", "save it as UTF-8"),
        (b'{"plugins": {"type": "multus"}}', "plugins", "must be a non-empty list of objects, got an object"),
        (b'{"plugins": []}', "plugins", "must be a non-empty list of objects, got a list []"),
        (
            b'{"plugins": [3, {"type": "multus"}]}',
            "plugins[0]",
            "must be an object (one plugin), got a number 3",
        ),
        (b'{"plugins": [{"type": ""}, {"type": "multus"}]}', "plugins[0].type", "must be a non-empty string"),
        (b'{"name": 7, "plugins": [{"type": "multus"}]}', "name", "must be a string, got a number 7"),
        (
            b'{"cniVersion": null, "plugins": [{"type": "multus"}]}',
            "cniVersion",
            "must be a string, got null",
        ),
        (
            b'{"cniVersions": ["1.0.0", 1], "plugins": [{"type": "multus"}]}',
            "cniVersions",
            "a list of strings",
        ),
        (b'{"disableCheck": "yes", "plugins": [{"type": "multus"}]}', "disableCheck", "must be a boolean"),
    ],
    ids=[
        "not-json",
        "not-an-object",
        "not-utf8",
        "plugins-not-a-list",
        "plugins-empty",
        "plugin-not-an-object",
        "plugin-type-empty",
        "conflist-name-not-a-string",
        "conflist-cni-version-null",
        "conflist-cni-versions-not-strings",
        "conflist-flag-not-a-boolean",
    ],
)
def test_unusable_config_file_is_refused_naming_the_file_and_the_field(
    data: bytes, path: str, phrase: str
) -> None:
    with pytest.raises(errors.InvalidSpec) as info:
        multus_conf.decode_config(data, source=SRC)
    assert SRC in str(info.value)
    assert [e.path for e in info.value.errors] == [_at(path)]
    assert phrase in info.value.errors[0].message


def test_conflist_without_a_multus_plugin_is_refused_naming_the_types() -> None:
    with pytest.raises(errors.InvalidSpec) as info:
        multus_conf.decode_config(b'{"plugins": [{"type": "bridge"}]}', source=SRC)
    assert (
        SRC in str(info.value)
        and "without a Multus plugin" in str(info.value)
        and "'bridge'" in str(info.value)
    )


@pytest.mark.parametrize("bad", [[], {}, ["multus"], 5, True, None], ids=repr)
def test_multus_config_with_a_non_string_plugin_type_is_a_typed_error_naming_the_field(bad: object) -> None:
    """``{"plugins":[{"type":[]}]}`` is a typed error naming the field, never a ``TypeError``."""
    data = json.dumps({"plugins": [{"type": "tuning"}, {"type": bad}, {"type": "multus"}]}).encode()
    with pytest.raises(errors.InvalidSpec) as info:
        multus_conf.decode_config(data, source=SRC)
    assert [e.path for e in info.value.errors] == ["$.plugins[1].type"]
    assert "must be a non-empty string" in str(info.value) and SRC in str(info.value)


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (b'{"defaultNetworks": ["a"], "defaultNetworks": ["b"]}', "defaultNetworks"),
        (b'{"plugins": [{"type": "multus", "systemNamespaces": [], "systemNamespaces": ["x"]}]}',
         "plugins[0].systemNamespaces"),
        (b'{"logOptions": {"maxAge": 1, "maxAge": 2}}', "logOptions.maxAge"),
    ],
    ids=["root", "inside-the-multus-plugin", "nested-object"],
)  # fmt: skip
def test_multus_config_with_a_repeated_key_is_refused_with_its_path(data: bytes, path: str) -> None:
    """A repeated key (``defaultNetworks`` twice) is refused, never last-one-wins."""
    with pytest.raises(errors.InvalidSpec) as info:
        multus_conf.decode_config(data, source=SRC)
    assert [e.path for e in info.value.errors] == [_at(path)]
    assert "duplicate key" in str(info.value) and SRC in str(info.value)


@pytest.mark.parametrize(
    ("document", "path", "phrase"),
    [
        ({"clusterNetwork": []}, "clusterNetwork", "must be a string, got a list []"),
        ({"defaultNetworks": "a,b"}, "defaultNetworks", "no comma-separated form"),
        ({"systemNamespaces": ["kube-system", None]}, "systemNamespaces", "must be a list of strings"),
        ({"namespaceIsolation": "true"}, "namespaceIsolation", "must be a boolean"),
        ({"retryDeleteOnError": 1}, "retryDeleteOnError", "must be a boolean"),
        ({"globalNamespaces": ["default"]}, "globalNamespaces", "must be a string"),
        ({"auxiliaryCNIChainName": 3}, "auxiliaryCNIChainName", "must be a string"),
        ({"capabilities": {"portMappings": "yes"}}, "capabilities", "an object of booleans"),
        ({"delegates": [{"type": "x"}, "y"]}, "delegates", "a list of objects"),
        ({"prevResult": []}, "prevResult", "must be an object"),
        ({"connectionLimit": 1.5}, "connectionLimit", "must be an integer, got a number 1.5"),
        ({"metricsPort": 2**63}, "metricsPort", "must be an integer"),
        ({"logOptions": {"compress": "no"}}, "logOptions.compress", "must be a boolean"),
        ({"logOptions": []}, "logOptions", "must be an object"),
        ({"perNodeCertificate": {"enabled": "true"}}, "perNodeCertificate.enabled", "must be a boolean"),
        ({"runtimeConfig": {"portMappings": [{"hostPort": "80"}]}}, "runtimeConfig.portMappings[0].hostPort",
         "must be an integer"),
        ({"runtimeConfig": {"portMappings": {}}}, "runtimeConfig.portMappings", "a list of objects"),
        ({"dns": {"nameservers": "1.1.1.1"}}, "dns.nameservers", "must be a list of strings"),
        ({"cni.dev/valid-attachments": [7]}, '["cni.dev/valid-attachments"][0]', "must be an object"),
    ],
    ids=lambda v: v if isinstance(v, str) and "." not in v and " " not in v else None,
)  # fmt: skip
def test_multus_config_key_of_the_wrong_json_type_is_refused_with_its_path(
    document: dict[str, Any], path: str, phrase: str
) -> None:
    for data, where in (
        (json.dumps(document).encode(), _at(path)),
        (
            json.dumps({"plugins": [{"type": "multus", **document}]}).encode(),
            f"$.plugins[0].{path}".replace(".[", "["),
        ),
    ):
        with pytest.raises(errors.InvalidSpec) as info:
            multus_conf.decode_config(data, source=SRC)
        assert [e.path for e in info.value.errors] == [where], info.value
        assert phrase in info.value.errors[0].message and SRC in str(info.value)


def test_every_wrong_key_is_reported_at_once() -> None:
    data = b'{"clusterNetwork": 1, "logLevel": [], "logOptions": {"maxAge": "x", "maxSize": true}}'
    with pytest.raises(errors.InvalidSpec) as info:
        multus_conf.decode_config(data, source=SRC)
    assert [e.path for e in info.value.errors] == [
        "$.clusterNetwork",
        "$.logLevel",
        "$.logOptions.maxAge",
        "$.logOptions.maxSize",
    ]


@pytest.mark.parametrize(
    ("document", "path"),
    [
        ({"DefaultNetworks": ["x"]}, "DefaultNetworks"),
        ({"defaultNetworks": [], "defaultnetworks": ["x"]}, "defaultnetworks"),
        ({"\u017fystemNamespaces": ["x"]}, '["\u017fystemNamespaces"]'),  # long s folds to s in Go
        ({"logOptions": {"MAXAGE": 1}}, "logOptions.MAXAGE"),
    ],
    ids=["capitalised", "second-spelling-beside-the-exact-one", "unicode-fold", "nested"],
)
def test_multus_config_key_in_another_letter_case_is_refused_because_go_would_read_it(
    document: dict[str, Any], path: str
) -> None:
    with pytest.raises(errors.InvalidSpec) as info:
        multus_conf.decode_config(json.dumps(document).encode(), source=SRC)
    assert [e.path for e in info.value.errors] == [_at(path)]
    assert "spell it" in str(info.value)


def test_null_keys_keep_multus_defaults_and_unknown_keys_are_kept() -> None:
    document = {
        "clusterNetwork": None,
        "namespaceIsolation": None,
        "logOptions": None,
        "capabilities": {"portMappings": None},
        "x-vendor": [1, {"a": 2}],
        "Plugins-note": "not a Multus key",
    }
    assert multus_conf.decode_config(json.dumps(document).encode(), source=SRC) == document


def test_a_valid_thick_daemon_config_decodes_unchanged() -> None:
    document = {
        "chrootDir": "/hostroot",
        "cniVersion": "0.3.1",
        "logLevel": "verbose",
        "logToStderr": True,
        "logOptions": {"maxAge": 5, "maxSize": 100, "maxBackups": 5, "compress": True},
        "perNodeCertificate": {
            "enabled": True,
            "bootstrapKubeconfig": "/b",
            "certDir": "/c",
            "certDuration": "10m",
        },
        "connectionLimit": 10,
        "metricsPort": 9091,
        "enablePprof": False,
        "cniConfigDir": "/host/etc/cni/net.d",
        "multusAutoconfigDir": "/host/etc/cni/net.d",
        "multusConfigFile": "auto",
        "socketDir": "/host/run/multus/",
        "defaultNetworks": ["x"],
        "systemNamespaces": ["kube-system"],
        "globalNamespaces": "default,infra",
        "retryDeleteOnError": True,
        "capabilities": {"portMappings": True},
    }
    assert multus_conf.decode_config(json.dumps(document).encode(), source=SRC) == document


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ({}, ((), ("kube-system",))),
        ({"defaultNetworks": ["x", "y"]}, (("x", "y"), ("kube-system",))),
        ({"systemNamespaces": ["kube-system", "infra"]}, ((), ("kube-system", "infra"))),
        ({"systemNamespaces": []}, ((), ())),
        ({"systemNamespaces": None, "defaultNetworks": None}, ((), ())),
    ],
    ids=[
        "absent-keys-keep-multus-defaults",
        "default-networks-in-order",
        "system-namespaces-replace-the-default",
        "empty-list-means-none",
        "null-means-none",
    ],
)
def test_layout_keys_overlay_the_base(keys: dict[str, Any], expected: tuple[Any, Any]) -> None:
    out = multus_conf.layout_from_keys(keys, source=SRC)
    assert (out.default_networks, out.system_namespaces) == expected


def test_absent_keys_keep_the_flags_and_present_keys_win() -> None:
    base = interface_naming.MultusLayout(
        primary_ifname="ovn0",
        default_networks=("flag-net",),
        system_namespaces=("infra",),
        auxiliary_chain=True,
    )
    kept = multus_conf.layout_from_keys({}, source=SRC, base=base)
    assert kept == base
    out = multus_conf.layout_from_keys({"defaultNetworks": ["file-net"]}, source=SRC, base=base)
    assert out == interface_naming.MultusLayout("ovn0", ("file-net",), ("infra",), True)
    assert not multus_conf.layout_from_keys({}, source=SRC, base=base, auxiliary_chain=False).auxiliary_chain


def test_every_malformed_key_is_reported_with_the_file() -> None:
    with pytest.raises(errors.InvalidSpec) as info:
        multus_conf.layout_from_keys(
            {"defaultNetworks": [1], "systemNamespaces": {"a": 1}, "clusterNetwork": []}, source=SRC
        )
    assert [e.path for e in info.value.errors] == ["defaultNetworks", "systemNamespaces", "clusterNetwork"]
    assert SRC in str(info.value) and "[1]" in str(info.value)


def test_a_comma_separated_list_key_is_refused_as_multus_refuses_it() -> None:
    """Multus v4.3.0 decodes ``systemNamespaces`` as ``[]string``: a string fails its LoadNetConf."""
    with pytest.raises(errors.InvalidSpec) as info:
        multus_conf.layout_from_keys({"systemNamespaces": "kube-system, infra"}, source=SRC)
    assert [e.path for e in info.value.errors] == ["systemNamespaces"]
    assert "write a JSON list" in str(info.value)


@pytest.mark.parametrize(
    ("keys", "expected"),
    [({"auxiliaryCNIChainName": "aux"}, "aux"), ({"auxiliaryCNIChainName": ""}, None), ({}, None)],
    ids=["named", "empty-is-none", "absent-is-none"],
)
def test_auxiliary_chain_name(keys: dict[str, Any], expected: str | None) -> None:
    assert multus_conf.auxiliary_chain_name(keys) == expected


def test_a_node_with_a_default_network_numbers_the_first_selection_net2() -> None:
    layout = multus_conf.layout_from_keys(
        multus_conf.decode_config(b'{"defaultNetworks": ["x"]}', source=SRC), source=SRC
    )
    got = [
        d.name
        for d in interface_naming.final_interface_names([{"name": "a"}], pod_namespace="ns", layout=layout)
    ]
    assert got == ["eth0", "net1", "net2"]


_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-/.", min_size=1, max_size=12)


@given(st.lists(_NAME, max_size=5), st.lists(_NAME, max_size=5))
def test_list_keys_read_in_order_from_the_file(networks: list[str], namespaces: list[str]) -> None:
    data = json.dumps({"defaultNetworks": networks, "systemNamespaces": namespaces}).encode()
    out = multus_conf.layout_from_keys(multus_conf.decode_config(data, source=SRC), source=SRC)
    assert out.default_networks == tuple(networks) and out.system_namespaces == tuple(namespaces)


_FOLDED_KEYS = {k.casefold() for k in multus_conf.NETCONF_KEYS}


@given(
    st.dictionaries(
        st.text(max_size=8).filter(lambda k: k != "plugins" and k.casefold() not in _FOLDED_KEYS),
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
        max_size=6,
    )
)
def test_decode_config_round_trips_an_object_of_keys_multus_does_not_read(document: dict[str, Any]) -> None:
    assert multus_conf.decode_config(json.dumps(document).encode(), source=SRC) == document
