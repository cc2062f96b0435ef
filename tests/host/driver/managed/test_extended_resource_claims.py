"""Auto-attach of a Pod whose VFs come from the scheduler's extended-resource claim
(docs/design.md#consumer, docs/design.md#interface-names).

The claim is found through ``pod.status.extendedResourceClaimStatus`` and must be controlled by the
Pod, like a template's claim; it then gets exactly what a ResourceClaim gets. The handler,
checkpoint, CDI files and driver binding are real; the API server is the FAKE of
``tests.fakes.kube_objects`` and ``tests.fakes.claims_api``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tests.fakes import claims_api as fx
from tests.fakes import managed_node as mn

from sriov_dra.driver.managed import consumer
from sriov_dra.kubeletapi import messages

RESOURCE = "example.com/rail_a"


def extended_consumer(
    node: mn.ManagedNode,
    devices: Sequence[tuple[str, str]],
    *,
    spec_claims: Sequence[tuple[str, str, bool]] = (),
) -> messages.ClaimRef:
    """The scheduler's claim ``consumer-extended-resources-x`` for a Pod asking ``resources.limits`` only."""
    ref = node.add_consumer(devices, claim="consumer-extended-resources-x", add_pod=False)
    node.claims.stored(mn.NS, ref.name)["metadata"]["annotations"] = {
        consumer.EXTENDED_RESOURCE_ANNOTATION: "true"
    }
    pod = mn.pod_json("consumer", fx.POD_UID, list(spec_claims))
    pod["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": ref.name,
        "requestMappings": [
            {"containerName": "c", "resourceName": RESOURCE, "requestName": request} for request, _ in devices
        ],
    }
    node.kube.add_pod(pod)
    return ref


def interfaces(node: mn.ManagedNode) -> dict[str, str]:
    return {d.pci_address: d.interface_name for r in node.store.all_claims().values() for d in r.devices}


def test_an_extended_resource_claim_gets_what_a_resource_claim_gets_and_leaves_nothing(
    node: mn.ManagedNode,
) -> None:
    ref = extended_consumer(
        node, [("container-0-request-0", mn.DEV_A0), ("container-0-request-1", mn.DEV_B0)]
    )
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert mn.convergence_problems(node) == []
    assert interfaces(node) == {mn.VF_A0: "dra0", mn.VF_B0: "dra1"}
    assert sorted(i for _, i in node.selected()) == ["dra0", "dra1"]
    assert node.unprepare(ref) is None
    assert mn.clean_problems(node) == []


def test_its_interfaces_follow_the_spec_claims_by_alias(node: mn.ManagedNode) -> None:
    node.add_consumer([("nic", mn.DEV_B0)], claim="claim-b", claim_uid=fx.CLAIM_UID_2, add_pod=False)
    ext = node.add_consumer([("container-0-request-0", mn.DEV_A0)], claim="ext", add_pod=False)
    node.claims.stored(mn.NS, "ext")["metadata"]["annotations"] = {
        consumer.EXTENDED_RESOURCE_ANNOTATION: "true"
    }
    pod = mn.pod_json("consumer", fx.POD_UID, [("devices", "claim-b", True)])
    pod["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": "ext",
        "requestMappings": [
            {"containerName": "c", "resourceName": RESOURCE, "requestName": "container-0-request-0"}
        ],
    }
    node.kube.add_pod(pod)
    assert isinstance(node.prepare(ext), messages.Prepared)  # "devices" < "extended-resources": dra1
    assert interfaces(node) == {mn.VF_A0: "dra1"}
    b = messages.ClaimRef(namespace=mn.NS, name="claim-b", uid=fx.CLAIM_UID_2)
    assert isinstance(node.prepare(b), messages.Prepared)
    assert interfaces(node) == {mn.VF_A0: "dra1", mn.VF_B0: "dra0"}
    assert mn.convergence_problems(node) == []


def test_the_repair_worker_and_orphan_scan_keep_an_extended_resource_claims_shadows(
    node: mn.ManagedNode,
) -> None:
    ref = extended_consumer(node, [("container-0-request-0", mn.DEV_A0)])
    node.prepare(ref)
    gone = node.kube.shadows()[0]["metadata"]["name"]
    node.kube.nads.pop((mn.NS, gone))
    report = node.worker().run_once()
    assert report.failed == {} and report.ensured_pods == [fx.POD_UID], report
    assert mn.convergence_problems(node) == []


def test_an_extended_resource_claim_the_pod_does_not_control_is_refused(node: mn.ManagedNode) -> None:
    ref = extended_consumer(node, [("container-0-request-0", mn.DEV_A0)])
    node.claims.stored(mn.NS, ref.name)["metadata"]["ownerReferences"][0]["uid"] = (
        "22222222-3333-4444-5555-666666666666"
    )
    out = node.prepare(ref)
    assert isinstance(out, messages.ClaimError) and "InvalidConsumer" in out.message
    assert node.store.all_claims() == {} and node.kube.shadows() == []


def test_an_extended_resource_request_no_container_maps_is_refused_as_unsupported(
    node: mn.ManagedNode,
) -> None:
    ref = extended_consumer(node, [("container-0-request-0", mn.DEV_A0)])
    node.kube.edit_pod(
        mn.NS, "consumer", lambda p: p["status"]["extendedResourceClaimStatus"].update(requestMappings=[])
    )
    out = node.prepare(ref)
    assert isinstance(out, messages.ClaimError) and "UnsupportedManagedClaimKind" in out.message
    assert "container-0-request-0" in out.message
    assert node.store.all_claims() == {} and node.kube.shadows() == []
