"""Cluster tier: the plugin process prepares and unprepares claims the real scheduler allocated.

The plugin runs as a real process through the product's entrypoint, started by the lab's
launcher (``python -m sriov_dra_lab.launch_plugin``: the product's ``main`` with the fake tree's
kernel, eswitch source and fault hook) on a fake-sysfs node (``sriov_dra_lab.fakes.fake_sysfs``;
its fake kernel emulates driver binding) against kube-apiserver, controller-manager and scheduler
v1.36.3. The test kubelet (``sriov_dra_lab.kubelet``) registers it and calls NodePrepare /
NodeUnprepare as the kubelet does. Every step asserts CDI files, the VF's driver on the fake
sysfs, the claim's ``status.devices`` and the checkpoint file. The crash tests kill the process
(SIGKILL, through the lab's ``SRIOV_DRA_TEST_KILL_AT`` hook, ``sriov_dra_lab.fakes.fault_kill``) at every step boundary and
prove that the next prepare or unprepare after a restart completes.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from tests import waiting
from tests.cluster.driver.conftest import install_plugin_objects
from tests.fakes.scripted_plugin import ScriptedPlugin, serve_scripted

from sriov_dra.core.plugin import cdi_spec, checkpoint_codec, device_metadata
from sriov_dra.driver import faults
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra.kube import apply
from sriov_dra.kubeletapi import messages
from sriov_dra_lab import kubelet, processes, session
from sriov_dra_lab.control_plane import ControlPlane
from sriov_dra_lab.fakes import fake_pci, fake_sysfs, fault_kill
from sriov_dra_lab.nodes import SimulatedNode
from sriov_dra_rules import checkpoint_doc, names

T = TypeVar("T")
D = names.DOMAIN
DRIVER = names.DRIVER_NAME
KIND = cdi_spec.KIND
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"


def eventually(what: str, fn: Callable[[], T | None], timeout_s: float = 60.0) -> T:
    """Poll ``fn`` every 0.1 s until truthy; fail naming ``what`` after ``timeout_s``."""
    return waiting.eventually(what, fn, timeout_s=timeout_s, interval_s=0.1)


@pytest.fixture(scope="module")
def installed(api: client.ApiClient) -> None:
    """CRDs, the shipped DeviceClass and the synthetic GPU DeviceClass, as the lab installs them."""
    install_plugin_objects(api, session.gpu_device_class())


@dataclass
class PluginNode:
    """A simulated node: Node object, fake sysfs, plugin directories, the plugin process, a kubelet."""

    api: client.ApiClient
    kubeconfig: Path
    policy_namespace: str
    root: Path
    node: SimulatedNode
    kubelet: kubelet.KubeletDraManager = field(default_factory=kubelet.KubeletDraManager)
    process: processes.Process | None = None
    port: int = 0
    starts: int = 0

    def __post_init__(self) -> None:
        self.fake = fake_sysfs.build(self.root / "host", fake_pci.two_root_pfs(2))
        self.sysfs = sysfs_mod.Sysfs(self.root / "host")
        self.registry = self.root / "registry"
        self.cdi_root = self.root / "cdi"
        self.state = self.root / "state"

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def checkpoint_path(self) -> Path:
        return self.state / checkpoint_doc.CHECKPOINT_FILE_NAME

    def argv(self, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "sriov_dra_lab.launch_plugin",
            f"--node-name={self.name}",
            f"--kubeconfig={self.kubeconfig}",
            f"--sysfs-root={self.root / 'host'}",
            f"--kubelet-plugins-directory-path={self.root / 'plugins'}",
            f"--kubelet-registrar-directory-path={self.registry}",
            f"--cdi-root={self.cdi_root}",
            f"--state-dir={self.state}",
            f"--namespace={self.policy_namespace}",
            f"--metrics-bind-address=127.0.0.1:{self.port}",
            "--log-format=json",
            *extra,
        ]

    def launch(self, *extra: str, kill_at: str = "") -> processes.Process:
        """Start the plugin process (without waiting for anything)."""
        self.port = processes.free_port()
        env = dict(os.environ)
        env.pop(fault_kill.ENV_VAR, None)
        if kill_at:
            env[fault_kill.ENV_VAR] = kill_at
        self.starts += 1
        self.process = processes.Process(
            f"plugin-{self.starts}",
            self.argv(*extra),
            self.root / "logs" / f"plugin-{self.starts}.log",
            env=env,
        )
        self.process.start()
        return self.process

    def start(self, *, kill_at: str = "") -> None:
        """Start the plugin and register it with the test kubelet.

        ``/readyz`` (serving) is 503 until the kubelet registered the plugin, while ``/healthz``
        (alive) is already 200: the two probes mean what they mean in every service.
        """
        proc = self.launch(kill_at=kill_at)
        processes.wait_until(
            "the plugin to serve its sockets (/readyz: waiting for the kubelet)",
            lambda: self.probe("/readyz")[1].startswith("registered: waiting"),
            timeout_s=60,
            process=proc,
        )
        assert self.probe("/readyz")[0] == 503
        assert self.probe("/healthz") == (200, "ok\n")
        self.kubelet.deregister(DRIVER)
        assert self.kubelet.wait_for_driver(self.registry, DRIVER, timeout_s=30)
        processes.wait_until(
            "/readyz to turn ready after registration",
            lambda: self.probe("/readyz")[0] == 200,
            timeout_s=30,
            process=proc,
        )

    def probe(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
            return str(r.read().decode())

    def wait_exit(self, timeout_s: float = 60.0) -> int:
        assert self.process is not None and self.process.popen is not None
        return self.process.popen.wait(timeout=timeout_s)

    def log_tail(self) -> str:
        assert self.process is not None
        return f"plugin log tail:\n{processes.tail(self.process.log_path, 30)}"

    def log(self) -> str:
        assert self.process is not None
        return self.process.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    # --- state on the node ---------------------------------------------------------------
    def records(self) -> dict[str, Any]:
        return dict(checkpoint_codec.decode_checkpoint(self.checkpoint_path.read_bytes()).claims)

    def cdi_files(self) -> list[str]:
        return sorted(p.name for p in self.cdi_root.glob("*.json"))

    def driver_of(self, pci: str) -> str | None:
        return self.sysfs.current_driver(pci)


@pytest.fixture
def plugin_node(
    api: client.ApiClient, control_plane: ControlPlane, installed: None, namespace: str
) -> Iterator[PluginNode]:
    """A node with the plugin's directories under a short /tmp path (unix socket length limit)."""
    root = Path(tempfile.mkdtemp(prefix="plug-", dir="/tmp"))
    name = f"plug-{uuid.uuid4().hex[:6]}"
    sim = SimulatedNode(api, name, labels={"kubernetes.io/hostname": name}, interval_s=5.0).start()
    create_policy(api, namespace)
    pn = PluginNode(api, control_plane.kubeconfig, namespace, root, sim)
    try:
        yield pn
    finally:
        pn.stop()
        pn.kubelet.close()
        sim.stop(delete=True)
        for s in client.ResourceV1Api(api).list_resource_slice(field_selector=f"spec.nodeName={name}").items:
            try:  # the garbage collector may be faster: the Node owns the plugin's slices
                client.ResourceV1Api(api).delete_resource_slice(s.metadata.name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        shutil.rmtree(root, ignore_errors=True)


def create_policy(api: client.ApiClient, namespace: str) -> None:
    """Advertise every VF of every node (``configs: [{}]``)."""
    body = {
        "apiVersion": f"{D}/v1alpha1",
        "kind": "SriovResourcePolicy",
        "metadata": {"name": "all-vfs", "namespace": namespace},
        "spec": {"configs": [{}]},
    }
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        D, "v1alpha1", namespace, "sriovresourcepolicies", body
    )


