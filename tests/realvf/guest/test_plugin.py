"""The plugin on real VFs: NodePrepare/NodeUnprepare over its real gRPC socket, the API server on the host.

One plugin process (``python -m sriov_dra.driver`` in auto-attach mode, ``--sysfs-root=/``, the real
kernel's binder) serves the whole module; this process plays the kubelet with the lab's kubelet
client (``sriov_dra_lab.kubelet_plugins``: the registration handshake, then the DRA socket). The
control plane runs on the host (tests/realvf/kubeapi.py: apiserver, scheduler, controller-manager,
the guest's Node and its rail mapping) and is reached through QEMU user networking. Each test
creates its own namespace, template NAD, ResourceClaim (one VF under each of the two PCIe roots)
and Pod; the real scheduler allocates the claim from the ResourceSlices the plugin published for
the guest's VFs.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client
from tests import waiting
from tests.realvf import kubeapi
from tests.realvf.guest import realvfs

from sriov_dra.core import bindings, checkpoint_codec, registry
from sriov_dra.host import checkpoint, netlink
from sriov_dra.kube import client as kube_client
from sriov_dra.kubeletapi import messages
from sriov_dra_lab import kubelet_plugins, processes
from sriov_dra_rules import names

ROOT_ATTRIBUTE = 'device.attributes["resource.kubernetes.io"].pcieRoot'
NAD_GROUP, NAD_VERSION, NAD_PLURAL = "k8s.cni.cncf.io", "v1", "network-attachment-definitions"
API_WAIT_S = 120.0
"""Bound of every wait on the API server (TCG guest, loaded host)."""
T = TypeVar("T")


def eventually(what: str, fn: Callable[[], T | None], timeout_s: float = API_WAIT_S) -> T:
    """Poll ``fn`` every 0.25 s until truthy; fail naming ``what`` after ``timeout_s``."""
    return waiting.eventually(what, fn, timeout_s=timeout_s, interval_s=0.25)


@pytest.fixture(scope="module")
def api() -> Iterator[client.ApiClient]:
    """An admin ApiClient for the host's API server (skips when the host started none)."""
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
        path = self.state_dir / checkpoint.CHECKPOINT_FILE_NAME
        return dict(checkpoint_codec.decode_checkpoint(path.read_bytes()).claims) if path.exists() else {}


