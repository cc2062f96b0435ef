"""Cluster tier: a node whose auto-attach gate closed while it holds bindings runs release-only.

The plugin (real handler, auto-attach clients and repair worker against the API server, as its
ServiceAccount) prepares a managed Pod, then restarts with its gate closed
(``core.plugin.auto_attach_gate`` decided release-only): a new managed Pod's claim is refused with
``AutoAttachGateClosed`` before anything is written, the recorded Pod's claim is still prepared
again (kubelet restart) and repaired, and its unprepare releases every shadow, so nothing leaks;
a new claim refused after that says that no binding is left and that the preflight ends release-only.
"""

from __future__ import annotations

from kubernetes import client

from sriov_dra.kubeletapi import messages

from .conftest import eventually, nads_in, one_vf_claim, workload_pod
from .test_auto_attach import annotations, start_pair_workload

WHY = "Node n does not carry the label (its auto-attach gate is closed), but the checkpoint holds ..."


def test_a_closed_gate_refuses_new_managed_claims_and_still_repairs_and_releases_recorded_ones(
    api, plugin, namespace
) -> None:
    first = start_pair_workload(api, plugin, namespace, pod="recorded")
    assert isinstance(plugin.prepare(first), messages.Prepared)
    shadows = sorted(o["metadata"]["uid"] for o in nads_in(api, namespace))
    assert len(shadows) == 2

    plugin.restart(gate_closed=WHY)
    client.ResourceV1Api(api).create_namespaced_resource_claim(namespace, one_vf_claim(namespace))
    client.CoreV1Api(api).create_namespaced_pod(
        namespace,
        workload_pod(
            "new-after-gate-closed", plugin.node.name, [{"name": "devices", "resourceClaimName": "one-vf"}]
        ),
    )
    new = plugin.claim_ref(namespace, "new-after-gate-closed")
    refused = plugin.prepare(new)
    assert isinstance(refused, messages.ClaimError), refused
    for needed in (
        "AutoAttachGateClosed",
        f"ResourceClaim {namespace}/one-vf ({new.uid}) of Pod {namespace}/new-after-gate-closed",
        "prepares no new claim while its auto-attach gate is closed; nothing was changed",
        WHY,
    ):
        assert needed in refused.message, refused.message
    assert "is released now" not in refused.message  # the recorded Pod's bindings are still held
    assert new.uid not in plugin.store.all_claims()
    assert sorted(o["metadata"]["uid"] for o in nads_in(api, namespace)) == shadows
    assert annotations(api, namespace, "new-after-gate-closed") == {}

    # the recorded Pod: prepared again (a kubelet restart), repaired, then released without a leak
    assert isinstance(plugin.prepare(first), messages.Prepared)
    recorded = client.CoreV1Api(api).read_namespaced_pod("recorded", namespace).metadata.uid
    report = plugin.worker().run_once()
    assert report.ensured_pods == [recorded] and not report.failed, report
    assert plugin.unprepare(first) is None
    eventually("the recorded Pod's shadows released", lambda: nads_in(api, namespace) == [])
    assert plugin.store.all_claims() == {}

    # release-only with nothing left to release refuses on, and says how it ends (the preflight restarts it)
    again = plugin.prepare(new)
    assert isinstance(again, messages.ClaimError), again
    assert (
        "Every auto-attached binding of this node is released now: run the preflight again (playbooks/preflight.yml), "
        "which restarts this plugin in manual mode" in again.message
    ), again.message