def vf_config(**fields: object) -> dict[str, Any]:
    return {"apiVersion": f"{D}/v1alpha1", "kind": "VfConfig", **fields}


def claim_template(
    api: client.ApiClient, namespace: str, name: str, *, config: dict[str, Any] | None, with_gpu: bool = False
) -> None:
    requests: list[dict[str, Any]] = [{"name": "vf", "exactly": {"deviceClassName": DRIVER}}]
    spec: dict[str, Any] = {"requests": requests}
    if with_gpu:
        requests.insert(0, {"name": "gpu", "exactly": {"deviceClassName": session.GPU_DRIVER}})
        spec["constraints"] = [{"requests": ["gpu", "vf"], "matchAttribute": PCIE_ROOT}]
    if config is not None:
        spec["config"] = [{"requests": ["vf"], "opaque": {"driver": DRIVER, "parameters": config}}]
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": spec}},
    }
    client.ResourceV1Api(api).create_namespaced_resource_claim_template(namespace, body)


@dataclass(frozen=True)
class Allocated:
    """A scheduled Pod and its allocated claim."""

    pod_uid: str
    claim: messages.ClaimRef
    results: tuple[dict[str, Any], ...]

    def device(self, driver: str = DRIVER) -> dict[str, Any]:
        return next(r for r in self.results if r["driver"] == driver)

    @property
    def drivers(self) -> tuple[str, ...]:
        return tuple(sorted({r["driver"] for r in self.results}))


