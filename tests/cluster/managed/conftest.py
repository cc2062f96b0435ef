"""Cluster-tier harness for auto-attach: real apiserver, scheduler, controller-manager (GC).

The plugin side runs in this process with the real handler (``driver.prepare``/``unprepare``),
the real publisher and the real ``driver.managed`` clients, all talking to the API server **as
the plugin's ServiceAccount** (``Impersonate-User``) with exactly the shipped
``manifests/plugin/rbac.yaml`` applied. The node is a ``SimulatedNode`` with a fake-sysfs host
(two PFs under the two lab PCIe roots) and the lab's synthetic GPU slices; there is no kubelet, so
the test calls NodePrepare/NodeUnprepare the way the kubelet would.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import prometheus_client
import pytest
import yaml
from kubernetes import client
from tests import waiting
from tests.fakes import policy_objects as po
from tests.fakes.inventory import StaticInventory

from sriov_dra.driver import claim_context, managed_wiring, prepare, publisher, unprepare
from sriov_dra.driver.managed import repair
from sriov_dra.host import cdi, checkpoint, vf_driver_binding
from sriov_dra.kube import apply
from sriov_dra.kube import claims as kube_claims
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kubeletapi import messages
from sriov_dra_lab import session
from sriov_dra_lab.fakes import fake_pci, fake_sysfs
from sriov_dra_lab.nodes import SimulatedNode
from sriov_dra_rules import checkpoint_doc, names

T = TypeVar("T")
D = names.DOMAIN
MANIFESTS = Path(publisher.__file__).resolve().parents[1] / "manifests"
PLUGIN_NS = "dra-driver-sriov"
PLUGIN_USER = f"system:serviceaccount:{PLUGIN_NS}:dra-driver-sriov"
RBAC = MANIFESTS / "plugin" / "rbac.yaml"
NODE_EXTRA_HEADER = "Impersonate-Extra-authentication.kubernetes.io%2Fnode-name"


def eventually(what: str, fn: Callable[[], T | None], timeout_s: float = 60.0) -> T:
    """Poll ``fn`` every 0.2 s until truthy; fail naming ``what`` after ``timeout_s``."""
    return waiting.eventually(what, fn, timeout_s=timeout_s, interval_s=0.2)


def load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def device_classes() -> list[dict[str, Any]]:
    """The two DeviceClasses of the gpu-nic-pairs example (no rail, NAD or root value in them)."""
    root = '"resource.kubernetes.io" in device.attributes && "pcieRoot" in device.attributes["resource.kubernetes.io"] && device.attributes["resource.kubernetes.io"].pcieRoot != ""'
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "sriov-pcie-netdevice"},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.driver == "{names.DRIVER_NAME}" && {root}'}}]
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "nvidia-gpu-pcie"},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": 'device.driver == "gpu.nvidia.com" && "gpu.nvidia.com" in device.attributes '
                            '&& "type" in device.attributes["gpu.nvidia.com"] && '
                            f'device.attributes["gpu.nvidia.com"].type == "gpu" && {root}'
                        }
                    }
                ]
            },
        },
    ]


@pytest.fixture(scope="session")
def installed(api: client.ApiClient) -> None:
    """CRDs, the plugin namespace and the shipped plugin RBAC, the gpu-nic-pairs DeviceClasses."""
    crds = [
        yaml.safe_load((MANIFESTS / "crds" / n).read_text())
        for n in (
            "network-attachment-definitions.yaml",
            f"{D}_sriovresourcepolicies.yaml",
            f"{D}_deviceattributes.yaml",
        )
    ]
    apply.apply_objects(api, crds)
    apply.wait_crds_established(api, [c["metadata"]["name"] for c in crds])
    apply.apply_objects(api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PLUGIN_NS}}])
    apply.apply_objects(api, load_all(RBAC))
    apply.apply_objects(api, [*device_classes(), session.gpu_device_class()])


@pytest.fixture(scope="session")
def plugin_api(control_plane: Any, installed: None) -> Iterator[client.ApiClient]:
    """An ApiClient acting as the plugin's ServiceAccount (impersonation): exactly its RBAC."""
    api = control_plane.api()
    api.set_default_header("Impersonate-User", PLUGIN_USER)
    try:
        yield api
    finally:
        api.close()


def nad(name: str, namespace: str, cni_name: str, cidr: str) -> dict[str, Any]:
    """A gpu-nic-pairs template NAD (whereabouts IPAM, no deviceID, no resourceName)."""
    ipam = {"type": "whereabouts", "network_name": cni_name, "range": cidr}
    config = json.dumps({"cniVersion": "1.0.0", "name": cni_name, "type": "sriov", "ipam": ipam}, indent=2)
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"config": config},
    }


