"""The parsers of outside input that ``bench/fuzz_parsers.py`` mutates, with their seeds.

Each :class:`Target` takes one input (bytes, text or a decoded JSON value, by ``kind``) and calls
one parser the product runs on text or objects it did not write: annotations, CNI and Multus
configs, SriovNetwork fields, node and resource policies, DeviceAttributes, checkpoints, the
guard's stdin. ``allowed`` are the exceptions its docstring documents; anything else, or a
documented error whose message has no UTF-8 form, is a crash.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sriov_dra.core import (
    binding_annotation,
    device_facts,
    ipam_ranges,
    multus_conf,
    networks,
    pci,
    policies,
    registry,
    render,
    selection_fields,
    templates,
    vf_config,
)
from sriov_dra.core.operator import network_config, network_refs, node_policy, sriov_network
from sriov_dra.core.plugin import checkpoint_codec, claim_network_data
from sriov_dra.host import strict_yaml
from sriov_dra_rules import (
    checkpoint_doc,
    errors,
    guard_conf,
    label_selectors,
    resource_filters,
    strict_json,
)

FIXTURES: Final = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
PROJECT_ERRORS: Final = (errors.SriovDraError,)
NEVER_RAISES: Final[tuple[type[BaseException], ...]] = ()


@dataclass(frozen=True)
class Target:
    """One parser: ``kind`` is ``bytes``, ``text``, ``json`` (the input decoded as JSON first) or
    ``object`` (decoded, and only a JSON object is passed: the parser takes a mapping)."""

    name: str
    kind: str
    call: Callable[[Any], object]
    seeds: tuple[str, ...]
    allowed: tuple[type[BaseException], ...] = PROJECT_ERRORS


def _nad(config: str) -> dict[str, object]:
    return {"metadata": {"name": "net-a", "namespace": "ns-a"}, "spec": {"config": config}}


def _network(**spec: object) -> dict[str, object]:
    return {
        "metadata": {"name": "net-a", "namespace": "ns-a", "uid": "u-1", "generation": 1},
        "spec": {"resourceName": "vfs", **spec},
        "status": {"conditions": [{"type": "Ready", "status": "True", "observedGeneration": 1}]},
    }


def _resolve(ipam: str) -> object:
    network = _network(ipam=ipam)
    return sriov_network.resolve_source(
        network_refs.ref_of(network), network, None, operator_namespace="op", resource_prefix="openshift.io"
    )


_VF = device_facts.DeviceFacts(
    pci_address="0000:3b:02.1",
    pf_name="ens1f0",
    pf_pci_address="0000:3b:00.0",
    vf_id=1,
    vendor="15b3",
    device_id="101e",
    pf_device_id="101d",
    link_type="ethernet",
)


def _policies(doc: object) -> object:
    objs = doc if isinstance(doc, list) else [doc]
    srp = [o for o in objs if isinstance(o, dict) and o.get("kind") != "DeviceAttributes"]
    attrs = [o for o in objs if isinstance(o, dict) and o.get("kind") == "DeviceAttributes"]
    return policies.evaluate_policies([_VF], srp, attrs, node_labels={"rail": "a"}, managed=True)


def _fixture_texts(pattern: str) -> tuple[str, ...]:
    return tuple(p.read_text() for p in sorted(FIXTURES.glob(pattern)))


_SRIOV = json.dumps(
    {
        "cniVersion": "1.0.0",
        "name": "rail-a",
        "plugins": [
            {
                "type": "sriov",
                "vlan": 100,
                "vlanQoS": 1,
                "spoofchk": "on",
                "min_tx_rate": 10,
                "max_tx_rate": 100,
                "ipam": {"type": "host-local", "subnet": "10.0.0.0/24", "rangeStart": "10.0.0.10"},
            },
            {"type": "tuning", "mtu": 9000},
        ],
    }
)
_WHEREABOUTS = '{"type":"whereabouts","range":"192.0.2.0/24","range_start":"192.0.2.10"}'
_STATUS = json.dumps(
    [
        {"name": "", "ips": ["10.118.207.24"], "default": True},
        {"name": "ns-a/dra-sriov-0a", "interface": "dra0", "ips": ["10.0.0.10"], "mac": "02:00:00:00:00:01"},
    ]
)
_NETWORKS = json.dumps([{"name": "net-a", "namespace": "ns-a", "interface": "net1", "ips": ["10.0.0.5/24"]}])
_POLICY = json.dumps(
    {
        "metadata": {"name": "p", "uid": "u", "generation": 1},
        "spec": {
            "resourceName": "rail_a",
            "nodeSelector": {"rail": "a"},
            "numVfs": 8,
            "nicSelector": {"vendor": "15b3", "deviceID": "101d", "pfNames": ["ens1f0#0-3"]},
            "dra": {"attributes": {"example.com/rail": {"int": 1}}},
        },
    }
)
_SRP = json.dumps(
    [
        {
            "kind": "SriovResourcePolicy",
            "metadata": {"name": "a"},
            "spec": {
                "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": []}]},
                "configs": [
                    {
                        "resourceFilters": [{"vendors": ["15b3"], "pfNames": ["ens1f0"]}],
                        "deviceAttributesSelector": {"matchLabels": {"rail": "a"}},
                    }
                ],
            },
        },
        {
            "kind": "DeviceAttributes",
            "metadata": {"name": "rail-a", "labels": {"rail": "a"}},
            "spec": {
                "attributes": {"sriovnetwork.k8snetworkplumbingwg.io/netAttachDefName": {"string": "x"}}
            },
        },
    ]
)
_GUARD = json.dumps(
    {
        "cniVersion": "1.0.0",
        "name": "multus-guard",
        "type": "multus-guard",
        "multus": {"mode": "thin", "primaryConfig": "10-flannel.conflist"},
    }
)


def targets() -> tuple[Target, ...]:
    """Every parser, in a stable order."""
    contract = tuple(p for p in _fixture_texts("contract/*.json"))
    checkpoints = _fixture_texts("checkpoint/*.json")
    return (
        Target("strict_json.decode", "text", strict_json.decode, (_SRIOV, _STATUS)),
        Target("strict_json.decode_sequence", "text", strict_json.decode_sequence, ('{"type":"tuning"},{}',)),
        Target(
            "registry annotation",
            "text",
            lambda t: registry.decode_registry(t, owner="Pod ns/p"),
            tuple(c for c in contract if '"entries"' in c) or ("{}",),
        ),
        Target(
            "binding annotation",
            "text",
            lambda t: binding_annotation.decode_binding(t, owner="NAD ns/x"),
            tuple(c for c in contract if '"attachmentID"' in c) or ("{}",),
        ),
        Target("VfConfig", "text", vf_config.decode_vf_config, ('{"netAttachDefName":"a","ifName":"net1"}',)),
        Target("Multus config", "bytes", lambda b: multus_conf.decode_config(b, source="f"), (_GUARD,)),
        Target(
            "network-status",
            "text",
            lambda t: claim_network_data.decode_network_status(t, pod="Pod"),
            (_STATUS,),
        ),
        Target("ipam_subnets", "text", claim_network_data.ipam_subnets, (_SRIOV,), NEVER_RAISES),
        Target(
            "checkpoint bindings",
            "bytes",
            lambda b: checkpoint_doc.managed_bindings(b, source="c"),
            checkpoints,
        ),
        Target("checkpoint codec", "bytes", lambda b: checkpoint_codec.decode_checkpoint(b), checkpoints),
        Target(
            "guard config",
            "bytes",
            guard_conf.parse_conf,
            (_GUARD,),
            (*PROJECT_ERRORS, guard_conf.GuardConfError),
        ),
        Target(
            "shadow render", "text", lambda t: render.render_shadow_config(_nad(t), "0000:3b:02.1"), (_SRIOV,)
        ),
        Target(
            "networks annotation",
            "text",
            lambda t: networks.parse_networks(t, pod_namespace="ns", pod="Pod"),
            (_NETWORKS, "ns-a/net-a@net1,net-b"),
        ),
        Target(
            "SriovNetwork ipam",
            "text",
            lambda t: network_config.render_config(_network(ipam=t)),
            (_WHEREABOUTS,),
        ),
        Target(
            "SriovNetwork metaPlugins",
            "text",
            lambda t: network_config.render_config(_network(metaPlugins=t)),
            ('{"type":"tuning"}',),
        ),
        Target("resolve_source", "text", _resolve, (_WHEREABOUTS,), NEVER_RAISES),
        Target(
            "node policy",
            "object",
            lambda o: node_policy.parse_policy(o, prefix="openshift.io", nic_ids=()),
            (_POLICY,),
            NEVER_RAISES,
        ),
        Target("supported NIC table", "object", node_policy.parse_nic_ids, ('{"a":"8086 158b 154c"}',)),
        Target("resource policies", "json", _policies, (_SRP,)),
        Target(
            "template reference",
            "object",
            lambda o: templates.resolve_template(o, vf_config.VfConfig(), "ns", device="d"),
            ('{"sriovnetwork.k8snetworkplumbingwg.io/netAttachDefName":{"string":"a"}}',),
        ),
        Target(
            "IPAM pools",
            "object",
            lambda o: ipam_ranges.ipam_problems(o, "ipam"),
            (_SRIOV,),
            NEVER_RAISES,
        ),
        Target(
            "selection element",
            "object",
            lambda o: selection_fields.multus_fields(selection_fields.pairs_of(o)),
            (_NETWORKS,),
            NEVER_RAISES,
        ),
        Target(
            "resource filter",
            "object",
            lambda o: resource_filters.parse_filter(o, "f", managed=True),
            ('{"vendors":["15b3"],"pfNames":["ens1f0#0-3"]}',),
            NEVER_RAISES,
        ),
        Target(
            "label selector",
            "object",
            lambda o: label_selectors.parse_label_selector(o, "s"),
            ('{"matchExpressions":[{"key":"a","operator":"In","values":["b"]}]}',),
            NEVER_RAISES,
        ),
        Target("PCI address", "text", pci.parse, ("0000:3b:02.1",), NEVER_RAISES),
        Target(
            "YAML manifest", "text", lambda t: strict_yaml.load_all(t, source="m"), ("a: 1\n---\nb: [1]\n",)
        ),
    )
