"""The real API server accepts every DeviceClass ``sriov_dra_rules.extended_resources`` builds and
refuses the extended-resource names the rule refuses (the rule is not stricter or looser than
Kubernetes' on these names). Server-side dry-run only: nothing is stored.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client

from sriov_dra.kube import apply
from sriov_dra_rules import extended_resources

LABEL = r"[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    prefix=st.from_regex(rf"{LABEL}(\.{LABEL}){{0,2}}", fullmatch=True).filter(
        lambda p: not p.endswith(("kubernetes.io", "k8s.io"))
    ),
    rn=st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,40}[A-Za-z0-9])?", fullmatch=True),
)
def test_every_class_the_rule_builds_is_accepted_with_its_fields_kept(
    api: client.ApiClient, prefix: str, rn: str
) -> None:
    obj = extended_resources.device_class(prefix, rn)
    (answer,) = apply.apply_objects(api, [obj], dry_run=True)
    assert answer["spec"]["extendedResourceName"] == f"{prefix}/{rn}"
    assert answer["spec"]["selectors"] == obj["spec"]["selectors"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("prefix", "rn"),
    [
        ("kubernetes.io", "rail_a"),
        ("openshift.io", "rail_a-"),
        ("openshift.io", "r" * 64),
        ("OpenShift.io", "rail_a"),
    ],
)
def test_names_the_rule_refuses_the_api_server_refuses_too(
    api: client.ApiClient, prefix: str, rn: str
) -> None:
    assert extended_resources.extended_resource_problem(prefix, rn) is not None
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "refused"},
        "spec": {"extendedResourceName": f"{prefix}/{rn}"},
    }
    with pytest.raises(client.ApiException) as caught:
        client.ResourceV1Api(api).create_device_class(body, dry_run="All")
    assert caught.value.status == 422, caught.value.body
