"""Tests of sriov_dra.core.plugin.stranded_shadows: a lost node's shadows, checked from the API alone."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from tests.fakes import managed_pods

from sriov_dra.core.plugin import stranded_shadows
from sriov_dra_rules import names

NODE_UID = "0b7c6f2e-5a1d-4c3e-9f10-2a3b4c5d6e7f"
POD_UID = "11111111-2222-3333-4444-555555555555"
CLAIM_UID = "c1a1c1a1-0000-4000-8000-000000000001"
SOURCE = {
    "metadata": {
        "name": "rail-a-net",
        "namespace": "ai-workloads",
        "uid": "5a5a5a5a-0000-4000-8000-00000000000a",
        "resourceVersion": "7",
    },
    "spec": {
        "config": json.dumps(
            {
                "cniVersion": "1.0.0",
                "name": "rail-a",
                "type": "sriov",
                "ipam": {"type": "whereabouts", "range": "192.0.2.0/24"},
            }
        )
    },
}


def shadow(node: str = "worker-a") -> dict[str, Any]:
    """A shadow exactly as the plugin creates it (``tests.fakes.managed_pods.plan_shadow``)."""
    obj = managed_pods.plan_shadow(
        pod_namespace="ai-workloads",
        pod_name="demo",
        pod_uid=POD_UID,
        source=SOURCE,
        pci="0000:03:00.2",
        interface="dra0",
        device="0000-03-00-2",
        node_name=node,
        node_uid=NODE_UID,
        claim_uid=CLAIM_UID,
        pool=node,
    ).nad
    obj["metadata"]["uid"] = "9e9e9e9e-0000-4000-8000-000000000001"
    return obj


def edited(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    obj = copy.deepcopy(shadow())
    change(obj)
    return obj


def test_a_shadow_of_the_node_is_found_with_its_pod_name_and_frozen_config() -> None:
    found, unverified = stranded_shadows.find([shadow(), shadow(node="worker-b")], "worker-a", frozenset())
    assert unverified == []
    [s] = found
    assert (s.ref, s.pod_name, s.binding.node_name, s.protected, s.terminating) == (
        f"ai-workloads/{shadow()['metadata']['name']}",
        "demo",
        "worker-a",
        True,
        False,
    )
    assert s.config == shadow()["spec"]["config"] and s.foreign_finalizers == ()


def test_a_shadow_whose_owner_reference_was_removed_is_still_recovered_without_a_pod_name() -> None:
    found, _ = stranded_shadows.find(
        [edited(lambda o: o["metadata"].pop("ownerReferences"))], "worker-a", frozenset()
    )
    assert [s.pod_name for s in found] == [""]


def _set(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        target = obj
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (_set(("metadata", "name"), "dra-sriov-" + "0" * 32), "the name is not the shadow name"),
        (_set(("metadata", "labels", names.LABEL_POD_UID), "x"), names.LABEL_POD_UID),
        (_set(("metadata", "labels", names.LABEL_CLAIM_UID), "x"), names.LABEL_CLAIM_UID),
        (_set(("spec", "config"), '{"edited": true}'), "configSHA256"),
        (_set(("spec",), {}), "spec.config is missing"),
        (
            _set(
                ("metadata", "ownerReferences"),
                [{"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": "other"}],
            ),
            "ownerReference",
        ),
    ],
    ids=["renamed", "pod-label", "claim-label", "config-edited", "config-missing", "other-owner"],
)
def test_a_shadow_that_disagrees_with_its_binding_is_unverified_and_never_recovered(
    change: Callable[[dict[str, Any]], None], why: str
) -> None:
    found, unverified = stranded_shadows.find([edited(change)], "worker-a", frozenset())
    assert found == []
    assert len(unverified) == 1 and why in unverified[0].why


def test_an_unreadable_binding_counts_only_under_the_lost_nodes_uid_label() -> None:
    broken = edited(_set(("metadata", "annotations", names.BINDING_ANNOTATION), "{not json"))
    assert stranded_shadows.find([broken], "worker-a", frozenset()) == ([], [])
    found, unverified = stranded_shadows.find([broken], "worker-a", frozenset({NODE_UID}))
    assert found == [] and "binding unreadable" in unverified[0].why


def test_objects_without_the_managed_by_label_are_ignored() -> None:
    foreign = edited(lambda o: o["metadata"]["labels"].pop(names.LABEL_MANAGED_BY))
    assert stranded_shadows.find([foreign, {"metadata": "nope"}], "worker-a", frozenset({NODE_UID})) == (
        [],
        [],
    )


def test_terminating_and_foreign_finalizers_are_reported() -> None:
    def change(obj: dict[str, Any]) -> None:
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        obj["metadata"]["finalizers"].append("example.com/audit")

    [s], _ = stranded_shadows.find([edited(change)], "worker-a", frozenset())
    assert s.terminating and s.protected and s.foreign_finalizers == ("example.com/audit",)