def schedule_pod(
    api: client.ApiClient,
    namespace: str,
    node: str,
    *,
    config: dict[str, Any] | None = None,
    with_gpu: bool = False,
    name: str = "consumer",
) -> Allocated:
    """Create a claim template and a Pod pinned to ``node``; wait for allocation and reservation."""
    claim_template(api, namespace, f"{name}-vfs", config=config, with_gpu=with_gpu)
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "resourceClaims": [{"name": "vfs", "resourceClaimTemplateName": f"{name}-vfs"}],
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.invalid/none",
                        "resources": {"claims": [{"name": "vfs"}]},
                    }
                ],
            },
        },
    )

    def allocated() -> tuple[Any, dict[str, Any]] | None:
        pod = core.read_namespaced_pod(name, namespace)
        statuses = (pod.status.resource_claim_statuses or []) if pod.status else []
        if not statuses or not statuses[0].resource_claim_name or not pod.spec.node_name:
            return None
        claim = api.sanitize_for_serialization(
            client.ResourceV1Api(api).read_namespaced_resource_claim(
                statuses[0].resource_claim_name, namespace
            )
        )
        status = claim.get("status") or {}
        if not status.get("allocation") or not status.get("reservedFor"):
            return None
        return pod, claim

    pod, claim = eventually(f"Pod {namespace}/{name} to be scheduled with an allocated claim", allocated)
    meta = claim["metadata"]
    return Allocated(
        pod_uid=pod.metadata.uid,
        claim=messages.ClaimRef(namespace=namespace, name=meta["name"], uid=meta["uid"]),
        results=tuple(claim["status"]["allocation"]["devices"]["results"]),
    )


def read_claim(api: client.ApiClient, ref: messages.ClaimRef) -> dict[str, Any]:
    return dict(
        api.sanitize_for_serialization(
            client.ResourceV1Api(api).read_namespaced_resource_claim(ref.name, ref.namespace)
        )
    )


def own_status(api: client.ApiClient, ref: messages.ClaimRef) -> list[dict[str, Any]]:
    devices = (read_claim(api, ref).get("status") or {}).get("devices") or []
    return [d for d in devices if d["driver"] == DRIVER]


def pci_of(device: str) -> str:
    """The BDF behind a DRA device name ``0000-03-02-0``."""
    domain, bus, slot, fn = device.split("-")
    return f"{domain}:{bus}:{slot}.{fn}"


def prepare(pn: PluginNode, alloc: Allocated) -> kubelet.PodPrepareResult:
    return pn.kubelet.prepare_pod(alloc.pod_uid, [kubelet.PodClaim(alloc.claim, alloc.drivers)])


