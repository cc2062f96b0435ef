"""The plugin's report of its auto-attach mode on its own Pod: one merge patch of one annotation.

``names.AUTO_ATTACH_MODE_ANNOTATION`` on the plugin's Pod (downward API name, namespace and UID)
is what an operator sees (``kubectl get pod -o yaml``) and what the preflight's auto-attach gate
compares with the mode it wants (docs/install.md). RBAC: ``pods`` patch (ClusterRole
``dra-sriov-managed-networks``). Never retries; the UID in the patch makes it fail on a replaced Pod.
"""

from __future__ import annotations

from kubernetes import client

from sriov_dra.kube import errors
from sriov_dra_rules import names

FIELD_MANAGER = "sriov-dra-plugin"


def report_mode(
    api: client.ApiClient, namespace: str, name: str, uid: str, mode: str, *, timeout_s: float
) -> None:
    """Set ``names.AUTO_ATTACH_MODE_ANNOTATION`` = ``mode`` on Pod ``namespace/name`` (UID ``uid``
    when not empty); other annotations are kept.

    Units: ``timeout_s`` seconds. Raises: the :mod:`sriov_dra.kube.errors` class of the failure
    (``errors.NotFound``, ``errors.Forbidden``; a UID mismatch is ``errors.Conflict`` or ``errors.Invalid``).
    """
    metadata: dict[str, object] = {"annotations": {names.AUTO_ATTACH_MODE_ANNOTATION: mode}}
    if uid:
        metadata["uid"] = uid
    with errors.translated(f"patch pods {namespace}/{name}"):
        client.CoreV1Api(api).patch_namespaced_pod(
            name,
            namespace,
            {"metadata": metadata},
            field_manager=FIELD_MANAGER,
            _content_type="application/merge-patch+json",
            _preload_content=False,
            _request_timeout=timeout_s,
        )