def rail_mapping(node: str) -> list[dict[str, Any]]:
    """The gpu-nic-pairs DeviceAttributes + SriovResourcePolicy, scoped to ``node`` (fake PF names, vendor 8086)."""
    suffix = node
    objs: list[dict[str, Any]] = []
    configs = []
    for rail, pf in (("a", "enp3s0f0"), ("b", "enp129s0f0")):
        objs.append(
            {
                "apiVersion": f"{D}/v1alpha1",
                "kind": "DeviceAttributes",
                "metadata": {
                    "name": f"rail-{rail}-{suffix}",
                    "namespace": PLUGIN_NS,
                    "labels": {"networking.example.com/template": f"rail-{rail}-net-{suffix}"},
                },
                "spec": {"attributes": {f"{D}/netAttachDefName": {"string": f"rail-{rail}-net"}}},
            }
        )
        configs.append(
            {
                "deviceAttributesSelector": {
                    "matchLabels": {"networking.example.com/template": f"rail-{rail}-net-{suffix}"}
                },
                "resourceFilters": [{"vendors": ["8086"], "pfNames": [pf], "linkType": "eth"}],
            }
        )
    objs.append(
        {
            "apiVersion": f"{D}/v1alpha1",
            "kind": "SriovResourcePolicy",
            "metadata": {"name": f"dual-rail-{suffix}", "namespace": PLUGIN_NS},
            "spec": {
                "nodeSelector": po.hostname_selector(node),
                "configs": configs,
            },
        }
    )
    return objs


def pairs_template(namespace: str) -> dict[str, Any]:
    """The gpu-nic-pairs ResourceClaimTemplate: four count-one requests, two pair-scoped roots."""

    def req(name: str, cls: str) -> dict[str, Any]:
        return {"name": name, "exactly": {"deviceClassName": cls, "allocationMode": "ExactCount", "count": 1}}

    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu-nic-pairs", "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        req("gpu-0", "nvidia-gpu-pcie"),
                        req("nic-0", "sriov-pcie-netdevice"),
                        req("gpu-1", "nvidia-gpu-pcie"),
                        req("nic-1", "sriov-pcie-netdevice"),
                    ],
                    "constraints": [
                        {"requests": ["gpu-0", "nic-0"], "matchAttribute": "resource.kubernetes.io/pcieRoot"},
                        {"requests": ["gpu-1", "nic-1"], "matchAttribute": "resource.kubernetes.io/pcieRoot"},
                    ],
                }
            }
        },
    }


def one_vf_claim(namespace: str, name: str = "one-vf") -> dict[str, object]:
    """A ResourceClaim ``name`` in ``namespace`` for exactly one VF of the shipped DeviceClass."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "vf",
                        "exactly": {
                            "deviceClassName": "sriov-pcie-netdevice",
                            "allocationMode": "ExactCount",
                            "count": 1,
                        },
                    }
                ]
            }
        },
    }


def workload_pod(name: str, node: str, claims: list[dict[str, Any]]) -> dict[str, Any]:
    """A Pod with standard DRA claims only: no networks annotation, no NAD or rail selector."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "terminationGracePeriodSeconds": 0,
            "resourceClaims": claims,
            "containers": [
                {
                    "name": "workload",
                    "image": "registry.invalid/toolbox",
                    "resources": {"claims": [{"name": c["name"]} for c in claims]},
                }
            ],
        },
    }


