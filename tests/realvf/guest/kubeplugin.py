"""The plugin on real VFs, as the realvf guest tests drive it: one process, the kubelet's client, workloads.

One plugin process per guest session (``python -m sriov_dra.driver`` in auto-attach mode,
``--sysfs-root=/``, the real kernel's binder; the session fixture ``plugin`` of the guest
conftest); the tests play the kubelet with the lab's kubelet client
(``sriov_dra_lab.kubelet_plugins``: the registration handshake, then the DRA socket). The control
plane runs on the host (tests/realvf/kubeapi.py: apiserver, scheduler, controller-manager, the
guest's Node and its rail mapping) and is reached through QEMU user networking. A
:func:`workload` is one test's namespace, template NAD, ResourceClaim (one VF under each PCIe root
asked for) and Pod; the real scheduler allocates the claim from the ResourceSlices the plugin
published for the guest's VFs. Imported only inside the guest.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from kubernetes import client
from tests import waiting
from tests.realvf import kubeapi
from tests.realvf.guest import realvfs

from sriov_dra.core import binding_annotation
from sriov_dra.core.plugin import checkpoint_codec
from sriov_dra.kube import client as kube_client
from sriov_dra.kubeletapi import messages
from sriov_dra_lab import kubelet_plugins, processes
from sriov_dra_rules import checkpoint_doc, names

ROOT_ATTRIBUTE = 'device.attributes["resource.kubernetes.io"].pcieRoot'
NAD_GROUP, NAD_VERSION, NAD_PLURAL = "k8s.cni.cncf.io", "v1", "network-attachment-definitions"
SUBNET = "10.56.2.0/24"
API_WAIT_S = 120.0
"""Bound of every wait on the API server (TCG guest, loaded host)."""
T = TypeVar("T")
TCG_TIMEOUTS = kubelet_plugins.KubeletTimeouts(dial_s=60.0, get_info_s=60.0, notify_s=60.0, call_s=180.0)
"""The kubelet's deadlines (1-45 s) stretched for a single-CPU TCG guest on a loaded host, where the
plugin process answers its first calls many times slower than on a node; the protocol is the same."""


def eventually(what: str, fn: Callable[[], T | None], timeout_s: float = API_WAIT_S) -> T:
    """Poll ``fn`` every 0.25 s until truthy; fail naming ``what`` after ``timeout_s``."""
    return waiting.eventually(what, fn, timeout_s=timeout_s, interval_s=0.25)


def open_api() -> Iterator[client.ApiClient]:
    """An admin ApiClient for the host's API server (skips when the host started none); closed after."""
    path = os.environ.get("SRIOV_DRA_REALVF_KUBECONFIG", "")
    if not path or not Path(path).is_file():
        pytest.skip("the host started no control plane for the guest (see the realvf summary for why)")
    api = kube_client.from_kubeconfig(Path(path))
    try:
        yield api
    finally:
        api.close()


@dataclass
class Plugin:
    """The running plugin process and the kubelet's client for its DRA socket."""

    process: processes.Process
    dra: kubelet_plugins.DraPluginClient
    state_dir: Path
    cdi_root: Path

    def prepare(self, ref: messages.ClaimRef) -> messages.PrepareOutcome:
        return self.dra.node_prepare_resources([ref])[ref.uid]

    def unprepare(self, ref: messages.ClaimRef) -> messages.UnprepareOutcome:
        return self.dra.node_unprepare_resources([ref])[ref.uid]

    def claim_records(self) -> dict[str, Any]:
        path = self.state_dir / checkpoint_doc.CHECKPOINT_FILE_NAME
        return dict(checkpoint_codec.decode_checkpoint(path.read_bytes()).claims) if path.exists() else {}


