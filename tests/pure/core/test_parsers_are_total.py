"""Every core parser of text or objects from outside is total: a result or its typed error.

One property per parser (the Multus config, CNI configs and the template path, the networks,
registry and binding annotations, the checkpoint codec, node policies, SriovResourcePolicy and
DeviceAttributes objects, the DRA policy plan, VfConfig, SriovNetwork objects and their source
NADs): whatever it is given, it returns its
result or raises the typed error its docstring names (a ``sriov_dra_rules.errors.SriovDraError``
subclass, with a message that has a UTF-8 form); any other exception fails the property.

The inputs come in three kinds so that they reach the deep validators, not only the first type
check: arbitrary JSON-ish values and text; valid fixtures with up to four random mutations at
random paths (a value replaced by another JSON value or by another field's valid value, a key
removed or added, a value wrapped in a list or turned into its JSON text, a list element
repeated); and the JSON text of a (mutated) fixture edited as text (cut short, a character
inserted or removed, one key repeated, a key repeated after a first value that repeats a key of
its own, a value replaced by a number of 4,301 digits). Keys and values include lone surrogates
and strings that hold numbers past Python's integer-string limit (a CIDR prefix, a VF range).

Examples: each property runs the profile's ``max_examples`` (500 under the CI profile of
tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tests.fakes import operator_objects as oo

from sriov_dra.core import (
    binding_annotation,
    device_facts,
    multus_conf,
    networks,
    policies,
    registry,
    render,
    templates,
    vf_config,
)
from sriov_dra.core.operator import dra_policy, network_refs, node_policy, sriov_network
from sriov_dra.core.plugin import checkpoint_codec
from sriov_dra_rules import checkpoint_doc, errors, strict_json

T = TypeVar("T")
FIXTURES = Path(__file__).parents[2] / "fixtures"
total = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
"""The settings of every property here."""

# --------------------------------------------------------------------------- input strategies

_SURROGATES = st.text(st.characters(categories=["Cs"]), min_size=1, max_size=2)
"""Lone surrogates (a JSON ``"\\ud800"`` escape decodes to one), as keys and as values."""
_LONG_DIGITS = "9" * 4301
"""More digits than Python converts between ``int`` and ``str`` by default (4,300)."""
_PAST_LIMITS = [
    _LONG_DIGITS,
    f"10.0.0.5/{_LONG_DIGITS}",
    f"10.0.0.0/{_LONG_DIGITS}",
    f"ens1f0#0-{_LONG_DIGITS}",
    f"192.0.2.1-192.0.2.9/{_LONG_DIGITS}",
]
"""Strings that hold numbers past Python's limits, where a parser might convert them."""

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(),
    st.sampled_from([2**63 - 1, 2**63, -(2**63) - 1, 10**400]),
    st.floats(),
    st.text(max_size=12),
    _SURROGATES,
    st.sampled_from(
        ["", " ", "0000:3b:02.1", "sriov", "multus", "1.0.0", "FromClaim", "a,b", "{}", "[]", "null"]
    ),
    st.sampled_from(_PAST_LIMITS),
)


def _json_values(keys: st.SearchStrategy[str], leaves: int = 12) -> st.SearchStrategy[Any]:
    return st.recursive(
        _SCALARS,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
        max_leaves=leaves,
    )


def _walk(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, (*path, i))


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return doc


def _keys_of(fixtures: list[Any]) -> list[str]:
    return sorted({k for f in fixtures for _, v in _walk(f) if isinstance(v, dict) for k in v})


def _leaves_of(fixtures: list[Any]) -> list[Any]:
    seen: dict[str, Any] = {}
    for f in fixtures:
        for _, v in _walk(f):
            if not isinstance(v, dict | list):
                seen.setdefault(json.dumps(v), v)
    return list(seen.values())


def _pick(draw: st.DrawFn, items: list[T]) -> T:
    """One of ``items`` (cheaper than a new ``sampled_from`` strategy per draw)."""
    return items[draw(st.integers(0, len(items) - 1))]


