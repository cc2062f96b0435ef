"""The realvf session's control plane on the host, reached from the guest through QEMU user networking.

Host side (tests/realvf/conftest.py): :func:`start` runs etcd, kube-apiserver, controller-manager and
scheduler as the cluster tier starts them (``sriov_dra_lab.control_plane``), installs what the
plugin's roles install (its CRDs, namespace and DeviceClass), registers the guest's Node
(:data:`NODE_NAME`, kept Ready by a heartbeat thread, as a kubelet would) and the node's rail
mapping (a DeviceAttributes giving every igb VF the template NAD :data:`SOURCE_NAD`, and the
SriovResourcePolicy advertising them), and writes the guest's kubeconfig (:func:`guest_kubeconfig`).

The apiserver listens on 127.0.0.1 only; the guest reaches it as ``10.0.2.2`` (QEMU user
networking's address of the host's loopback). Its serving certificate is valid for the name
:data:`API_HOST` (one of its DNS SANs), which the guest's ``/etc/hosts`` maps to ``10.0.2.2``
(``vm.run_script``), so TLS is verified as usual and nothing is reissued.

The guest tests import the constants only (no lab import at module level).
"""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

NODE_NAME = "realvf-guest"
"""The guest's Node: the plugin's ``--node-name`` and its ResourceSlices' pool."""
KUBELET_NODE = "realvf-kubelet"
"""The Node the real kubelet in the guest registers (the one-Pod test: guest/test_one_pod_every_real_part.py)."""
API_HOST = "kubernetes"
"""A DNS SAN of the lab apiserver's serving certificate; the guest resolves it to the host."""
PLUGIN_NS = "dra-driver-sriov"
SOURCE_NAD = "rail-net"
"""The template NAD name every VF of the guest's node maps to (created per test, in its namespace)."""
TEMPLATE_LABEL = "realvf.example.com/template"
DEVICE_CLASS = "sriovnetwork.k8snetworkplumbingwg.io"


@dataclasses.dataclass
class Kubelet:
    """What a real kubelet in the guest needs from the host: the port QEMU forwards to it, its
    node credentials (a guest kubeconfig for ``system:node:<KUBELET_NODE>``), the cluster CA, and
    the proxy the apiserver reaches it through (``tests.realvf.kubelet_proxy``)."""

    port: int
    kubeconfig: Path
    ca_cert: Path
    proxy: Any


@dataclasses.dataclass
class HostApi:
    """A running control plane with the guest's Node and the guest's kubeconfig (``kubeconfig``)."""

    control_plane: Any
    node: Any
    kubeconfig: Path
    kubelet: Kubelet | None = None

    def stop(self) -> None:
        """Stop the heartbeat (deleting the Node), the kubelet proxy and the control plane; idempotent."""
        try:
            self.node.stop(delete=True)
        finally:
            try:
                if self.kubelet is not None:
                    self.kubelet.proxy.stop()
            finally:
                self.control_plane.stop()


def guest_kubeconfig(
    control_plane: Any,
    out: Path,
    *,
    user: str = "realvf-guest-admin",
    groups: tuple[str, ...] = ("system:masters",),
) -> Path:
    """A self-contained kubeconfig for ``user`` in ``groups`` naming the apiserver ``https://<API_HOST>:<port>``.

    Shapes: CA, client certificate and key embedded (``*-data``), written to ``out`` (mode 0600).
    """
    client_config = yaml.safe_load(control_plane.client_kubeconfig(out.stem, user, groups).read_text())
    user = client_config["users"][0]["user"]
    port = urlsplit(control_plane.server).port

    def data(path: str) -> str:
        return base64.b64encode(Path(path).read_bytes()).decode()

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "host",
                "cluster": {
                    "server": f"https://{API_HOST}:{port}",
                    "certificate-authority-data": data(str(control_plane.ca_cert)),
                },
            }
        ],
        "users": [
            {
                "name": "realvf-guest",
                "user": {
                    "client-certificate-data": data(user["client-certificate"]),
                    "client-key-data": data(user["client-key"]),
                },
            }
        ],
        "contexts": [{"name": "host", "context": {"cluster": "host", "user": "realvf-guest"}}],
        "current-context": "host",
    }
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    out.chmod(0o600)
    return out


def node_objects() -> list[dict[str, Any]]:
    """The plugin namespace, the guest node's DeviceAttributes and SriovResourcePolicy (the gpu-nic-pairs shape)."""
    d = DEVICE_CLASS
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PLUGIN_NS}},
        {
            "apiVersion": f"{d}/v1alpha1",
            "kind": "DeviceAttributes",
            "metadata": {"name": "realvf-rail", "namespace": PLUGIN_NS, "labels": {TEMPLATE_LABEL: "rail"}},
            "spec": {"attributes": {f"{d}/netAttachDefName": {"string": SOURCE_NAD}}},
        },
        {
            "apiVersion": f"{d}/v1alpha1",
            "kind": "SriovResourcePolicy",
            "metadata": {"name": "realvf-igb", "namespace": PLUGIN_NS},
            "spec": {
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [NODE_NAME, KUBELET_NODE],
                                }
                            ]
                        }
                    ]
                },
                "configs": [
                    {
                        "deviceAttributesSelector": {"matchLabels": {TEMPLATE_LABEL: "rail"}},
                        "resourceFilters": [{"vendors": ["8086"], "linkType": "eth"}],
                    }
                ],
            },
        },
    ]


def start(workdir: Path) -> HostApi:
    """Start the control plane, install the plugin's objects, register the guest's Node, and
    prepare what the real kubelet in the guest needs (:class:`Kubelet`): the apiserver reaches
    kubelets through its proxy.
    Raises: as ``ControlPlane.start`` (``binaries.BinaryMissing``, ``processes.ProcessFailed``,
    ``TimeoutError``); everything started is stopped again first.
    """
    from tests.realvf import kubelet_proxy

    from sriov_dra.kube import apply
    from sriov_dra_lab import control_plane, nodes, processes

    manifests = Path(apply.__file__).resolve().parents[1] / "manifests"
    proxy = kubelet_proxy.KubeletProxy(processes.free_port())
    cp = control_plane.ControlPlane(
        control_plane.ControlPlaneSettings(workdir=workdir / "control-plane", kubelet_proxy=proxy.path)
    )
    try:
        cp.start()
    except BaseException:
        proxy.stop()
        raise
    try:
        with cp.api() as api:
            crds = [
                yaml.safe_load((manifests / "crds" / f"{DEVICE_CLASS}_{n}.yaml").read_text())
                for n in ("sriovresourcepolicies", "deviceattributes")
            ]
            apply.apply_objects(api, crds)
            apply.wait_crds_established(api, [c["metadata"]["name"] for c in crds])
            device_class = yaml.safe_load((manifests / "deviceclasses" / f"{DEVICE_CLASS}.yaml").read_text())
            apply.apply_objects(api, [device_class, *node_objects()])
        node = nodes.SimulatedNode(
            cp.api(), NODE_NAME, labels={"kubernetes.io/hostname": NODE_NAME}, interval_s=10.0
        ).start()
    except BaseException:
        cp.stop()
        proxy.stop()
        raise
    node_kubeconfig = guest_kubeconfig(
        cp, workdir / "kubelet.kubeconfig", user=f"system:node:{KUBELET_NODE}", groups=("system:nodes",)
    )
    return HostApi(
        cp,
        node,
        guest_kubeconfig(cp, workdir / "guest.kubeconfig"),
        Kubelet(proxy.forwarded_port, node_kubeconfig, cp.ca_cert, proxy),
    )
