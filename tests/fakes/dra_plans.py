"""Settings, resolutions and plan helpers for the DRA policy plan tests (docs/design.md#operator).

Shared by the unit tests of :mod:`sriov_dra.core.operator.dra_policy` and its sub-concern modules
(``dra_nodes``): the operator namespace settings, both rails' SriovNetworks resolved, two
worker nodes, :func:`plan`, which runs the real plan, and the expected rail objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.fakes import operator_objects as oo

from sriov_dra.core.operator import dra_policy, network_refs, sriov_network
from sriov_dra_rules import errors

R = errors.Reason
OP = oo.OP_NS
SETTINGS = dra_policy.PlanSettings(namespace=OP)
GEN = "sriovnetwork.openshift.io/generated-by"
UID_LABEL = "sriovnetwork.openshift.io/node-policy-uid"
POOL_LABEL = "sriovnetwork.openshift.io/resource-pool"
D = "sriovnetwork.k8snetworkplumbingwg.io"
UID_C = "cccccccc-0000-4000-8000-00000000000c"
UID_D = "dddddddd-0000-4000-8000-00000000000d"
ATTRS_A = f"dra-policy-{oo.UID_A}-attrs"
ATTRS_B = f"dra-policy-{oo.UID_B}-attrs"


def ready(*refs: network_refs.ObjectRef) -> dict[network_refs.ObjectRef, sriov_network.SourceResolution]:
    return {
        r: sriov_network.SourceResolution(r, network_refs.ObjectRef(oo.TARGET_NS, r.name), None, "")
        for r in refs
    }


RAIL_A = network_refs.ObjectRef(OP, "rail-a-net")
RAIL_B = network_refs.ObjectRef(OP, "rail-b-net")
BOTH_READY = ready(RAIL_A, RAIL_B)
NODES = [oo.node("worker-1"), oo.node("worker-2")]


def plan(
    pols: Sequence[dict[str, Any]],
    nodes: Sequence[dict[str, Any]] = NODES,
    resolutions: dict[network_refs.ObjectRef, sriov_network.SourceResolution] | None = None,
    settings: dra_policy.PlanSettings = SETTINGS,
    **kw: Any,
) -> dra_policy.DraPolicyPlan:
    return dra_policy.build_dra_policy_plan(
        pols, nodes, BOTH_READY if resolutions is None else resolutions, settings, **kw
    )


def srp(p: dra_policy.DraPolicyPlan, node: str) -> dict[str, Any]:
    return next(dict(o) for o in p.resource_policies if o["metadata"]["name"] == node)  # type: ignore[index]


def attrs_of(p: dra_policy.DraPolicyPlan, name: str) -> dict[str, Any] | None:
    return next((dict(o) for o in p.device_attributes if o["metadata"]["name"] == name), None)  # type: ignore[index]


def rail_attrs(uid: str, rail: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{D}/v1alpha1",
        "kind": "DeviceAttributes",
        "metadata": {
            "name": f"dra-policy-{uid}-attrs",
            "namespace": OP,
            "labels": {GEN: "sriov-network-operator", UID_LABEL: uid},
        },
        "spec": {
            "attributes": {
                "k8s.cni.cncf.io/resourceName": {"string": "openshift.io/sriov_vfs"},
                f"{D}/netAttachDefName": {"string": rail},
                f"{D}/netAttachDefNamespace": {"string": "ai-workloads"},
            }
        },
    }


def rail_config(uid: str, pf: str) -> dict[str, Any]:
    return {
        "deviceAttributesSelector": {"matchLabels": {GEN: "sriov-network-operator", UID_LABEL: uid}},
        "resourceFilters": [{"linkType": "eth", "pfNames": [pf], "vendors": ["15b3"]}],
    }