_OPS = ("replace", "replace", "delete", "add", "wrap", "as-text", "repeat")
_TEXT_OPS = ("repeat-key", "nested-repeat", "long-number", "cut", "insert", "remove")
_OBJECT_OPS = 3
"""The first ``_OBJECT_OPS`` of ``_TEXT_OPS`` need an object in the document."""
_STRAY = '{}[],:"\\ 0-.eNa\x00\u2028'


@st.composite
def _mutated(
    draw: st.DrawFn, fixtures: list[Any], keys: st.SearchStrategy[str], values: st.SearchStrategy[Any]
) -> Any:
    """A deep copy of one fixture with up to four random edits at random paths."""
    doc = copy.deepcopy(_pick(draw, fixtures))
    for _ in range(draw(st.integers(0, 4))):
        path, node = _pick(draw, list(_walk(doc)))
        op = _pick(draw, list(_OPS))
        if op == "replace":
            doc = _set(doc, path, draw(values))
        elif op == "delete" and path:
            parent = doc
            for step in path[:-1]:
                parent = parent[step]
            del parent[path[-1]]
        elif op == "add" and isinstance(node, dict):
            node[draw(keys)] = draw(values)
        elif op == "add" and isinstance(node, list):
            node.insert(draw(st.integers(0, len(node))), draw(values))
        elif op == "wrap":
            doc = _set(doc, path, [node])
        elif op == "as-text":
            doc = _set(doc, path, json.dumps(node))
        elif op == "repeat" and isinstance(node, list) and node:
            node.append(copy.deepcopy(_pick(draw, node)))
    return doc


def _encode_repeating(
    value: Any, target: int, extra: str, *, first: bool = False, replace: str | None = None
) -> str:
    """``json.dumps(value)``, with ``extra`` (a ``"key":value`` member) added to the object whose id is
    ``target``: last, or ``first`` (so that the object's own member repeats it after), or in place of
    the member ``replace``."""
    if isinstance(value, dict):
        here = id(value) == target
        members = [
            extra
            if here and k == replace
            else f"{json.dumps(k)}:{_encode_repeating(v, target, extra, first=first, replace=replace)}"
            for k, v in value.items()
        ]
        if here and replace is None:
            members[0:0] = [extra] if first else []
            members[len(members) :] = [] if first else [extra]
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        return (
            "["
            + ",".join(_encode_repeating(v, target, extra, first=first, replace=replace) for v in value)
            + "]"
        )
    return json.dumps(value)


@st.composite
def _edited_text(draw: st.DrawFn, docs: st.SearchStrategy[Any], values: st.SearchStrategy[Any]) -> str:
    """The JSON text of a (mutated) fixture, then edited as text or given one repeated key."""
    doc = draw(docs)
    objects = [v for _, v in _walk(doc) if isinstance(v, dict) and v]
    op = _pick(draw, list(_TEXT_OPS if objects else _TEXT_OPS[_OBJECT_OPS:]))
    if op in _TEXT_OPS[:_OBJECT_OPS]:
        obj = _pick(draw, objects)
        key = _pick(draw, list(obj))
        if op == "repeat-key":
            return _encode_repeating(doc, id(obj), f"{json.dumps(key)}:{json.dumps(draw(values))}")
        if op == "nested-repeat":  # the replaced first value repeats a key of its own
            inner = json.dumps(_pick(draw, [key, *list(obj)]))
            nested = f"{{{inner}:{json.dumps(draw(values))},{inner}:{json.dumps(draw(values))}}}"
            return _encode_repeating(doc, id(obj), f"{json.dumps(key)}:{nested}", first=True)
        return _encode_repeating(doc, id(obj), f"{json.dumps(key)}:{_LONG_DIGITS}", replace=key)
    text = json.dumps(doc)
    at = draw(st.integers(0, len(text)))
    if op == "cut":
        return text[:at]
    if op == "insert":
        return text[:at] + _pick(draw, list(_STRAY)) + text[at:]
    return text[:at] + text[at + 1 :]


