"""Read-only cluster facts for ``sriov-dra preflight``: version, served APIs, access reviews, objects.

The API calls the preflight's cluster checks rest on: ``GET /version``, the served
``group/version`` list, a SubjectAccessReview per permission of a ServiceAccount, LISTs of CRDs,
DaemonSets, Nodes and SriovResourcePolicies, and GETs of the admission policy and its binding.
The decisions are ``sriov_dra_rules.preflight_rules``. Writes only access reviews (which persist
nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from sriov_dra.kube import errors, objects, watches
from sriov_dra_rules import names, preflight_rules

CRD = objects.Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
DAEMONSET = objects.Resource("apps", "v1", "daemonsets", "DaemonSet")
VALIDATING_ADMISSION_POLICY = objects.Resource(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False
)
VALIDATING_ADMISSION_POLICY_BINDING = objects.Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
    False,
)
SUBJECT_ACCESS_REVIEW = objects.Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False
)
FIELD_MANAGER = "sriov-dra-preflight"


@dataclass(frozen=True)
class ClusterFacts:
    """What the cluster checks need, read once.

    Shapes: ``apis`` ``group/version`` strings (``v1`` for core); ``denied`` the permissions
    (``preflight_rules.PERMISSIONS`` items) refused; ``crds`` CRD names; ``admission_policy`` and
    ``admission_binding`` the objects named ``preflight_rules.ADMISSION_POLICY`` or ``None``;
    ``admission_grant`` whether the ServiceAccount holds ``preflight_rules.ADMISSION_GRANT``;
    ``policies`` those of the policy namespace, ``all_policies`` those of every namespace; the rest
    API objects.
    """

    version: str
    apis: list[str]
    denied: list[dict[str, str]]
    reviewed: int
    crds: list[str]
    workloads: list[dict[str, Any]]
    policies: list[dict[str, Any]]
    all_policies: list[dict[str, Any]]
    device_attributes: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    admission_policy: dict[str, Any] | None
    admission_binding: dict[str, Any] | None
    admission_grant: bool


def served_apis(api: client.ApiClient) -> list[str]:
    """Every served ``group/version`` (core as ``v1``). Raises: :class:`errors.ApiError`."""
    core = errors.call("get /api", lambda: client.CoreApi(api).get_api_versions())
    groups = errors.call("get /apis", lambda: client.ApisApi(api).get_api_versions())
    found = list(core.versions or [])
    for group in groups.groups or []:
        found.extend(v.group_version for v in group.versions or [])
    return sorted(found)


def server_version(api: client.ApiClient) -> str:
    """The API server's gitVersion (``v1.36.3``). Raises: :class:`errors.ApiError`."""
    info = errors.call("get /version", lambda: client.VersionApi(api).get_code())
    return str(info.git_version)


def service_account_groups(namespace: str) -> list[str]:
    """The groups the authenticator gives a ServiceAccount token of ``namespace``."""
    return ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]


def denied_permissions(
    api: client.ApiClient,
    *,
    namespace: str,
    service_account: str,
    policy_namespace: str,
    permissions: Sequence[Mapping[str, str]] = preflight_rules.PERMISSIONS,
) -> list[dict[str, str]]:
    """The permissions the ServiceAccount ``namespace/service_account`` does not have, in order.

    One SubjectAccessReview each, as the user and groups its token authenticates as.
    Raises: :class:`errors.ApiError` (e.g. Forbidden when the caller may not create reviews).
    """
    reviews = objects.Objects(api, field_manager=FIELD_MANAGER)
    user = f"system:serviceaccount:{namespace}:{service_account}"
    denied = []
    for perm in permissions:
        attributes = {
            "group": perm.get("group", ""),
            "resource": perm["resource"],
            "verb": perm["verb"],
            "subresource": perm.get("subresource", ""),
            "name": perm.get("name", ""),
            "namespace": preflight_rules.review_namespace(perm, policy_namespace),
        }
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": service_account_groups(namespace),
                "resourceAttributes": attributes,
            },
        }
        answer = reviews.create(SUBJECT_ACCESS_REVIEW, body)
        if not (answer.get("status") or {}).get("allowed"):
            denied.append(dict(perm))
    return denied


