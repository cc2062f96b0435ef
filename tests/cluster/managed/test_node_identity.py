"""Cluster tier (docs/design.md#consumer): a Node deleted and registered again under the same name gets a
new UID; the running plugin recorded the old one and must refuse new bindings instead of labelling
their shadows for a node that no longer exists. Real API server, scheduler, GC and Node watch."""

from __future__ import annotations

from kubernetes import client

from sriov_dra.driver import managed_wiring
from sriov_dra.kubeletapi import messages
from sriov_dra_lab.nodes import SimulatedNode

from .conftest import ClusterPlugin, eventually, nads_in, one_vf_claim, workload_pod


def node_gone(api: client.ApiClient, name: str) -> bool:
    try:
        client.CoreV1Api(api).read_node(name)
    except client.ApiException as exc:
        return exc.status == 404
    return False


def test_a_prepare_on_a_re_registered_node_is_refused_from_the_watched_uid_without_any_write(
    api: client.ApiClient, plugin: ClusterPlugin, namespace: str
) -> None:
    recorded = plugin.attach.node.uid
    # The Node watch lists in the background after the plugin starts: wait for it, do not race it.
    eventually(
        "the plugin's Node watch has the recorded UID",
        lambda: plugin.publisher.watched_node_uid() == recorded,
    )
    plugin.node.stop(delete=True)
    eventually("the Node deleted", lambda: node_gone(api, plugin.node.name))
    again = SimulatedNode(api, plugin.node.name, labels=plugin.node.labels, interval_s=5.0).start()
    try:
        assert again.uid != recorded
        eventually(
            "the plugin's Node watch sees the new UID",
            lambda: plugin.publisher.watched_node_uid() == again.uid,
        )
        plugin.publish_mapping(namespace)
        client.ResourceV1Api(api).create_namespaced_resource_claim(namespace, one_vf_claim(namespace))
        client.CoreV1Api(api).create_namespaced_pod(
            namespace,
            workload_pod(
                "after-reregistration", again.name, [{"name": "devices", "resourceClaimName": "one-vf"}]
            ),
        )
        ref = plugin.claim_ref(namespace, "after-reregistration")
        reader = plugin.attach.node_uid
        assert isinstance(reader, managed_wiring.LiveNodeUid)
        reads_before = reader.live_reads
        refused = plugin.prepare(ref)
        assert isinstance(refused, messages.ClaimError)
        for needed in ("ContractViolation", f"has UID {again.uid}", f"recorded UID {recorded}", "drain"):
            assert needed in refused.message
        assert reader.live_reads == reads_before  # answered by the watch: no extra request
        assert plugin.store.all_claims() == {} and nads_in(api, namespace) == []
        pod = client.CoreV1Api(api).read_namespaced_pod("after-reregistration", namespace)
        assert not (pod.metadata.annotations or {})
    finally:
        again.stop()
