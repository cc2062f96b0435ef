"""Auto-attach prepare through the real handler on a fake node (docs/design.md#prepare;
the one-network-deviceclass and gpu-nic-pairs shapes).

The handler, checkpoint, CDI files and driver binding are real; the API server is the FAKE of
``tests.fakes.kube_objects`` and ``tests.fakes.claims_api``. The cluster tier repeats the main
cases against the real API server and garbage collector.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.fakes import claims_api as fx
from tests.fakes import kube_objects as ko
from tests.fakes import managed_node as mn

from sriov_dra.core import binding_annotation, registry
from sriov_dra.host import discovery, sysfs
from sriov_dra.kubeletapi import messages
from sriov_dra_rules import names

TWO_RAILS = [("nic-0", mn.DEV_A0), ("nic-1", mn.DEV_B0)]
POD2_UID = "22222222-3333-4444-5555-666666666666"


def error_of(outcome: Any) -> str:
    assert isinstance(outcome, messages.ClaimError), f"expected a claim error, got {outcome!r}"
    return outcome.message


def writes(node: mn.ManagedNode) -> list[tuple[str, str]]:
    return [c for c in node.kube.calls if c[0] in ("nads.create", "nads.delete", "nads.patch", "pods.patch")]


def test_two_vf_prepare_publishes_one_protected_shadow_per_vf_with_exact_metadata(
    node: mn.ManagedNode,
) -> None:
    ref = node.add_consumer(TWO_RAILS)
    out = node.prepare(ref)
    assert isinstance(out, messages.Prepared)
    assert mn.convergence_problems(node) == []
    shadows = {n["metadata"]["name"]: n for n in node.kube.shadows(mn.NS)}
    assert len(shadows) == 2
    by_pci = {}
    for obj in shadows.values():
        meta = obj["metadata"]
        assert meta["namespace"] == mn.NS
        assert meta["labels"] == {
            names.LABEL_MANAGED_BY: names.MANAGED_BY_VALUE,
            names.LABEL_POD_UID: fx.POD_UID,
            names.LABEL_CLAIM_UID: fx.CLAIM_UID,
            names.LABEL_NODE_UID: mn.NODE_UID,
        }
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "consumer",
                "uid": fx.POD_UID,
                "blockOwnerDeletion": False,
            }
        ]
        assert meta["finalizers"] == [names.FINALIZER_ATTACHMENT_PROTECTION]
        assert set(meta["annotations"]) == {names.BINDING_ANNOTATION}
        binding = binding_annotation.decode_binding(meta["annotations"][names.BINDING_ANNOTATION])
        config = json.loads(obj["spec"]["config"])
        assert config["deviceID"] == binding.pci_address
        assert binding.config_sha256 == binding_annotation.config_sha256(obj["spec"]["config"])
        by_pci[binding.pci_address] = (
            binding.source.name,
            binding.interface,
            config["name"],
            config["ipam"]["range"],
        )
    assert by_pci == {
        mn.VF_A0: ("rail-a-net", "dra0", "ai-workloads-rail-a", "192.0.2.0/24"),
        mn.VF_B0: ("rail-b-net", "dra1", "ai-workloads-rail-b", "198.51.100.0/24"),
    }
    reg = registry.decode_registry(node.pod_annotations()[names.MANAGED_NETWORKS_ANNOTATION])
    assert [e.interface for e in reg.entries] == ["dra0", "dra1"] and reg.pod_uid == fx.POD_UID
    assert node.phases() == {fx.CLAIM_UID: ["Ready", "Ready"]}


def test_happy_path_costs_three_plus_two_requests_per_vf(node: mn.ManagedNode) -> None:
    ref = node.add_consumer(TWO_RAILS)
    node.prepare(ref)
    assert [op for op, _ in node.kube.calls] == [
        "pods.get",
        "nads.get",
        "nads.get",
        "nads.create",
        "nads.create",
        "pods.patch",
    ]
    created = {name for op, name in node.kube.calls if op == "nads.create"}
    assert created == {n["metadata"]["name"] for n in node.kube.shadows()}
    assert node.claims.gets == 1  # 1 claim GET + 1 Pod GET + 1 Pod patch + k source GETs + k creates


def test_gpu_results_of_another_driver_create_nothing(node: mn.ManagedNode) -> None:
    gpu = [
        fx.result("gpu-0", "gpu-0", driver="gpu.nvidia.com"),
        fx.result("gpu-1", "gpu-1", driver="gpu.nvidia.com"),
    ]
    ref = node.add_consumer(TWO_RAILS)
    claim = node.claims.stored(mn.NS, "vf-claim")
    claim["status"]["allocation"]["devices"]["results"] = [
        gpu[0],
        claim["status"]["allocation"]["devices"]["results"][0],
        gpu[1],
        claim["status"]["allocation"]["devices"]["results"][1],
    ]
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert len(node.kube.shadows()) == 2
    assert [i for _, i in node.selected()] == ["dra0", "dra1"]


def test_two_vfs_of_one_template_get_two_shadows_from_one_source_read(node: mn.ManagedNode) -> None:
    ref = node.add_consumer([("nic", mn.DEV_A0), ("nic", mn.DEV_A1)])
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert [c for c in node.kube.calls if c[0] == "nads.get"] == [("nads.get", "rail-a-net")]
    assert [i for _, i in node.selected()] == ["dra0", "dra1"]
    assert mn.convergence_problems(node) == []


def test_repeated_prepare_only_reads_and_writes_nothing(node: mn.ManagedNode) -> None:
    ref = node.add_consumer(TWO_RAILS)
    node.prepare(ref)
    before = node.snapshot()
    node.kube.calls.clear()
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert writes(node) == []
    assert node.snapshot() == before


def test_interfaces_are_numbered_over_all_claims_of_the_pod_in_any_prepare_order(
    node: mn.ManagedNode,
) -> None:
    first = node.add_consumer(
        [("nic", mn.DEV_B0)], claim="claim-b", claim_uid=fx.CLAIM_UID_2, alias="b-nics", add_pod=False
    )
    second = node.add_consumer([("nic", mn.DEV_A0)], alias="a-nics", add_pod=False)
    node.kube.add_pod(
        mn.pod_json("consumer", fx.POD_UID, [("b-nics", "claim-b", True), ("a-nics", "vf-claim", True)])
    )
    assert isinstance(node.prepare(first), messages.Prepared)  # claim B first: it still gets dra1
    assert node.selected() == [
        (node.store.snapshot_claim(fx.CLAIM_UID_2).devices[0].managed.shadow_name, "dra1")
    ]
    assert isinstance(node.prepare(second), messages.Prepared)
    assert sorted(i for _, i in node.selected()) == ["dra0", "dra1"]
    assert node.store.snapshot_claim(fx.CLAIM_UID).devices[0].interface_name == "dra0"
    assert mn.convergence_problems(node) == []


def test_unprepare_releases_in_the_documented_order_and_leaves_nothing(node: mn.ManagedNode) -> None:
    ref = node.add_consumer(TWO_RAILS)
    node.prepare(ref)
    node.kube.calls.clear()
    assert node.unprepare(ref) is None
    assert mn.clean_problems(node) == []
    ops = [op for op, _ in node.kube.calls]
    assert ops[:6] == ["nads.get", "nads.get", "nads.delete", "nads.delete", "pods.get", "pods.patch"]
    # the finalizer removals run concurrently: each shadow is re-read, then patched
    assert sorted(ops[6:]) == ["nads.get", "nads.get", "nads.patch", "nads.patch"]
    for name in {n for _, n in node.kube.calls[6:]}:
        assert [op for op, n in node.kube.calls[6:] if n == name] == ["nads.get", "nads.patch"]
    assert node.events.reasons() == ["ManagedNetworksReady", "ManagedNetworksReleased"]


def test_sequential_reuse_of_an_explicit_claim_gets_a_new_binding_identity(node: mn.ManagedNode) -> None:
    ref = node.add_consumer([("nic", mn.DEV_A0)], template=False)
    node.prepare(ref)
    old = {n["metadata"]["name"] for n in node.kube.shadows()}
    assert node.unprepare(ref) is None
    node.kube.pods.pop((mn.NS, "consumer"))
    node.claims.stored(mn.NS, "vf-claim")["status"]["reservedFor"] = [
        {"resource": "pods", "name": "second", "uid": POD2_UID}
    ]
    node.kube.add_pod(mn.pod_json("second", POD2_UID, [("devices", "vf-claim", False)]))
    assert isinstance(node.prepare(ref), messages.Prepared)
    new = {n["metadata"]["name"] for n in node.kube.shadows()}
    assert new and new.isdisjoint(old)
    assert mn.convergence_problems(node, pod="second") == []


def test_concurrent_reuse_by_a_second_pod_is_refused_while_the_first_holds_the_claim(
    node: mn.ManagedNode,
) -> None:
    ref = node.add_consumer([("nic", mn.DEV_A0)], template=False)
    node.prepare(ref)
    before = node.snapshot()
    node.claims.stored(mn.NS, "vf-claim")["status"]["reservedFor"] = [
        {"resource": "pods", "name": "second", "uid": POD2_UID}
    ]
    node.kube.add_pod(mn.pod_json("second", POD2_UID, [("devices", "vf-claim", False)]))
    message = error_of(node.prepare(ref))
    assert "ClaimReleaseInProgress" in message and fx.POD_UID in message
    after = node.snapshot()
    assert after[:2] == before[:2] and after[3:] == before[3:]
    assert "annotations" not in node.kube.pod(mn.NS, "second")["metadata"]


def _set_annotations(**values: str) -> Any:
    def change(pod: dict[str, Any]) -> None:
        pod["metadata"].setdefault("annotations", {}).update(values)

    return change


def _refusal_cases() -> list[Any]:
    def ineligible(n: mn.ManagedNode) -> None:
        n.devices.view.eligible.discard(mn.DEV_B0)

    def infiniband(n: mn.ManagedNode) -> None:  # PF B reports ARPHRD_INFINIBAND; discovery runs again
        [netdev] = (n.fake.device_dir(mn.PF_B) / "net").iterdir()
        (netdev / "type").write_text(f"{sysfs.ARPHRD_INFINIBAND}\n")
        n.devices.view.inventory.update(discovery.by_name(discovery.discover(n.fake.sysfs)))

    def no_source(n: mn.ManagedNode) -> None:
        n.kube.nads.pop((mn.NS, "rail-b-net"))

    def unmapped(n: mn.ManagedNode) -> None:
        n.devices.view.references.pop(mn.DEV_B0)

    def manual_source(n: mn.ManagedNode) -> None:
        n.kube.edit_pod(mn.NS, "consumer", _set_annotations(**{names.NETWORKS_ANNOTATION: "rail-a-net"}))

    def manual_ifname(n: mn.ManagedNode) -> None:
        n.kube.edit_pod(mn.NS, "consumer", _set_annotations(**{names.NETWORKS_ANNOTATION: "other-net@dra1"}))

    def too_large(n: mn.ManagedNode) -> None:
        n.kube.edit_pod(mn.NS, "consumer", _set_annotations(big="x" * (256 * 1024 - 600)))

    def host_network(n: mn.ManagedNode) -> None:
        n.kube.edit_pod(mn.NS, "consumer", lambda p: p["spec"].update(hostNetwork=True))

    def terminating(n: mn.ManagedNode) -> None:
        n.kube.edit_pod(
            mn.NS, "consumer", lambda p: p["metadata"].update(deletionTimestamp="2026-11-30T00:00:00Z")
        )

    def replaced(n: mn.ManagedNode) -> None:
        n.kube.edit_pod(mn.NS, "consumer", lambda p: p["metadata"].update(uid=POD2_UID))

    def elsewhere(n: mn.ManagedNode) -> None:
        n.kube.edit_pod(mn.NS, "consumer", lambda p: p["spec"].update(nodeName="node-b"))

    def extended(n: mn.ManagedNode) -> None:
        n.claims.stored(mn.NS, "vf-claim")["metadata"]["annotations"] = {
            "resource.kubernetes.io/extended-resource-claim": "true"
        }

    def not_referenced(n: mn.ManagedNode) -> None:
        n.kube.edit_pod(mn.NS, "consumer", lambda p: p["status"].update(resourceClaimStatuses=[]))

    def not_owned(n: mn.ManagedNode) -> None:
        n.claims.stored(mn.NS, "vf-claim")["metadata"]["ownerReferences"][0]["uid"] = POD2_UID

    def conflicting_config(n: mn.ManagedNode) -> None:
        n.claims.stored(mn.NS, "vf-claim")["status"]["allocation"]["devices"]["config"] = [
            fx.config(fx.vf_config(netAttachDefName="rail-b-net"), requests=["nic-0"])
        ]

    def pod_forbidden(n: mn.ManagedNode) -> None:
        n.kube.fail("pods.get", ko.forbidden)

    def source_forbidden(n: mn.ManagedNode) -> None:
        n.kube.fail("nads.get", ko.forbidden)

    def source_timeout(n: mn.ManagedNode) -> None:
        n.kube.fail("nads.get", ko.timeout)

    cases = [
        (ineligible, "DeviceNotEligible"),
        (infiniband, "UnsupportedLinkType"),
        (no_source, "MissingNetworkTemplate"),
        (unmapped, "MissingNetworkTemplate"),
        (manual_source, "ManualSelectionConflictsWithManagedTemplate"),
        (manual_ifname, "DuplicateInterfaceName"),
        (too_large, "AnnotationTooLarge"),
        (host_network, "InvalidConsumer"),
        (terminating, "InvalidConsumer"),
        (replaced, "InvalidConsumer"),
        (elsewhere, "InvalidConsumer"),
        (extended, "UnsupportedManagedClaimKind"),
        (not_referenced, "InvalidConsumer"),
        (not_owned, "InvalidConsumer"),
        (conflicting_config, "ConflictingNetworkReference"),
        (pod_forbidden, "403 Forbidden"),
        (source_forbidden, "SourceAccessDenied"),
        (source_timeout, "timed out"),
    ]
    return [pytest.param(f, r, id=f.__name__) for f, r in cases]


@pytest.mark.parametrize(("break_it", "reason"), _refusal_cases())
def test_refusals_happen_before_any_hardware_or_api_write(
    node: mn.ManagedNode, break_it: Any, reason: str
) -> None:
    ref = node.add_consumer(TWO_RAILS)
    break_it(node)
    pod_before = json.dumps(node.kube.pods.get((mn.NS, "consumer")), sort_keys=True)
    message = error_of(node.prepare(ref))
    assert reason in message
    assert node.store.all_claims() == {}
    assert node.kube.shadows() == [] and writes(node) == []
    assert json.dumps(node.kube.pods.get((mn.NS, "consumer")), sort_keys=True) == pod_before
    assert node.drivers() == ["iavf"] * 4 and node.cdi_files() == []


def test_an_error_on_one_claim_never_tears_down_another(node: mn.ManagedNode) -> None:
    a = node.add_consumer([("nic", mn.DEV_A0)], alias="a", add_pod=False)
    b = node.add_consumer(
        [("nic", mn.DEV_B0)], claim="claim-b", claim_uid=fx.CLAIM_UID_2, alias="b", add_pod=False
    )
    node.kube.add_pod(mn.pod_json("consumer", fx.POD_UID, [("a", "vf-claim", True), ("b", "claim-b", True)]))
    assert isinstance(node.prepare(a), messages.Prepared)
    kept = node.store.snapshot_claim(fx.CLAIM_UID)
    node.kube.fail("nads.create", ko.forbidden)
    assert "Forbidden" in error_of(node.prepare(b))
    assert node.store.snapshot_claim(fx.CLAIM_UID) == kept
    assert node.selected() == [(kept.devices[0].managed.shadow_name, "dra0")]
    assert node.phases()[fx.CLAIM_UID_2] == ["Pending"]  # kept for retry, hardware not rolled back
    assert isinstance(node.prepare(b), messages.Prepared)
    assert mn.convergence_problems(node) == []


def test_direct_claim_with_an_empty_template_status_list_is_resolved(node: mn.ManagedNode) -> None:
    ref = node.add_consumer([("nic", mn.DEV_A0)], template=False)
    assert node.kube.pod(mn.NS, "consumer")["status"]["resourceClaimStatuses"] == []
    assert isinstance(node.prepare(ref), messages.Prepared)


def test_unset_template_claims_are_skipped_and_aliases_of_one_claim_count_once(node: mn.ManagedNode) -> None:
    ref = node.add_consumer([("nic", mn.DEV_A0)], template=False, add_pod=False)
    pod = mn.pod_json(
        "consumer", fx.POD_UID, [("z-alias", "vf-claim", False), ("a-alias", "vf-claim", False)]
    )
    pod["spec"]["resourceClaims"].append({"name": "optional", "resourceClaimTemplateName": "t"})
    pod["status"]["resourceClaimStatuses"].append({"name": "optional"})
    node.kube.add_pod(pod)
    assert isinstance(node.prepare(ref), messages.Prepared)
    assert len(node.kube.shadows()) == 1 and [i for _, i in node.selected()] == ["dra0"]


def test_manual_entries_and_their_order_are_preserved(node: mn.ManagedNode) -> None:
    manual = '[{"name":"other","namespace":"ns-b","ips":["10.0.0.1/24"],"mac":"02:00:00:00:00:01"}]'
    ref = node.add_consumer(TWO_RAILS, annotations={names.NETWORKS_ANNOTATION: manual})
    node.prepare(ref)
    raw = json.loads(node.pod_annotations()[names.NETWORKS_ANNOTATION])
    assert raw[0] == {
        "name": "other",
        "namespace": "ns-b",
        "ips": ["10.0.0.1/24"],
        "mac": "02:00:00:00:00:01",
    }
    assert [s["interface"] for s in raw[1:]] == ["dra0", "dra1"]
    node.unprepare(ref)
    assert json.loads(node.pod_annotations()[names.NETWORKS_ANNOTATION]) == json.loads(manual)
