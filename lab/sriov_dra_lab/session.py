"""The lab's cluster-side topology: node names and labels, and the synthetic GPU devices.

Owns the lab's topology: node names, their labels, and the synthetic ``gpu.nvidia.com`` devices
(two full GPUs per node, one under each of the two PCIe roots the fake SR-IOV hardware uses). The
GPU slices are clearly marked synthetic; no GPU driver runs in the lab. Starts nothing
(``sriov-dra lab up`` is :mod:`~sriov_dra_lab.console`).
"""

from __future__ import annotations

from typing import Any

GPU_DRIVER = "gpu.nvidia.com"
#: The two PCIe roots of every simulated node: rail A (GPU 0 + PF ens1f0) and rail B (GPU 1 + ens2f0).
PCIE_ROOTS = ("pci0000:00", "pci0000:80")
MAX_GPUS_PER_ROOT = 16
"""The most synthetic GPUs :func:`gpu_slice` may publish under one root (a real node's GPU CDI spec
names that many, ``real_stack.write_gpu_cdi``)."""
SYNTHETIC_LABEL = "lab.sriov-dra.dev/synthetic"
SIMULATED_LABEL = "lab.sriov-dra.dev/simulated"
NODE_LABELS = {"networking.example.com/dual-rail": "true", SIMULATED_LABEL: "true"}


def node_names(count: int) -> list[str]:
    """Names of the simulated nodes: ``lab-node-1`` … ``lab-node-<count>``."""
    return [f"lab-node-{i}" for i in range(1, count + 1)]


def gpu_slice(node: str, per_root: int = 1) -> dict[str, Any]:
    """A synthetic ``gpu.nvidia.com`` ResourceSlice: ``per_root`` full GPUs under each lab PCIe root.

    Shapes: devices ``gpu-<index>``, index ``j * 2 + r`` for the ``j``-th GPU under root ``r``
    (``gpu-0`` under ``pci0000:00``, ``gpu-1`` under ``pci0000:80``, ...), with attributes
    ``type: gpu``, ``resource.kubernetes.io/pcieRoot``, ``uuid`` and ``productName``; labelled
    :data:`SYNTHETIC_LABEL` so nobody mistakes them for real GPUs. The lab publishes one per root;
    a benchmark that starts more Pods of the gpu-nic-pairs shape at once asks for more.
    Raises: ``ValueError`` when ``per_root`` is not 1 to :data:`MAX_GPUS_PER_ROOT`.
    """
    if not 1 <= per_root <= MAX_GPUS_PER_ROOT:
        raise ValueError(f"per_root must be 1 to {MAX_GPUS_PER_ROOT}, got {per_root}")
    devices = []
    for index in range(per_root * len(PCIE_ROOTS)):
        root = PCIE_ROOTS[index % len(PCIE_ROOTS)]
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
