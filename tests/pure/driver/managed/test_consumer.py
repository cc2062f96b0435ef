"""driver.managed.consumer: Kubernetes resourceclaim.Name / IsForPod semantics and claim kinds."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import identities, vf_config
from sriov_dra.core.plugin import claim_plan
from sriov_dra.driver.managed import consumer, seams
from sriov_dra.kube import views
from sriov_dra_rules import errors

POD_UID = "11111111-2222-3333-4444-555555555555"


def pod(
    claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None = None, **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": POD_UID},
        "spec": {"resourceClaims": claims},
        "status": {"resourceClaimStatuses": statuses or [], **status},
    }


@pytest.mark.parametrize(
    ("claims", "statuses", "want"),
    [
        pytest.param(
            [{"name": "a", "resourceClaimName": "c1"}],
            [],
            [("a", "c1", False)],
            id="direct-claim-empty-status-list",
        ),
        pytest.param(
            [{"name": "a", "resourceClaimTemplateName": "t"}],
            [{"name": "a", "resourceClaimName": "p-a-xyz"}],
            [("a", "p-a-xyz", True)],
            id="template-through-status",
        ),
        pytest.param(
            [{"name": "a", "resourceClaimTemplateName": "t"}],
            [{"name": "a"}],
            [],
            id="unset-template-claim-skipped",
        ),
        pytest.param(
            [{"name": "b", "resourceClaimName": "c1"}, {"name": "a", "resourceClaimName": "c1"}],
            [],
            [("b", "c1", False), ("a", "c1", False)],
            id="aliases-of-one-claim-kept-in-spec-order",
        ),
    ],
)
def test_resolve_pod_claims_follows_resourceclaim_name(claims, statuses, want) -> None:
    got = [
        (c.alias, c.claim_name, c.must_check_owner)
        for c in consumer.resolve_pod_claims(views.decode_pod(pod(claims, statuses)))
    ]
    assert got == want


@pytest.mark.parametrize(
    ("claims", "statuses", "fragment"),
    [
        pytest.param(
            [{"name": "a", "resourceClaimTemplateName": "t"}],
            [],
            "has no entry",
            id="template-not-resolved-yet",
        ),
        pytest.param([{"name": "a"}], [], "neither", id="neither-field"),
    ],
)
def test_unresolvable_claims_are_refused_with_the_entry_named(claims, statuses, fragment) -> None:
    with pytest.raises(errors.InvalidSpec) as caught:
        consumer.resolve_pod_claims(views.decode_pod(pod(claims, statuses)))
    assert caught.value.reason is errors.Reason.INVALID_CONSUMER and fragment in str(caught.value)
    assert "spec.resourceClaims[0]" in str(caught.value)


def owner(uid: str, *, controller: bool = True, kind: str = "Pod") -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": kind, "name": "p", "uid": uid, "controller": controller}
            ],
        }
    }


@pytest.mark.parametrize(
    ("claim", "want"),
    [
        pytest.param(owner(POD_UID), True, id="controlled-by-the-pod"),
        pytest.param(owner(POD_UID, controller=False), False, id="plain-owner-is-not-enough"),
        pytest.param(owner("22222222-3333-4444-5555-666666666666"), False, id="another-pod"),
        pytest.param(owner(POD_UID, kind="PodGroup"), False, id="podgroup-owner-out-of-scope"),
        pytest.param(
            {"metadata": {**owner(POD_UID)["metadata"], "namespace": "other"}},
            False,
            id="another-namespace",
        ),
    ],
)
def test_is_for_pod(claim, want) -> None:
    assert consumer.is_for_pod(views.decode_pod(pod([])), views.decode_meta(claim)) is want


EXTENDED = {
    "resourceClaimName": "p-extended-resources-abcde",
    "requestMappings": [
        {"containerName": "app", "resourceName": "example.com/rail_a", "requestName": "container-0-request-0"}
    ],
}


def plan(*requests: str) -> claim_plan.ClaimPlan:
    devices = tuple(
        claim_plan.PlannedDevice((r,), "node-a", f"0000-03-00-{i}", vf_config.VfConfig())
        for i, r in enumerate(requests)
    )
    return claim_plan.ClaimPlan(
        identities.ClaimUid("33333333-4444-5555-6666-777777777777"),
        "ns",
        EXTENDED["resourceClaimName"],
        identities.PodUid(POD_UID),
        "p",
        devices,
    )


def test_the_extended_resource_claim_resolves_after_the_spec_claims_and_must_be_controlled() -> None:
    got = consumer.resolve_pod_claims(
        views.decode_pod(
            pod([{"name": "a", "resourceClaimName": "c1"}], extendedResourceClaimStatus=EXTENDED)
        )
    )
    assert [(c.alias, c.claim_name, c.must_check_owner) for c in got] == [
        ("a", "c1", False),
        (consumer.EXTENDED_ALIAS, EXTENDED["resourceClaimName"], True),
    ]


def test_a_spec_entry_named_like_the_extended_alias_is_refused_beside_an_extended_claim() -> None:
    entry = {"name": consumer.EXTENDED_ALIAS, "resourceClaimName": "c1"}
    with pytest.raises(errors.InvalidSpec) as caught:
        consumer.resolve_pod_claims(views.decode_pod(pod([entry], extendedResourceClaimStatus=EXTENDED)))
    assert caught.value.reason is errors.Reason.INVALID_CONSUMER
    assert "spec.resourceClaims[0].name" in str(caught.value) and "rename" in str(caught.value)
    assert [c.claim_name for c in consumer.known_pod_claims(views.decode_pod(pod([entry])))] == ["c1"]


@given(
    spec=st.lists(
        st.tuples(st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True), st.booleans()),
        max_size=4,
        unique_by=lambda t: t[0],
    ),
    extended=st.one_of(st.none(), st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True)),
)
def test_every_pod_claim_source_is_resolved_once_in_order(spec, extended) -> None:
    claims = [
        {"name": n, "resourceClaimTemplateName": "t"}
        if tmpl
        else {"name": n, "resourceClaimName": f"direct-{n}"}
        for n, tmpl in spec
    ]
    statuses = [{"name": n, "resourceClaimName": f"gen-{n}"} for n, tmpl in spec if tmpl]
    status = {"extendedResourceClaimStatus": {"resourceClaimName": extended}} if extended else {}
    got = consumer.resolve_pod_claims(views.decode_pod(pod(claims, statuses, **status)))
    want = [(n, f"gen-{n}" if tmpl else f"direct-{n}", tmpl) for n, tmpl in spec]
    if extended:
        want.append((consumer.EXTENDED_ALIAS, extended, True))
    assert [(c.alias, c.claim_name, c.must_check_owner) for c in got] == want


def test_the_pods_mapped_extended_resource_claim_passes_the_kind_check() -> None:
    claim = {
        "metadata": {
            "name": EXTENDED["resourceClaimName"],
            "annotations": {consumer.EXTENDED_RESOURCE_ANNOTATION: "true"},
        }
    }
    consumer.check_claim_kind(
        views.decode_meta(claim),
        views.decode_pod(pod([], extendedResourceClaimStatus=EXTENDED)),
        plan("container-0-request-0"),
    )


@pytest.mark.parametrize(
    ("pod_status", "requests", "fragment"),
    [
        pytest.param({}, ("container-0-request-0",), "names 'no claim'", id="marker-without-pod-status"),
        pytest.param(
            {"extendedResourceClaimStatus": {**EXTENDED, "resourceClaimName": "other"}},
            ("container-0-request-0",),
            "names 'other'",
            id="pod-status-names-another-claim",
        ),
        pytest.param(
            {"extendedResourceClaimStatus": EXTENDED},
            ("container-0-request-0", "container-1-request-0"),
            "container-1-request-0",
            id="request-in-no-mapping",
        ),
    ],
)
def test_extended_resource_claims_the_pod_does_not_map_are_unsupported(
    pod_status, requests, fragment
) -> None:
    claim = {
        "metadata": {
            "name": EXTENDED["resourceClaimName"],
            "annotations": {consumer.EXTENDED_RESOURCE_ANNOTATION: "true"},
        }
    }
    with pytest.raises(errors.InvalidSpec) as caught:
        consumer.check_claim_kind(
            views.decode_meta(claim), views.decode_pod(pod([], **pod_status)), plan(*requests)
        )
    assert caught.value.reason is errors.Reason.UNSUPPORTED_MANAGED_CLAIM_KIND
    assert fragment in str(caught.value)


def test_ordinary_claims_pass_the_kind_check() -> None:
    consumer.check_claim_kind(
        views.decode_meta({"metadata": {"name": "c"}}),
        views.decode_pod(pod([], extendedResourceClaimStatus={"resourceClaimName": "x"})),
        plan("nic"),
    )


RECORDED = seams.NodeIdentity("node-a", identities.NodeUid("0a0a0a0a-0000-4000-8000-00000000000a"))


def test_the_recorded_node_uid_passes_the_identity_check() -> None:
    consumer.check_node_identity(RECORDED, RECORDED.uid)


@pytest.mark.parametrize(
    ("current", "fragment"),
    [
        ("0b0b0b0b-0000-4000-8000-00000000000b", "Node node-a has UID 0b0b0b0b-0000-4000-8000-00000000000b"),
        (None, "Node node-a does not exist (it was deleted)"),
    ],
    ids=["re-registered-with-a-new-uid", "deleted"],
)
def test_a_changed_node_identity_is_a_contract_violation_naming_both_uids_and_the_fix(
    current: str | None, fragment: str
) -> None:
    with pytest.raises(errors.ContractViolation) as caught:
        consumer.check_node_identity(RECORDED, current)
    text = str(caught.value)
    assert caught.value.reason is errors.Reason.CONTRACT_VIOLATION
    for needed in (
        fragment,
        f"recorded UID {RECORDED.uid}",
        "drain the node",
        "restart the plugin Pod on node-a",
    ):
        assert needed in text
