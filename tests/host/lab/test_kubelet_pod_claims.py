"""The lab's kubelet simulator prepares a Pod's claims as the kubelet does: its pod.spec.resourceClaims
(directly named or resolved through status.resourceClaimStatuses) and the scheduler's extended-resource
claim named in status.extendedResourceClaimStatus, each once, waiting while one is not allocated and
reserved for the Pod. The API is the FAKE of ``tests.fakes.objects_api``."""

from __future__ import annotations

from typing import Any

import pytest
from tests.fakes.objects_api import FakeObjects

from sriov_dra_lab import kubelet_pods

POD_UID = "11111111-2222-3333-4444-555555555555"


def claim(name: str, *, reserved: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {
        "allocation": {"devices": {"results": [{"driver": "sriovnetwork.k8snetworkplumbingwg.io"}]}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": POD_UID}] if reserved else [],
    }
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "status": status}


def steps(*claims: dict[str, Any]) -> kubelet_pods.PodSteps:
    api = FakeObjects()
    for c in claims:
        api.put(kubelet_pods.CLAIM, c)
    out = kubelet_pods.PodSteps.__new__(kubelet_pods.PodSteps)
    out.objects = api  # type: ignore[assignment]
    return out


def pod(extended: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {"resourceClaimStatuses": [{"name": "gen", "resourceClaimName": "p-gen"}]}
    if extended:
        status["extendedResourceClaimStatus"] = {"resourceClaimName": extended, "requestMappings": []}
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": POD_UID},
        "spec": {"resourceClaims": [{"name": "gen", "resourceClaimTemplateName": "t"}]},
        "status": status,
    }


def test_the_extended_resource_claim_is_prepared_after_the_spec_claims() -> None:
    got = steps(claim("p-gen"), claim("p-extended"))._claims(pod("p-extended"))
    assert [c.claim.name for c in got] == ["p-gen", "p-extended"]


def test_an_extended_resource_claim_not_reserved_for_the_pod_yet_waits() -> None:
    with pytest.raises(kubelet_pods.NotReady, match="p-extended"):
        steps(claim("p-gen"), claim("p-extended", reserved=False))._claims(pod("p-extended"))


def test_a_pod_without_extended_resources_has_only_its_spec_claims() -> None:
    assert [c.claim.name for c in steps(claim("p-gen"))._claims(pod(None))] == ["p-gen"]
