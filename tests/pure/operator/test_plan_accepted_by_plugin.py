"""Cross-part contract: what the operator generates, the plugin's policy evaluation accepts.

The operator (``core.operator.dra_policy``) turns SriovNetworkNodePolicies with ``spec.dra`` into
DeviceAttributes and per-node SriovResourcePolicies; the plugin (``core.policies``) evaluates those
very objects against its discovered VFs in managed mode. For arbitrary policy sets (overlapping or
disjoint PFs, ready, missing or absent networks, priorities) this proves the two agree:

* the plugin parses every generated object (no structural error, no filter it cannot honour);
* the plugin's first match for a device is the operator's highest-priority policy naming its PF;
* a device claimed by a Ready DRA policy is published with exactly that policy's resolved NAD;
  one claimed by a not-Ready DRA policy is blocked (never published under another mapping); one
  claimed by a policy without ``spec.dra`` carries no network reference;
* a node the operator withdraws (empty ``configs``) publishes nothing.

The contract: docs/design.md#operator-attributes and docs/design.md#eligibility.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import operator_objects as oo

from sriov_dra.core import attributes, device_facts, policies
from sriov_dra.core.operator import dra_objects, dra_policy, network_refs, sriov_network
from sriov_dra_rules import errors, extended_resources

PFS = ("ens1f0", "ens2f0", "ens3f0")
NETWORKS = ("rail-a-net", "rail-b-net", "missing-net")
READY = {
    ref: sriov_network.SourceResolution(ref, network_refs.ObjectRef(oo.TARGET_NS, ref.name), None, "")
    for ref in (
        network_refs.ObjectRef(oo.OP_NS, "rail-a-net"),
        network_refs.ObjectRef(oo.OP_NS, "rail-b-net"),
    )
}
NODE = oo.node("worker-1")
DEVICES = [
    device_facts.DeviceFacts(f"0000:0{i}:00.{vf}", "15b3", "101e", "101d", pf, f"0000:0{i}:00.0", vf)
    for i, pf in enumerate(PFS, start=1)
    for vf in (1, 2)
]
PF_OF = {d.name: d.pf_name for d in DEVICES}

policy_specs = st.lists(
    st.tuples(
        st.sets(st.sampled_from(PFS), min_size=1),  # nicSelector.pfNames
        st.sampled_from((*NETWORKS, None)),  # spec.dra network (None: no dra block)
        st.integers(min_value=0, max_value=3),  # priority
    ),
    min_size=1,
    max_size=4,
)


def _disjoint(specs: list[tuple[set[str], str | None, int]]) -> list[tuple[set[str], str | None, int]]:
    """The same policies with every PF kept only by the first policy naming it (empty ones dropped)."""
    used: set[str] = set()
    out = []
    for pfs, network, priority in specs:
        if pfs - used:
            out.append((pfs - used, network, priority))
        used |= pfs
    return out


def _policies(specs: list[tuple[set[str], str | None, int]]) -> list[dict[str, Any]]:
    out = []
    for i, (pfs, network, priority) in enumerate(specs):
        dra = None if network is None else {"attributes": oo.reference(network)}
        out.append(
            oo.node_policy(
                f"policy-{i}",
                uid=f"0000000{i}-0000-4000-8000-00000000000{i}",
                dra=dra,
                priority=priority,
                resource_name=f"pool_{i}",
                nic={"vendor": "15b3", "pfNames": sorted(pfs)},
            )
        )
    return out


def _claiming_policy(
    plan: dra_policy.DraPolicyPlan, objs: list[dict[str, Any]], outcome: policies.DeviceOutcome
) -> dict[str, Any]:
    """The node policy whose generated config (by its selector labels) claimed the device."""
    configs = plan.resource_policies[0]["spec"]["configs"]  # type: ignore[index]
    labels = configs[outcome.config_index]["deviceAttributesSelector"]["matchLabels"]
    uid = labels.get(dra_objects.POLICY_UID_LABEL)
    pool = labels.get(dra_objects.RESOURCE_POOL_LABEL)
    return next(
        o
        for o in objs
        if o["metadata"]["uid"] == uid
        or extended_resources.device_class_name(o["spec"]["resourceName"]) == pool
    )


@given(policy_specs, st.booleans(), st.booleans())
def test_generated_objects_are_accepted_and_claims_follow_the_operator_mapping(
    specs: list[tuple[set[str], str | None, int]], disjoint: bool, with_inventory: bool
) -> None:
    objs = _policies(_disjoint(specs) if disjoint else specs)
    plan = dra_policy.build_dra_policy_plan(
        objs,
        [NODE],
        READY,
        dra_policy.PlanSettings(namespace=oo.OP_NS),
        inventory={"worker-1": DEVICES} if with_inventory else None,
    )
    ev = policies.evaluate_policies(
        DEVICES,
        list(plan.resource_policies),
        list(plan.device_attributes),
        node_labels=NODE["metadata"]["labels"],
        managed=True,
    )
    assert not [d for d in ev.diagnostics if d.reason == errors.Reason.UNSUPPORTED_RESOURCE_FILTER]
    configs = plan.resource_policies[0]["spec"]["configs"]  # type: ignore[index]
    if not configs:  # the operator withdrew the node (conflict): the plugin publishes nothing
        assert not ev.outcomes
        return
    order = sorted(objs, key=lambda o: (o["spec"]["priority"], o["metadata"]["name"]))
    for device, outcome in ev.outcomes.items():
        policy = _claiming_policy(plan, objs, outcome)
        # The plugin's first match is the operator's highest-priority policy naming the PF.
        first = next(o for o in order if PF_OF[device] in o["spec"]["nicSelector"]["pfNames"])
        assert policy["metadata"]["name"] == first["metadata"]["name"], device
        verdict = plan.outcomes.get(policy["metadata"]["name"])
        if verdict is None:  # no spec.dra: upstream pool attributes, never a network reference
            assert outcome.reference is None
        elif verdict.reason is None:
            network = policy["spec"]["dra"]["attributes"][oo.NAME_KEY]["string"]
            assert outcome.eligible, (device, outcome.reasons)
            assert outcome.reference == attributes.NadReference(network, oo.TARGET_NS)
        else:  # withheld mapping: claimed and blocked, never published under another mapping
            assert not outcome.eligible and outcome.reference is None
