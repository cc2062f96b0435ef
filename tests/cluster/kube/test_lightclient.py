"""Cluster tier: ``kube.lightclient`` and ``kube.livereads`` (the guard's reads) on a real apiserver.

The guard daemon reads Pods and NADs without the ``kubernetes`` package (issue 17 item 3). Here
its client talks to kube-apiserver v1.36.3 with each credential form it accepts: the control
plane's admin kubeconfig (CA file, client certificate and key files), and a ServiceAccount token
(``token`` and ``tokenFile``, CA as ``certificate-authority-data``). Answers are the server's JSON
byte for byte (``spec.config`` of a NAD compared with what the admin client reads), and the
failure classes are the ones the guard decides on: NotFound, Forbidden (a token without RBAC),
Unauthorized (a wrong token), and a transport failure (no server) as ServerError.
"""

from __future__ import annotations

import base64
import json
import ssl
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from sriov_dra.kube import apply, errors, lightclient, livereads

NAD_CRD = (
    Path(livereads.__file__).resolve().parents[1]
    / "manifests"
    / "crds"
    / "network-attachment-definitions.yaml"
)


@pytest.fixture(scope="module")
def nad_crd(api: client.ApiClient) -> None:
    crd = yaml.safe_load(NAD_CRD.read_text())
    apply.apply_objects(api, [crd])
    apply.wait_crds_established(api, [crd["metadata"]["name"]])


def token_kubeconfig(tmp_path: Path, control_plane: Any, token: str, *, as_file: bool) -> Path:
    """The admin kubeconfig with its user replaced by ``token`` and its CA inlined as data."""
    doc = inline_kubeconfig_doc(control_plane)
    if as_file:
        (tmp_path / "token").write_text(token + "\n")
        user = {"tokenFile": "token"}  # relative to the kubeconfig's directory
    else:
        user = {"token": token}
    for entry in doc["users"]:
        entry["user"] = user
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def service_account_token(api: client.ApiClient, namespace: str) -> str:
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "no-grants"}})
    answer = core.create_namespaced_service_account_token(
        "no-grants", namespace, {"spec": {"expirationSeconds": 600}}
    )
    return str(answer.status.token)


def inline_kubeconfig_doc(control_plane: Any) -> dict[str, Any]:
    """The admin kubeconfig with its CA, certificate and key as ``-data`` fields instead of files."""
    doc: dict[str, Any] = yaml.safe_load(Path(control_plane.kubeconfig).read_text())
    base = Path(control_plane.kubeconfig).parent

    def data(entry: dict[str, Any], field: str) -> None:
        entry[f"{field}-data"] = base64.b64encode((base / entry.pop(field)).read_bytes()).decode()

    for entry in doc["clusters"]:
        data(entry["cluster"], "certificate-authority")
    for entry in doc["users"]:
        data(entry["user"], "client-certificate")
        data(entry["user"], "client-key")
    return doc


@pytest.mark.parametrize("inline", [False, True], ids=["files", "inline-data"])
def test_the_admin_kubeconfig_reads_a_pod_and_a_nad_byte_for_byte(
    api: client.ApiClient, control_plane: Any, namespace: str, nad_crd: None, tmp_path: Path, inline: bool
) -> None:
    client.CoreV1Api(api).create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "p", "annotations": {"k8s.v1.cni.cncf.io/networks": '[{"name": "x"}]'}},
            "spec": {"containers": [{"name": "c", "image": "registry.invalid/x"}]},
        },
    )
    config = json.dumps({"cniVersion": "1.0.0", "name": "n", "type": "sriov"}, indent=3)
    nad = {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "spec": {"config": config},
    }
    apply.apply_objects(api, [{**nad, "metadata": {"name": "n", "namespace": namespace}}])
    path = Path(control_plane.kubeconfig)
    if inline:
        path = tmp_path / "inline-kubeconfig"
        path.write_text(yaml.safe_dump(inline_kubeconfig_doc(control_plane)))
    light = lightclient.LightClient.from_kubeconfig(path)
    try:
        pod = livereads.get_pod(light, namespace, "p", timeout_s=10)
        read = livereads.get_nad(light, namespace, "n", timeout_s=10)
        with pytest.raises(errors.NotFound, match=f"get pods {namespace}/missing: HTTP 404"):
            livereads.get_pod(light, namespace, "missing", timeout_s=10)
    finally:
        light.close()
    assert pod["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/networks": '[{"name": "x"}]'}
    assert read["spec"]["config"] == config  # the exact bytes, whitespace included


@pytest.mark.parametrize("as_file", [False, True], ids=["token", "tokenFile"])
def test_a_token_without_grants_is_forbidden_with_the_request_named(
    api: client.ApiClient, control_plane: Any, namespace: str, tmp_path: Path, as_file: bool
) -> None:
    token = service_account_token(api, namespace)
    light = lightclient.LightClient.from_kubeconfig(
        token_kubeconfig(tmp_path, control_plane, token, as_file=as_file)
    )
    try:
        with pytest.raises(errors.Forbidden, match=f"get pods {namespace}/p: HTTP 403 Forbidden") as caught:
            livereads.get_pod(light, namespace, "p", timeout_s=10)
    finally:
        light.close()
    assert caught.value.status == 403 and "no-grants" in str(caught.value)


def test_a_wrong_token_is_unauthorized_and_no_server_is_a_server_error(
    control_plane: Any, namespace: str, tmp_path: Path
) -> None:
    light = lightclient.LightClient.from_kubeconfig(
        token_kubeconfig(tmp_path, control_plane, f"wrong-{uuid.uuid4().hex}", as_file=False)
    )
    try:
        with pytest.raises(errors.Unauthorized):
            livereads.get_nad(light, namespace, "n", timeout_s=10)
    finally:
        light.close()
    gone = lightclient.LightClient("https://127.0.0.1:9", ssl.create_default_context())  # nothing listens
    with pytest.raises(errors.ServerError, match="get pods ns/p: "):
        livereads.get_pod(gone, "ns", "p", timeout_s=2)