def outside(
    fixtures: list[Any], *, keys: tuple[str, ...] = (), objects: bool = False
) -> st.SearchStrategy[Any]:
    """Values as they may come from outside: arbitrary JSON values, or mutated ``fixtures``.

    ``objects``: the arbitrary values are objects (the parser's signature takes a mapping) and
    a mutation that replaces the whole fixture by a non-object is redrawn.
    """
    key = st.sampled_from(sorted({*_keys_of(fixtures), *keys})) | st.text(max_size=8) | _SURROGATES
    values = _json_values(key, leaves=6) | st.sampled_from(_leaves_of(fixtures))
    mutated = _mutated(fixtures, key, values)
    if objects:
        return st.dictionaries(key, values, max_size=6) | mutated.filter(lambda v: isinstance(v, dict))
    return _json_values(key) | mutated | mutated


def outside_text(fixtures: list[Any], *, keys: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    """Text as it may come from outside: arbitrary text, JSON of :func:`outside` values, edited JSON."""
    docs = outside(fixtures, keys=keys)
    values = _json_values(st.text(max_size=4) | _SURROGATES, leaves=4) | st.sampled_from(_leaves_of(fixtures))
    return st.one_of(
        st.text(max_size=40),
        st.text(alphabet='[]{}",:0123456789.eE-+ntrufals\\ ', max_size=40),
        docs.map(json.dumps),
        _edited_text(docs, values),
        _edited_text(docs, values),
    )


def typed(call: Callable[[], T], *expected: type[errors.SriovDraError]) -> T | errors.SriovDraError:
    """``call()``'s result, or the typed error it raised if it is one of ``expected``.

    Any other exception propagates and fails the property; a typed error must have a UTF-8 message.
    Each outcome is a Hypothesis event (``--hypothesis-show-statistics`` shows how many inputs
    got through to a result, and which reasons refused the others).
    """
    try:
        out = call()
    except errors.SriovDraError as exc:
        assert isinstance(exc, expected), f"{type(exc).__name__} is not documented here: {exc}"
        str(exc).encode("utf-8")
        event(f"refused: {exc.reason}")
        return exc
    event("result")
    return out


def _reason(out: object, *reasons: errors.Reason) -> None:
    if isinstance(out, errors.SriovDraError):
        assert out.reason in reasons, out


# --------------------------------------------------------------------------- Multus config (core.multus_conf)

SRC = "/etc/cni/net.d/00-multus.conflist"
_MULTUS_CONFIGS: list[Any] = [
    {
        "chrootDir": "/hostroot",
        "cniVersion": "0.3.1",
        "logLevel": "verbose",
        "logToStderr": True,
        "logOptions": {"maxAge": 5, "maxSize": 100, "compress": True},
        "perNodeCertificate": {"enabled": True, "certDir": "/c", "certDuration": "10m"},
        "connectionLimit": 10,
        "cniConfigDir": "/host/etc/cni/net.d",
        "multusConfigFile": "auto",
        "socketDir": "/host/run/multus/",
        "defaultNetworks": ["x"],
        "systemNamespaces": ["kube-system"],
        "auxiliaryCNIChainName": "aux",
    },
    {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "cniVersions": ["1.0.0"],
        "disableCheck": "true",
        "plugins": [
            {
                "type": "multus",
                "kubeconfig": "/etc/cni/net.d/multus.d/multus.kubeconfig",
                "defaultNetworks": ["x", "y"],
                "systemNamespaces": [],
                "capabilities": {"portMappings": True},
                "delegates": [{"cniVersion": "1.0.0", "name": "primary", "type": "bridge"}],
                "runtimeConfig": {
                    "portMappings": [{"hostPort": 80, "containerPort": 8080}],
                    "ips": ["10.0.0.2"],
                },
                "dns": {"nameservers": ["10.0.0.10"]},
            },
            {"type": "tuning"},
        ],
    },
]


def _as_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate becomes bytes that are not UTF-8


@total
@given(
    outside_text(_MULTUS_CONFIGS, keys=tuple(multus_conf.NETCONF_KEYS)).map(_as_bytes)
    | st.binary(max_size=40)
)
def test_multus_config_file_of_any_bytes_gives_a_netconf_whose_layout_reads_or_invalid_spec(
    data: bytes,
) -> None:
    out = typed(lambda: multus_conf.decode_config(data, source=SRC), errors.InvalidSpec)
    if isinstance(out, dict):  # what decode_config accepts, the layout reading accepts too
        multus_conf.layout_from_keys(
            out, source=SRC, auxiliary_chain=multus_conf.auxiliary_chain_name(out) is not None
        )


@total
@given(outside(_MULTUS_CONFIGS[:1], keys=tuple(multus_conf.NETCONF_KEYS), objects=True))
def test_multus_keys_of_any_shape_give_a_layout_or_invalid_spec(keys: dict[str, Any]) -> None:
    typed(lambda: multus_conf.layout_from_keys(keys, source="multus.config of the guard"), errors.InvalidSpec)


# --------------------------------------------------------------------------- CNI configs (core.render, core.templates)

PCI = "0000:3b:02.1"
_CNI_CONFIGS: list[Any] = [
    {
        "cniVersion": "1.0.0",
        "name": "sriov-net",
        "type": "sriov",
        "vlan": 100,
        "vlanQoS": 0,
        "spoofchk": "on",
        "deviceID": PCI,
        "ipam": {"type": "host-local", "subnet": "10.56.217.0/24"},
    },
    {
        "cniVersion": "1.0.0",
        "name": "ai-workloads-rail-a",
        "cniVersions": ["0.4.0", "1.0.0"],
        "plugins": [
            {
                "type": "sriov",
                "pciBusID": PCI,
                "max_tx_rate": 1.0e3,
                "ipam": {"type": "whereabouts", "range": "192.0.2.0/24"},
            },
            {"type": "tuning", "mtu": 9000},
        ],
    },
]
_NAD_FIXTURES: list[Any] = [
    {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": "net-a", "namespace": "ns-a", "uid": "5a5a5a5a-0000-4000-8000-00000000000a"},
        "spec": {"config": json.dumps(config)},
    }
    for config in _CNI_CONFIGS
]
_PCI_TEXT = st.sampled_from([PCI, "0000:3b:02.2", "0000:3B:02.1", "3b:02.1"])
"""The allocated VF's address comes from discovery, not from outside: valid, or in a short form."""


def _with_config(nad: Any, config: str) -> Any:
    out = copy.deepcopy(nad)
    out["spec"]["config"] = config
    return out


@total
@given(
    st.one_of(
        outside(_NAD_FIXTURES, objects=True),
        st.builds(_with_config, st.sampled_from(_NAD_FIXTURES), outside_text(_CNI_CONFIGS)),
        st.builds(_with_config, st.sampled_from(_NAD_FIXTURES), outside(_CNI_CONFIGS)),
    ),
    _PCI_TEXT,
)
def test_source_nad_of_any_shape_renders_or_is_an_invalid_spec(nad: dict[str, Any], pci: str) -> None:
    out = typed(lambda: render.render_shadow_config(nad, pci), errors.InvalidSpec)
    _reason(
        out,
        errors.Reason.INVALID_PCI_ADDRESS,
        errors.Reason.INVALID_NETWORK_TEMPLATE,
        errors.Reason.UNSUPPORTED_NETWORK_TEMPLATE,
    )
    if isinstance(out, render.RenderedConfig):  # a rendered config renders again to the same bytes
        again = render.render_shadow_config(_with_config(nad, out.config_text), out.pci_address)
        assert again.config_bytes == out.config_bytes


_NAD_KEYS = (
    "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefName",
    "sriovnetwork.k8snetworkplumbingwg.io/netAttachDefNamespace",
)
_DEVICE_ATTRIBUTES: list[Any] = [
    {
        _NAD_KEYS[0]: {"string": "rail-a-net"},
        _NAD_KEYS[1]: {"string": "ai-workloads"},
        "dra.net/numaNode": {"int": 0},
    },
    {_NAD_KEYS[0]: {"string": "rail-a-net"}},
]
_VF_CONFIGS: list[Any] = [
    {
        "apiVersion": vf_config.API_VERSION,
        "kind": vf_config.KIND,
        "driver": "vfio-pci",
        "addVhostMount": True,
        "ifName": "net1",
        "netAttachDefName": "rail-a-net",
        "netAttachDefNamespace": "ai-workloads",
    },
    {"apiVersion": vf_config.API_VERSION, "kind": vf_config.KIND, "netAttachDefName": "other-net"},
]


def _vf_config_or_empty(raw: Any) -> vf_config.VfConfig:
    try:
        return vf_config.decode_vf_config(raw)
    except errors.InvalidSpec:
        return vf_config.VfConfig()


@total
@given(
    outside(_DEVICE_ATTRIBUTES, objects=True),
    outside(_VF_CONFIGS).map(_vf_config_or_empty),
    st.sampled_from(["ai-workloads", "ns-pod", "Ns"]),  # the verified consumer's namespace
)
def test_template_reference_of_any_device_attributes_resolves_or_is_a_typed_error(
    attrs: dict[str, Any], config: vf_config.VfConfig, pod_namespace: str
) -> None:
    typed(
        lambda: templates.resolve_template(attrs, config, pod_namespace, device="0000-3b-02-1"),
        errors.InvalidSpec,
        errors.Conflict,
    )


# --------------------------------------------------------------------------- annotations (core.networks, core.registry, core.binding_annotation)

_NETWORKS: list[Any] = [
    [
        {
            "name": "net-a",
            "namespace": "ns-a",
            "interface": "net1",
            "ips": ["10.0.0.5/24"],
            "mac": "02:00:00:00:00:01",
        },
        {"name": "net-b", "default-route": ["10.0.0.1"], "cni-args": {"x": 1}},
        {"name": "net-c", "infiniband-guid": "00:00:00:00:00:00:00:01", "interface": "ib0"},
    ]
]


@total
@given(
    outside_text(_NETWORKS, keys=("portMappings", "bandwidth", "interfaceRequest", "deviceID"))
    | st.text(alphabet="ns-a/net-b@ib0,. ", max_size=40)
)
def test_networks_annotation_of_any_text_parses_or_is_an_invalid_networks_annotation(text: str) -> None:
    out = typed(
        lambda: networks.parse_networks(text, pod_namespace="ns-pod", pod="Pod ns-pod/p"), errors.InvalidSpec
    )
    _reason(out, errors.Reason.INVALID_NETWORKS_ANNOTATION)


def _contract(name: str) -> Any:
    return json.loads((FIXTURES / "contract" / name).read_text())


_REGISTRIES = [_contract("registry-valid-two-entries.json"), _contract("registry-valid-empty.json")]
_BINDINGS = [_contract("binding-valid-rail-a.json"), _contract("binding-valid-rail-b.json")]
_CONTRACT_REASONS = (errors.Reason.CONTRACT_VIOLATION, errors.Reason.UNSUPPORTED_VERSION)


@total
@given(outside_text(_REGISTRIES) | outside(_REGISTRIES))
def test_registry_annotation_of_any_value_decodes_or_is_a_contract_violation(text: object) -> None:
    out = typed(lambda: registry.decode_registry(text, owner="Pod ns/p"), errors.ContractViolation)
    _reason(out, *_CONTRACT_REASONS)
    if isinstance(out, registry.Registry):  # what decodes, encodes back to text that decodes the same
        assert registry.decode_registry(registry.encode_registry(out)) == out


@total
@given(outside_text(_BINDINGS) | outside(_BINDINGS))
def test_binding_annotation_of_any_value_decodes_or_is_a_contract_violation(text: object) -> None:
    out = typed(lambda: binding_annotation.decode_binding(text, owner="NAD ns/x"), errors.ContractViolation)
    _reason(out, *_CONTRACT_REASONS)
    if isinstance(out, binding_annotation.Binding):
        assert binding_annotation.decode_binding(binding_annotation.encode_binding(out)) == out


# --------------------------------------------------------------------------- checkpoint (core.plugin.checkpoint_codec)

_CHECKPOINTS = [json.loads(p.read_text()) for p in sorted((FIXTURES / "checkpoint").glob("*.json"))]


def _resealed(doc: Any) -> Any:
    """``doc`` with its checksum recomputed over its (mutated) data, so decoding reaches the records."""
    if isinstance(doc, dict) and "data" in doc:
        # a value JSON text never holds (NaN) cannot be sealed; the decoder then sees a mismatch
        with contextlib.suppress(errors.SriovDraError, TypeError, ValueError):
            doc["checksum"] = checkpoint_doc.checksum(doc["data"])
    return doc


@total
@given(
    outside_text(_CHECKPOINTS).map(_as_bytes)
    | outside(_CHECKPOINTS).map(_resealed).map(lambda d: json.dumps(d).encode())
    | st.binary(max_size=40)
)
def test_checkpoint_of_any_bytes_decodes_or_is_a_contract_violation(data: bytes) -> None:
    out = typed(
        lambda: checkpoint_codec.decode_checkpoint(data, source="checkpoint.json"), errors.ContractViolation
    )
    _reason(out, *_CONTRACT_REASONS)


# --------------------------------------------------------------------------- node policies (core.operator.node_policy)

_NIC_TABLE = {"Intel_i40e_XXV710": "8086 158a 154c", "Nvidia_mlx5_ConnectX-6": "0x15b3 101b 101c"}
_NIC_IDS = node_policy.parse_nic_ids(_NIC_TABLE)
_NODE_POLICIES: list[Any] = [
    *oo.rail_policies(),
    oo.node_policy(
        "ib-policy",
        uid=oo.UID_B,
        nic={
            "vendor": "15b3",
            "deviceID": "101b",
            "rootDevices": ["0000:3b:00.0"],
            "pfNames": ["ens2f0#0-3"],
        },
        linkType="ib",
        dra={
            "attributes": {
                "example.com/rail": {"int": 2},
                "example.com/fast": {"bool": True},
                "example.com/v": {"version": "1.2.3"},
            }
        },
    ),
]


@total
@given(outside(_NODE_POLICIES, objects=True))
def test_node_policy_of_any_shape_parses_without_raising(obj: dict[str, Any]) -> None:
    """``parse_policy`` reports shape problems as translation or DRA problems, never as exceptions."""
    policy = typed(lambda: node_policy.parse_policy(obj, prefix="openshift.io", nic_ids=_NIC_IDS))
    assert isinstance(policy, node_policy.NodePolicy)


@total
@given(outside([_NIC_TABLE], objects=True))
def test_supported_nic_table_of_any_shape_parses_or_is_an_invalid_spec(data: dict[str, Any]) -> None:
    typed(lambda: node_policy.parse_nic_ids(data), errors.InvalidSpec)


# --------------------------------------------------------------------------- DRA policies (core.policies, core.operator.dra_policy)

_D = "sriovnetwork.k8snetworkplumbingwg.io"
_SRPS: list[Any] = [
    {
        "metadata": {"name": "rails", "namespace": "dra-driver-sriov"},
        "spec": {
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]}
                        ]
                    }
                ]
            },
            "configs": [
                {
                    "deviceAttributesSelector": {
                        "matchLabels": {"t": "a"},
                        "matchExpressions": [{"key": "t", "operator": "Exists"}],
                    },
                    "resourceFilters": [
                        {
                            "vendors": ["15b3"],
                            "pfNames": ["ens1f0#0-1"],
                            "linkType": "eth",
                            "drivers": ["mlx5_core"],
                        }
                    ],
                },
                {
                    "resourceFilters": [
                        {
                            "devices": ["154c"],
                            "pfPciAddresses": ["0000:5e:00.0"],
                            "rootDevices": ["0000:5e:00.0"],
                        }
                    ]
                },
            ],
        },
    },
    {"metadata": {"name": "all"}, "spec": {"configs": [{}]}},
]
_DEVICE_ATTRIBUTE_OBJECTS: list[Any] = [
    {
        "metadata": {"name": "rail-a", "labels": {"t": "a"}},
        "spec": {
            "attributes": {f"{_D}/netAttachDefName": {"string": "rail-a-net"}, "example.com/k": {"int": 1}}
        },
    },
    {
        "metadata": {"name": "extra", "labels": {"t": "b"}},
        "spec": {"attributes": {"example.com/v": {"version": "1.0.0"}}},
    },
]