@pytest.fixture(scope="module")
def plugin(
    api: client.ApiClient, real_pfs: list[realvfs.RealPf], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Plugin]:
    """One plugin process for the module, registered, with every VF of the guest advertised."""
    root = tmp_path_factory.mktemp("plugin")
    registry_dir, state_dir, cdi_root = root / "plugins_registry", root / "state", root / "cdi"
    argv = [
        sys.executable,
        "-m",
        "sriov_dra.driver",
        f"--node-name={kubeapi.NODE_NAME}",
        f"--kubeconfig={os.environ['SRIOV_DRA_REALVF_KUBECONFIG']}",
        "--sysfs-root=/",
        f"--kubelet-plugins-directory-path={root / 'plugins'}",
        f"--kubelet-registrar-directory-path={registry_dir}",
        f"--cdi-root={cdi_root}",
        f"--state-dir={state_dir}",
        f"--namespace={kubeapi.PLUGIN_NS}",
        "--multus-auto-attach=true",
        "--log-format=json",
    ]
    proc = processes.Process("plugin", argv, root / "plugin.log", stop_grace_s=10.0)
    proc.start()
    try:
        socket = kubelet_plugins.wait_for_new_socket(registry_dir, timeout_s=240.0)
        if socket is None:
            pytest.fail(
                f"the plugin never created its registration socket:\n{processes.tail(root / 'plugin.log', 40)}"
            )
        dra = kubelet_plugins.DraPluginClient(kubelet_plugins.register_plugin(socket))
        vfs = {vf.bdf for pf in real_pfs for vf in realvfs.raw_vfs(pf)}
        eventually(
            f"ResourceSlices of {kubeapi.NODE_NAME} listing the {len(vfs)} VFs",
            lambda: _advertised(api) == vfs,
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


@pytest.fixture
def workload(api: client.ApiClient, plugin: Plugin) -> Iterator[Workload]:
    """A namespace with the template NAD, a claim of one VF per root and its Pod, scheduled and allocated."""
    core, res = client.CoreV1Api(api), client.ResourceV1Api(api)
    ns = f"realvf-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    try:
        config = {"cniVersion": "1.0.0", "name": "rail", "type": "sriov"}
        config["ipam"] = {"type": "host-local", "ranges": [[{"subnet": "10.56.2.0/24"}]]}
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
        res.create_namespaced_resource_claim(ns, _claim("nics", sorted(realvfs.ROOTS)))
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

        ref = eventually(f"claim {ns}/nics allocated and reserved by the scheduler", allocated)
        yield Workload(ns, "workload", ref)
        if ref.uid in plugin.claim_records():
            plugin.unprepare(ref)
    finally:
        core.delete_namespace(ns, propagation_policy="Background")


def _shadows(api: client.ApiClient, ns: str) -> list[dict[str, Any]]:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(
        NAD_GROUP, NAD_VERSION, ns, NAD_PLURAL
    )["items"]
    return [i for i in items if i["metadata"]["name"].startswith(names.SHADOW_NAME_PREFIX)]


def _annotations(api: client.ApiClient, w: Workload) -> dict[str, str]:
    return client.CoreV1Api(api).read_namespaced_pod(w.pod, w.namespace).metadata.annotations or {}


def _shadow_vfs(shadows: list[dict[str, Any]]) -> dict[str, str]:
    """Shadow name -> the PCI address of the VF its binding annotation names."""
    return {
        s["metadata"]["name"]: bindings.decode_binding(
            s["metadata"]["annotations"][names.BINDING_ANNOTATION]
        ).pci_address
        for s in shadows
    }


def test_node_prepare_over_the_grpc_socket_creates_a_shadow_per_real_vf_and_the_pods_selections(
    api: client.ApiClient, plugin: Plugin, workload: Workload
) -> None:
    out = plugin.prepare(workload.ref)
    assert isinstance(out, messages.Prepared), out
    assert sorted(d.request_names[0] for d in out.devices) == ["nic-0", "nic-1"]
    assert {d.pool_name for d in out.devices} == {kubeapi.NODE_NAME}
    shadows = _shadows(api, workload.namespace)
    vfs = _shadow_vfs(shadows)
    assert len(shadows) == 2, shadows
    roots = sorted(realvfs.raw_vf(bdf).pcie_root for bdf in vfs.values())
    assert roots == sorted(realvfs.ROOTS), f"one real VF under each PCIe root: {vfs}"
    pod = client.CoreV1Api(api).read_namespaced_pod(workload.pod, workload.namespace)
    for obj in shadows:
        meta = obj["metadata"]
        assert [(o["kind"], o["uid"]) for o in meta["ownerReferences"]] == [("Pod", pod.metadata.uid)]
        assert meta["finalizers"] == [names.FINALIZER_ATTACHMENT_PROTECTION]
        binding = bindings.decode_binding(meta["annotations"][names.BINDING_ANNOTATION])
        config = json.loads(obj["spec"]["config"])
        assert (binding.source.name, config["type"], config["deviceID"]) == (
            kubeapi.SOURCE_NAD,
            "sriov",
            binding.pci_address,
        )
    ann = _annotations(api, workload)
    selections = json.loads(ann[names.NETWORKS_ANNOTATION])
    assert sorted(s["interface"] for s in selections) == ["dra0", "dra1"]
    assert {s["name"] for s in selections} == set(vfs)
    reg = registry.decode_registry(ann[names.MANAGED_NETWORKS_ANNOTATION])
    assert {e.uid for e in reg.entries} == {o["metadata"]["uid"] for o in shadows}
    assert plugin.unprepare(workload.ref) is None


def test_a_retried_node_prepare_of_a_real_vf_whose_netdev_is_in_the_pods_netns_succeeds(
    api: client.ApiClient, plugin: Plugin, workload: Workload
) -> None:
    first = plugin.prepare(workload.ref)
    assert isinstance(first, messages.Prepared), first
    shadows = _shadows(api, workload.namespace)
    bdf = sorted(_shadow_vfs(shadows).values())[0]
    (name,) = realvfs.raw_vf(bdf).net or ("",)
    pod_ns = f"realvf-{uuid.uuid4().hex[:8]}"
    path = netlink.create_netns(pod_ns)
    try:
        netlink.move_link(name, target_netns=path, new_name="net1")  # what the CNI ADD does
        assert realvfs.raw_vf(bdf).net == (), "the kernel shows an empty net/ for a VF in another netns"
        again = plugin.prepare(workload.ref)  # the kubelet retries NodePrepare (e.g. after a restart)
        assert again == first
        assert [o["metadata"]["resourceVersion"] for o in _shadows(api, workload.namespace)] == [
            o["metadata"]["resourceVersion"] for o in shadows
        ]
        netlink.move_link("net1", target_netns=None, new_name=name, netns_path=path)  # the CNI DEL
    finally:
        netlink.remove_netns(pod_ns)
    realvfs.wait_until(f"{name} back in the host namespace", lambda: realvfs.raw_vf(bdf).net == (name,))
    assert plugin.unprepare(workload.ref) is None


def test_node_unprepare_restores_the_real_vfs_and_leaves_no_shadow_selection_checkpoint_or_cdi_file(
    api: client.ApiClient, plugin: Plugin, workload: Workload, all_vfs: list[realvfs.RawVf]
) -> None:
    before = {vf.bdf: (vf.driver, vf.net) for vf in all_vfs}
    assert isinstance(plugin.prepare(workload.ref), messages.Prepared)
    used = set(_shadow_vfs(_shadows(api, workload.namespace)).values())
    assert workload.ref.uid in plugin.claim_records()
    assert any(workload.ref.uid in p.read_text() for p in plugin.cdi_root.glob("*.json"))

    assert plugin.unprepare(workload.ref) is None
    assert {bdf: (realvfs.raw_vf(bdf).driver, realvfs.raw_vf(bdf).net) for bdf in used} == {
        bdf: before[bdf] for bdf in used
    }, "each VF back on its driver with its netdev under its name"
    eventually("the shadows deleted", lambda: _shadows(api, workload.namespace) == [])
    ann = _annotations(api, workload)
    assert names.NETWORKS_ANNOTATION not in ann and names.MANAGED_NETWORKS_ANNOTATION not in ann, ann
    assert workload.ref.uid not in plugin.claim_records()
    assert not [p for p in plugin.cdi_root.glob("*.json") if workload.ref.uid in p.read_text()]
    assert plugin.unprepare(workload.ref) is None, "a repeated NodeUnprepare is a no-op"
