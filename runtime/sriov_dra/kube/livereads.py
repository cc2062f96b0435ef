"""The guard's live reads of Pods and NetworkAttachmentDefinitions, as plain JSON dicts.

Owns the two GETs of the guard's pre-ADD checks (spec §10.2, §10.3): the Pod, and each selected
managed shadow. Each is an ordinary live GET (never ``resourceVersion=0``, never an informer
cache) through ``kube.lightclient`` (no ``kubernetes`` package in the guard daemon, issue 17
item 3), bounded by the caller's time budget, returning the server's JSON exactly as sent
(annotations and ``spec.config`` byte for byte, so ``configSHA256`` can be checked). Failures
are :mod:`sriov_dra.kube.errors` classes naming the request.

It must never cache a result, list, fall back to an older successful read, or retry on its own:
the caller owns the budget and decides what is retryable.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote

from sriov_dra.kube import lightclient

NAD_GROUP: Final = "k8s.cni.cncf.io"
NAD_VERSION: Final = "v1"
NAD_PLURAL: Final = "network-attachment-definitions"


def get_pod(api: lightclient.LightClient, namespace: str, name: str, *, timeout_s: float) -> dict[str, Any]:
    """Live GET of Pod ``namespace/name``; return the server's JSON object.

    Units: ``timeout_s`` seconds, the total time this request may take (connect and read).
    Shapes: the API's Pod JSON (``metadata``, ``spec``, ``status``) as plain dicts and lists.
    Raises: ``errors.NotFound``, ``errors.Forbidden`` (the message names verb, resource and
    namespace), ``errors.ServerError`` for 5xx and transport failures, a timeout, or a body that
    is not a JSON object; other ``errors.ApiError`` subclasses by status.
    """
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
    return api.get_object(path, action=f"get pods {namespace}/{name}", timeout_s=timeout_s)


def get_nad(api: lightclient.LightClient, namespace: str, name: str, *, timeout_s: float) -> dict[str, Any]:
    """Live GET of NetworkAttachmentDefinition ``namespace/name``; return the server's JSON object.

    Units: ``timeout_s`` seconds, the total time this request may take.
    Shapes: the NAD JSON (``metadata``, ``spec.config`` as a string) as plain dicts.
    Raises: as :func:`get_pod`.
    """
    path = (
        f"/apis/{NAD_GROUP}/{NAD_VERSION}/namespaces/{quote(namespace, safe='')}/{NAD_PLURAL}/"
        f"{quote(name, safe='')}"
    )
    return api.get_object(
        path, action=f"get {NAD_PLURAL}.{NAD_GROUP} {namespace}/{name}", timeout_s=timeout_s
    )