def _vf(bdf: str, pf: str, vf_id: int, **extra: Any) -> device_facts.DeviceFacts:
    fields: dict[str, Any] = {
        "pci_address": bdf,
        "vendor": "15b3",
        "device_id": "101e",
        "pf_device_id": "101d",
        "pf_name": pf,
        "pf_pci_address": bdf[:-3] + "0.0",
        "vf_id": vf_id,
        "driver": "mlx5_core",
        "numa_node": 0,
        "pcie_root": "pci0000:3a",
        "link_type": "ethernet",
    }
    return device_facts.DeviceFacts(**(fields | extra))


_DEVICES = (
    _vf("0000:3b:02.0", "ens1f0", 0),
    _vf("0000:3b:02.1", "ens1f0", 1),
    _vf("0000:5e:02.0", "ens2f0", 0, device_id="154c"),
)
_OBJECT_LISTS = st.lists(outside(_SRPS, objects=True), max_size=3)


@total
@given(
    _OBJECT_LISTS,
    st.lists(outside(_DEVICE_ATTRIBUTE_OBJECTS, objects=True), max_size=3),
    st.booleans(),
)
def test_resource_policies_and_device_attributes_of_any_shape_evaluate_or_are_an_invalid_spec(
    srps: list[dict[str, Any]], objects: list[dict[str, Any]], managed: bool
) -> None:
    typed(
        lambda: policies.evaluate_policies(
            _DEVICES, srps, objects, node_labels={"kubernetes.io/hostname": "node-a"}, managed=managed
        ),
        errors.InvalidSpec,
    )


