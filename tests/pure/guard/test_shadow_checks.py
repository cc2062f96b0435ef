"""Tests for sriov_dra.guard.shadow_checks: the per-shadow pre-ADD rules (docs/design.md#guard-checks)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.fakes import managed_pods as mp

from sriov_dra.core import binding_annotation, identities
from sriov_dra.guard import decisions, shadow_checks
from sriov_dra_rules import names

R = decisions.Reason
NS, POD = "ai-workloads", "trainer"
PCI = "0000:03:00.1"
NAD_UID = "d0d0d0d0-0000-4000-8000-00000000000a"
FIXTURES = Path(__file__).parents[2] / "fixtures" / "contract"


def _planned(**template: Any) -> mp.PlannedShadow:
    source = mp.source_nad(NS, "rail-a-net", mp.host_local_template("rail-a", "192.0.2.0/24", **template))
    return mp.plan_shadow(
        pod_namespace=NS,
        pod_name=POD,
        pod_uid=mp.POD_UID,
        source=source,
        pci=PCI,
        interface="dra0",
        device="vf-0",
    )


PLANNED = _planned()
VIEW = shadow_checks.PodView(namespace=NS, name=POD, uid=mp.POD_UID, node_name=mp.NODE_NAME, annotations={})
ENTRY = mp.registry_entry(PLANNED, NAD_UID)


def _nad() -> dict[str, Any]:
    return mp.with_uid(PLANNED.nad, NAD_UID)


def _set_binding(nad: dict[str, Any], **changes: Any) -> None:
    obj = json.loads(nad["metadata"]["annotations"][names.BINDING_ANNOTATION])
    obj.update(changes)
    nad["metadata"]["annotations"][names.BINDING_ANNOTATION] = json.dumps(obj, separators=(",", ":"))


def _set_config(nad: dict[str, Any], config: str, *, rehash: bool) -> None:
    nad["spec"]["config"] = config
    if rehash:
        _set_binding(nad, configSHA256=binding_annotation.config_sha256(config))


def _reasons(verdict: shadow_checks.ShadowVerdict) -> list[R]:
    return [v.reason for v in verdict.violations]


def test_valid_shadow_passes_and_names_its_interface_and_claim() -> None:
    verdict = shadow_checks.check_shadow(_nad(), pod=VIEW, entry=ENTRY)
    assert verdict.managed and verdict.violations == ()
    assert verdict.expected == shadow_checks.ExpectedInterface(
        ifname="dra0", network=f"{NS}/{PLANNED.name}", pci_address=PCI, claim_uid=mp.CLAIM_UID
    )


def test_nad_without_binding_and_registry_entry_is_ordinary() -> None:
    nad = mp.source_nad(NS, "dra-sriov-not-ours", mp.host_local_template("x", "10.0.0.0/24"))
    verdict = shadow_checks.check_shadow(nad, pod=VIEW, entry=None)
    assert not verdict.managed and verdict.violations == ()


def test_registry_entry_without_binding_annotation_is_invalid_binding() -> None:
    nad = _nad()
    del nad["metadata"]["annotations"][names.BINDING_ANNOTATION]
    verdict = shadow_checks.check_shadow(nad, pod=VIEW, entry=ENTRY)
    assert _reasons(verdict) == [R.INVALID_BINDING]
    assert names.MANAGED_NETWORKS_ANNOTATION in verdict.violations[0].message


def _mutations() -> list[tuple[str, Callable[[dict[str, Any]], None], R]]:
    def version(n: dict[str, Any]) -> None:
        _set_binding(n, version=2)

    def malformed(n: dict[str, Any]) -> None:
        n["metadata"]["annotations"][names.BINDING_ANNOTATION] = '{"version":1'

    def renamed(n: dict[str, Any]) -> None:
        n["metadata"]["name"] = "dra-sriov-00000000000000000000000000000000"

    def pod_uid(n: dict[str, Any]) -> None:
        _set_binding(n, podUID="22222222-3333-4444-5555-666666666666")

    def node(n: dict[str, Any]) -> None:
        _set_binding(n, nodeName="node-b")

    def namespace(n: dict[str, Any]) -> None:
        n["metadata"]["namespace"] = "other"

    def owner(n: dict[str, Any]) -> None:
        n["metadata"]["ownerReferences"][0]["uid"] = "22222222-3333-4444-5555-666666666666"

    def no_owner(n: dict[str, Any]) -> None:
        n["metadata"]["ownerReferences"] = []

    def finalizer(n: dict[str, Any]) -> None:
        n["metadata"]["finalizers"] = ["example.com/other"]

    def terminating(n: dict[str, Any]) -> None:
        n["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"

    def resource_name(n: dict[str, Any]) -> None:
        n["metadata"]["annotations"][names.RESOURCE_NAME_ANNOTATION] = ""

    def no_device(n: dict[str, Any]) -> None:  # sriov-network-device-plugin #258
        doc = json.loads(n["spec"]["config"])
        del doc["deviceID"]
        _set_config(n, json.dumps(doc, separators=(",", ":")), rehash=True)

    def other_device(n: dict[str, Any]) -> None:
        _set_config(n, n["spec"]["config"].replace(PCI, "0000:03:00.2"), rehash=True)

    def empty_config(n: dict[str, Any]) -> None:  # multus-cni #1362
        _set_config(n, "", rehash=False)

    def not_sriov(n: dict[str, Any]) -> None:
        _set_config(n, n["spec"]["config"].replace('"type":"sriov"', '"type":"macvlan"'), rehash=True)

    def formatting(n: dict[str, Any]) -> None:  # formatting edits are detected
        _set_config(n, json.dumps(json.loads(n["spec"]["config"]), indent=2), rehash=False)

    def cni_name(
        n: dict[str, Any],
    ) -> None:  # multus-dynamic-networks-controller #45: the frozen CNI name is part of the hash
        _set_config(
            n, n["spec"]["config"].replace('"name":"rail-a"', f'"name":"{PLANNED.name}"'), rehash=False
        )

    def registry_uid(n: dict[str, Any]) -> None:
        n["metadata"]["uid"] = "d0d0d0d0-0000-4000-8000-0000000000ff"

    def registry_interface(n: dict[str, Any]) -> None:
        _set_binding(n, interface="dra7")

    return [
        ("unknown-binding-version", version, R.UNSUPPORTED_BINDING_VERSION),
        ("malformed-binding-json", malformed, R.INVALID_BINDING),
        ("name-not-derived-from-attachment-id", renamed, R.INVALID_BINDING),
        ("binding-for-another-pod-uid", pod_uid, R.BINDING_POD_UID_MISMATCH),
        ("binding-for-another-node", node, R.BINDING_NODE_MISMATCH),
        ("shadow-in-another-namespace", namespace, R.SHADOW_NAMESPACE_MISMATCH),
        ("owner-reference-to-another-pod", owner, R.MISSING_POD_OWNER_REFERENCE),
        ("no-owner-reference", no_owner, R.MISSING_POD_OWNER_REFERENCE),
        ("protection-finalizer-missing", finalizer, R.MISSING_PROTECTION_FINALIZER),
        ("shadow-terminating", terminating, R.SHADOW_TERMINATING),
        ("empty-resource-name-key-present", resource_name, R.RESOURCE_NAME_ANNOTATION_PRESENT),
        ("sriov-without-device-id", no_device, R.DEVICE_ID_MISMATCH),
        ("device-id-of-another-vf", other_device, R.DEVICE_ID_MISMATCH),
        ("empty-config", empty_config, R.INVALID_SHADOW_CONFIG),
        ("not-an-sriov-config", not_sriov, R.INVALID_SHADOW_CONFIG),
        ("reformatted-config", formatting, R.CONFIG_HASH_MISMATCH),
        ("cni-name-changed", cni_name, R.CONFIG_HASH_MISMATCH),
        ("shadow-uid-differs-from-registry", registry_uid, R.REGISTRY_SHADOW_MISMATCH),
        ("binding-interface-differs-from-registry", registry_interface, R.REGISTRY_SHADOW_MISMATCH),
    ]


@pytest.mark.parametrize(
    ("mutate", "reason"), [(m, r) for _, m, r in _mutations()], ids=[i for i, _, _ in _mutations()]
)
def test_each_broken_rule_has_its_own_reason(mutate: Callable[[dict[str, Any]], None], reason: R) -> None:
    nad = _nad()
    mutate(nad)
    verdict = shadow_checks.check_shadow(nad, pod=VIEW, entry=ENTRY)
    assert verdict.managed
    assert _reasons(verdict)[0] is reason, verdict.violations


def test_device_id_problem_is_reported_once_not_also_as_invalid_config() -> None:
    nad = _nad()
    _set_config(nad, nad["spec"]["config"].replace(PCI, "0000:03:00.2"), rehash=True)
    assert _reasons(shadow_checks.check_shadow(nad, pod=VIEW, entry=None)) == [R.DEVICE_ID_MISMATCH]


def test_message_says_the_sriov_plugin_has_no_device_id() -> None:
    nad = _nad()
    doc = json.loads(nad["spec"]["config"])
    del doc["deviceID"]
    _set_config(nad, json.dumps(doc, separators=(",", ":")), rehash=True)
    message = shadow_checks.check_shadow(nad, pod=VIEW, entry=ENTRY).violations[0].message
    assert "has no deviceID" in message and PCI in message and PLANNED.name in message


def test_every_violation_is_reported_in_rule_order() -> None:
    nad = _nad()
    _set_binding(nad, nodeName="node-b")
    nad["metadata"]["finalizers"] = []
    nad["metadata"]["annotations"][names.RESOURCE_NAME_ANNOTATION] = "vendor.example/sriov_a"
    nad["spec"]["config"] += " "
    reasons = _reasons(shadow_checks.check_shadow(nad, pod=VIEW, entry=ENTRY))
    assert reasons == [
        R.BINDING_NODE_MISMATCH,
        R.MISSING_PROTECTION_FINALIZER,
        R.RESOURCE_NAME_ANNOTATION_PRESENT,
        R.CONFIG_HASH_MISMATCH,
    ]


def test_conflist_shadow_with_tuning_passes() -> None:
    config = {
        "cniVersion": "1.0.0",
        "name": "rail-b",
        "plugins": [
            {"type": "sriov", "ipam": {"type": "host-local", "ranges": [[{"subnet": "198.51.100.0/24"}]]}},
            {"type": "tuning", "mtu": 9000},
        ],
    }
    planned = mp.plan_shadow(
        pod_namespace=NS,
        pod_name=POD,
        pod_uid=mp.POD_UID,
        source=mp.source_nad(NS, "rail-b-net", config),
        pci="0000:80:00.1",
        interface="dra1",
        device="vf-1",
    )
    verdict = shadow_checks.check_shadow(mp.with_uid(planned.nad, NAD_UID), pod=VIEW, entry=None)
    assert verdict.violations == () and verdict.expected is not None and verdict.expected.ifname == "dra1"


def test_terminating_shadow_is_reported_for_add_only_with_actionable_text() -> None:
    nad = _nad()
    nad["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    message = shadow_checks.check_shadow(nad, pod=VIEW, entry=ENTRY).violations[0].message
    assert "wait for the claim's release" in message


def _binding_fixtures() -> list[dict[str, Any]]:
    index = json.loads((FIXTURES / "index.json").read_text())
    return [e for e in index if e["contract"] == "binding"]


@pytest.mark.parametrize("entry", _binding_fixtures(), ids=[e["file"] for e in _binding_fixtures()])
def test_guard_reads_binding_contract_fixtures_like_the_plugin(entry: dict[str, Any]) -> None:
    """The shared contract fixtures: valid ones decode in the guard, invalid ones are refused with
    UnsupportedBindingVersion or InvalidBinding exactly where the codec says UnsupportedVersion or
    ContractViolation."""
    text = (FIXTURES / entry["file"]).read_text()
    value = text[:-1] if text.endswith("\n") else text
    nad = copy.deepcopy(_nad())
    nad["metadata"]["annotations"][names.BINDING_ANNOTATION] = value
    if entry["valid"]:
        decoded = binding_annotation.decode_binding(value)
        nad["metadata"]["name"] = identities.shadow_name(decoded.attachment_id)
        reasons = _reasons(shadow_checks.check_shadow(nad, pod=VIEW, entry=None))
        assert R.UNSUPPORTED_BINDING_VERSION not in reasons and R.INVALID_BINDING not in reasons
    else:
        want = R.UNSUPPORTED_BINDING_VERSION if entry["reason"] == "UnsupportedVersion" else R.INVALID_BINDING
        assert _reasons(shadow_checks.check_shadow(nad, pod=VIEW, entry=None)) == [want]