def run_plugin(
    api: client.ApiClient,
    real_pfs: list[realvfs.RealPf],
    root: Path,
    *,
    auto_attach: bool = True,
    launcher: Sequence[str] = ("-m", "sriov_dra.driver"),
    env: Mapping[str, str] | None = None,
) -> Iterator[Plugin]:
    """The plugin process (state under ``root``), registered, with every VF of the guest advertised;
    stopped after. ``auto_attach`` False runs it in manual mode; ``launcher`` is what the Python
    interpreter runs (a bench wraps the entrypoint), ``env`` extra environment."""
    registry_dir, state_dir, cdi_root = root / "plugins_registry", root / "state", root / "cdi"
    argv = [
        sys.executable,
        *launcher,
        f"--node-name={kubeapi.NODE_NAME}",
        f"--kubeconfig={os.environ['SRIOV_DRA_REALVF_KUBECONFIG']}",
        "--sysfs-root=/",
        f"--kubelet-plugins-directory-path={root / 'plugins'}",
        f"--kubelet-registrar-directory-path={registry_dir}",
        f"--cdi-root={cdi_root}",
        f"--state-dir={state_dir}",
        f"--namespace={kubeapi.PLUGIN_NS}",
        f"--multus-auto-attach={'true' if auto_attach else 'false'}",
        "--log-format=json",
    ]
    log = root / "plugin.log"
    proc = processes.Process(
        "plugin", argv, log, env={**os.environ, **env} if env else None, stop_grace_s=10.0
    )
    started = time.monotonic()
    proc.start()
    try:
        socket = kubelet_plugins.wait_for_new_socket(registry_dir, timeout_s=240.0)
        if socket is None:
            pytest.fail(f"the plugin never created its registration socket:\n{processes.tail(log, 40)}")
        socket_s = time.monotonic() - started
        try:
            registered = kubelet_plugins.register_plugin(socket, timeouts=TCG_TIMEOUTS)
        except grpc.RpcError as exc:
            pytest.fail(f"registering the plugin failed: {exc}\n{processes.tail(log, 40)}")
        dra = kubelet_plugins.DraPluginClient(registered, call_timeout_s=TCG_TIMEOUTS.call_s)
        vfs = {vf.bdf for pf in real_pfs for vf in realvfs.raw_vfs(pf)}
        eventually(
            f"ResourceSlices of {kubeapi.NODE_NAME} listing the {len(vfs)} VFs",
            lambda: _advertised(api) == vfs,
        )
        print(
            f"plugin start: registration socket after {socket_s:.1f}s, registered and "
            f"{len(vfs)} VFs advertised after {time.monotonic() - started:.1f}s"
        )
        yield Plugin(proc, dra, state_dir, cdi_root)
    finally:
        proc.stop()


def _advertised(api: client.ApiClient) -> set[str]:
    """PCI addresses of the devices in the plugin's ResourceSlices for the guest's node."""
    slices = client.ResourceV1Api(api).list_resource_slice(
        field_selector=f"spec.nodeName={kubeapi.NODE_NAME}"
    )
    out = set()
    for item in slices.items:
        if item.spec.driver != names.DRIVER_NAME:
            continue
        for device in item.spec.devices or []:
            attr = (device.attributes or {}).get(f"{names.DOMAIN}/pciAddress")
            if attr is not None and attr.string:
                out.add(attr.string)
    return out


@dataclass
class Workload:
    """One test's namespace, Pod and its allocated claim."""

    namespace: str
    pod: str
    ref: messages.ClaimRef


def _claim(name: str, roots: list[str]) -> dict[str, Any]:
    requests = [
        {
            "name": f"nic-{i}",
            "exactly": {
                "deviceClassName": kubeapi.DEVICE_CLASS,
                "allocationMode": "ExactCount",
                "count": 1,
                "selectors": [{"cel": {"expression": f'{ROOT_ATTRIBUTE} == "{root}"'}}],
            },
        }
        for i, root in enumerate(roots)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": requests}},
    }