_RESOLUTIONS = {
    ref: sriov_network.SourceResolution(ref, network_refs.ObjectRef(oo.TARGET_NS, ref.name), None, "")
    for ref in (
        network_refs.ObjectRef(oo.OP_NS, "rail-a-net"),
        network_refs.ObjectRef(oo.OP_NS, "rail-b-net"),
    )
}
_PLAN_SETTINGS = dra_policy.PlanSettings(namespace=oo.OP_NS, nic_ids=_NIC_IDS)


@total
@given(
    st.lists(outside(_NODE_POLICIES, objects=True), max_size=3),
    st.lists(
        outside([oo.node("worker-1"), oo.node("worker-2", hostname="")], objects=True),
        max_size=2,
    ),
)
def test_dra_policy_plan_of_any_node_policies_and_nodes_is_built_without_raising(
    pols: list[dict[str, Any]], nodes: list[dict[str, Any]]
) -> None:
    """``build_dra_policy_plan`` documents no error: every problem is a policy outcome or a diagnostic."""
    plan = typed(lambda: dra_policy.build_dra_policy_plan(pols, nodes, _RESOLUTIONS, _PLAN_SETTINGS))
    assert isinstance(plan, dra_policy.DraPolicyPlan)


# --------------------------------------------------------------------------- VfConfig (core.vf_config)