def assert_prepared(pn: PluginNode, alloc: Allocated, *, driver: str, original: str) -> None:
    """Every trace of a prepared claim: checkpoint, CDI files, VF driver, claim status."""
    vf = alloc.device()
    pci = pci_of(vf["device"])
    record = pn.records()[alloc.claim.uid]
    assert (record.pod_uid, record.name) == (alloc.pod_uid, alloc.claim.name)
    assert [(d.device, d.pci_address, d.original_driver) for d in record.devices] == [
        (vf["device"], pci, original if driver else "")
    ]
    request = vf["request"]
    assert pn.cdi_files() == sorted(
        [
            cdi_spec.spec_file_name(alloc.claim.uid),
            cdi_spec.spec_file_name(alloc.pod_uid),
            device_metadata.cdi_spec_file_name(DRIVER, alloc.claim.uid, request),
        ]
    )
    metadata = pn.root / "plugins" / DRIVER / "dra-device-metadata" / f"{record.namespace}_{record.name}"
    doc = json.loads((metadata / request / "metadata.json").read_text())
    assert doc["metadata"]["uid"] == alloc.claim.uid
    assert [(d["pool"], d["name"]) for d in doc["requests"][0]["devices"]] == [(pn.name, vf["device"])]
    assert pn.driver_of(pci) == (driver or "iavf")
    status = own_status(pn.api, alloc.claim)
    assert [(s["pool"], s["device"], s["data"].get("driver")) for s in status] == [
        (pn.name, vf["device"], driver or None)
    ], pn.log_tail()
    assert [(c["type"], c["status"], c["reason"]) for c in status[0]["conditions"]] == [
        ("Ready", "True", "Prepared")
    ]


def assert_released(pn: PluginNode, alloc: Allocated) -> None:
    """Nothing of the claim is left on the node or in its status; the VF is back on iavf."""
    assert pn.records() == {}
    assert pn.cdi_files() == []
    assert list((pn.root / "plugins" / DRIVER / "dra-device-metadata").glob("*")) == []
    assert pn.driver_of(pci_of(alloc.device()["device"])) == "iavf"
    assert own_status(pn.api, alloc.claim) == []


# --- the forward path -------------------------------------------------------------------------


def test_plugin_publishes_and_prepares_a_scheduled_vf_then_unprepares_it(
    api: client.ApiClient, namespace: str, plugin_node: PluginNode
) -> None:
    pn = plugin_node
    pn.start()
    slices = eventually(
        "the plugin's ResourceSlices",
        lambda: (
            client.ResourceV1Api(api)
            .list_resource_slice(field_selector=f"spec.driver={DRIVER},spec.nodeName={pn.name}")
            .items
        ),
    )
    assert sum(len(s.spec.devices or []) for s in slices) == 4
    alloc = schedule_pod(
        api, namespace, pn.name, config=vf_config(driver="vfio-pci", netAttachDefName="rail-a")
    )
    vf = alloc.device()
    assert vf["pool"] == pn.name

    result = prepare(pn, alloc)
    assert result.ok, result.failure
    claim_uid, pod_uid = alloc.claim.uid, alloc.pod_uid
    assert result.devices[alloc.claim][DRIVER] == (
        messages.Device(
            pool_name=pn.name,
            device_name=vf["device"],
            request_names=("vf",),
            cdi_device_ids=(
                f"{KIND}={claim_uid}-{vf['device']}",
                f"{KIND}={pod_uid}",
                f"{DRIVER}/metadata={claim_uid}_vf",
            ),
        ),
    )
    assert_prepared(pn, alloc, driver="vfio-pci", original="iavf")
    spec = (pn.cdi_root / cdi_spec.spec_file_name(claim_uid)).read_text()
    assert f"/dev/vfio/{pn.sysfs.iommu_group(pci_of(vf['device']))}" in spec
    assert "SRIOVNETWORK_NET_ATTACH_DEF_NAME=rail-a" in spec
    assert (
        'sriov_dra_plugin_claim_operations_total{operation="prepare",outcome="ok",reason=""} 1.0'
        in pn.metrics()
    )

    again = pn.kubelet.client(DRIVER)
    assert again is not None
    rv = read_claim(api, alloc.claim)["metadata"]["resourceVersion"]
    assert again.node_prepare_resources([alloc.claim]) == {
        claim_uid: messages.Prepared(result.devices[alloc.claim][DRIVER])
    }
    assert read_claim(api, alloc.claim)["metadata"]["resourceVersion"] == rv

    released = pn.kubelet.unprepare_pod(pod_uid)
    assert released.ok, released.failure
    assert_released(pn, alloc)
    assert again.node_unprepare_resources([alloc.claim]) == {claim_uid: None}