def read(
    api: client.ApiClient, *, namespace: str, service_account: str, policy_namespace: str
) -> ClusterFacts:
    """Every fact of the cluster checks. Raises: :class:`errors.ApiError` from the first failing read."""
    reader = objects.Objects(api, field_manager=FIELD_MANAGER)
    apis = served_apis(api)
    policies: list[dict[str, Any]] = []
    all_policies: list[dict[str, Any]] = []
    device_attributes: list[dict[str, Any]] = []
    if preflight_rules.PLUGIN_API in apis:
        all_policies = reader.list(objects.RESOURCE_POLICY).items
        policies = [p for p in all_policies if (p.get("metadata") or {}).get("namespace") == policy_namespace]
        device_attributes = reader.list(objects.DEVICE_ATTRIBUTES, policy_namespace).items
    crds = reader.list(CRD).items
    return ClusterFacts(
        version=server_version(api),
        apis=apis,
        denied=denied_permissions(
            api, namespace=namespace, service_account=service_account, policy_namespace=policy_namespace
        ),
        reviewed=len(preflight_rules.PERMISSIONS),
        crds=sorted(str((c.get("metadata") or {}).get("name", "")) for c in crds),
        workloads=reader.list(DAEMONSET).items,
        policies=policies,
        all_policies=all_policies,
        device_attributes=device_attributes,
        nodes=reader.list(objects.NODE).items,
        admission_policy=reader.get_or_none(VALIDATING_ADMISSION_POLICY, preflight_rules.ADMISSION_POLICY),
        admission_binding=reader.get_or_none(
            VALIDATING_ADMISSION_POLICY_BINDING, preflight_rules.ADMISSION_POLICY
        ),
        admission_grant=not denied_permissions(
            api,
            namespace=namespace,
            service_account=service_account,
            policy_namespace=policy_namespace,
            permissions=[preflight_rules.ADMISSION_GRANT],
        ),
    )


def extended_resources_kept(api: client.ApiClient) -> tuple[bool | None, str]:
    """Whether the API server keeps a DeviceClass's ``extendedResourceName``: a server-side dry run.

    The dry run writes nothing. Returns ``(kept, "")``, or ``(None, why)`` when the server refused it.
    """
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"generateName": "sriov-dra-preflight-"},
        "spec": {"extendedResourceName": f"preflight.{names.DOMAIN}/vf"},
    }
    stored, why = _dry_run_create(api, "deviceclasses", body)
    if stored is None:
        return None, why
    return bool((stored.get("spec") or {}).get("extendedResourceName")), ""


def device_taints_kept(api: client.ApiClient) -> tuple[bool | None, str]:
    """Whether the API server keeps a device taint: a server-side dry run of a tainted ResourceSlice.

    The dry run writes nothing. Returns ``(kept, "")``, or ``(None, why)`` when the server
    refused the dry run (no permission, resource.k8s.io/v1 not served).
    """
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"generateName": "sriov-dra-preflight-"},
        "spec": {
            "driver": f"preflight.{names.DOMAIN}",
            "pool": {"name": "preflight", "generation": 1, "resourceSliceCount": 1},
            "allNodes": True,
            "devices": [
                {"name": "d0", "taints": [{"key": f"{names.DOMAIN}/preflight", "effect": "NoSchedule"}]}
            ],
        },
    }
    stored, why = _dry_run_create(api, "resourceslices", body)
    if stored is None:
        return None, why
    devices = (stored.get("spec") or {}).get("devices") or [{}]
    return bool(devices[0].get("taints")), ""


def _dry_run_create(
    api: client.ApiClient, resource: str, body: dict[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    """A server-side dry-run create of a ``resource.k8s.io/v1`` ``resource``: ``(stored object, "")``, or
    ``(None, why)`` when the server refused it. Writes nothing."""
    try:
        stored = watches.request_json(
            api,
            f"dry-run create {resource}",
            "POST",
            f"/apis/resource.k8s.io/v1/{resource}",
            query=[("dryRun", "All")],
            body=body,
        )
    except errors.ApiError as exc:
        return None, str(exc)
    return stored, ""