_ALLOCATION_CONFIGS: list[Any] = [
    [
        {
            "source": "FromClass",
            "requests": [],
            "opaque": {"driver": vf_config.DRIVER_NAME, "parameters": _VF_CONFIGS[0]},
        },
        {
            "source": "FromClaim",
            "requests": ["nic/a"],
            "opaque": {"driver": vf_config.DRIVER_NAME, "parameters": _VF_CONFIGS[1]},
        },
        {
            "source": "FromClaim",
            "requests": ["gpu"],
            "opaque": {"driver": "gpu.example.com", "parameters": {"x": 1}},
        },
    ]
]


@total
@given(outside_text(_VF_CONFIGS) | outside(_VF_CONFIGS) | outside_text(_VF_CONFIGS).map(_as_bytes))
def test_vf_config_parameters_of_any_value_decode_or_are_an_invalid_vf_config(raw: object) -> None:
    out = typed(lambda: vf_config.decode_vf_config(raw), errors.InvalidSpec)
    _reason(out, errors.Reason.INVALID_VF_CONFIG)


@total
@given(outside(_ALLOCATION_CONFIGS))
def test_allocation_configs_of_any_shape_decode_or_are_an_invalid_vf_config(configs: object) -> None:
    out = typed(lambda: vf_config.decode_allocation_configs(configs), errors.InvalidSpec)
    _reason(out, errors.Reason.INVALID_VF_CONFIG)