def workload(
    api: client.ApiClient,
    plugin: Plugin,
    roots: list[str],
    data_dir: Path,
    vf_settings: dict[str, object] | None = None,
) -> Iterator[Workload]:
    """A namespace with the template NAD (host-local in ``data_dir``; ``vf_settings`` such as
    ``{"vlan": 100, "spoofchk": "off"}`` added to its sriov config, which the plugin renders into
    each shadow), a claim of one VF under each of ``roots`` and its Pod, scheduled and allocated;
    unprepared (if still prepared) and deleted after."""
    core, res = client.CoreV1Api(api), client.ResourceV1Api(api)
    ns = f"realvf-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    try:
        config = {"cniVersion": "1.0.0", "name": "rail", "type": "sriov", **(vf_settings or {})}
        config["ipam"] = {"type": "host-local", "dataDir": str(data_dir), "ranges": [[{"subnet": SUBNET}]]}
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            NAD_GROUP,
            NAD_VERSION,
            ns,
            NAD_PLURAL,
            {
                "apiVersion": f"{NAD_GROUP}/{NAD_VERSION}",
                "kind": "NetworkAttachmentDefinition",
                "metadata": {"name": kubeapi.SOURCE_NAD},
                "spec": {"config": json.dumps(config)},
            },
        )
        res.create_namespaced_resource_claim(ns, _claim("nics", roots))
        eventually(
            f"ServiceAccount {ns}/default",
            lambda: any(
                sa.metadata.name == "default" for sa in core.list_namespaced_service_account(ns).items
            ),
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "workload"},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": kubeapi.NODE_NAME},
                "terminationGracePeriodSeconds": 0,
                "resourceClaims": [{"name": "nics", "resourceClaimName": "nics"}],
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.invalid/toolbox",
                        "resources": {"claims": [{"name": "nics"}]},
                    }
                ],
            },
        }
        core.create_namespaced_pod(ns, pod)

        def allocated() -> messages.ClaimRef | None:
            claim = res.read_namespaced_resource_claim("nics", ns)
            if claim.status and claim.status.allocation and claim.status.reserved_for:
                return messages.ClaimRef(namespace=ns, name="nics", uid=claim.metadata.uid)
            return None

        try:
            ref = eventually(f"claim {ns}/nics allocated and reserved by the scheduler", allocated)
        except pytest.fail.Exception:
            status = core.read_namespaced_pod("workload", ns).status
            conditions = [(c.type, c.status, c.reason, c.message) for c in status.conditions or []]
            pytest.fail(
                f"claim {ns}/nics was not allocated and reserved: the Pod's conditions {conditions}; "
                f"devices advertised for {kubeapi.NODE_NAME}: {sorted(_advertised(api))}"
            )
        yield Workload(ns, "workload", ref)
        if ref.uid in plugin.claim_records():
            plugin.unprepare(ref)
    finally:
        core.delete_namespace(ns, propagation_policy="Background")


def shadows(api: client.ApiClient, ns: str) -> list[dict[str, Any]]:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(
        NAD_GROUP, NAD_VERSION, ns, NAD_PLURAL
    )["items"]
    return [i for i in items if i["metadata"]["name"].startswith(names.SHADOW_NAME_PREFIX)]


def annotations(api: client.ApiClient, w: Workload) -> dict[str, str]:
    return client.CoreV1Api(api).read_namespaced_pod(w.pod, w.namespace).metadata.annotations or {}


def shadow_vfs(shadows: list[dict[str, Any]]) -> dict[str, str]:
    """Shadow name -> the PCI address of the VF its binding annotation names."""
    return {
        s["metadata"]["name"]: binding_annotation.decode_binding(
            s["metadata"]["annotations"][names.BINDING_ANNOTATION]
        ).pci_address
        for s in shadows
    }


def status_devices(api: client.ApiClient, w: Workload) -> list[dict[str, Any]]:
    """The plugin's entries of the workload claim's ``status.devices``, as JSON."""
    claim = client.ResourceV1Api(api).read_namespaced_resource_claim(w.ref.name, w.namespace)
    status = api.sanitize_for_serialization(claim).get("status") or {}
    return [d for d in status.get("devices") or [] if d.get("driver") == names.DRIVER_NAME]