@dataclass
class ClusterPlugin:
    """The plugin (handler, publisher, auto-attach, repair worker) for one simulated node."""

    admin: client.ApiClient
    api: client.ApiClient
    node: SimulatedNode
    root: Path
    started: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.fake = fake_sysfs.build(self.root / "sys", fake_pci.two_root_pfs(2))
        self.stop = threading.Event()
        self.publisher = publisher.Publisher(
            api=self.api,
            node_name=self.node.name,
            sysfs=self.fake.sysfs,
            policy_namespace=PLUGIN_NS,
            stop=self.stop,
            managed=True,
            settle_s=0.05,
        ).start()
        (self.root / "state").mkdir()
        self.restart()

    def restart(self, gate_closed: str = "") -> None:
        """A new plugin process on the same node (checkpoint re-read); ``gate_closed``: release-only mode."""
        self.store = checkpoint.CheckpointStore(self.root / "state" / checkpoint_doc.CHECKPOINT_FILE_NAME)
        self.store.load()
        specs = cdi.CdiSpecs(self.root / "cdi")
        specs.ensure_root()
        self.attach = managed_wiring.build_attach(
            api=self.api,
            node_name=self.node.name,
            devices=self.publisher,
            store=self.store,
            registry=prometheus_client.CollectorRegistry(),
            api_timeout_s=10.0,
            watched_node_uid=self.publisher.watched_node_uid,
        )
        self.ctx = claim_context.ClaimContext(
            driver_name=names.DRIVER_NAME,
            node_name=self.node.name,
            claims=kube_claims.ClaimClient(self.api),
            inventory=StaticInventory(self.publisher.snapshot().inventory),
            store=self.store,
            binder=vf_driver_binding.DriverBinder(self.fake.sysfs, kernel=self.fake.kernel()),
            cdi=specs,
            sysfs=self.fake.sysfs,
            require_netdevice=True,
            claim_locks=self.attach.locks.claim_locks,
            pod_locks=self.attach.locks.pod_locks,
            managed=self.attach,
            gate_closed=gate_closed,
        )
        self.handler = prepare.DraHandler(self.ctx)

    def worker(self) -> repair.RepairWorker:
        return repair.RepairWorker(
            attach=self.attach,
            host_release=lambda r: unprepare.release_host(self.ctx, r),
            host_prepare=lambda r: prepare.ensure_host(self.ctx, r),
            clear_status=lambda r: unprepare.clear_status(self.ctx, r),
        )

    def prepare(self, ref: messages.ClaimRef) -> Any:
        return self.handler.prepare_resources([ref])[ref.uid]

    def unprepare(self, ref: messages.ClaimRef) -> Any:
        return self.handler.unprepare_resources([ref])[ref.uid]

    def close(self) -> None:
        self.stop.set()
        self.publisher.close()

    # ------------------------------------------------------------------ workload helpers
    def publish_mapping(self, namespace: str) -> None:
        """Source NADs in ``namespace`` and the rail mapping; wait until 4 VFs are advertised."""
        custom = client.CustomObjectsApi(self.admin)
        for body in (
            nad("rail-a-net", namespace, "ai-workloads-rail-a", "192.0.2.0/24"),
            nad("rail-b-net", namespace, "ai-workloads-rail-b", "198.51.100.0/24"),
        ):
            custom.create_namespaced_custom_object(
                "k8s.cni.cncf.io", "v1", namespace, "network-attachment-definitions", body
            )
        apply.apply_objects(self.admin, rail_mapping(self.node.name))
        eventually("4 eligible VFs", lambda: len(self.publisher.snapshot().eligible) == 4)

    def unpublish_mapping(self) -> None:
        custom = client.CustomObjectsApi(self.admin)
        for obj in rail_mapping(self.node.name):
            plural = "sriovresourcepolicies" if obj["kind"] == "SriovResourcePolicy" else "deviceattributes"
            try:
                custom.delete_namespaced_custom_object(
                    D, "v1alpha1", PLUGIN_NS, plural, obj["metadata"]["name"]
                )
            except client.ApiException as exc:
                if exc.status != 404:
                    raise

    def claim_ref(self, namespace: str, pod: str, alias: str = "devices") -> messages.ClaimRef:
        """Wait until the Pod is scheduled and its claim allocated and reserved; return its ref."""
        core, res = client.CoreV1Api(self.admin), client.ResourceV1Api(self.admin)

        def ready() -> messages.ClaimRef | None:
            p = core.read_namespaced_pod(pod, namespace)
            if not p.spec.node_name:
                return None
            claim_name = next(
                (s.resource_claim_name for s in (p.status.resource_claim_statuses or []) if s.name == alias),
                None,
            )
            if claim_name is None:
                claim_name = next(
                    (c.resource_claim_name for c in p.spec.resource_claims if c.name == alias), None
                )
            if claim_name is None:
                return None
            claim = res.read_namespaced_resource_claim(claim_name, namespace)
            if not claim.status or not claim.status.allocation or not claim.status.reserved_for:
                return None
            return messages.ClaimRef(namespace=namespace, name=claim_name, uid=claim.metadata.uid)

        return eventually(f"Pod {namespace}/{pod} scheduled with its claim allocated", ready)


@pytest.fixture
def plugin(api: client.ApiClient, plugin_api: client.ApiClient, tmp_path: Path) -> Iterator[ClusterPlugin]:
    name = f"mg-{uuid.uuid4().hex[:6]}"
    node = SimulatedNode(api, name, labels={"kubernetes.io/hostname": name}, interval_s=5.0).start()
    apply.apply_objects(api, [session.gpu_slice(name)])
    # A ServiceAccount token of a Pod on a node carries this extra; it is what the
    # resourceclaims/driver associated-node:* verbs authorize against (claim status updates).
    plugin_api.set_default_header(NODE_EXTRA_HEADER, name)
    harness = ClusterPlugin(admin=api, api=plugin_api, node=node, root=tmp_path)
    try:
        yield harness
    finally:
        harness.close()
        harness.unpublish_mapping()
        try:
            client.ResourceV1Api(api).delete_resource_slice(session.gpu_slice(name)["metadata"]["name"])
        except client.ApiException as exc:
            if exc.status != 404:
                raise
        node.stop(delete=True)


def nads_in(api: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", namespace, "network-attachment-definitions"
    )["items"]
    return [i for i in items if i["metadata"]["name"].startswith(names.SHADOW_NAME_PREFIX)]


def gone(api: client.ApiClient, namespace: str) -> bool:
    try:
        client.CoreV1Api(api).read_namespace(namespace)
    except client.ApiException as exc:
        return exc.status == 404
    return False


__all__ = ["ClusterPlugin", "eventually", "gone", "kube_errors", "nads_in", "pairs_template", "workload_pod"]