# --------------------------------------------------------------------------- SriovNetwork objects (core.operator.sriov_network)

_EVERY_NETWORK_FIELD: dict[str, Any] = {
    "vlan": 100, "vlanQoS": 2, "vlanProto": "802.1q", "spoofChk": "on", "trust": "off", "linkState": "enable",
    "minTxRate": 0, "maxTxRate": 100, "capabilities": '{"mac": true}', "logFile": "/var/log/sriov.log",
    "metaPlugins": '{"type": "tuning", "mtu": 9000}, {"type": "sbr"}',
    "ipam": '{"type": "host-local", "subnet": "10.0.0.0/24"}',
}  # fmt: skip
_NETWORKS_CR: list[Any] = [
    oo.sriov_network("rail-a-net", uid=oo.UID_A, ready="True"),
    oo.sriov_network("plain", uid=oo.UID_B, ready="True", **_EVERY_NETWORK_FIELD),
]
_NETWORK_TEXT_FIELDS: list[tuple[str, list[Any]]] = [
    ("ipam", [{"type": "whereabouts", "range": "192.0.2.0/24", "exclude": ["192.0.2.1/32"]}]),
    ("capabilities", [{"mac": True, "ips": True}]),
    ("metaPlugins", [{"type": "tuning", "sysctl": {"net.ipv4.conf.all.arp_notify": "1"}}]),
]