def test_gpu_and_vf_on_one_pcie_root_keep_the_gpu_drivers_status_entry(
    api: client.ApiClient, namespace: str, plugin_node: PluginNode
) -> None:
    pn = plugin_node
    apply.apply_objects(api, [session.gpu_slice(pn.name)])
    pn.start()
    gpu_plugin = ScriptedPlugin(name=session.GPU_DRIVER)
    with serve_scripted(gpu_plugin, pn.registry / f"{session.GPU_DRIVER}-reg.sock"):
        assert pn.kubelet.wait_for_driver(pn.registry, session.GPU_DRIVER, timeout_s=10)
        alloc = schedule_pod(api, namespace, pn.name, with_gpu=True)
        gpu = alloc.device(session.GPU_DRIVER)
        vf = alloc.device()
        gpu_root = {0: "pci0000:00", 1: "pci0000:80"}[int(gpu["device"].split("-")[1])]
        assert (
            pn.fake.sysfs.pci_device_dir(pci_of(vf["device"])).resolve().as_posix().count(f"/{gpu_root}/")
            == 1
        )
        gpu_entry = {
            "driver": session.GPU_DRIVER,
            "pool": gpu["pool"],
            "device": gpu["device"],
            "data": {"uuid": "GPU-x"},
        }
        client.ResourceV1Api(api).patch_namespaced_resource_claim_status(
            alloc.claim.name, alloc.claim.namespace, {"status": {"devices": [gpu_entry]}}
        )

        result = prepare(pn, alloc)
        assert result.ok, result.failure
        assert [c.driver for c in result.calls] == [session.GPU_DRIVER, DRIVER]
        assert_prepared(pn, alloc, driver="", original="")
        devices = read_claim(api, alloc.claim)["status"]["devices"]
        assert [d["driver"] for d in devices] == [session.GPU_DRIVER, DRIVER]
        assert devices[0] == gpu_entry

        assert pn.kubelet.unprepare_pod(alloc.pod_uid).ok
        assert_released(pn, alloc)
        assert read_claim(api, alloc.claim)["status"]["devices"] == [gpu_entry]


# --- kill between any two steps ---------------------------------------------------------------


@pytest.mark.parametrize("then", ["prepare", "unprepare"])
@pytest.mark.parametrize("point", faults.PREPARE_POINTS, ids=list(faults.PREPARE_POINTS))
def test_kill_during_prepare_then_restart_completes(
    api: client.ApiClient, namespace: str, plugin_node: PluginNode, point: str, then: str
) -> None:
    pn = plugin_node
    pn.start(kill_at=point)
    alloc = schedule_pod(api, namespace, pn.name, config=vf_config(driver="vfio-pci"))
    failed = prepare(pn, alloc)
    assert failed.failure is not None and failed.failure.kind is kubelet.FailureKind.RPC_FAILED
    assert pn.wait_exit() == -9
    assert f'"reason": "{point}"' in pn.log()

    pn.start()
    if then == "prepare":
        result = prepare(pn, alloc)
        assert result.ok, result.failure
        assert_prepared(pn, alloc, driver="vfio-pci", original="iavf")
    assert pn.kubelet.unprepare_pod(alloc.pod_uid).ok
    assert_released(pn, alloc)


