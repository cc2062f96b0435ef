"""The objects a DRA policy plan generates: their names, labels, selectors and shapes.

The generated objects' contract with the driver and with whoever lists them
(docs/design.md#operator-attributes): API group and kinds, the ``generated-by`` label and
:data:`MANAGED_SELECTOR` (the only objects a plan may delete), the per-policy
``dra-policy-<policy UID>-attrs`` DeviceAttributes, upstream's per-pool ``<pool>-attrs`` object,
each config's selector, and the per-node SriovResourcePolicy. Decides nothing about what to
generate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sriov_dra.core import attributes
from sriov_dra.core.operator import node_policy
from sriov_dra_rules import names

DRA_GROUP: Final = "sriovnetwork.k8snetworkplumbingwg.io"
DRA_API_VERSION: Final = f"{DRA_GROUP}/v1alpha1"
ATTRIBUTES_KIND: Final = "DeviceAttributes"
ATTRIBUTES_PLURAL: Final = "deviceattributes"
POLICY_KIND: Final = "SriovResourcePolicy"
POLICY_PLURAL: Final = "sriovresourcepolicies"
GENERATED_BY_LABEL: Final = "sriovnetwork.openshift.io/generated-by"
GENERATED_BY_VALUE: Final = "sriov-network-operator"
POLICY_UID_LABEL: Final = "sriovnetwork.openshift.io/node-policy-uid"
RESOURCE_POOL_LABEL: Final = "sriovnetwork.openshift.io/resource-pool"
NODE_LABEL: Final = "sriovnetwork.openshift.io/node"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
MANAGED_SELECTOR: Final = f"{GENERATED_BY_LABEL}={GENERATED_BY_VALUE}"
"""Label selector of every object this plan generates (and the only ones it may delete)."""


def attributes_name(policy_uid: str) -> str:
    """``dra-policy-<full policy UID>-attrs``: a recreated policy gets a different object."""
    return f"dra-policy-{policy_uid}-attrs"


def attributes_object(
    name: str, labels: Mapping[str, str], values: Mapping[str, attributes.AttributeValue], namespace: str
) -> dict[str, object]:
    """A DeviceAttributes object in ``namespace``; labels and attributes sorted by key."""
    return {
        "apiVersion": DRA_API_VERSION,
        "kind": ATTRIBUTES_KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": dict(sorted(labels.items()))},
        "spec": {"attributes": {k: values[k].to_json() for k in sorted(values)}},
    }


def config_selector(
    p: node_policy.NodePolicy, pools: Mapping[str, tuple[str, Mapping[str, object]]]
) -> dict[str, object]:
    """The policy-UID selector for DRA policies; upstream's pool selector for the others."""
    if p.has_dra:
        labels = {GENERATED_BY_LABEL: GENERATED_BY_VALUE, POLICY_UID_LABEL: p.uid}
    else:
        labels = {RESOURCE_POOL_LABEL: pools[p.resource_name][0]}
    return {"matchLabels": dict(sorted(labels.items()))}


def resource_policy_object(
    node: str, hostname: str, configs: list[dict[str, object]], namespace: str
) -> dict[str, object]:
    """The SriovResourcePolicy of ``node``: selects its ``hostname``, labelled with the node when valid."""
    labels = {GENERATED_BY_LABEL: GENERATED_BY_VALUE}
    if not names.label_value_errors(node):
        labels[NODE_LABEL] = node
    term = {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [hostname]}]}
    return {
        "apiVersion": DRA_API_VERSION,
        "kind": POLICY_KIND,
        "metadata": {"name": node, "namespace": namespace, "labels": dict(sorted(labels.items()))},
        "spec": {"nodeSelector": {"nodeSelectorTerms": [term]}, "configs": configs},
    }


def object_name(obj: Mapping[str, object]) -> str:
    """``metadata.name`` of an API object, ``""`` when absent or not an object."""
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


def object_labels(meta: object) -> Mapping[str, str]:
    """The labels of a ``metadata`` value as strings, ``{}`` when absent or not a map."""
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