def _with_spec(network: Any, key: str, value: str) -> Any:
    out = copy.deepcopy(network)
    out["spec"][key] = value
    return out


def _rendered_nad(network: Any) -> Any:
    """The NAD the network controller would have written for ``network``, or ``None``."""
    try:
        return sriov_network.render_nad(network, resource_prefix="openshift.io")
    except errors.InvalidSpec:
        return None


_ANY_NETWORK = st.one_of(
    outside(_NETWORKS_CR, keys=("networkNamespace", "deletionTimestamp"), objects=True),
    *(
        st.builds(_with_spec, st.sampled_from(_NETWORKS_CR), st.just(key), outside_text(objects))
        for key, objects in _NETWORK_TEXT_FIELDS
    ),
)
_VALID_NADS = [nad for nad in map(_rendered_nad, _NETWORKS_CR) if nad is not None]


@total
@given(_ANY_NETWORK)
def test_sriov_network_of_any_shape_renders_a_strict_json_nad_or_is_an_invalid_network_spec(
    network: dict[str, Any],
) -> None:
    out = typed(lambda: sriov_network.render_nad(network, resource_prefix="openshift.io"), errors.InvalidSpec)
    _reason(out, errors.Reason.INVALID_NETWORK_SPEC)
    if isinstance(out, dict):  # the config written into a NAD is always one strict JSON object
        spec = out["spec"]
        assert isinstance(spec, dict) and isinstance(strict_json.decode(spec["config"]), dict)


@total
@given(_ANY_NETWORK, st.none() | st.sampled_from(_VALID_NADS) | outside(_VALID_NADS, objects=True))
def test_sriov_network_and_nad_of_any_shape_resolve_to_a_verdict_without_raising(
    network: dict[str, Any], nad: dict[str, Any] | None
) -> None:
    """``resolve_source`` documents no error: every problem is an unresolved verdict with a reason."""
    ref = network_refs.ObjectRef(oo.OP_NS, "rail-a-net")
    verdict = typed(
        lambda: sriov_network.resolve_source(
            ref, network, nad, operator_namespace=oo.OP_NS, resource_prefix="openshift.io"
        )
    )
    assert isinstance(verdict, sriov_network.SourceResolution)
    event(f"verdict: {verdict.reason or 'resolved'}")