@pytest.mark.parametrize("point", faults.UNPREPARE_POINTS, ids=list(faults.UNPREPARE_POINTS))
def test_kill_during_unprepare_then_restart_completes(
    api: client.ApiClient, namespace: str, plugin_node: PluginNode, point: str
) -> None:
    pn = plugin_node
    pn.start(kill_at=point)
    alloc = schedule_pod(api, namespace, pn.name, config=vf_config(driver="vfio-pci"))
    assert prepare(pn, alloc).ok
    failed = pn.kubelet.unprepare_pod(alloc.pod_uid)
    assert failed.failure is not None and failed.failure.kind is kubelet.FailureKind.RPC_FAILED
    assert pn.wait_exit() == -9

    pn.start()
    assert pn.kubelet.unprepare_pod(alloc.pod_uid).ok
    assert_released(pn, alloc)


# --- bad input --------------------------------------------------------------------------------


def test_corrupt_checkpoint_stops_startup_and_leaves_the_file_untouched(plugin_node: PluginNode) -> None:
    pn = plugin_node
    pn.state.mkdir(parents=True)
    garbage = b'{"version": 1, "checksum": "00", "data": {"claims": {'
    pn.checkpoint_path.write_bytes(garbage)
    pn.launch()
    assert pn.wait_exit() == 1
    log = pn.log()
    assert "startup failed" in log and "is corrupt" in log and str(pn.checkpoint_path) in log
    assert pn.checkpoint_path.read_bytes() == garbage
    assert not (pn.root / "plugins").exists() or not any((pn.root / "plugins").rglob("*.sock"))


def test_missing_policy_namespace_stops_startup_with_the_fix(plugin_node: PluginNode) -> None:
    pn = plugin_node
    pn.launch("--namespace=no-such-policy-ns")
    assert pn.wait_exit() == 1
    log = pn.log()
    assert "policy namespace 'no-such-policy-ns' does not exist" in log
    assert "kubectl create namespace no-such-policy-ns" in log


def test_unknown_vfconfig_field_fails_the_claim_and_changes_nothing(
    api: client.ApiClient, namespace: str, plugin_node: PluginNode
) -> None:
    pn = plugin_node
    pn.start()
    alloc = schedule_pod(api, namespace, pn.name, config=vf_config(driver="vfio-pci", vlan=12))
    result = prepare(pn, alloc)
    assert result.failure is not None and result.failure.kind is kubelet.FailureKind.CLAIM_FAILED
    assert "InvalidVfConfig" in result.failure.message
    assert "opaque.parameters.vlan: unknown field" in result.failure.message
    assert pn.records() == {} and pn.cdi_files() == []
    assert pn.driver_of(pci_of(alloc.device()["device"])) == "iavf"


def test_claim_allocated_on_another_node_fails_and_changes_nothing(
    api: client.ApiClient, namespace: str, plugin_node: PluginNode
) -> None:
    pn = plugin_node
    pn.start()
    other = SimulatedNode(
        api, f"{pn.name}-b", labels={"kubernetes.io/hostname": f"{pn.name}-b"}, interval_s=5.0
    ).start()
    device = "0000-03-02-0"  # the same device name exists on this node: only the pool tells them apart
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{other.name}-hand-made"},
        "spec": {
            "driver": DRIVER,
            "nodeName": other.name,
            "pool": {"name": other.name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": device, "attributes": {f"{D}/pciAddress": {"string": "0000:03:02.0"}}}],
        },
    }
    client.ResourceV1Api(api).create_resource_slice(body)
    try:
        alloc = schedule_pod(api, namespace, other.name)
        assert alloc.device()["pool"] == other.name
        result = prepare(pn, alloc)
        assert result.failure is not None and result.failure.kind is kubelet.FailureKind.CLAIM_FAILED
        assert "InvalidClaim" in result.failure.message
        assert (
            f"'{other.name}' is another node's pool; this plugin serves node '{pn.name}'"
            in result.failure.message
        )
        assert pn.records() == {} and pn.cdi_files() == []
        assert own_status(api, alloc.claim) == []
    finally:
        client.ResourceV1Api(api).delete_resource_slice(body["metadata"]["name"])
        other.stop(delete=True)
