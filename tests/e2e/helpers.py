"""Manifests the e2e tests build: templates, claim templates, Pods, and the gpu-nic-pairs mapping."""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client

from sriov_dra_lab import stack_base, workloads

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PAIRS = EXAMPLES / "gpu-nic-pairs" / "multus-auto-gpu-nic-pairs.yaml"
ADMIN_KINDS = ("DeviceAttributes", "SriovResourcePolicy", "DeviceClass")


@contextlib.contextmanager
def fresh_namespace(api: client.ApiClient, test_name: str) -> Iterator[str]:
    """A new namespace named after ``test_name``, with its ``default`` ServiceAccount; deleted afterwards.

    Its Pods are deleted and awaited first, so their teardown runs on the nodes before the namespace goes.
    """
    core = client.CoreV1Api(api)
    base = re.sub(r"[^a-z0-9-]", "-", test_name.lower())[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    workloads.eventually(
        f"ServiceAccount {name}/default",
        lambda: any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(name).items),
        timeout_s=30,
    )
    try:
        yield name
    finally:
        core.delete_collection_namespaced_pod(name)
        workloads.eventually(
            f"Pods of {name} to be gone",
            lambda: not core.list_namespaced_pod(name).items,
            timeout_s=120,
        )
        core.delete_namespace(name)


def rail_mapping_docs() -> list[dict[str, Any]]:
    """The administrator's objects of the gpu-nic-pairs example, unchanged: rail attributes, policy, DeviceClasses."""
    return [d for d in workloads.load(PAIRS) if d["kind"] in ADMIN_KINDS]


def delete_example(lab: Any, *files: Path) -> None:
    """``kubectl delete -f`` on an example's ``files`` (it waits until they are gone, the namespace too).

    Asserts what the examples promise: the install namespaces, the plugin's ServiceAccount and the
    plugin and guard DaemonSets are still there afterwards.
    """
    import subprocess

    from sriov_dra_lab import binaries

    argv = [str(binaries.find("kubectl")), f"--kubeconfig={lab.cp.kubeconfig}", "delete"]
    argv += [a for f in files for a in ("-f", str(f))]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    core, apps = client.CoreV1Api(lab.api), client.AppsV1Api(lab.api)
    for namespace in (stack_base.POLICY_NAMESPACE, stack_base.OPERATOR_NAMESPACE):
        core.read_namespace(namespace)  # 404 raises
    core.read_namespaced_service_account("dra-driver-sriov", stack_base.POLICY_NAMESPACE)
    for name in ("sriov-dra-plugin", "sriov-dra-guard"):
        apps.read_namespaced_daemon_set(name, stack_base.POLICY_NAMESPACE)


def template(name: str, network: str, ipam: dict[str, Any]) -> dict[str, Any]:
    """A source NAD (template) ``name`` of type ``sriov`` with CNI network name ``network``."""
    config = {"cniVersion": "1.0.0", "name": network, "type": "sriov", "ipam": ipam}
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name},
        "spec": {"config": json.dumps(config, indent=2)},
    }


def vf_pod(name: str, template_name: str, *, node: str | None = None) -> dict[str, Any]:
    """A Pod using claim template ``template_name`` (no networks annotation).

    Its container is the lab's local busybox image (imported into every real node, never pulled), asleep.
    """
    from sriov_dra_lab import images

    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "workload",
                "image": images.BUSYBOX_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", "sleep 3600"],
                "resources": {"claims": [{"name": "devices"}]},
            }
        ],
        "resourceClaims": [{"name": "devices", "resourceClaimTemplateName": template_name}],
    }
    if node is not None:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


SRIOV_CLASS = "sriovnetwork.k8snetworkplumbingwg.io"


def on_pf(pf: str) -> str:
    """A CEL request selector for VFs of PF ``pf`` (its published ``PFName``)."""
    return f'device.attributes["sriovnetwork.k8snetworkplumbingwg.io"].PFName == "{pf}"'


def claim_template(
    name: str,
    requests: list[tuple[str, str]],
    constraints: list[list[str]] | None = None,
    *,
    selector: str | None = None,
    count: int = 1,
) -> dict[str, Any]:
    """A ResourceClaimTemplate with ``(request, deviceClass)`` requests, each of ``count`` devices.

    ``selector`` is a CEL expression added to every request; ``constraints`` groups requests by
    an equal ``resource.kubernetes.io/pcieRoot``.
    """
    exact: dict[str, Any] = {"allocationMode": "ExactCount", "count": count}
    if selector:
        exact["selectors"] = [{"cel": {"expression": selector}}]
    devices: dict[str, Any] = {
        "requests": [{"name": req, "exactly": {"deviceClassName": cls, **exact}} for req, cls in requests]
    }
    if constraints:
        devices["constraints"] = [
            {"requests": group, "matchAttribute": "resource.kubernetes.io/pcieRoot"} for group in constraints
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": devices}},
    }


def in_namespace(namespace: str, *docs: dict[str, Any]) -> list[dict[str, Any]]:
    """``docs`` with ``metadata.namespace`` set."""
    return [{**d, "metadata": {**d["metadata"], "namespace": namespace}} for d in docs]


def wait_clean(lab: Any, *, timeout_s: float = 60.0) -> Any:
    """Wait until :func:`sriov_dra_lab.leftovers.collect` finds nothing; return the last count.

    On timeout the last (non-empty) result is returned, so the assertion shows what was left.
    """
    from sriov_dra_lab import leftovers

    def clean() -> leftovers.Leftovers | None:
        found = leftovers.collect(lab)
        return found if found.empty else None

    try:
        return workloads.eventually("nothing left behind", clean, timeout_s=timeout_s)
    except workloads.WaitTimeout:
        return leftovers.collect(lab)


def interfaces(lab: Any, pod: dict[str, Any]) -> dict[str, list[str]]:
    """``{ifname: [CIDR]}`` inside the Pod's sandbox, read on its node (link-local IPv6 left out)."""
    from sriov_dra.cli import inspect

    netns = lab.pod_netns(pod)
    assert netns is not None, f"Pod {pod['metadata']['name']} has no sandbox on {pod['spec']['nodeName']}"
    return inspect.read_netns(netns)


def shadows_of(lab: Any, pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The shadow NADs labelled with the Pod's UID."""
    from sriov_dra.kube import objects
    from sriov_dra_rules import names

    client = objects.Objects(lab.api, field_manager="e2e")
    selector = f"{names.LABEL_POD_UID}={pod['metadata']['uid']}"
    return client.list(objects.NAD, pod["metadata"]["namespace"], label_selector=selector).items
