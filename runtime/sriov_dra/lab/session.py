"""``sriov-dra lab up``: a control plane, simulated nodes and synthetic GPU ResourceSlices.

Owns the lab's topology: node names, their labels, and the synthetic ``gpu.nvidia.com`` devices
(two full GPUs per node, one under each of the two PCIe roots the fake SR-IOV hardware uses). The
GPU slices are clearly marked synthetic; no GPU driver runs in the lab.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from sriov_dra.kube import apply
from sriov_dra.lab import controlplane
from sriov_dra.lab.nodes import SimulatedNode

GPU_DRIVER = "gpu.nvidia.com"
#: The two PCIe roots of every simulated node: rail A (GPU 0 + PF ens1f0) and rail B (GPU 1 + ens2f0).
PCIE_ROOTS = ("pci0000:00", "pci0000:80")
SYNTHETIC_LABEL = "lab.sriov-dra.dev/synthetic"
NODE_LABELS = {"networking.example.com/dual-rail": "true", "lab.sriov-dra.dev/simulated": "true"}


def node_names(count: int) -> list[str]:
    """Names of the simulated nodes: ``lab-node-1`` … ``lab-node-<count>``."""
    return [f"lab-node-{i}" for i in range(1, count + 1)]


def gpu_slice(node: str) -> dict[str, Any]:
    """A synthetic ``gpu.nvidia.com`` ResourceSlice: one full GPU under each lab PCIe root.

    Shapes: devices ``gpu-0`` (root ``pci0000:00``) and ``gpu-1`` (``pci0000:80``) with attributes
    ``type: gpu``, ``resource.kubernetes.io/pcieRoot``, ``uuid`` and ``productName``; labelled
    :data:`SYNTHETIC_LABEL` so nobody mistakes them for real GPUs.
    """
    devices = []
    for index, root in enumerate(PCIE_ROOTS):
        devices.append(
            {
                "name": f"gpu-{index}",
                "attributes": {
                    "type": {"string": "gpu"},
                    "uuid": {"string": f"GPU-synthetic-{node}-{index}"},
                    "productName": {"string": "Synthetic lab GPU (no hardware)"},
                    "index": {"int": index},
                    "resource.kubernetes.io/pcieRoot": {"string": root},
                },
            }
        )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.nvidia.com-synthetic", "labels": {SYNTHETIC_LABEL: "true"}},
        "spec": {
            "driver": GPU_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def gpu_device_class() -> dict[str, Any]:
    """The DeviceClass ``gpu.nvidia.com`` selecting full GPUs (``type == "gpu"``), as the NVIDIA driver ships."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": GPU_DRIVER},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{GPU_DRIVER}' && device.attributes['{GPU_DRIVER}'].type == 'gpu'"
                    }
                }
            ]
        },
    }


def up(*, workdir: str, nodes: int, hold: bool) -> int:
    """Start the lab control plane and ``nodes`` simulated nodes; hold until SIGINT/SIGTERM.

    Returns: the process exit status (0 after a clean stop).
    Raises: ``binaries.BinaryMissing`` / ``ProcessFailed`` from the control plane start.
    """
    path = Path(workdir).resolve()
    cp = controlplane.ControlPlane(controlplane.ControlPlaneSettings(workdir=path, keep_workdir=True))
    cp.start()
    sims: list[SimulatedNode] = []
    api = cp.api()
    try:
        for name in node_names(nodes):
            sims.append(
                SimulatedNode(api, name, labels={**NODE_LABELS, "kubernetes.io/hostname": name}).start()
            )
        apply.apply_objects(api, [gpu_device_class(), *(gpu_slice(n.name) for n in sims)])
        print(f"lab up: control plane {cp.server}, nodes {', '.join(n.name for n in sims)}")
        print(f"  export KUBECONFIG={cp.kubeconfig}")
        print(f"  component logs: {path / 'logs'}")
        if hold:
            done = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: done.set())
            print("  press Ctrl-C to stop")
            done.wait()
    finally:
        for sim in sims:
            sim.stop()
        api.close()
        cp.stop()
    print("lab stopped")
    return 0
